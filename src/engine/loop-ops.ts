// What of this thread moves only on its event loop: the network engines whose ops run on the
// rank's own connections (collectives the rank runs itself, send/recv). A wait that blocks the
// thread (Atomics.wait) stops that loop, so an awaited op blocks only while none of them can
// move: a peer may need one before it can join the awaited op. (A rank blocked awaiting a send
// to its node mate kept its broadcast across nodes from forwarding the root's data; the node
// mate, that broadcast's root and awaiting it first, never took the send: both waited until the
// deadline.)

/** An engine with ops that only this thread's event loop moves. */
export interface LoopEngine {
  /** How many of its ops can move now (a communicator's head op, each send and recv). */
  movable(): number;
}

/** This thread's network engines (their communicators not yet destroyed). */
export const loopEngines = new Set<LoopEngine>();

/** How many of this thread's network ops can move now. */
export function loopMovable(): number {
  let n = 0;
  for (const e of loopEngines) n += e.movable();
  return n;
}

/** Whether none of this thread's network ops can move: its event loop may stop while a wait blocks. */
export function loopIdle(): boolean {
  return loopEngines.size === 0 || loopMovable() === 0; // (every await on one node asks)
}
