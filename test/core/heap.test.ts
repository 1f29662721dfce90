// The node heap behind comm.alloc(): a corrupt header is reported (INTERNAL naming the block),
// never walked forever; its lock has a deadline and never blocks a thread that may not block;
// and what alloc/free and ops do with bad or stale buffers is refused with a code. The race it
// once lost (a view older than another rank's memory.grow) runs on 8 thread ranks at the end.
import { afterEach, describe, expect, it } from 'vitest';
import { freshBuffer } from '../../src/core/fresh-buffer.js';
import { HEAP_LIMIT, NodeHeap } from '../../src/core/heap.js';
import { abortNode } from '../../src/core/node.js';
import { ABORT_REASON, N, NODE_BASE } from '../../src/core/shm-map.js';
import type { RankContext } from '../../src/engine/context.js';
import { createNode } from '../../src/progress/create-node.js';
import { allocCommBlock, releaseCommBlock } from '../../src/shm/block.js';
import { caught } from '../helpers/caught.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';
import { runScenario } from '../helpers/threads.js';

const heapOf = (nranks = 2, o: { canBlock?: boolean; rank?: number } = {}) => {
  const node = createNode({ nranks, slotBytes: 4096 });
  return { node, heap: new NodeHeap(node.memory, o), i32: () => new Int32Array(node.memory.buffer) };
};

describe('node heap', () => {
  it('reuses freed blocks and merges neighbours both ways', () => {
    const { heap, i32 } = heapOf();
    const top0 = i32()[(NODE_BASE + N.HEAP_TOP) >> 2];
    const [a, b, c] = [heap.alloc(100), heap.alloc(100), heap.alloc(100)];
    heap.free(a);
    heap.free(b); // merges into a's free block
    expect(heap.alloc(200)).toBe(a);
    heap.free(a);
    heap.free(c); // joins a+b, and the whole run goes back to the top
    expect(i32()[(NODE_BASE + N.HEAP_TOP) >> 2]).toBe(top0);
  });

  it('a zeroed header fails alloc and free with INTERNAL naming the block, not an endless walk', () => {
    const { heap, i32 } = heapOf();
    const a = heap.alloc(1000);
    const b = heap.alloc(20);
    heap.alloc(20);
    i32().fill(0, (b - 64) >> 2, b >> 2); // what a stray write once left there
    let e = caught(() => heap.alloc(5000)); // walks past b's header
    expect(e.code).toBe('INTERNAL');
    expect(e.details.block).toBe(b - 64);
    expect(e.message).toContain(String(b - 64));
    e = caught(() => heap.free(b + 64 + 64)); // a walk that crosses it
    expect(e.code).toBe('INTERNAL');
    expect(Atomics.load(i32(), (NODE_BASE + N.HEAP_LOCK) >> 2)).toBe(0); // the lock was released
    i32()[(a - 64) >> 2] = 4096 + 8; // a size that is no multiple of 64
    expect(caught(() => heap.alloc(5000)).details.block).toBe(a - 64);
  });

  it('impossible sizes and states are caught too', () => {
    for (const [word, value] of [
      [0, 0],
      [0, 1 << 30],
      [1, 7],
    ] as const) {
      const { heap, i32 } = heapOf();
      const a = heap.alloc(64);
      heap.alloc(64);
      heap.free(a);
      i32()[((a - 64) >> 2) + word] = value;
      const e = caught(() => heap.alloc(1 << 16));
      expect(e.code).toBe('INTERNAL');
      expect(e.details.block).toBe(a - 64);
    }
  });

  it('free of an address that is no block, or twice, is INVALID_ARGUMENT', () => {
    const { heap } = heapOf();
    const a = heap.alloc(256);
    expect(caught(() => heap.free(a + 64)).code).toBe('INVALID_ARGUMENT');
    heap.free(a);
    expect(caught(() => heap.free(a)).code).toBe('INVALID_ARGUMENT');
  });

  it('a lock held by another rank: a thread that may not block fails TIMEOUT naming it, without Atomics.wait', () => {
    const { node, heap } = heapOf(2, { canBlock: false, rank: 0 });
    const lock = new Int32Array(node.memory.buffer);
    Atomics.store(lock, (NODE_BASE + N.HEAP_LOCK) >> 2, 2); // rank 1 holds it
    const t0 = performance.now();
    const e = caught(() => heap.alloc(64));
    expect(e.code).toBe('TIMEOUT');
    expect(e.details.holder).toBe(1);
    expect(performance.now() - t0).toBeLessThan(5_000);
    Atomics.store(lock, (NODE_BASE + N.HEAP_LOCK) >> 2, 0);
    expect(heap.alloc(64)).toBeGreaterThan(0);
  });

  it('a lock held when its node is aborted (a rank died): the waiter fails ABORTED naming the rank that died', () => {
    // What a node mate met when a rank thread exited mid-op and the launcher stopped its threads.
    const { node, heap } = heapOf(2, { canBlock: true, rank: 0 });
    const lock = new Int32Array(node.memory.buffer);
    Atomics.store(lock, (NODE_BASE + N.HEAP_LOCK) >> 2, 0xffff); // another thread holds it
    abortNode(node, 1, ABORT_REASON.PEER_DIED, 'exited with code 7');
    const e = caught(() => heap.alloc(64));
    expect(e.code).toBe('ABORTED');
    expect(e.details.by).toBe(1);
    expect(e.message).toMatch(/heap lock: rank 1 died \(exited with code 7\)/);
  });

  it('a communicator block freed by another member leaves nothing behind: a view in the reused memory is checked against its own block', () => {
    // What failed on 2 nodes x 3 threads after a double shrink: a group's block, allocated by
    // one rank and freed by the other (the last to release it), stayed on the first rank's list;
    // that rank's network scratch later reused the memory, and a view into it met the stale
    // entry first: "node heap corrupt ... the header of its block was overwritten".
    const { node, heap } = heapOf();
    const other = new NodeHeap(node.memory, { rank: 1 });
    const ctxOf = (h: NodeHeap) =>
      ({ heap: h, core: { memory: node.memory }, slotBytes: 4096 }) as unknown as RankContext;
    const before = heap.alloc(64);
    const block = allocCommBlock(ctxOf(heap), 2);
    releaseCommBlock(ctxOf(heap), block, 2);
    releaseCommBlock(ctxOf(other), block, 2); // the last member: frees it
    heap.free(before); // the free space now starts before the block's old header
    const scratch = heap.alloc(1 << 20);
    expect(scratch).toBeLessThan(block);
    expect(() => heap.checkLive(block + 64, 4096, 'a view inside the scratch, where the block was')).not.toThrow();
    // and the block itself was never this rank's buffer: a view of it is refused as one
    const shared = allocCommBlock(ctxOf(heap), 2);
    expect(caught(() => heap.checkLive(shared, 64, 'a view of the block')).code).toBe('INVALID_ARGUMENT');
  });

  it('a node aborted while a rank waits for the lock: ABORTED', () => {
    const { node, heap } = heapOf(2, { rank: 0 });
    const i32 = new Int32Array(node.memory.buffer);
    Atomics.store(i32, (NODE_BASE + N.HEAP_LOCK) >> 2, 2);
    Atomics.store(i32, (NODE_BASE + N.ABORT) >> 2, 2);
    expect(caught(() => heap.alloc(64)).code).toBe('ABORTED');
  });
});

describe("a buffer another thread's memory.grow has not reached yet", () => {
  const TOP = (NODE_BASE + N.HEAP_TOP) >> 2;

  it('is renewed (grow(0)) when it ends below the heap top: no view falls short of a block', () => {
    // A memory whose buffer lags, as V8 leaves it on a thread until it handles another
    // thread's grow: its old, shorter buffer until grow(0) is called here.
    const real = new WebAssembly.Memory({ initial: 2, maximum: 16, shared: true });
    const old = real.buffer;
    real.grow(2);
    let renewed = false;
    const lagging = {
      get buffer() {
        return renewed ? real.buffer : old;
      },
      grow(n: number) {
        renewed = true;
        return real.grow(n);
      },
    } as unknown as WebAssembly.Memory;
    new Int32Array(real.buffer)[TOP] = real.buffer.byteLength; // the heap's top at the new end
    expect(freshBuffer(lagging).byteLength).toBe(4 * 65536);
    expect(renewed).toBe(true);
    // A top inside the old buffer: nothing to renew (no call into the memory).
    renewed = false;
    new Int32Array(real.buffer)[TOP] = old.byteLength;
    expect(freshBuffer(lagging)).toBe(old);
    expect(renewed).toBe(false);
  });
});

describe('comm.alloc() and free() at the API', () => {
  it('sizes beyond the 2 GiB memory are INVALID_ARGUMENT, not RangeError', () => {
    const [c] = inprocRanks(1);
    for (const [dtype, count] of [
      ['f32', 2 ** 40],
      ['f64', HEAP_LIMIT / 4],
      ['u8', 2 ** 53 + 2],
      ['f32', 1.5],
      ['f32', -1],
    ] as const) {
      expect(caught(() => c.alloc(dtype, count)).code).toBe('INVALID_ARGUMENT');
    }
    expect(c.alloc('f32', 4).length).toBe(4); // still usable
  });

  it('a detached buffer (its ArrayBuffer transferred) is INVALID_ARGUMENT, not TypeError', () => {
    const [c] = inprocRanks(1);
    const x = new Float32Array(16);
    structuredClone(x.buffer, { transfer: [x.buffer] });
    const e = caught(() => c.allReduce(x));
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.details).toEqual({ detached: true });
    expect(caught(() => c.allGather(new Float32Array(16), x)).code).toBe('INVALID_ARGUMENT');
  });

  // The communicator remembers the record of each array it was passed (so a loop passing the
  // same arrays op after op checks each once): that must not hide what happened to an array meanwhile.
  it('an array used by one op, then transferred, is refused by the next (the remembered record does not hide it)', async () => {
    const [c] = inprocRanks(1);
    const x = new Float32Array(16).fill(2);
    await c.allReduce(x);
    await c.allReduce(x);
    expect(x[0]).toBe(2);
    structuredClone(x.buffer, { transfer: [x.buffer] });
    const e = caught(() => c.allReduce(x));
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.details).toEqual({ detached: true });
  });

  it('an alloc() buffer used by one op, then freed, is refused by the next; a resized view is seen anew', async () => {
    const [a, b] = inprocRanks(2);
    const x = a.alloc('f32', 64) as Float32Array;
    const y = b.alloc('f32', 64) as Float32Array;
    x.fill(1);
    y.fill(2);
    await settleAll([a.allReduce(x), b.allReduce(y)]);
    expect(x[63]).toBe(3);
    a.free(x);
    expect(caught(() => a.allReduce(x)).code).toBe('INVALID_ARGUMENT');
    // A length-tracking view of a resizable buffer: the same array object, another length.
    const rb = new ArrayBuffer(16, { maxByteLength: 64 });
    const v = new Float32Array(rb);
    const w = new Float32Array(rb);
    await settleAll([a.allReduce(v), b.allReduce(w)]);
    rb.resize(32);
    expect(v.length).toBe(8);
    v.fill(1);
    const e = await settleAll([a.allReduce(v), b.allReduce(new Float32Array(8).fill(1))]);
    expect(e.every((r) => r === undefined)).toBe(true);
    expect(Array.from(v)).toEqual(new Array(8).fill(2));
  });

  it('alloc after destroy() is refused', () => {
    const [c] = inprocRanks(1);
    c.destroy();
    expect(caught(() => c.alloc('f32', 4)).code).toBe('ABORTED');
  });

  it('an op on a freed alloc() buffer is refused, also when another rank took the memory over', async () => {
    const [a, b] = inprocRanks(2);
    const x = a.alloc('f32', 1000) as Float32Array;
    a.free(x);
    expect(caught(() => a.allReduce(x)).code).toBe('INVALID_ARGUMENT');
    expect(caught(() => a.broadcast(new Float32Array(10), { out: x.subarray(0, 10) })).code).toBe('INVALID_ARGUMENT');
    const y = b.alloc('f32', 1000) as Float32Array; // the same memory, now rank 1's
    expect(y.byteOffset).toBe(x.byteOffset);
    expect(caught(() => a.allReduce(x)).code).toBe('INVALID_ARGUMENT');
    expect(caught(() => a.free(x)).code).toBe('INVALID_ARGUMENT');
    // Live buffers and views inside them still work.
    const z = a.alloc('f32', 16) as Float32Array;
    z.fill(1);
    y.fill(2);
    await settleAll([a.allReduce(z.subarray(4, 8)), b.allReduce(y.subarray(0, 4))]);
    expect(Array.from(z.subarray(4, 8))).toEqual([3, 3, 3, 3]);
    expect(z[0]).toBe(1);
  });

  it('a header overwritten under a live buffer: its next op fails INTERNAL', () => {
    const [a] = inprocRanks(2);
    const x = a.alloc('f32', 8) as Float32Array;
    new Int32Array(x.buffer, x.byteOffset - 64, 16).fill(0);
    const e = caught(() => a.allReduce(x));
    expect(e.code).toBe('INTERNAL');
    expect(e.details.block).toBe(x.byteOffset - 64);
  });
});

describe('pages that are not cross-origin isolated', () => {
  const saved = {
    sab: globalThis.SharedArrayBuffer,
    coi: Object.getOwnPropertyDescriptor(globalThis, 'crossOriginIsolated'),
  };
  afterEach(() => {
    globalThis.SharedArrayBuffer = saved.sab;
    if (saved.coi) Object.defineProperty(globalThis, 'crossOriginIsolated', saved.coi);
    else delete (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated;
  });

  it('SharedArrayBuffer undefined: a node of several ranks is UNSUPPORTED naming the COOP/COEP headers (a node of one runs on unshared memory)', () => {
    delete (globalThis as { SharedArrayBuffer?: unknown }).SharedArrayBuffer;
    expect(createNode({ nranks: 1, progress: false }).memory.buffer).toBeInstanceOf(ArrayBuffer);
    const e = caught(() => createNode({ nranks: 2, progress: false }));
    expect(e.code).toBe('UNSUPPORTED');
    expect(e.message).toContain('Cross-Origin-Opener-Policy: same-origin');
    expect(e.message).toContain('Cross-Origin-Embedder-Policy: require-corp');
    expect(e.details.headers).toEqual({
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
    });
  });

  it('crossOriginIsolated false: a node for workers is refused before postMessage would fail', () => {
    Object.defineProperty(globalThis, 'crossOriginIsolated', { value: false, configurable: true });
    expect(caught(() => createNode({ nranks: 2 })).code).toBe('UNSUPPORTED');
  });
});

describe('alloc()/free() around every op on 8 thread ranks', () => {
  const counts = [0, 5, 1000];
  it('broadcast and reduce, every root, with and without out, sum and min, freed per op: 20 times', async () => {
    const { result, reports } = await runScenario(
      8,
      'heapStress',
      { iters: 20, dtypes: ['f32'], counts },
      { env: { WEBCCL_TIMEOUT_MS: '30000' } },
    );
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    for (const [rep] of reports) expect(rep, JSON.stringify(rep)).toMatchObject({ ok: true, ops: 20 * 3 * 3 * 16 });
  }, 600_000);

  it('the same, held until the end of each iteration so the memory grows under allocating ranks; every dtype width, small slots, scalar build', async () => {
    const { result, reports } = await runScenario(
      8,
      'heapStress',
      { iters: 3, dtypes: ['f32', 'f64', 'f16', 'bf16'], counts, hold: true, unrooted: true },
      {
        slotBytes: 4096,
        simd: false,
        env: { WEBCCL_TIMEOUT_MS: '30000' },
      },
    );
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    for (const [rep] of reports) expect(rep, JSON.stringify(rep)).toMatchObject({ ok: true });
  }, 600_000);

  it('allReduce, allGather and reduceScatter on alloc() buffers beside them, 6 ranks, simd build, held', async () => {
    const { result, reports } = await runScenario(
      6,
      'heapStress',
      { iters: 2, dtypes: ['f32', 'i32'], counts: [0, 5, 1000, 20_000], hold: true, unrooted: true },
      {
        env: { WEBCCL_TIMEOUT_MS: '30000' },
      },
    );
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    for (const [rep] of reports) expect(rep, JSON.stringify(rep)).toMatchObject({ ok: true });
  }, 600_000);
});
