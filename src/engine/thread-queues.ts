// MPI's progress rule for one thread's communicators: a rank that waits for one communicator's
// op also moves the ops it queued on its other communicators along. Without it, two ranks that
// each issued an op on communicators A and B, then waited for A's first on one rank and B's
// first on the other, waited for each other until the deadline in 'caller' progress (each
// rank's wait moved only its own communicator, and each op needed the other rank to move it).
// torch's and NCCL's users wait for handles in any order; so may webccl's.

/** An engine whose queued ops only its rank moves (shared memory, run by the rank). */
export interface QueueServer {
  /** Ops queued, or send/recv pending, that only this thread moves. */
  queued(): number;
  /** Moves them along without blocking; true when one ended or a message moved. */
  serveQueued(): boolean;
  /**
   * An op kept unstarted until the rank's next call ('auto' progress): handed on now. A call on
   * another communicator is the rank's next call too; a held op that only a wait for it would
   * start left peers that waited for it first waiting for this rank forever.
   */
  releaseHold?(): void;
}

/** How long a wait sleeps at most between looks at the thread's other communicators (ms). */
export const OTHERS_LOOK_MS = 1;

const servers = new Set<QueueServer>();
/** Those that may hold an op (releaseHold): a thread rank's engine, not the local engine it runs ops with. */
const holders = new Set<QueueServer>();
let serving = false;

export function joinThreadQueues(s: QueueServer): void {
  servers.add(s);
  if (s.releaseHold) holders.add(s);
}

export function leaveThreadQueues(s: QueueServer): void {
  servers.delete(s);
  holders.delete(s);
}

/** Whether an engine of this thread other than `self` has ops only this thread moves. */
export function othersQueued(self: unknown): boolean {
  for (const s of servers) if (s !== self && s.queued() > 0) return true;
  return false;
}

/** Moves the other engines' ops along without blocking (not from inside another such move); true when one moved. */
export function serveOthers(self: unknown): boolean {
  if (serving || servers.size < 2) return false;
  serving = true;
  try {
    let moved = false;
    for (const s of servers) if (s !== self && s.queued() > 0 && s.serveQueued()) moved = true;
    return moved;
  } finally {
    serving = false;
  }
}

/** The rank calls webccl on `self`: the other engines' held ops go on (QueueServer.releaseHold). */
export function releaseHoldsElsewhere(self: unknown): void {
  // (every op pays for this look)
  if (holders.size === 0 || (holders.size === 1 && holders.has(self as QueueServer))) return;
  for (const s of holders) if (s !== self) s.releaseHold!();
}
