// Jobs of real processes for the tests: spawn a command in its own process group with a clean
// environment, collect its output (and hand each stdout line to a callback as it comes), kill
// the group if it outlives a guard, and tell whether any given pid is still alive.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const bin = join(root, 'bin', 'webccl.js');
export const fixture = (name: string) => join(root, 'test', 'fixtures', name);

export type Env = Record<string, string | undefined>;
const LAUNCHER_VARS = [
  'RANK',
  'WORLD_SIZE',
  'LOCAL_RANK',
  'LOCAL_WORLD_SIZE',
  'MASTER_ADDR',
  'MASTER_PORT',
  'TORCHELASTIC_RUN_ID',
  'XDG_RUNTIME_DIR',
];
const home = mkdtempSync(join(tmpdir(), 'webccl-procs-'));

/** This environment without any launcher's or webccl's variables, HOME in a temp dir, plus `extra`. */
export function cleanEnv(extra: Env = {}): Env {
  const e: Env = { ...process.env, HOME: home };
  for (const k of Object.keys(e)) {
    if (LAUNCHER_VARS.includes(k) || /^(WEBCCL_|OMPI_|PMIX_|PMI_|MPI_LOCAL|SLURM_)/.test(k)) delete e[k];
  }
  return { ...e, ...extra };
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Killed by the guard (the job did not end on its own). */
  hung: boolean;
  ms: number;
}

const children = new Set<ChildProcess>();
/** Kills every job still running (call from afterAll). */
export function killAll(): void {
  for (const c of children) killGroup(c, 'SIGKILL');
}

function killGroup(c: ChildProcess, signal: NodeJS.Signals) {
  try {
    process.kill(-c.pid!, signal);
  } catch {
    // already gone
  }
}

export function run(
  cmd: string,
  args: string[],
  env: Env,
  o: { guardMs?: number; onLine?: (line: string) => void } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const c = spawn(cmd, args, { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(c);
    let stdout = '';
    let stderr = '';
    let partial = '';
    let hung = false;
    c.stdout!.on('data', (d) => {
      stdout += d;
      const lines = (partial + d).split('\n');
      partial = lines.pop()!;
      for (const l of lines) o.onLine?.(l);
    });
    c.stderr!.on('data', (d) => (stderr += d));
    const guard = setTimeout(() => {
      hung = true;
      killGroup(c, 'SIGTERM');
      setTimeout(() => killGroup(c, 'SIGKILL'), 2000).unref();
    }, o.guardMs ?? 50_000);
    c.on('close', (code) => {
      clearTimeout(guard);
      children.delete(c);
      resolve({ code, stdout, stderr, hung, ms: performance.now() - t0 });
    });
  });
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pids the rank scripts printed ("pid rank R PID"). */
export const pidsIn = (stdout: string): number[] => [
  ...new Set([...stdout.matchAll(/^pid rank \d+ (\d+)$/gm)].map((m) => Number(m[1]))),
];
