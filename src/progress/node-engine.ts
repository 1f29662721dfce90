// Which engine a communicator of one node gets: the rank's own (ShmEngine), or one that hands
// ops to the node's progress thread (ThreadEngine), by WEBCCL_PROGRESS / the progress option.
//
// Who runs an op (WEBCCL_PROGRESS, or the communicator's `progress` option):
// - 'caller': this rank, while it waits or polls (the engine of a node without progress thread);
// - 'thread': the progress thread;
// - 'auto': decided per op (thread-engine.ts). A rank that waited for its last op at once
//   (`await comm.allReduce(x)`, waitSync() right after the call) is expected to do so again:
//   a small op of one exchange then starts on the rank at issue (its data is posted for the
//   peers before the call returns), and a larger one is held, written into the postbox but
//   uncounted: a wait for it runs it on the rank, no copy, no hand-over; any other call hands it
//   to the thread; left alone (the rank computes), the thread takes it HOLD_MS after it first
//   sees it. Ops of a rank that did not wait at once go to the thread at once (a wait within
//   HOLD_MS takes one back). Ops issued behind ops one runner holds go to the same runner.
// Send/recv always run on this rank (they keep no place in the collective order).

import { WebcclError } from '../core/errors.js';
import { freshI32 } from '../core/fresh-buffer.js';
import { resolveProgressMode } from '../core/progress-mode.js';
import type { RankContext } from '../engine/context.js';
import type { Engine, OpCounters } from '../engine/engine.js';
import { checkMode } from '../engine/input-check.js';
import { ShmEngine } from '../shm/engine.js';
import { PROGRESS_RUNNING, progressState } from './postboxes.js';
import { progressStarting, waitProgressSettled } from './start.js';
import { ThreadEngine } from './thread-engine.js';

/** Longest a rank waits for a page's progress thread to start (its script to load) before going on without it. */
export const START_WAIT_MS = 30_000;

/** A node communicator's options as its engine takes them: its algorithm and progress options, as given. */
export interface NodeEngineOptions {
  algo: unknown;
  timeoutMs: number;
  progress: unknown;
}

/**
 * The engine of a communicator whose ranks are all on `ctx`'s node: ops handed to the node's
 * progress thread where it runs (mode thread or auto), else run by the rank itself.
 */
export function nodeEngine(ctx: RankContext, counters: OpCounters, o: NodeEngineOptions): Engine {
  const { algo: commAlgo, timeoutMs, progress } = o;
  const mode = resolveProgressMode(progress);
  // WEBCCL_CHECK hashes the buffers between the rank's own slices of an op: it needs the rank to run them.
  if (mode === 'caller' || ctx.size === 1 || checkMode()) return new ShmEngine(ctx, counters, commAlgo, timeoutMs);
  // A page's thread may still be loading its script: choose once it runs or is known not to.
  waitProgressSettled(ctx.core.memory, Math.min(timeoutMs, START_WAIT_MS), ctx.canBlock);
  if (!hasProgressThread(ctx)) {
    if (mode === 'auto') return new ShmEngine(ctx, counters, commAlgo, timeoutMs);
    const why = progressStarting(ctx.core.memory)
      ? "this node's progress thread has not started yet (a rank on a page's main thread cannot wait for it here: await initCommGroup, which does)"
      : "this node has no progress thread (webccl's launchers and createNode() start one; createNode({ nranks, progress: false }) makes none, and a page's fails to start where its script progress-worker.js cannot be loaded beside index.js)";
    throw new WebcclError('UNSUPPORTED', `progress 'thread' (WEBCCL_PROGRESS): ${why}`, { option: 'progress' });
  }
  return new ThreadEngine(ctx, counters, commAlgo, timeoutMs, mode);
}

/** Whether `ctx`'s node has a running progress thread. */
export function hasProgressThread(ctx: RankContext): boolean {
  return progressState(freshI32(ctx.core.memory)) === PROGRESS_RUNNING;
}
