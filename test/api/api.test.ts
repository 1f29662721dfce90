// Bad input is refused at the API boundary, before anything moves, with a stable code.
import { describe, expect, it } from 'vitest';
import { Communicator } from '../../src/api/communicator.js';
import { WebcclError } from '../../src/core/errors.js';
import { abortNode } from '../../src/core/node.js';
import { ABORT_REASON } from '../../src/core/shm-map.js';
import { joinNode } from '../../src/engine/context.js';
import * as ccl from '../../src/index.js';
import { createNode } from '../../src/progress/create-node.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (e) {
    expect(WebcclError.is(e)).toBe(true);
    return (e as WebcclError).code;
  }
  return undefined;
};

describe('argument checks', () => {
  const [c] = inprocRanks(1);
  const [a, b] = inprocRanks(2);

  it('wrong buffer types and dtypes', () => {
    expect(code(() => c.allReduce([1, 2, 3] as any))).toBe('INVALID_ARGUMENT');
    expect(code(() => c.allReduce(new Uint16Array(4) as any))).toBe('INVALID_DTYPE');
    expect(code(() => c.allReduce(new DataView(new ArrayBuffer(8)) as any))).toBe('INVALID_ARGUMENT');
    expect(code(() => c.allReduce({ data: new Uint16Array(4), dtype: 'f8' } as any))).toBe('INVALID_DTYPE');
    expect(code(() => c.allReduce({ data: new Float32Array(4), dtype: 'bf16' } as any))).toBe('INVALID_DTYPE');
    expect(code(() => c.allGather(new Float32Array(4), new Float64Array(4)))).toBe('INVALID_DTYPE');
    expect(code(() => c.allReduce(new Float32Array(4), { out: new Int32Array(4) }))).toBe('INVALID_DTYPE');
  });

  it('lengths that do not fit the collective', () => {
    expect(code(() => b.allGather(new Float32Array(7), new Float32Array(4)))).toBe('SIZE_MISMATCH');
    expect(code(() => b.reduceScatter(new Float32Array(4), new Float32Array(9)))).toBe('SIZE_MISMATCH');
    expect(code(() => c.allReduce(new Float32Array(4), { out: new Float32Array(5) }))).toBe('SIZE_MISMATCH');
    try {
      b.reduceScatter(new Float32Array(4), new Float32Array(9));
    } catch (e) {
      expect((e as Error).message).toMatch(/2 × 4 = 8.*equal per-rank counts/);
    }
  });

  it('roots, ops and algorithms', () => {
    expect(code(() => b.broadcast(new Float32Array(4), { root: 2 }))).toBe('INVALID_ARGUMENT');
    expect(code(() => b.reduce(new Float32Array(4), { root: -1 }))).toBe('INVALID_ARGUMENT');
    expect(code(() => b.broadcast(new Float32Array(4), { root: 0.5 }))).toBe('INVALID_ARGUMENT');
    expect(code(() => c.allReduce(new Float32Array(4), { op: 'mean' as any }))).toBe('INVALID_OP');
    expect(code(() => c.allReduce(new Int32Array(4), { op: 'avg' }))).toBe('INVALID_OP');
    expect(code(() => c.allReduce(new Float32Array(4), { algo: 'tree' as any }))).toBe('INVALID_ARGUMENT');
    try {
      b.broadcast(new Float32Array(4), { root: 5 });
    } catch (e) {
      expect((e as Error).message).toMatch(/invalid root 5 \(root should be in the 0\.\.1 range\)/);
    }
  });

  it('a buffer used by an op still in flight', async () => {
    const x = new Float32Array(8).fill(1);
    const w = a.allReduce(x); // rank 1 has not joined: pending
    expect(w.isCompleted()).toBe(false);
    expect(code(() => a.allReduce(x))).toBe('BUFFER_BUSY');
    expect(code(() => a.allGather(new Float32Array(8), x.subarray(2, 6)))).toBe('BUFFER_BUSY');
    const y = new Float32Array(8).fill(2);
    await settleAll([w, b.allReduce(y)]);
    expect(Array.from(x)).toEqual(new Array(8).fill(3));
    await settleAll([a.allReduce(x), b.allReduce(y)]); // free again once complete
  });

  it('ops complete in issue order and Work reports timing', async () => {
    const x = new Float64Array(3).fill(1);
    const y = new Float64Array(3).fill(5);
    const w1 = a.allReduce(x);
    const w2 = a.allReduce(y, { op: 'max' });
    expect(w1.isCompleted() || w2.isCompleted()).toBe(false);
    await settleAll([
      w1,
      w2,
      b.allReduce(new Float64Array(3).fill(1)),
      b.allReduce(new Float64Array(3).fill(7), { op: 'max' }),
    ]);
    expect(Array.from(x)).toEqual([2, 2, 2]);
    expect(Array.from(y)).toEqual([7, 7, 7]);
    expect(w2.timing.completedAt).toBeGreaterThanOrEqual(w1.timing.completedAt);
    expect(w1.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('a single rank reduces to itself, for every collective', async () => {
    const x = new Float32Array([1, 2, 3]);
    await c.allReduce(x, { op: 'avg' });
    expect(Array.from(x)).toEqual([1, 2, 3]);
    const out = new Int8Array(3);
    await c.allGather(out, new Int8Array([4, 5, 6]));
    expect(Array.from(out)).toEqual([4, 5, 6]);
    await c.barrier();
  });

  it('abort fails pending ops here and on the other rank', async () => {
    const [p, q] = inprocRanks(2);
    const w = p.allReduce(new Float32Array(4));
    q.abort('test');
    const [e] = await settleAll([w]);
    expect((e as WebcclError).code).toBe('ABORTED');
    expect(code(() => q.allReduce(new Float32Array(1)))).toBe('ABORTED');
  });

  it('a step every rank posted before an abort still decides: MISMATCH on the rank that looks after it, not ABORTED', async () => {
    // As when a rank's script fails on the MISMATCH and its launcher aborts the node before a
    // slower rank has looked at the step they all posted (once in the fault matrix, on threads).
    for (const by of ['comm', 'node'] as const) {
      const node = createNode({ nranks: 2, slotBytes: 4096, progress: false });
      const [p, q] = [0, 1].map((r) => new Communicator(joinNode(node, r, { spinUs: 0 }), { timeoutMs: 20_000 }));
      const w = p.allReduce(new Float32Array(8));
      expect(w.isCompleted()).toBe(false); // posted; rank 1 has not
      const [e1] = await settleAll([q.allReduce(new Float32Array(9))]);
      expect((e1 as WebcclError).code).toBe('MISMATCH');
      if (by === 'comm') q.abort('rank 1 failed on the mismatch');
      else abortNode(node, 1, ABORT_REASON.PEER_DIED, 'rank 1 exited with code 1'); // what the threads launcher does
      const [e0] = await settleAll([w]);
      expect((e0 as WebcclError).code, by).toBe('MISMATCH');
      const [next] = await settleAll([p.allReduce(new Float32Array(8))]);
      expect((next as WebcclError).code, by).toBe('ABORTED'); // the next op sees the abort
    }
  });
});

it('joinNode refuses a memory that holds no node', () => {
  const memory = new WebAssembly.Memory({ initial: 2, maximum: 4, shared: true });
  expect(code(() => joinNode({ memory, nranks: 1, world: 0, slotBytes: 4096, key: 'none' }, 0))).toBe(
    'INVALID_ARGUMENT',
  );
});

describe('threads that may not block (a browser main thread)', () => {
  it('complete collectives through Atomics.waitAsync while the thread stays free', async () => {
    const node = createNode({ nranks: 2, slotBytes: 4096 });
    const cs = [0, 1].map((r) => {
      const ctx = joinNode(node, r, { spinUs: 0 });
      ctx.canBlock = false;
      return new Communicator(ctx, { timeoutMs: 20_000 });
    });
    const x = new Float32Array(5000).fill(1); // 20 kB: several 4 KiB chunks, several sleeps
    const y = new Float32Array(5000).fill(2);
    const w0 = cs[0].allReduce(x);
    expect(code(() => w0.waitSync())).toBe('UNSUPPORTED');
    const done0 = w0.wait(); // rank 1 has not joined: must not block
    let ticked = false;
    await new Promise((res) => setTimeout(() => res((ticked = true)), 10));
    expect(ticked).toBe(true);
    await Promise.all([done0, cs[1].allReduce(y).wait()]);
    expect(x.every((v) => v === 3) && y.every((v) => v === 3)).toBe(true);
  });
});

describe('module-level API', () => {
  it('refuses use before initCommGroup, then works on a one-rank world', async () => {
    expect(code(() => ccl.getRank())).toBe('NOT_INITIALIZED');
    await expect(ccl.allReduce(new Float32Array(1))).rejects.toMatchObject({ code: 'NOT_INITIALIZED' });
    await ccl.initCommGroup();
    expect([ccl.getRank(), ccl.getWorldSize()]).toEqual([0, 1]);
    const x = new Float32Array(4).fill(2);
    await ccl.allReduce(x, { op: ccl.Prod });
    const h = ccl.allReduceAsync(x);
    await ccl.wait(h);
    expect(h.isCompleted()).toBe(true);
    expect([ccl.Sum, ccl.Prod, ccl.Max, ccl.Min, ccl.Avg]).toEqual(['sum', 'prod', 'max', 'min', 'avg']);
    await expect(ccl.wait({} as any)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' }); // a rejection, never a throw
  });
});
