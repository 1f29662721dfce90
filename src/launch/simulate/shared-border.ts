// A simulation thread's Border (src/sim/border.ts) over one SharedArrayBuffer that every thread
// of the run maps: a barrier, and for each thread its next time, running ranks and an outbox of
// records (messages between nodes, failures) as float64s, in two sets used in turn: a thread
// writes one set while a slower one still reads the other, so one barrier per window is
// enough. Records too many for an outbox go over in further rounds.
//
// The barrier spins for a while, then sleeps in Atomics.wait: a sleeping thread takes tens of
// microseconds to wake on a virtual machine, longer than most windows last, so threads that each
// have a core spin (up to SPIN_US); with more threads than cores they sleep at once, so that a
// waiting thread never takes a core from one with work.
import { WebcclError } from '../../core/errors.js';
import type { Border, Met } from '../../sim/border.js';
import { type Crossing, crossing } from '../../sim/network.js';
import type { Failure } from '../../sim/types.js';

/** Int32 words at the start: arrivals, generation, abandoned (a thread failed: the others stop). */
const CONTROL = 4;
/** Float64 words per thread and set: next, running, words in the outbox this round, more rounds to come. */
const META = 4;
const CROSSING = 0;
const FAILURE = 1;
const CROSSING_WORDS = 10;
/** How long the barrier spins before it sleeps, µs (when every thread has a core). */
const SPIN_US = 2000;
/** How long one sleep of the barrier lasts before it looks whether the run was abandoned, ms. */
const NAP_MS = 200;
const NOTHING = new Float64Array(0);

export function borderBuffer(threads: number, outboxWords: number): SharedArrayBuffer {
  return new SharedArrayBuffer(CONTROL * 4 + 2 * threads * (META + outboxWords) * 8);
}

/** Marks the run abandoned (a thread died): every thread at the barrier throws. */
export function abandon(sab: SharedArrayBuffer): void {
  const control = new Int32Array(sab, 0, CONTROL);
  Atomics.store(control, 2, 1);
  Atomics.add(control, 1, 1);
  Atomics.notify(control, 1);
}

export class SharedBorder implements Border {
  private readonly control: Int32Array;
  /** [set][thread]: meta words, and the outbox. */
  private readonly meta: Float64Array[];
  private readonly outboxes: Float64Array[][];
  private readonly words: number;
  private round = 0;
  /** This thread's records of a window, before they go out (grown as needed, kept). */
  private records = new Float64Array(1 << 12);

  /**
   * Thread `me` of `threads` runs nodes me, me + threads, me + 2·threads, ...: taken in turn
   * rather than in one block, so that the ranks busy at any moment (a ring's wave, a tree's
   * level) are spread over every thread, and none waits at the barrier for the others.
   */
  constructor(
    sab: SharedArrayBuffer,
    private readonly me: number,
    private readonly threads: number,
    private readonly perNode: number,
    private readonly spin: boolean,
  ) {
    this.control = new Int32Array(sab, 0, CONTROL);
    const base = CONTROL * 4;
    this.words = (sab.byteLength - base) / 8 / 2 / threads - META;
    const setBytes = threads * (META + this.words) * 8;
    this.meta = [0, 1].map((s) => new Float64Array(sab, base + s * setBytes, threads * META));
    this.outboxes = [0, 1].map((s) =>
      Array.from(
        { length: threads },
        (_, t) => new Float64Array(sab, base + s * setBytes + (threads * META + t * this.words) * 8, this.words),
      ),
    );
  }

  owns(r: number): boolean {
    return Math.floor(r / this.perNode) % this.threads === this.me;
  }

  meet(crossings: readonly Crossing[], failures: readonly Failure[], next: number, running: number): Met {
    const mine = crossings.length || failures.length ? this.encode(crossings, failures) : NOTHING;
    const got: Met = { crossings: [], failures: [], next: Infinity, running: 0 };
    for (let pos = 0; ; ) {
      const set = this.round++ & 1;
      const m = this.meta[set];
      const n = fitting(mine, pos, this.words);
      if (n) this.outboxes[set][this.me].set(mine.subarray(pos, pos + n));
      pos += n;
      const at = this.me * META;
      m[at] = next;
      m[at + 1] = running;
      m[at + 2] = n;
      m[at + 3] = pos < mine.length ? 1 : 0;
      this.barrier();
      let more = false;
      got.next = Infinity;
      got.running = 0;
      for (let t = 0; t < this.threads; t++) {
        got.next = Math.min(got.next, m[t * META]);
        got.running += m[t * META + 1];
        more ||= m[t * META + 3] === 1;
        if (t !== this.me) this.decode(this.outboxes[set][t], m[t * META + 2], got);
      }
      if (!more) return got;
    }
  }

  private encode(crossings: readonly Crossing[], failures: readonly Failure[]): Float64Array {
    const texts = failures.map((f) =>
      JSON.stringify({ code: f.error.code, reason: f.error.reason, details: f.error.details }),
    );
    const words = crossings.length * CROSSING_WORDS + texts.reduce((a, t) => a + 4 + t.length, 0);
    if (words > this.records.length) this.records = new Float64Array(Math.max(words, 2 * this.records.length));
    const out = this.records;
    let i = 0;
    for (const c of crossings) {
      out[i] = CROSSING;
      out[i + 1] = c.src;
      out[i + 2] = c.dst;
      out[i + 3] = c.bytes;
      out[i + 4] = c.seq;
      out[i + 5] = c.sentAt;
      out[i + 6] = c.out;
      out[i + 7] = c.wire;
      out[i + 8] = c.alpha;
      out[i + 9] = c.key;
      i += CROSSING_WORDS;
    }
    texts.forEach((t, k) => {
      out[i] = FAILURE;
      out[i + 1] = failures[k].atUs;
      out[i + 2] = failures[k].from;
      out[i + 3] = t.length;
      i += 4;
      for (let j = 0; j < t.length; j++) out[i++] = t.charCodeAt(j);
    });
    return out.subarray(0, words);
  }

  /** The records of `count` words in `w`: the crossings bound for this thread's ranks, and every failure. */
  private decode(w: Float64Array, count: number, got: Met): void {
    for (let i = 0; i < count; i += recordWords(w, i)) {
      if (w[i] === CROSSING) {
        const dst = w[i + 2];
        if (!this.owns(dst)) continue;
        const c = crossing(w[i + 1], dst, w[i + 3], w[i + 4]);
        c.sentAt = w[i + 5];
        c.out = w[i + 6];
        c.wire = w[i + 7];
        c.alpha = w[i + 8];
        c.key = w[i + 9];
        got.crossings.push(c);
      } else {
        const text = String.fromCharCode(...w.subarray(i + 4, i + 4 + w[i + 3]));
        const e = JSON.parse(text) as { code: WebcclError['code']; reason: string; details: Record<string, unknown> };
        got.failures.push({ atUs: w[i + 1], from: w[i + 2], error: new WebcclError(e.code, e.reason, e.details) });
      }
    }
  }

  /** The last thread to arrive starts the next generation. */
  private barrier(): void {
    const c = this.control;
    const gen = Atomics.load(c, 1);
    if (Atomics.add(c, 0, 1) === this.threads - 1) {
      Atomics.store(c, 0, 0);
      Atomics.add(c, 1, 1);
      Atomics.notify(c, 1);
    } else {
      // Abandoned before this thread arrived, the generation has moved on already: look at the flag too.
      const waiting = () => Atomics.load(c, 1) === gen && !Atomics.load(c, 2);
      if (this.spin) {
        const until = performance.now() + SPIN_US / 1000;
        for (let i = 1; waiting(); i++) if ((i & 255) === 0 && performance.now() > until) break;
      }
      while (waiting()) Atomics.wait(c, 1, gen, NAP_MS);
    }
    if (Atomics.load(c, 2)) throw new WebcclError('INTERNAL', 'simulate: another thread of the simulation failed');
  }
}

const recordWords = (w: Float64Array, i: number): number => (w[i] === CROSSING ? CROSSING_WORDS : 4 + w[i + 3]);

/** Words of the whole records from `pos` that fit in `room` (a record is never split over rounds). */
function fitting(w: Float64Array, pos: number, room: number): number {
  let i = pos;
  while (i < w.length && i + recordWords(w, i) - pos <= room) i += recordWords(w, i);
  if (i === pos && pos < w.length)
    throw new WebcclError(
      'INTERNAL',
      `simulate: a record of ${recordWords(w, pos)} words does not fit an outbox of ${room}`,
    );
  return i - pos;
}
