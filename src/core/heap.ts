// The node heap that comm.alloc() serves: first-fit blocks above the world communicator,
// shared by every rank of the node (a spin-then-wait lock in the node header guards it).
// Each block starts with a 64-byte header [bytes, used] so user data stays cache-line aligned.
import { fail } from './errors.js';
import { N, NODE_BASE } from './layout.js';

const HDR = 64;
const LOCK = (NODE_BASE + N.HEAP_LOCK) >> 2;
const START = (NODE_BASE + N.HEAP_START) >> 2;
const TOP = (NODE_BASE + N.HEAP_TOP) >> 2;
const GROWTHS = (NODE_BASE + N.GROWTHS) >> 2;
const MAX_BYTES = 32768 * 65536;

export class NodeHeap {
  constructor(private readonly memory: WebAssembly.Memory) {}

  private get i32(): Int32Array {
    return new Int32Array(this.memory.buffer);
  }

  private locked<T>(fn: (i32: Int32Array) => T): T {
    const i32 = this.i32;
    while (Atomics.compareExchange(i32, LOCK, 0, 1) !== 0) Atomics.wait(i32, LOCK, 1, 1);
    try {
      return fn(i32);
    } finally {
      Atomics.store(i32, LOCK, 0);
      Atomics.notify(i32, LOCK, 1);
    }
  }

  /** Address of `bytes` of shared memory, 64-byte aligned. */
  alloc(bytes: number): number {
    const need = HDR + ((Math.max(bytes, 1) + 63) & ~63);
    return this.locked((i32) => {
      const top = i32[TOP];
      for (let b = i32[START]; b < top; b += i32[b >> 2]) {
        const size = i32[b >> 2];
        if (i32[(b >> 2) + 1] === 0 && size >= need) {
          if (size - need >= 2 * HDR) {
            i32[(b + need) >> 2] = size - need;
            i32[((b + need) >> 2) + 1] = 0;
            i32[b >> 2] = need;
          }
          i32[(b >> 2) + 1] = 1;
          return b + HDR;
        }
      }
      if (top + need > MAX_BYTES) fail('INVALID_ARGUMENT', `alloc of ${bytes} bytes exceeds the node's 2 GiB shared memory`);
      const have = this.memory.buffer.byteLength;
      let i = i32;
      if (top + need > have) {
        this.memory.grow(Math.ceil((top + need - have) / 65536));
        i = this.i32;
        Atomics.add(i, GROWTHS, 1);
      }
      i[top >> 2] = need;
      i[(top >> 2) + 1] = 1;
      i[TOP] = top + need;
      return top + HDR;
    });
  }

  free(addr: number): void {
    this.locked((i32) => {
      const b = addr - HDR;
      if (i32[(b >> 2) + 1] !== 1) fail('INVALID_ARGUMENT', `free of ${addr}: not an allocated block`);
      i32[(b >> 2) + 1] = 0;
      // Merge with the free blocks that follow, then give a free tail back to the top.
      let size = i32[b >> 2];
      while (b + size < i32[TOP] && i32[((b + size) >> 2) + 1] === 0) size += i32[(b + size) >> 2];
      i32[b >> 2] = size;
      if (b + size === i32[TOP]) i32[TOP] = b;
    });
  }
}
