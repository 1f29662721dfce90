// Which buffers a communicator's ops still hold, decided only from what the caller has done, so
// that every rank running the same program decides alike (a decision taken from how far each
// rank's ops have progressed split the ranks: one refused an op that another accepted).
//
// An op holds its buffers from issue until the caller has seen it end: wait() or await settled,
// waitSync() returned or threw, or isCompleted() answered true. Ops complete in issue order, so
// seeing an op end also releases every op issued before it.
import { type Buf, overlaps } from './buffers.js';
import type { Work } from './work.js';

interface Held {
  work: Work;
  input: Buf | null;
  output: Buf | null;
}

export class BuffersInFlight {
  private held: Held[] = [];

  add(work: Work, input: Buf | null, output: Buf | null): void {
    this.held.push({ work, input, output });
  }

  /** `name #seq` of an op the caller has not yet seen end that reads or writes any byte of `b`. */
  heldBy(b: Buf): string | undefined {
    this.release();
    const h = this.held.find(({ input, output }) => (input !== null && overlaps(b.bytes, input.bytes)) || (output !== null && overlaps(b.bytes, output.bytes)));
    return h && `${h.work.name} #${h.work.seq}`;
  }

  /** Drops every op issued up to the last one the caller has seen end. */
  private release(): void {
    let last = -1;
    for (let i = 0; i < this.held.length; i++) if (this.held[i].work.observed) last = i;
    if (last >= 0) this.held = this.held.slice(last + 1);
  }
}
