// A list that never gives its storage back. V8 drops an array's backing store when its length
// falls to 0 (`length = 0`, a filter in place that keeps nothing, shift() of the last item) and
// allocates a new one at the next push: a queue that empties and fills once per message (the
// pending sends and recvs of a ping-pong) then allocates on every op, which fills the young
// generation and stops both ranks of a ping-pong for each scavenge. These keep their slots and
// clear them instead (so nothing stays reachable from a freed slot).

/** A first-in first-out queue: push at the tail, take from the head. */
export class KeepQueue<T> {
  private items: (T | undefined)[] = [];
  private head = 0;
  private tail = 0;

  get length(): number {
    return this.tail - this.head;
  }

  push(x: T): void {
    if (this.tail === this.items.length && this.head > 0) this.compact();
    this.items[this.tail++] = x;
  }

  /** The item at the head (undefined when empty). */
  peek(): T | undefined {
    return this.head < this.tail ? this.items[this.head] : undefined;
  }

  shift(): T | undefined {
    if (this.head === this.tail) return undefined;
    const x = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.tail) this.head = this.tail = 0;
    return x;
  }

  clear(): void {
    for (let i = this.head; i < this.tail; i++) this.items[i] = undefined;
    this.head = this.tail = 0;
  }

  *[Symbol.iterator](): Generator<T> {
    for (let i = this.head; i < this.tail; i++) yield this.items[i]!;
  }

  private compact(): void {
    const n = this.tail - this.head;
    this.items.copyWithin(0, this.head, this.tail);
    for (let i = n; i < this.tail; i++) this.items[i] = undefined;
    this.head = 0;
    this.tail = n;
  }
}

/** A list compacted in place: visit with at(i), move kept items down with set(), then truncate(). */
export class KeepList<T> {
  private items: (T | undefined)[] = [];
  private n = 0;

  get length(): number {
    return this.n;
  }

  push(x: T): void {
    this.items[this.n++] = x;
  }

  at(i: number): T {
    return this.items[i]!;
  }

  set(i: number, x: T): void {
    this.items[i] = x;
  }

  /** Keeps the first `k` items. */
  truncate(k: number): void {
    for (let i = k; i < this.n; i++) this.items[i] = undefined;
    this.n = Math.min(this.n, k);
  }

  clear(): void {
    this.truncate(0);
  }

  *[Symbol.iterator](): Generator<T> {
    for (let i = 0; i < this.n; i++) yield this.items[i]!;
  }
}
