// Launching N ranks as worker threads of this process, sharing one node memory.
// Any rank's uncaught error (or non-zero exit) aborts the node, so every other rank's pending
// collective fails at once instead of waiting; the job ends with a message naming the rank.
// A rank that ends normally is marked as having left the node: the ops it finished complete
// on its peers, and an op that needs it fails at once, naming it.

import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { WorldInit } from '../bootstrap/world.js';
import { abortNode, leaveNode, type NodeHandle } from '../core/node.js';
import { ABORT_REASON } from '../core/shm-map.js';
import { createNode } from '../progress/create-node.js';
import { registerProgressStarter, startProgressThread, stopProgressThread } from '../progress/start.js';
import { workerEntryPath } from './paths.js';
import { startNodeProgress } from './progress-thread.js';

// The nodes this launcher makes get a progress thread (a worker_threads Worker).
registerProgressStarter(startNodeProgress);

import { fail } from '../core/errors.js';
import { checkTracePath, mergeJobTrace, PROCESS_JOB, tracePath } from '../core/nodejs/trace-files.js';
import {
  anything,
  boolean,
  checkOptions,
  func,
  integer,
  MAX_TIMEOUT_MS,
  number,
  type OptionSpec,
  object,
  string,
  stringArray,
} from '../core/options.js';
import { MAX_RANKS } from '../core/shm-map.js';

/** The options of launch and startRanks: ranks as worker threads of this process, one node. */
export interface LaunchOptions {
  /** How many ranks to start, 1..64 (required). */
  nranks: number;
  /** Path or file: URL of the ES module every rank runs. */
  script: string;
  /** The script's arguments (process.argv after the script). */
  args?: string[];
  /** Environment of the ranks (default: this process's). */
  env?: Record<string, string | undefined>;
  /** Bytes of the node's staging slot, as WEBCCL_BUFFSIZE. */
  slotBytes?: number;
  /** false forces the scalar WebAssembly core. */
  simd?: boolean;
  /** Called with every message a rank posts to its parent port. */
  onMessage?: (rank: number, msg: unknown) => void;
  /** How long other ranks get to finish after one failed, before they are terminated (default 5000 ms). */
  graceMs?: number;
  /** Set when this process is one node of a larger job: thread i is world rank firstRank + i. */
  world?: Omit<WorldInit, 'rank'> & { firstRank: number };
  /**
   * A failing rank does not end the job: it is marked dead in the node (the ops of its peers
   * that need it fail, naming it, and they may shrink() and go on). The exit code is 0 when
   * every other rank ends well.
   */
  faultTolerant?: boolean;
}

/** One failure of a launched job: which rank, why, and the error when one was thrown. */
export interface RankFailure {
  /** The world rank (in a one-node job, the thread's index); -1 for the launcher's own reason (terminate()). */
  rank: number;
  /** What happened: the rank's error (a thread's with its stack), how it exited, or the launcher's reason. */
  message: string;
  /** The error the rank threw, where it threw one. */
  error?: unknown;
}

/** How a launched job ended: its exit code and its failures, the first one the cause. */
export interface LaunchResult {
  /**
   * 0 when every rank ended well (or, with faultTolerant, when at least one did and every
   * failure was a rank's), else 1.
   */
  exitCode: number;
  /** The first rank that failed: the cause; later failures are usually its consequence. */
  failure?: RankFailure;
  failures: RankFailure[];
}

/** A job of thread ranks, running, as startRanks returns it. */
export interface LaunchHandle {
  /** Resolves with the job's result once every rank has ended. */
  done: Promise<LaunchResult>;
  /** The ranks' node. */
  node: NodeHandle;
  /** Ends every rank (e.g. on Ctrl-C). */
  terminate(reason?: string): void;
}

/** What each key of LaunchOptions may hold; `slotBytes` is checked by createNode, `world` by the ranks' join. */
export const LAUNCH_OPTIONS = {
  nranks: integer(1, MAX_RANKS),
  script: string,
  args: stringArray,
  env: object,
  slotBytes: anything,
  simd: boolean,
  onMessage: func,
  graceMs: number(0, MAX_TIMEOUT_MS),
  world: object,
  faultTolerant: boolean,
} as const satisfies OptionSpec;

/**
 * Starts `script` on `nranks` worker threads of this process, sharing one node (as `webccl run
 * -n`), and returns at once: `done` resolves with the result, `terminate()` ends every rank.
 * launch() is the same, awaited. A rank's uncaught error or non-zero exit aborts the node (every
 * other rank's pending op fails with ABORTED) and ends the job after `graceMs`, unless faultTolerant.
 *
 * @throws WebcclError at once (launch() rejects instead): `INVALID_ARGUMENT` for a bad option, a
 *   missing `nranks` or `script`, or a WEBCCL_TRACE path that cannot be written.
 * @example
 * ```js
 * const job = startRanks({ nranks: 4, script: 'train.mjs' });
 * process.once('SIGINT', () => job.terminate('interrupted'));
 * const { exitCode, failure } = await job.done;
 * if (failure) console.error(`rank ${failure.rank} failed: ${failure.message}`);
 * ```
 */
export function startRanks(options: LaunchOptions): LaunchHandle {
  const o = checkLaunchOptions('startRanks', options, LAUNCH_OPTIONS);
  // WEBCCL_TRACE: refused before any rank starts when no file can be written there.
  const trace = tracePath(o.env ?? process.env);
  if (trace) checkTracePath(trace);
  const started = Date.now();
  const node = createNode({ nranks: o.nranks, ...(o.slotBytes ? { slotBytes: o.slotBytes } : {}), progress: false });
  // The progress thread reads the ranks' environment (WEBCCL_TRACE, WEBCCL_SPIN_US...), not the launcher's.
  if (o.nranks > 1) startProgressThread(node, o.env);
  const script = /^[a-z]+:/.test(o.script) ? o.script : pathToFileURL(resolve(o.script)).href;
  const cores = availableParallelism();
  const failures: RankFailure[] = [];
  let graceTimer: ReturnType<typeof setTimeout> | undefined;
  let ending = false;
  const workers: Worker[] = [];

  /** `rank` is the thread's index in the node; failures name its world rank. */
  const fail = (rank: number, message: string, error?: unknown) => {
    failures.push({ rank: rank >= 0 && o.world ? o.world.firstRank + rank : rank, message, error });
    if (o.faultTolerant && rank >= 0) return leaveNode(node, rank, 'died'); // tolerated: its peers see it gone
    if (ending) return;
    ending = true;
    if (rank < 0) abortNode(node, null, ABORT_REASON.USER, message);
    else abortNode(node, rank, ABORT_REASON.PEER_DIED, firstLine(message));
    graceTimer = setTimeout(() => workers.forEach((w) => void w.terminate()), o.graceMs ?? 5000);
    graceTimer.unref?.();
  };

  const exits = Array.from({ length: o.nranks }, (_, rank) => {
    const world = o.world && worldOf(o.world, rank);
    const w = new Worker(workerEntryPath(), {
      workerData: { init: { node, rank, cores, simd: o.simd, ...(world && { world }) }, script },
      argv: o.args ?? [],
      env: o.env ?? process.env,
    });
    workers.push(w);
    if (o.onMessage) w.on('message', (m) => o.onMessage!(rank, m));
    let errored = false;
    w.on('error', (e) => {
      errored = true;
      fail(rank, e instanceof Error ? (e.stack ?? e.message) : String(e), e);
    });
    return new Promise<void>((done) =>
      w.on('exit', (code) => {
        if (code !== 0 && !errored) fail(rank, `exited with code ${code}`);
        else if (code === 0) leaveNode(node, rank);
        done();
      }),
    );
  });

  const done = Promise.all(exits).then(async (): Promise<LaunchResult> => {
    if (graceTimer) clearTimeout(graceTimer);
    await stopProgressThread(node);
    const tolerated = o.faultTolerant && failures.every((f) => f.rank >= 0) && failures.length < o.nranks;
    // The ranks' parts become one file (the nodes of one job on this machine add to it).
    if (trace) mergeJobTrace(trace, [process.pid], o.world?.jobId ?? PROCESS_JOB, started);
    return { exitCode: failures.length && !tolerated ? 1 : 0, failure: failures[0], failures };
  });
  return {
    done,
    node,
    terminate(reason = 'terminated') {
      fail(-1, reason);
      workers.forEach((w) => void w.terminate());
    },
  };
}

/** The first line of an error's stack or message: its "Error: what happened". */
function firstLine(message: string): string {
  return message.split('\n', 1)[0];
}

function worldOf({ firstRank, storeFd, ...job }: NonNullable<LaunchOptions['world']>, rank: number): WorldInit {
  return { ...job, rank: firstRank + rank, ...(firstRank + rank === 0 && storeFd !== undefined && { storeFd }) };
}

/**
 * Runs `script` on `nranks` worker threads and resolves when all have ended (startRanks, awaited;
 * bad options reject).
 *
 * @example
 * ```js
 * const { exitCode, failure } = await launch({ nranks: 4, script: 'train.mjs', args: ['--epochs', '3'] });
 * if (failure) console.error(`rank ${failure.rank} failed: ${failure.message}`);
 * ```
 */
export function launch(o: LaunchOptions): Promise<LaunchResult> {
  try {
    return startRanks(o).done;
  } catch (e) {
    return Promise.reject(e); // bad options too: a promise-returning function rejects, never throws
  }
}

/** Options of a launcher: known keys, and the two it cannot run without. */
export function checkLaunchOptions<T extends { nranks: number; script: string }>(
  where: string,
  o: T,
  spec: OptionSpec,
): T {
  checkOptions(where, o, spec, "{ nranks: 4, script: 'train.mjs' }");
  for (const key of ['nranks', 'script'] as const) {
    if (o?.[key] === undefined) fail('INVALID_ARGUMENT', `${where}: option ${key} is required`, { option: key });
  }
  return o;
}
