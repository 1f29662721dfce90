// The simulator's clock: a queue of events ordered by virtual time, then by an order of their
// own at equal times: deliveries by sender and the sender's message number, which do not depend
// on the order the events were scheduled in (that differs when a run is split over threads, and
// which rank wakes first decides which sends first), other events first in the order they were
// scheduled. Nothing sleeps: the clock jumps from one event time to the next.

import { MinHeap } from './heap.js';

/**
 * An event: at virtual time `t` (microseconds), `fire(arg)` — or a message delivery, which
 * carries its fields here rather than in a closure (the simulator makes millions of them).
 */
export interface SimEvent {
  t: number;
  seq: number;
  /** Order at equal times: src · 2^32 + the sender's message number for a delivery, -1 otherwise. */
  ord: number;
  fire: ((arg: SimEvent) => void) | null;
  /** A delivery's receiver, mailbox key, bytes (null in size-only mode) and length. */
  dst: number;
  key: number;
  payload: Uint8Array | null;
  bytes: number;
}

/**
 * Events by time: a min-heap of the distinct times, and for each time its events, put in their
 * order (ord, then seq) when the first of them fires. A ring over thousands of ranks schedules
 * a hundred or more events per instant: one heap operation per instant rather than per event.
 */
export class EventQueue {
  /** Distinct times with events. */
  private readonly times = new MinHeap<number>((a, b) => a - b);
  private readonly buckets = new Map<number, Bucket>();
  private seq = 0;
  private count = 0;
  /** Fired events, reused: a run makes millions, and each lives long enough to be costly to collect. */
  private readonly spare: SimEvent[] = [];
  private readonly spareBuckets: Bucket[] = [];

  get size(): number {
    return this.count;
  }

  /** The earliest event's time (Infinity when empty). */
  get nextTime(): number {
    return this.times.peek() ?? Infinity;
  }

  at(t: number, fire: (e: SimEvent) => void): void {
    this.push(this.event(t, fire, -1, 0, 0, null, 0));
  }

  /** A delivery (fire null): the caller reads its fields when it pops it. */
  delivery(
    t: number,
    src: number,
    msg: number,
    dst: number,
    key: number,
    payload: Uint8Array | null,
    bytes: number,
  ): void {
    this.push(this.event(t, null, src * 4294967296 + msg, dst, key, payload, bytes));
  }

  /** Hands a popped event back for reuse, once the caller is done with its fields. */
  release(e: SimEvent): void {
    e.fire = null;
    e.payload = null;
    this.spare.push(e);
  }

  private event(
    t: number,
    fire: SimEvent['fire'],
    ord: number,
    dst: number,
    key: number,
    payload: Uint8Array | null,
    bytes: number,
  ): SimEvent {
    const e = this.spare.pop();
    if (!e) return { t, seq: this.seq++, ord, fire, dst, key, payload, bytes };
    e.t = t;
    e.seq = this.seq++;
    e.ord = ord;
    e.fire = fire;
    e.dst = dst;
    e.key = key;
    e.payload = payload;
    e.bytes = bytes;
    return e;
  }

  private push(e: SimEvent): void {
    this.count++;
    let b = this.buckets.get(e.t);
    if (!b) {
      b = this.spareBuckets.pop() ?? { events: [], next: 0 };
      this.buckets.set(e.t, b);
      this.times.push(e.t);
    }
    b.events.push(e);
  }

  pop(): SimEvent | undefined {
    const t = this.times.peek();
    if (t === undefined) return undefined;
    const b = this.buckets.get(t)!;
    if (b.next === 0) inOrder(b.events);
    const e = b.events[b.next++];
    this.count--;
    if (b.next === b.events.length) {
      this.buckets.delete(t);
      this.times.pop();
      b.events.length = 0;
      b.next = 0;
      this.spareBuckets.push(b);
    }
    return e;
  }
}

/** Sorts an instant's events by (ord, seq); most arrive sorted already, so look first. */
function inOrder(events: SimEvent[]): void {
  for (let i = 1; i < events.length; i++) {
    if (before(events[i], events[i - 1]) < 0) {
      events.sort(before);
      return;
    }
  }
}

const before = (a: SimEvent, b: SimEvent): number => a.ord - b.ord || a.seq - b.seq;

/** The events of one instant, in the order they were scheduled; `next` is the first not yet popped. */
interface Bucket {
  events: SimEvent[];
  next: number;
}

/**
 * Resolves after every pending microtask has run: the schedules are async code, and what an
 * event wakes (a rank's next send or receive) happens in microtasks, which must all run before
 * the clock moves on. A macrotask comes only after the microtask queue is empty.
 */
export const afterMicrotasks: () => Promise<void> = (() => {
  const g = globalThis as { setImmediate?: (f: () => void) => unknown };
  if (typeof g.setImmediate === 'function') return () => new Promise<void>((r) => g.setImmediate!(r));
  if (typeof MessageChannel === 'function') {
    const ch = new MessageChannel();
    const waiting: (() => void)[] = [];
    ch.port1.onmessage = () => waiting.shift()?.();
    return () =>
      new Promise<void>((r) => {
        waiting.push(r);
        ch.port2.postMessage(0);
      });
  }
  return () => new Promise<void>((r) => setTimeout(r, 0));
})();
