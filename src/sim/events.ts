// The simulator's clock: a queue of events ordered by virtual time (then by the order they were
// scheduled, so that equal times fire in a fixed order and a run is repeatable). Nothing sleeps:
// the clock jumps from one event time to the next.

/**
 * An event: at virtual time `t` (microseconds), `fire(arg)` — or a message delivery, which
 * carries its fields here rather than in a closure (the simulator makes millions of them).
 */
export interface SimEvent {
  t: number;
  seq: number;
  fire: ((arg: SimEvent) => void) | null;
  /** A delivery's receiver, mailbox key, bytes (null in size-only mode) and length. */
  dst: number;
  key: number;
  payload: Uint8Array | null;
  bytes: number;
}

/** A binary min-heap of events by (t, seq). */
export class EventQueue {
  private readonly heap: SimEvent[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  /** The earliest event's time (Infinity when empty). */
  get nextTime(): number {
    return this.heap.length ? this.heap[0].t : Infinity;
  }

  at(t: number, fire: (e: SimEvent) => void): void {
    this.push({ t, seq: this.seq++, fire, dst: 0, key: 0, payload: null, bytes: 0 });
  }

  /** A delivery, handed to the `deliver` the queue was made with. */
  delivery(t: number, dst: number, key: number, payload: Uint8Array | null, bytes: number): void {
    this.push({ t, seq: this.seq++, fire: null, dst, key, payload, bytes });
  }

  private push(e: SimEvent): void {
    const h = this.heap;
    let i = h.push(e) - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, h[p])) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = e;
  }

  pop(): SimEvent | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length && last) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const c = l + 1 < h.length && before(h[l + 1], h[l]) ? l + 1 : l;
        if (!before(h[c], last)) break;
        h[i] = h[c];
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}

const before = (a: SimEvent, b: SimEvent): boolean => a.t < b.t || (a.t === b.t && a.seq < b.seq);

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
    return () => new Promise<void>((r) => {
      waiting.push(r);
      ch.port2.postMessage(0);
    });
  }
  return () => new Promise<void>((r) => setTimeout(r, 0));
})();
