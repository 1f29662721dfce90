// The order of a connection's data frames, without a promise turn per small frame (browser-safe).
// A small frame no other write waits before goes to the carrier at once, in the caller's own
// turn; a write that must wait (its carrier is full: see a Conn's backpressure) holds the later
// ones behind it, and each of those goes in turn once the one before it has gone. Chaining every
// frame on a promise cost a small op over loopback a fifth to a half of its time: it left only
// after microtask hops, and each hop allocated. A frame over AT_ONCE_MAX goes after the caller's
// turn, as every frame did before: beside its transfer the hops are nothing.

import type { WebcclError } from '../../core/errors.js';

/** How a frame's write ends: `ok` once the carrier has taken it, or `fail`. */
export interface FrameEnd {
  ok: () => void;
  fail: (e: WebcclError) => void;
}

/**
 * Writes a frame now; returns what the next frame must wait for (the carrier draining), or
 * undefined. It must not throw: a failure ends its own write (`end.fail`) instead.
 */
export type PutFrame = (end: FrameEnd) => Promise<void> | undefined;

/** Frames of up to this many payload bytes go at once when none waits before them. */
export const AT_ONCE_MAX = 16 * 1024;

export class WriteTurns {
  /** Settles once every frame handed to `write` so far has gone (and its wait, if any, ended). */
  private tail: Promise<void> = Promise.resolve();
  /** Frames queued behind `tail`, and waits in progress: while any, a new frame queues too. */
  private behind = 0;

  /** Writes a frame of `bytes` payload bytes through `put`, in order; settles as `put` ends it. */
  write(bytes: number, put: PutFrame): Promise<void> {
    return new Promise((ok, fail) => {
      const end = { ok, fail };
      if (this.behind === 0 && bytes <= AT_ONCE_MAX) {
        const wait = put(end);
        if (wait) this.queue(() => wait);
        return;
      }
      this.queue(() => put(end));
    });
  }

  private queue(step: () => Promise<void> | undefined): void {
    this.behind++;
    const ended = () => {
      this.behind--;
    };
    this.tail = this.tail.then(step).then(ended, ended);
  }
}
