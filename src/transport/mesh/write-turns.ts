// The order of a connection's data frames, without a promise turn per frame (browser-safe).
// A frame no other write waits before goes to the carrier at once, in the caller's own turn; a
// write that must wait (its carrier is full: see a Conn's backpressure) holds the later ones
// behind it, and each of those goes in turn once the one before it has gone. Chaining every
// frame on a promise instead cost a small op over loopback a fifth of its time: the frame left
// only after microtask hops, and each hop allocated.

/**
 * Writes a frame now; returns what the next frame must wait for (the carrier draining), or
 * undefined. It must not throw: a failure rejects its own write's promise instead.
 */
export type PutFrame = () => Promise<void> | undefined;

export class WriteTurns {
  /** Settles once every frame handed to `run` so far has gone (and its wait, if any, ended). */
  private tail: Promise<void> = Promise.resolve();
  /** Frames queued behind `tail`, and waits in progress: while any, a new frame queues too. */
  private behind = 0;

  run(put: PutFrame): void {
    if (this.behind === 0) {
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
