// Starting and stopping a node's progress thread. Starting a thread is the platform's business
// (Node's worker_threads; a page would need the URL of a worker script): the Node entry
// registers a starter here, and createNode calls it. The thread is started by whoever creates
// the node (a launcher, a test, a page's main thread), never by a rank: a thread a rank started
// would end with that rank, with its peers' ops still in hand.
import { N, NODE_BASE } from '../core/shm-map.js';
import { writeReasonText } from '../core/reason-text.js';
import type { NodeHandle } from '../core/node.js';
import { L, PROGRESS_GONE, PROGRESS_RUNNING, T, laneTable } from './lanes.js';

/** A started progress thread: `stop()` ends it (the node's ranks must have ended their ops). */
export interface ProgressThread {
  stop(): Promise<void>;
}

export type ProgressStarter = (node: NodeHandle, ended: (why: string) => void) => ProgressThread;

const STARTER = Symbol.for('webccl.progressStarter');
const threads = new WeakMap<WebAssembly.Memory, ProgressThread>();

export function registerProgressStarter(start: ProgressStarter): void {
  (globalThis as Record<symbol, unknown>)[STARTER] = start;
}

/** Starts the node's progress thread where the platform can; false where it cannot. */
export function startProgressThread(node: NodeHandle): boolean {
  const start = (globalThis as Record<symbol, ProgressStarter | undefined>)[STARTER];
  if (!start) return false;
  const i32 = new Int32Array(node.memory.buffer);
  // Marked running before the thread runs: ranks may post to it from the first op on.
  Atomics.store(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_RUNNING);
  threads.set(node.memory, start(node, (why) => progressEnded(node.memory, why)));
  return true;
}

/** Ends the node's progress thread, if this thread started one. */
export async function stopProgressThread(node: NodeHandle): Promise<void> {
  const t = threads.get(node.memory);
  threads.delete(node.memory);
  await t?.stop();
}

/**
 * Records that the progress thread has ended (`why` when it failed) and wakes every rank that
 * waits for it, so that each fails the ops it had handed over instead of waiting for them.
 */
export function progressEnded(memory: WebAssembly.Memory, why: string): void {
  const i32 = new Int32Array(memory.buffer);
  if (Atomics.exchange(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_GONE) === PROGRESS_GONE) return;
  const table = laneTable(i32);
  if (!table) return;
  if (why) writeReasonText(memory, table + T.REASON, why);
  const high = Atomics.load(i32, (table + T.HIGH) >> 2);
  for (let k = 0; k < high; k++) {
    const lane = Atomics.load(i32, (table + T.ENTRIES + 4 * k) >> 2);
    if (lane) {
      Atomics.notify(i32, (lane + L.DONE) >> 2);
      Atomics.notify(i32, (lane + L.STATE) >> 2);
    }
  }
}
