// Starting whole jobs (a launcher and its ranks, or a rank by hand) as child processes, in their
// own process group, with an environment free of any launcher's variables; and checking that
// none of their processes is left.
import { type ChildProcess, spawn } from 'node:child_process';

export type Env = Record<string, string | undefined>;

/** Variables a launcher sets or passes through to its ranks: none may leak in from the shell. */
export const LAUNCHER_VARS = [
  'RANK',
  'WORLD_SIZE',
  'LOCAL_RANK',
  'LOCAL_WORLD_SIZE',
  'MASTER_ADDR',
  'MASTER_PORT',
  'TORCHELASTIC_RUN_ID',
  'XDG_RUNTIME_DIR',
];

/** This environment without any launcher's or webccl's variables, plus `extra` (give HOME a
 *  temp dir: the per-user token file lives there). */
export function cleanEnv(extra: Env = {}): Env {
  const e: Env = { ...process.env };
  for (const k of Object.keys(e)) {
    if (LAUNCHER_VARS.includes(k) || /^(WEBCCL_|OMPI_|PMIX_|PMI_|MPI_LOCAL|SLURM_)/.test(k)) delete e[k];
  }
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete e[k];
    else e[k] = v;
  }
  return e;
}

export interface Run {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** Killed by the hang guard (the job did not end on its own). */
  hung: boolean;
  /** From the start to the end (for "ends well before a deadline" bounds, never a timing check). */
  ms: number;
}

export interface Job {
  child: ChildProcess;
  /** The launcher's pid, which is also its process group's id. */
  pid: number;
  /** Resolves once the command has exited and its output is read (or, when something it started
   *  still holds the output pipes, a few seconds after it exited). */
  done: Promise<Run>;
  /** Output so far. */
  stdout(): string;
  stderr(): string;
}

const started = new Set<Job>();

/** Sends `signal` to every process of the job's group (0: only asks whether one is left);
 *  false when none is left. */
export function signalGroup(job: Job, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-job.pid, signal);
    return true;
  } catch {
    return false; // already gone
  }
}

/** Ends every process of every job still running (for afterAll). */
export function killAllJobs(): void {
  for (const j of started) {
    signalGroup(j, 'SIGCONT');
    signalGroup(j, 'SIGKILL');
  }
}

export interface JobOptions {
  cwd?: string;
  /** A job still running after this is killed and reported as hung. */
  guardMs?: number;
  /** Called with each line of the standard output as it comes. */
  onLine?: (line: string) => void;
}

/**
 * Starts a command in its own process group; a job still running after `guardMs` is killed
 * and reported as hung (a guard against hangs, not a timing assertion).
 */
export function startJob(
  cmd: string,
  args: string[],
  env: Env,
  { cwd, guardMs = 50_000, onLine }: JobOptions = {},
): Job {
  const t0 = performance.now();
  const c = spawn(cmd, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let partial = '';
  let hung = false;
  c.stdout!.on('data', (d) => {
    stdout += d;
    if (!onLine) return;
    const lines = (partial + d).split('\n');
    partial = lines.pop()!;
    for (const l of lines) onLine(l);
  });
  c.stderr!.on('data', (d) => (stderr += d));
  const job: Job = {
    child: c,
    pid: c.pid ?? -1,
    done: undefined as unknown as Promise<Run>,
    stdout: () => stdout,
    stderr: () => stderr,
  };
  started.add(job);
  job.done = new Promise((resolve) => {
    const guard = setTimeout(() => {
      hung = true;
      signalGroup(job, 'SIGTERM');
      setTimeout(() => signalGroup(job, 'SIGKILL'), 2000).unref();
    }, guardMs);
    let finished = false;
    const finish = (code: number | null, signal: string | null) => {
      if (finished) return;
      finished = true;
      clearTimeout(guard);
      // Forget a job none of whose processes is left: its group id may be reused later.
      if (!signalGroup(job, 0)) started.delete(job);
      resolve({ code, signal, stdout, stderr, hung, ms: performance.now() - t0 });
    };
    c.on('error', (err) => (stderr += `spawn failed: ${err.message}`));
    c.on('close', finish);
    // A rank left behind keeps the pipes open and 'close' never comes: report at exit + 3 s.
    c.on('exit', (code, signal) => setTimeout(() => finish(code, signal), 3000).unref());
  });
  return job;
}

/** Runs a command to its end (see startJob). */
export function run(cmd: string, args: string[], env: Env, guardMs = 50_000, cwd?: string): Promise<Run> {
  return startJob(cmd, args, env, { cwd, guardMs }).done;
}

/** The pids the rank scripts printed ("pid rank R PID"). */
export const pidsIn = (stdout: string): number[] => [
  ...new Set([...stdout.matchAll(/^pid rank \d+ (\d+)$/gm)].map((m) => Number(m[1]))),
];

/** Waits (5 s at most) for every process of `pids` to be gone; those still alive. */
export async function leftOf(pids: number[]): Promise<number[]> {
  for (let i = 0; i < 50 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
  return pids.filter(alive);
}

/** Whether a process with this pid exists (a zombie counts until reaped). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
