// Launching N ranks as OS processes on this machine, one rank each, in torchrun's convention:
// each child finds RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
// its environment, plus the job's WEBCCL_TOKEN and WEBCCL_JOB_ID. Processes share no memory the
// launcher could abort, so when one dies the others get a grace period to notice through their
// connections and fail with their own message, then SIGTERM, then SIGKILL: none is left behind.
// Each rank also holds a pipe to the launcher (see bootstrap/nodejs/launcher-pipe.ts): when the
// launcher itself ends, even by SIGKILL, every rank aborts its communicator and ends.
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { randomJobId, randomToken } from '../bootstrap/nodejs/job-secrets.js';
import { exitNoticeTimes, LAUNCHER_FD, LAUNCHER_FD_VAR } from '../bootstrap/nodejs/launcher-pipe.js';
import { type ReservedPort, reserveStorePort, STORE_FD_VAR, storeHandoff } from '../bootstrap/nodejs/store-handoff.js';
import { checkTracePath, mergeJobTrace, tracePath } from '../core/nodejs/trace-files.js';
import {
  boolean,
  integer,
  MAX_TIMEOUT_MS,
  number,
  type OptionSpec,
  object,
  string,
  stringArray,
} from '../core/options.js';
import { ChildGroup } from './children.js';
import { rankGuardUrl } from './paths.js';
import { checkLaunchOptions, type LaunchResult } from './threads.js';

/** The options of launchProcesses and startProcesses: one process per rank on this machine. */
export interface ProcessLaunchOptions {
  /** How many rank processes to start, 1..65536 (required). */
  nranks: number;
  /** Path or file: URL of the script every rank runs. */
  script: string;
  /** The script's arguments (process.argv after the script). */
  args?: string[];
  /** Environment the ranks' variables are added to (default: this process's). */
  env?: Record<string, string | undefined>;
  /** Default 127.0.0.1: every rank runs here. */
  masterAddr?: string;
  /** Default: a port the launcher binds and hands, listening, to rank 0 (no other program can take it in between). */
  masterPort?: number;
  /** How long other ranks get to end on their own after one failed (default 5 s), and again
   *  between SIGTERM and SIGKILL. */
  graceMs?: number;
  /** A failing rank does not end the job (see LaunchOptions.faultTolerant): the others go on. */
  faultTolerant?: boolean;
}

/** How long the launcher reads a rank's pipe after the rank has exited (its own children may hold the pipe open). */
const PIPE_DRAIN_MS = 500;

const PROCESS_LAUNCH_OPTIONS = {
  nranks: integer(1, 1 << 16),
  script: string,
  args: stringArray,
  env: object,
  masterAddr: string,
  masterPort: integer(0, 65535),
  graceMs: number(0, MAX_TIMEOUT_MS),
  faultTolerant: boolean,
} as const satisfies OptionSpec;

/** A job of process ranks, running, as startProcesses returns it. */
export interface ProcessLaunchHandle {
  /** Resolves with the job's result once every rank process has ended. */
  done: Promise<LaunchResult>;
  /** Sends SIGTERM to every rank (e.g. on Ctrl-C); called again, SIGKILL. */
  terminate(reason?: string): void;
}

/**
 * Starts `script` in `nranks` processes of this machine (as `webccl run --procs`), each given
 * torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...) and the job's WEBCCL_TOKEN and
 * WEBCCL_JOB_ID, and returns at once: `done` resolves with the result, `terminate()` sends SIGTERM
 * (again: SIGKILL). launchProcesses() is the same, awaited. When a rank fails, the others get
 * `graceMs` to end on their own, then SIGTERM, then SIGKILL, unless faultTolerant.
 *
 * @throws WebcclError at once (launchProcesses() rejects instead): `INVALID_ARGUMENT` for a bad
 *   option, a missing `nranks` or `script`, or a WEBCCL_TRACE path that cannot be written.
 * @example
 * ```js
 * const job = startProcesses({ nranks: 4, script: 'train.mjs', masterPort: 29500 });
 * process.once('SIGINT', () => job.terminate('interrupted'));
 * const { exitCode } = await job.done;
 * ```
 */
export function startProcesses(options: ProcessLaunchOptions): ProcessLaunchHandle {
  const o = checkLaunchOptions('startProcesses', options, PROCESS_LAUNCH_OPTIONS);
  const group = new ChildGroup(o.graceMs ?? 5000, o.faultTolerant ?? false);
  const base = o.env ?? process.env;
  const script = o.script.startsWith('file:') ? fileURLToPath(o.script) : o.script;
  // WEBCCL_TRACE: refused before any rank starts when no file can be written there.
  const trace = tracePath(base);
  if (trace) checkTracePath(trace);
  const pids: number[] = [];
  const started = Date.now();

  const run = async (): Promise<LaunchResult> => {
    const masterAddr = o.masterAddr ?? '127.0.0.1';
    const reserved: ReservedPort | undefined =
      o.masterPort === undefined ? await reserveStorePort(masterAddr) : undefined;
    const masterPort = o.masterPort ?? reserved!.port;
    if (group.terminated) {
      reserved?.release();
      return group.result();
    }
    const shared = {
      WORLD_SIZE: String(o.nranks),
      LOCAL_WORLD_SIZE: String(o.nranks),
      MASTER_ADDR: masterAddr,
      MASTER_PORT: String(masterPort),
      WEBCCL_TOKEN: base.WEBCCL_TOKEN || randomToken(),
      WEBCCL_JOB_ID: base.WEBCCL_JOB_ID || randomJobId(),
    };
    await Promise.all(
      Array.from({ length: o.nranks }, (_, rank) => {
        // Rank 0 gets the store's listening socket at stdio[STORE_FD]; this process's copy is closed
        // right after that spawn, before any other rank exists to connect.
        const handoff = storeHandoff(rank === 0 ? reserved : undefined, LAUNCHER_FD + 1);
        const env = {
          ...base,
          ...shared,
          RANK: String(rank),
          LOCAL_RANK: String(rank),
          [LAUNCHER_FD_VAR]: String(LAUNCHER_FD),
          [STORE_FD_VAR]: undefined,
          ...handoff.env,
        };
        // stdio[LAUNCHER_FD] is the pipe: this process holds the other end until it ends.
        const child = spawn(process.execPath, ['--import', rankGuardUrl(), script, ...(o.args ?? [])], {
          env,
          stdio: ['inherit', 'inherit', 'inherit', 'pipe', ...handoff.stdio],
        });
        if (rank === 0) reserved?.release();
        // The rank writes on the pipe as it starts to exit with a failure (launcher-pipe.ts); its
        // end closes when it has gone, and then this end would only keep the launcher running.
        const pipe = child.stdio[LAUNCHER_FD] as Readable | null;
        let said = '';
        pipe?.setEncoding('utf8');
        pipe?.on('data', (d: string) => {
          said += d;
          for (const at of exitNoticeTimes(said)) group.exiting(rank, at);
        });
        pipe?.on('error', () => undefined);
        pipe?.on('end', () => pipe.destroy());
        if (child.pid !== undefined) pids.push(child.pid);
        const ended = group.watch(child, 'exit', (failure, error) => failure && group.fail(rank, failure, error));
        // What the rank wrote before it exited is read before the result is made: its end of the
        // pipe closes as it goes (a process it started might hold it open: bounded).
        return ended.then(() => {
          if (!pipe || pipe.destroyed) return;
          return new Promise<void>((done) => {
            const t = setTimeout(() => {
              pipe.destroy();
              done();
            }, PIPE_DRAIN_MS);
            pipe.once('close', () => {
              clearTimeout(t);
              done();
            });
          });
        });
      }),
    );
    if (trace) mergeJobTrace(trace, pids, shared.WEBCCL_JOB_ID, started);
    return group.result();
  };

  return { done: run(), terminate: (reason = 'terminated') => group.terminate(reason) };
}

/**
 * Runs `script` in `nranks` processes and resolves when all have ended; bad options reject.
 *
 * @example
 * ```js
 * const { exitCode, failures } = await launchProcesses({ nranks: 4, script: 'train.mjs' });
 * ```
 */
export function launchProcesses(o: ProcessLaunchOptions): Promise<LaunchResult> {
  try {
    return startProcesses(o).done;
  } catch (e) {
    return Promise.reject(e);
  }
}
