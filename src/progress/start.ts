// Starting and stopping a node's progress thread. Starting a thread is the platform's business
// (Node's worker_threads; a page would need the URL of a worker script): the Node entry
// registers a starter here, and createNode calls it. The thread is started by whoever creates
// the node (a launcher, a test, a page's main thread), never by a rank: a thread a rank started
// would end with that rank, with its peers' ops still in hand.
import { N, NODE_BASE } from '../core/shm-map.js';
import { writeReasonText } from '../core/reason-text.js';
import type { NodeHandle } from '../core/node.js';
import { L, PROGRESS_GONE, PROGRESS_RUNNING, PROGRESS_STOPPING, T, laneTable, ringProgress } from './lanes.js';

/** A started progress thread: `stop()` ends it (the node's ranks must have ended their ops). */
export interface ProgressThread {
  stop(): Promise<void>;
}

/** `env`: the environment the thread reads its WEBCCL_* settings from (default: this process's). */
export type ProgressStarter = (node: NodeHandle, ended: (why: string) => void, env?: Record<string, string | undefined>) => ProgressThread;

const STARTER = Symbol.for('webccl.progressStarter');
const threads = new WeakMap<WebAssembly.Memory, ProgressThread>();

export function registerProgressStarter(start: ProgressStarter): void {
  (globalThis as Record<symbol, unknown>)[STARTER] = start;
}

/** Starts the node's progress thread where the platform can; false where it cannot. */
export function startProgressThread(node: NodeHandle, env?: Record<string, string | undefined>): boolean {
  const start = (globalThis as Record<symbol, ProgressStarter | undefined>)[STARTER];
  if (!start) return false;
  const i32 = new Int32Array(node.memory.buffer);
  // Marked running before the thread runs: ranks may post to it from the first op on.
  Atomics.store(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_RUNNING);
  threads.set(node.memory, start(node, (why) => progressEnded(node.memory, why), env));
  return true;
}

/**
 * Ends the node's progress thread, if this thread started one: it is asked to end (it writes
 * its trace), and ended by force if it does not within a moment. Ops it still held fail on
 * their ranks (ABORTED, details.progressThread).
 */
export async function stopProgressThread(node: NodeHandle): Promise<void> {
  const t = threads.get(node.memory);
  if (!t) return;
  threads.delete(node.memory);
  const i32 = new Int32Array(node.memory.buffer);
  Atomics.compareExchange(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_RUNNING, PROGRESS_STOPPING);
  ringProgress(i32);
  await t.stop();
}

/**
 * Records that the progress thread has ended (`why` when it failed) and wakes every rank that
 * waits for it, so that each fails the ops it had handed over instead of waiting for them.
 */
export function progressEnded(memory: WebAssembly.Memory, why: string): void {
  const i32 = new Int32Array(memory.buffer);
  const was = Atomics.exchange(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_GONE);
  const table = laneTable(i32);
  if (!table) return;
  if (why && was !== PROGRESS_GONE) writeReasonText(memory, table + T.REASON, why);
  const high = Atomics.load(i32, (table + T.HIGH) >> 2);
  for (let k = 0; k < high; k++) {
    const lane = Atomics.load(i32, (table + T.ENTRIES + 4 * k) >> 2);
    if (lane) {
      Atomics.notify(i32, (lane + L.DONE) >> 2);
      Atomics.notify(i32, (lane + L.STATE) >> 2);
    }
  }
}
