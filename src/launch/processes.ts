// Launching N ranks as OS processes on this machine, one rank each, in torchrun's convention:
// each child finds RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
// its environment, plus the job's WEBCCL_TOKEN and WEBCCL_JOB_ID. Processes share no memory the
// launcher could abort, so when one dies the others get a grace period to notice through their
// connections and fail with their own message, then SIGTERM, then SIGKILL: none is left behind.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { randomJobId, randomToken } from '../bootstrap/node/job-secrets.js';
import type { LaunchResult, RankFailure } from './threads.js';

export interface ProcessLaunchOptions {
  nranks: number;
  /** Path or file: URL of the script every rank runs. */
  script: string;
  args?: string[];
  /** Environment the ranks' variables are added to (default: this process's). */
  env?: Record<string, string | undefined>;
  /** Default 127.0.0.1: every rank runs here. */
  masterAddr?: string;
  /** Default: a port free when the launcher looked. */
  masterPort?: number;
  /** How long other ranks get to end on their own after one failed (default 5 s), and again
   *  between SIGTERM and SIGKILL. */
  graceMs?: number;
}

export interface ProcessLaunchHandle {
  done: Promise<LaunchResult>;
  /** Sends SIGTERM to every rank (e.g. on Ctrl-C); called again, SIGKILL. */
  terminate(reason?: string): void;
}

/** A port nothing listens on now. Another process may take it before rank 0 does; torchrun
 *  takes the same risk, and the rank's bind error then names the port. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `killed by ${signal}` : `exited with code ${code}`;
}

export function startProcesses(o: ProcessLaunchOptions): ProcessLaunchHandle {
  const grace = o.graceMs ?? 5000;
  const base = o.env ?? process.env;
  const script = o.script.startsWith('file:') ? fileURLToPath(o.script) : o.script;
  const failures: RankFailure[] = [];
  const children: ChildProcess[] = [];
  const timers: ReturnType<typeof setTimeout>[] = [];
  let terminated = false;

  const signalAll = (signal: NodeJS.Signals) => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill(signal);
  };
  const later = (ms: number, signal: NodeJS.Signals) => {
    const t = setTimeout(() => signalAll(signal), ms);
    t.unref?.();
    timers.push(t);
  };
  /** SIGTERM to every rank still running after `waitMs`, SIGKILL a grace period later. */
  const endAll = (waitMs: number) => {
    later(waitMs, 'SIGTERM');
    later(waitMs + grace, 'SIGKILL');
  };
  const fail = (rank: number, message: string, error?: unknown) => {
    failures.push({ rank, message, error });
    if (failures.length === 1 && !terminated) endAll(grace);
  };

  const run = async (): Promise<LaunchResult> => {
    const masterAddr = o.masterAddr ?? '127.0.0.1';
    const masterPort = o.masterPort ?? (await freePort(masterAddr));
    if (terminated) return result();
    const shared = {
      WORLD_SIZE: String(o.nranks),
      LOCAL_WORLD_SIZE: String(o.nranks),
      MASTER_ADDR: masterAddr,
      MASTER_PORT: String(masterPort),
      WEBCCL_TOKEN: base.WEBCCL_TOKEN || randomToken(),
      WEBCCL_JOB_ID: base.WEBCCL_JOB_ID || randomJobId(),
    };
    const exits = Array.from({ length: o.nranks }, (_, rank) => {
      const env = { ...base, ...shared, RANK: String(rank), LOCAL_RANK: String(rank) };
      const child = spawn(process.execPath, [script, ...(o.args ?? [])], { env, stdio: 'inherit' });
      children.push(child);
      return new Promise<void>((done) => {
        // 'error' alone (spawn failed) or 'exit' alone, or both: count the rank once.
        let ended = false;
        const end = (message?: string, error?: unknown) => {
          if (ended) return;
          ended = true;
          if (message) fail(rank, message, error);
          done();
        };
        child.once('error', (e) => end(`could not start: ${e.message}`, e));
        child.once('exit', (code, signal) => end(code === 0 ? undefined : describeExit(code, signal)));
      });
    });
    await Promise.all(exits);
    return result();
  };
  const result = (): LaunchResult => {
    timers.forEach(clearTimeout);
    return { exitCode: failures.length ? 1 : 0, failure: failures[0], failures };
  };

  return {
    done: run(),
    terminate(reason = 'terminated') {
      if (terminated) return signalAll('SIGKILL');
      terminated = true;
      fail(-1, reason);
      endAll(0);
    },
  };
}

/** Runs `script` in `nranks` processes and resolves when all have ended. */
export function launchProcesses(o: ProcessLaunchOptions): Promise<LaunchResult> {
  return startProcesses(o).done;
}
