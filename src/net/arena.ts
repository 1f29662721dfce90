// Scratch memory for network ops, in the node memory so the wasm kernels can reach it: bump
// allocation within an op, reset after it. An op that needs more than the arena holds gets
// extra blocks, and the arena grows to that size for the next op (ops repeat their sizes).
import type { NodeHeap } from '../core/heap.js';

const ALIGN = 64;

export class Arena {
  private base = 0;
  private capacity = 0;
  private used = 0;
  private readonly extra: number[] = [];
  private wanted = 0;

  constructor(private readonly heap: NodeHeap) {}

  /** Address of `bytes` of scratch, 64-byte aligned, valid until reset(). */
  take(bytes: number): number {
    const b = Math.ceil(Math.max(bytes, 1) / ALIGN) * ALIGN;
    this.wanted += b;
    if (this.used + b <= this.capacity) {
      const at = this.base + this.used;
      this.used += b;
      return at;
    }
    const block = this.heap.alloc(b);
    this.extra.push(block);
    return block;
  }

  /** Ends the op's use of its scratch; grows the arena if the op needed more. */
  reset(): void {
    for (const b of this.extra.splice(0)) this.heap.free(b);
    if (this.wanted > this.capacity) {
      if (this.base) this.heap.free(this.base);
      this.base = this.heap.alloc(this.wanted);
      this.capacity = this.wanted;
    }
    this.used = 0;
    this.wanted = 0;
  }

  release(): void {
    for (const b of this.extra.splice(0)) this.heap.free(b);
    if (this.base) this.heap.free(this.base);
    this.base = this.capacity = this.used = this.wanted = 0;
  }
}
