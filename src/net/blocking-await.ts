// How a rank awaits an op its network progress thread runs (net-proxy-engine.ts progressAsync):
// by blocking its thread, as an awaited op on one node does, when nothing else of the thread's
// needs its event loop meanwhile; else through Atomics.waitAsync and the event loop.

import { loopIdle } from '../engine/loop-ops.js';

/**
 * The longest an awaited op blocks its rank's thread at a time before the event loop runs once:
 * its timers and its own connections (a send's bytes still queued there, which a peer may need
 * before it joins the op) wait no longer than this.
 */
export const BLOCK_SLICE_MS = 5;

/**
 * Whether this runtime has a turn of the event loop to give between slices (Node's setImmediate;
 * a page's worker has none as short: a timer's least delay there would leave an op that ends in
 * it unseen that long, so a page's ranks wait with waitAsync).
 */
const HAS_TURN = typeof setImmediate === 'function';

/** One turn of the event loop: its timers and I/O run. */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Whether an awaited op the thread runs may be waited for by blocking this thread (`canBlock`:
 * it may): a thread of Node's none of whose network ops (send/recv, or collectives on its own
 * connections, of any communicator) can move meanwhile. A waitAsync() wake-up, and the event
 * loop it runs, cost a waited op more here: 2 processes awaiting 1 MiB allReduces back to back,
 * hand-offs to the thread and back 60-70 and 32-45 µs blocking, 84-92 and 48-54 through the
 * event loop (bench/op-parts.mjs).
 */
export function mayBlockFor(canBlock: boolean): boolean {
  return HAS_TURN && canBlock && loopIdle();
}
