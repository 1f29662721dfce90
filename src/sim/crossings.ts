// The messages between nodes waiting to enter their receivers' interfaces, in the order they
// left (network.ts's leftBefore): a binary min-heap, since a busy interface can hold thousands
// back while a window settles only the few that left in it.
import { type Crossing, leftBefore } from './network.js';

export class Crossings {
  private readonly heap: Crossing[] = [];

  get size(): number {
    return this.heap.length;
  }

  /** The first to enter, or undefined. */
  peek(): Crossing | undefined {
    return this.heap[0];
  }

  push(c: Crossing): void {
    const h = this.heap;
    let i = h.push(c) - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (leftBefore(h[p], c) <= 0) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = c;
  }

  pop(): Crossing | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (!h.length || !last) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const c = l + 1 < h.length && leftBefore(h[l + 1], h[l]) < 0 ? l + 1 : l;
      if (leftBefore(h[c], last) >= 0) break;
      h[i] = h[c];
      i = c;
    }
    h[i] = last;
    return top;
  }
}
