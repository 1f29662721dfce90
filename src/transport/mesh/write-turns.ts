// The order of a connection's data frames, without a promise turn per small frame (browser-safe).
// A small frame no other write waits before goes to the carrier at once, in the caller's own
// turn; a write that must wait (its carrier is full: see a Conn's backpressure) holds the later
// ones behind it, and each of those goes in turn once the one before it has gone. Chaining every
// frame on a promise cost a small op over loopback a third of its time: the frame left only
// after microtask hops, and each hop allocated. A frame over AT_ONCE_MAX goes after the caller's
// turn, as every frame did before: beside its transfer the hops are nothing.

/**
 * Writes a frame now; returns what the next frame must wait for (the carrier draining), or
 * undefined. It must not throw: a failure rejects its own write's promise instead.
 */
export type PutFrame = () => Promise<void> | undefined;

/** Frames of up to this many payload bytes go at once when none waits before them. */
export const AT_ONCE_MAX = 16 * 1024;

export class WriteTurns {
  /** Settles once every frame handed to `run` so far has gone (and its wait, if any, ended). */
  private tail: Promise<void> = Promise.resolve();
  /** Frames queued behind `tail`, and waits in progress: while any, a new frame queues too. */
  private behind = 0;

  /** Writes a frame of `bytes` payload bytes through `put`, in order. */
  run(put: PutFrame, bytes: number): void {
    if (this.behind === 0 && bytes <= AT_ONCE_MAX) {
      const wait = put();
      if (wait) this.queue(() => wait);
      return;
    }
    this.queue(put);
  }

  private queue(step: () => Promise<void> | undefined): void {
    this.behind++;
    const ended = () => {
      this.behind--;
    };
    this.tail = this.tail.then(step).then(ended, ended);
  }
}
