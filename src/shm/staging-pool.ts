// Heap blocks that hold copies of send payloads (plain buffers beyond the inline bytes), kept
// for reuse once the receiver has taken them: the node heap's lock costs microseconds a
// message. Blocks of up to MAX_BLOCK bytes are kept, at most MAX_KEPT bytes in all, by
// power-of-two size class; release() gives them all back to the heap.
import type { NodeHeap } from '../core/heap.js';

const MAX_BLOCK = 1 << 20;
const MAX_KEPT = 8 << 20;
const sizeClass = (bytes: number): number => Math.max(64, 2 ** Math.ceil(Math.log2(bytes)));

export class StagingPool {
  private readonly free = new Map<number, number[]>();
  private kept = 0;

  constructor(private readonly heap: NodeHeap) {}

  /** A block of at least `bytes` (throws when the node memory is full). */
  take(bytes: number): number {
    const c = sizeClass(bytes);
    const list = this.free.get(c);
    if (!list?.length) return this.heap.alloc(c);
    this.kept -= c;
    return list.pop()!;
  }

  /** Gives back a block `take(bytes)` returned. */
  give(addr: number, bytes: number): void {
    const c = sizeClass(bytes);
    if (c > MAX_BLOCK || this.kept + c > MAX_KEPT) return this.heap.free(addr);
    const list = this.free.get(c);
    if (list) list.push(addr);
    else this.free.set(c, [addr]);
    this.kept += c;
  }

  release(): void {
    for (const list of this.free.values()) for (const a of list) this.heap.free(a);
    this.free.clear();
    this.kept = 0;
  }
}
