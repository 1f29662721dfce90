// The count of a simulation's messages and bytes, its optional trace, and a hash of every
// message's ends, size and times that does not depend on the order messages are noted in, so
// that a run split over threads can be checked against the same run on one.
import type { Message } from './types.js';

export class Tally {
  messages = 0;
  bytes = 0;
  private sum = 0;
  readonly trace?: Message[];

  constructor(trace: boolean) {
    if (trace) this.trace = [];
  }

  /** The trace hash as the result reports it. */
  get hash(): number {
    return this.sum >>> 0;
  }

  /**
   * Counts a message and adds it to the trace hash: a sum of each message's hash, so the order messages are noted in
   * (which threads change) does not count.
   */
  note(src: number, dst: number, bytes: number, sentAt: number, arrives: number): void {
    this.messages++;
    this.bytes += bytes;
    let h = 0x811c9dc5;
    h = Math.imul(h ^ src, 0x01000193);
    h = Math.imul(h ^ dst, 0x01000193);
    h = Math.imul(h ^ (bytes | 0), 0x01000193);
    h = Math.imul(h ^ (Math.round(sentAt * 1000) | 0), 0x01000193);
    h = Math.imul(h ^ (Math.round(arrives * 1000) | 0), 0x01000193);
    this.sum = (this.sum + (h ^ (h >>> 16))) | 0;
    this.trace?.push({ src, dst, bytes, sendUs: sentAt, arriveUs: arrives });
  }
}
