// A binary min-heap under an order of the caller's: the event queue's distinct times and the
// messages waiting for their receiver's interface (world.ts) both use it.

export class MinHeap<T> {
  private readonly h: T[] = [];

  /** `before(a, b) < 0` when a comes first. */
  constructor(private readonly before: (a: T, b: T) => number) {}

  get size(): number {
    return this.h.length;
  }

  /** The first, or undefined. */
  peek(): T | undefined {
    return this.h[0];
  }

  push(x: T): void {
    const h = this.h;
    let i = h.push(x) - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.before(h[p], x) <= 0) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = x;
  }

  pop(): T | undefined {
    const h = this.h;
    const top = h[0];
    const last = h.pop();
    if (!h.length || last === undefined) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const c = l + 1 < h.length && this.before(h[l + 1], h[l]) < 0 ? l + 1 : l;
      if (this.before(h[c], last) >= 0) break;
      h[i] = h[c];
      i = c;
    }
    h[i] = last;
    return top;
  }
}
