// The node heap that comm.alloc() serves: first-fit blocks above the world communicator,
// shared by every rank of the node (a lock word in the node header guards it).
//
// Each block starts with a 64-byte header, so user data stays cache-line aligned:
//   [0] bytes of the block, header included (a multiple of 64, at least MIN_BLOCK)
//   [1] FREE or USED
//   [2] CANARY ^ the block's address: a header that was overwritten, or bytes that only look
//       like one, fail the check
// Every walk checks each header it crosses, so a stray write into the heap ends in an INTERNAL
// error naming the block instead of a walk that never ends while holding the lock.
//
// The memory may grow under any rank. A view taken before the lock was won can be shorter than
// the memory another rank just grew; writes through it past its end are silently dropped (that
// once left a new block's header all zero). So views are taken after the lock is held, from a
// buffer renewed when another thread's grow has not reached this one yet (fresh-buffer.ts).

import { fail, WebcclError } from './errors.js';
import { freshBuffer, freshI32 } from './fresh-buffer.js';
import { nodeAbortCause } from './node.js';
import { N, NODE_BASE } from './shm-map.js';
import { isShared, UNSHARED_NODE_BYTES } from './unshared-memory.js';

const HDR = 64;
const MIN_BLOCK = 2 * HDR;
const FREE = 0;
const USED = 1;
const CANARY = 0x48454150; // 'HEAP'
const LOCK = (NODE_BASE + N.HEAP_LOCK) >> 2;
const START = (NODE_BASE + N.HEAP_START) >> 2;
const TOP = (NODE_BASE + N.HEAP_TOP) >> 2;
const GROWTHS = (NODE_BASE + N.GROWTHS) >> 2;
const PAGE = 65536;
/** The heap ends a page below 2 GiB, so every address and size fits an i32. */
export const HEAP_LIMIT = 32768 * PAGE - PAGE;
/** How long a thread that may block waits for the lock (its holder keeps it for microseconds). */
const LOCK_WAIT_MS = 10_000;
/** How long a thread that may not block (a page's main thread) spins for it. */
const LOCK_SPIN_MS = 250;

export interface HeapOptions {
  /** Whether this thread may block in Atomics.wait (false on a page's main thread). */
  canBlock?: boolean;
  /** This rank's number on the node, recorded in the lock word so a stuck wait can name its holder. */
  rank?: number;
  /**
   * A progress thread's heap: the buffers of the ops it runs belong to ranks (checked by them at
   * issue), so checkLive does not look for them among its own blocks.
   */
  runsRanksOps?: boolean;
}

const canary = (b: number): number => (CANARY ^ b) | 0;
const roundUp64 = (x: number): number => Math.ceil(x / 64) * 64;

export class NodeHeap {
  private readonly canBlock: boolean;
  private readonly owner: number;
  private readonly runsRanksOps: boolean;
  /** This rank's live blocks: data address → data bytes (ops check their buffers against it). */
  private readonly mine = new Map<number, number>();
  private readonly lockView: Int32Array;
  /** The memory as of this rank's last alloc or free: it covers every block in `mine`. */
  private ownView: Int32Array;

  constructor(
    private readonly memory: WebAssembly.Memory,
    o: HeapOptions = {},
  ) {
    this.canBlock = o.canBlock ?? true;
    this.owner = (o.rank ?? -1) + 1 || 0xffff;
    this.runsRanksOps = o.runsRanksOps ?? false;
    // The lock and the heap bounds sit in the node header, inside the memory's first pages.
    this.lockView = new Int32Array(freshBuffer(memory), 0, (NODE_BASE + N.HEADER_BYTES) >> 2);
    this.ownView = this.view();
  }

  /** Address of `bytes` of shared memory, 64-byte aligned: this rank's, until it frees it. */
  alloc(bytes: number): number {
    const addr = this.allocShared(bytes);
    this.mine.set(addr, bytes);
    return addr;
  }

  /**
   * The same for a block that several ranks use and the last of them frees (a communicator's
   * block, its send/recv channels): not listed as this rank's. Listed, it would outlive a free()
   * by another rank, and a view of this rank's inside the reused memory would then be checked
   * against that stale entry (checkLive) and reported as a corrupt heap.
   */
  allocShared(bytes: number): number {
    if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > HEAP_LIMIT) {
      fail(
        'INVALID_ARGUMENT',
        `alloc of ${bytes} bytes: the node memory holds at most ${HEAP_LIMIT} bytes (2 GiB, the limit of a WebAssembly memory)`,
        { bytes, limit: HEAP_LIMIT },
      );
    }
    const need = HDR + roundUp64(Math.max(bytes, 1));
    return this.locked((i32) => this.firstFit(i32, need) ?? this.extend(i32, need, bytes));
  }

  free(addr: number): void {
    this.locked((i32) => {
      const b = addr - HDR;
      let prev = -1;
      let at = i32[START];
      const top = i32[TOP];
      for (; at < top && at < b; at += i32[at >> 2]) {
        checkBlock(i32, at, top);
        prev = i32[(at >> 2) + 1] === FREE ? at : -1;
      }
      if (at !== b || at >= top)
        fail('INVALID_ARGUMENT', `free of ${addr}: not the address of a block from comm.alloc()`, { addr });
      checkBlock(i32, b, top);
      if (i32[(b >> 2) + 1] !== USED)
        fail('INVALID_ARGUMENT', `free of ${addr}: the block was already freed`, { addr });
      i32[(b >> 2) + 1] = FREE;
      // Merge with the free blocks that follow and the one before, then give a free tail back.
      let size = i32[b >> 2];
      while (b + size < top) {
        checkBlock(i32, b + size, top);
        if (i32[((b + size) >> 2) + 1] !== FREE) break;
        size += i32[(b + size) >> 2];
      }
      const start = prev >= 0 ? prev : b;
      size += b - start;
      i32[start >> 2] = size;
      if (start + size === top) i32[TOP] = start;
    });
    this.mine.delete(addr);
  }

  /**
   * Checks that bytes [addr, addr + bytes) lie in a live block this rank allocated, and that its
   * header is intact: an op on a freed buffer (whose memory another rank may own by now) is
   * refused instead of writing into someone else's data.
   */
  checkLive(addr: number, bytes: number, what: string): void {
    if (this.runsRanksOps) return;
    let start = this.mine.has(addr) ? addr : -1;
    if (start < 0) {
      for (const [a, n] of this.mine) {
        if (a <= addr && addr + bytes <= a + Math.max(n, 1)) {
          start = a;
          break;
        }
      }
    }
    if (start < 0 || addr + bytes > start + Math.max(this.mine.get(start)!, 1)) {
      fail(
        'INVALID_ARGUMENT',
        `${what}: a view of the node memory that is not inside a live comm.alloc() buffer of this rank (freed already, or never allocated here)`,
        { addr, bytes },
      );
    }
    const i32 = this.ownView;
    const b = start - HDR;
    if (i32[(b >> 2) + 2] !== canary(b) || i32[(b >> 2) + 1] !== USED) {
      throw corrupt(b, i32, `${what}: the header of its block was overwritten`);
    }
  }

  /** The live block that fits `need` bytes, taken (and split) under the lock; null if none. */
  private firstFit(i32: Int32Array, need: number): number | null {
    const top = i32[TOP];
    for (let b = i32[START]; b < top; b += i32[b >> 2]) {
      checkBlock(i32, b, top);
      // No two free blocks are ever neighbours: free() merges with both, and a split leaves its
      // free rest before a used block.
      if (i32[(b >> 2) + 1] !== FREE) continue;
      let size = i32[b >> 2];
      if (size < need) continue;
      if (size - need >= MIN_BLOCK) {
        writeHeader(i32, b + need, size - need, FREE);
        size = need;
      }
      writeHeader(i32, b, size, USED);
      return b + HDR;
    }
    return null;
  }

  /** A new block at the top of the heap, growing the memory if it must. */
  private extend(i32: Int32Array, need: number, bytes: number): number {
    const top = i32[TOP];
    if (top + need > HEAP_LIMIT) {
      fail(
        'INVALID_ARGUMENT',
        `alloc of ${bytes} bytes exceeds the node's 2 GiB shared memory (${HEAP_LIMIT - top} bytes left at the top of the heap)`,
        { bytes, available: HEAP_LIMIT - top },
      );
    }
    let view = i32;
    const have = freshBuffer(this.memory).byteLength;
    if (top + need > have) {
      try {
        this.memory.grow(Math.ceil((top + need - have) / PAGE));
      } catch (e) {
        const fixed = isShared(this.memory)
          ? ''
          : `; a node without shared memory (a page that is not cross-origin isolated) has a fixed ${UNSHARED_NODE_BYTES >> 20} MiB`;
        fail(
          'INVALID_ARGUMENT',
          `alloc of ${bytes} bytes: the node memory could not grow to ${top + need} bytes (${(e as Error).message})${fixed}`,
          { bytes },
        );
      }
      view = this.view();
    }
    writeHeader(view, top, need, USED);
    view[TOP] = top + need;
    // Counted after the top moved: a rank that sees the count renews its views, and finds the
    // top past the end of a buffer its thread has not renewed yet (fresh-buffer.ts).
    if (view !== i32) Atomics.add(view, GROWTHS, 1);
    return top + HDR;
  }

  /** A view of the whole memory as it is now (another rank may have grown it). */
  private view(): Int32Array {
    return freshI32(this.memory);
  }

  private locked<T>(fn: (i32: Int32Array) => T): T {
    this.acquire();
    try {
      return fn(this.view());
    } finally {
      this.ownView = this.view();
      Atomics.store(this.lockView, LOCK, 0);
      Atomics.notify(this.lockView, LOCK, 1);
    }
  }

  /**
   * Takes the lock: waits in slices where the thread may block, spins briefly where it may not,
   * and gives up with a coded error (naming the holder) rather than wait forever on a rank that
   * died holding it.
   */
  private acquire(): void {
    const i32 = this.lockView;
    let held = Atomics.compareExchange(i32, LOCK, 0, this.owner);
    if (held === 0) return;
    const limit = this.canBlock ? LOCK_WAIT_MS : LOCK_SPIN_MS;
    const deadline = performance.now() + limit;
    for (;;) {
      if (this.canBlock) Atomics.wait(i32, LOCK, held, 5);
      held = Atomics.compareExchange(i32, LOCK, 0, this.owner);
      if (held === 0) return;
      const aborted = nodeAbortCause(this.memory);
      if (aborted) {
        // (the holder may be the rank that died, or a thread the launcher stopped as it did)
        const { by, reason, text } = aborted;
        fail('ABORTED', `comm.alloc()/free(): the node was aborted while waiting for its heap lock: ${text}`, {
          by,
          reason,
        });
      }
      if (performance.now() > deadline) {
        const who = held === 0xffff ? 'another thread' : `rank ${held - 1}`;
        fail(
          'TIMEOUT',
          `comm.alloc()/free(): ${who} held the node heap's lock for over ${limit} ms${this.canBlock ? '' : ' (this thread may not block, so it only spins)'}`,
          { holder: held === 0xffff ? null : held - 1, waitedMs: limit },
        );
      }
    }
  }
}

function writeHeader(i32: Int32Array, b: number, size: number, state: number): void {
  i32[b >> 2] = size;
  i32[(b >> 2) + 1] = state;
  i32[(b >> 2) + 2] = canary(b);
}

function corrupt(b: number, i32: Int32Array, why: string): WebcclError {
  const [size, state, mark] = [i32[b >> 2], i32[(b >> 2) + 1], i32[(b >> 2) + 2]];
  return new WebcclError(
    'INTERNAL',
    `node heap corrupt: ${why} (block at ${b}: size ${size}, state ${state}, canary ${mark >>> 0})`,
    { block: b, size, state },
  );
}

/** Throws INTERNAL when the header at b is not one the heap wrote. */
function checkBlock(i32: Int32Array, b: number, top: number): void {
  const size = i32[b >> 2];
  const state = i32[(b >> 2) + 1];
  if (i32[(b >> 2) + 2] !== canary(b)) throw corrupt(b, i32, 'a block header was overwritten');
  if (!(size >= MIN_BLOCK && size % 64 === 0 && b + size <= top))
    throw corrupt(b, i32, 'a block has an impossible size');
  if (state !== FREE && state !== USED) throw corrupt(b, i32, 'a block has an unknown state');
}
