// Which buffers a communicator's ops still hold, decided only from what the caller has done, so
// that every rank running the same program decides alike (a decision taken from how far each
// rank's ops have progressed split the ranks: one refused an op that another accepted).
//
// An op holds its buffers from issue until the caller has seen it end: wait() or await settled,
// waitSync() returned or threw, or isCompleted() answered true. Collectives complete in issue
// order, so seeing one end also releases every collective issued before it; a send or recv
// keeps no place in that order and is released only by seeing it end itself.
import { type Buf, overlaps } from './buffers.js';
import { isP2p } from './engine.js';
import type { Kind } from '../core/shm-map.js';
import type { Work } from './work.js';

interface Held {
  work: Work;
  input: Buf | null;
  output: Buf | null;
  /** A collective (completes in issue order), not a send or recv. */
  ordered: boolean;
}

export class BuffersInFlight {
  private held: Held[] = [];

  add(work: Work, input: Buf | null, output: Buf | null): void {
    this.held.push({ work, input, output, ordered: !isP2p(work.name as Kind) });
  }

  /** `name #seq` of an op the caller has not yet seen end that reads or writes any byte of `b`. */
  heldBy(b: Buf): string | undefined {
    this.release();
    const h = this.held.find(({ input, output }) => (input !== null && overlaps(b.bytes, input.bytes)) || (output !== null && overlaps(b.bytes, output.bytes)));
    return h && `${h.work.name} #${h.work.seq}`;
  }

  /** Drops every op the caller has seen end, and every collective issued before the last such collective. */
  private release(): void {
    let last = -1, seen = 0;
    for (let i = 0; i < this.held.length; i++) {
      if (!this.held[i].work.observed) continue;
      seen++;
      if (this.held[i].ordered) last = i;
    }
    if (seen) this.held = this.held.filter((h, i) => !h.work.observed && !(h.ordered && i < last));
  }
}
