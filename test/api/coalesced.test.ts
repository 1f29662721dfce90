// Coalesced collectives (allReduceCoalesced, broadcastCoalesced: api/coalesced.ts): on 2 and 4
// ranks of one node in this thread, every result equals what one allReduce or broadcast per
// array gives, over dtypes, ops and list shapes (empty, zero-length arrays, one element, lengths
// that do not divide, lists over many buckets: the bucket size is lowered through its internal
// option); refusals take no place in the op sequence; the call is one Work; its buckets go
// back to the heap on every path. Then the rank script test/api/fixtures/coalesced-check.mjs on
// thread ranks, processes and 2 nodes × 2 threads, and examples/coalesced.mjs.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { BUCKET_BYTES_OPTION, COALESCED_BUCKET_BYTES } from '../../src/api/coalesced.js';
import type { Communicator } from '../../src/api/communicator.js';
import type { BufferArg } from '../../src/engine/buffers.js';
import { Work } from '../../src/engine/work.js';
import { caught } from '../helpers/caught.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { expectExit, type Form, launchForm, stdoutOf } from '../helpers/launch-forms.js';

type D = 'f32' | 'f64' | 'i32' | 'f16';
const DTYPES: D[] = ['f32', 'f64', 'i32', 'f16'];
const SIZE: Record<D, number> = { f32: 4, f64: 8, i32: 4, f16: 2 };
const ARRAY = { f32: Float32Array, f64: Float64Array, i32: Int32Array, f16: Uint16Array };

/** The f16 bits of a small non-negative integer (exact up to 2048). */
function f16Of(n: number): number {
  if (n === 0) return 0;
  const e = Math.floor(Math.log2(n));
  return ((e + 15) << 10) | ((n / 2 ** e - 1) * 1024);
}

/** Rank r's array a: small integers, different per rank, array and element (exact in every dtype). */
const value = (r: number, a: number, i: number) => ((r + 1) * 3 + a * 5 + i) % 11;

function arrayOf(d: D, n: number, r: number, a: number): BufferArg {
  const x = new ARRAY[d](n);
  for (let i = 0; i < n; i++) x[i] = d === 'f16' ? f16Of(value(r, a, i)) : value(r, a, i);
  return d === 'f16' ? { data: x as Uint16Array, dtype: 'f16' } : x;
}

const bytesOf = (x: BufferArg): number[] => {
  const v = (ArrayBuffer.isView(x) ? x : x.data) as ArrayBufferView;
  return Array.from(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
};
const copyOf = (x: BufferArg): BufferArg =>
  ArrayBuffer.isView(x) ? (x as Float32Array).slice() : { data: (x.data as Uint16Array).slice(), dtype: 'f16' };

/** Every rank's list: array a holds lengths[a] elements. */
const listsOf = (n: number, d: D, lengths: number[]) =>
  Array.from({ length: n }, (_, r) => lengths.map((len, a) => arrayOf(d, len, r, a)));

/** Runs one call per rank and fails the test with the first error. */
async function together(comms: Communicator[], issue: (c: Communicator, r: number) => Work): Promise<void> {
  const errs = await settleAll(comms.map((c, r) => issue(c, r)));
  expect(errs.filter(Boolean)).toEqual([]);
}

/** Options with the bucket size lowered (an internal option, under a registered symbol). */
const withBucket = (o: object, bucket?: number): any =>
  bucket === undefined ? o : { ...o, [BUCKET_BYTES_OPTION]: bucket };

/** The ops a call issues for `lengths` of `d` with buckets of `bucket` bytes. */
const opsFor = (d: D, lengths: number[], bucket: number) => {
  const total = lengths.reduce((a, b) => a + b, 0);
  return Math.ceil(total / Math.max(1, Math.floor(bucket / SIZE[d])));
};

const SHAPES: [string, number[]][] = [
  ['an empty list', []],
  ['zero-length arrays among others', [0, 5, 0, 7, 0]],
  ['one element', [1]],
  ['lengths that do not divide evenly', [13, 7, 1029, 3]],
];
/** Lists over many buckets: arrays straddle bucket boundaries, some fill one exactly. */
const OVER_BUCKETS: [string, number[], number][] = [
  ['a list of many buckets (64-byte buckets)', [100, 3, 0, 250, 17], 64],
  ['arrays straddling buckets of one element', [3, 0, 2], 1],
  ['buckets that end where arrays end', [16, 16, 32], 64],
];

for (const n of [2, 4]) {
  describe(`allReduceCoalesced on ${n} ranks equals one allReduce per array`, () => {
    const comms = inprocRanks(n);
    for (const d of DTYPES) {
      for (const op of ['sum', 'max', 'avg'] as const) {
        if (op === 'avg' && d === 'i32') continue;
        it(`${d} ${op}`, async () => {
          const cases: [string, number[], number | undefined][] = [
            ...SHAPES.map(([s, l]): [string, number[], undefined] => [s, l, undefined]),
            ...OVER_BUCKETS,
          ];
          for (const [shape, lengths, bucket] of cases) {
            const lists = listsOf(n, d, lengths);
            const refs = lists.map((l) => l.map(copyOf));
            for (let a = 0; a < lengths.length; a++) await together(comms, (c, r) => c.allReduce(refs[r][a], { op }));
            const before = comms.map((c) => c.stats().ops);
            await together(comms, (c, r) => c.allReduceCoalesced(lists[r], withBucket({ op }, bucket)));
            const ops = bucket === undefined ? (lengths.some((x) => x > 0) ? 1 : 0) : opsFor(d, lengths, bucket);
            expect(
              comms.map((c, r) => c.stats().ops - before[r]),
              shape,
            ).toEqual(comms.map(() => ops));
            for (let r = 0; r < n; r++)
              for (let a = 0; a < lengths.length; a++)
                expect(bytesOf(lists[r][a]), `${shape}: rank ${r} array ${a}`).toEqual(bytesOf(refs[r][a]));
          }
        });
      }
    }

    it('f32 sum, checked against the sums themselves', async () => {
      const lengths = [3, 0, 1029, 1];
      const lists = listsOf(n, 'f32', lengths);
      await together(comms, (c, r) => c.allReduceCoalesced(lists[r], withBucket({}, 100)));
      for (let r = 0; r < n; r++)
        lengths.forEach((len, a) =>
          expect(Array.from(lists[r][a] as Float32Array)).toEqual(
            Array.from({ length: len }, (_, i) =>
              Array.from({ length: n }, (_, q) => value(q, a, i)).reduce((s, v) => s + v),
            ),
          ),
        );
    });
  });

  describe(`broadcastCoalesced on ${n} ranks equals one broadcast per array`, () => {
    const comms = inprocRanks(n);
    for (const d of DTYPES) {
      for (const root of [0, n - 1]) {
        it(`${d} from root ${root}`, async () => {
          const cases: [string, number[], number | undefined][] = [
            ...SHAPES.map(([s, l]): [string, number[], undefined] => [s, l, undefined]),
            ...OVER_BUCKETS,
          ];
          for (const [shape, lengths, bucket] of cases) {
            const lists = listsOf(n, d, lengths);
            const refs = lists.map((l) => l.map(copyOf));
            for (let a = 0; a < lengths.length; a++) await together(comms, (c, r) => c.broadcast(refs[r][a], { root }));
            await together(comms, (c, r) => c.broadcastCoalesced(lists[r], withBucket({ root }, bucket)));
            for (let r = 0; r < n; r++)
              for (let a = 0; a < lengths.length; a++) {
                expect(bytesOf(lists[r][a]), `${shape}: rank ${r} array ${a}`).toEqual(bytesOf(refs[r][a]));
                expect(bytesOf(lists[r][a])).toEqual(bytesOf(arrayOf(d, lengths[a], root, a)));
              }
          }
        });
      }
    }
  });
}

describe('refusals at issue leave the ranks in step', () => {
  const comms = inprocRanks(2);
  const f32 = (len: number, v = 1) => new Float32Array(len).fill(v);

  /** A valid allReduce and a valid coalesced call on every rank, with the right results. */
  async function stillInStep(): Promise<void> {
    const xs = comms.map((_, r) => f32(5, r + 1));
    await together(comms, (c, r) => c.allReduce(xs[r]));
    expect(xs.map((x) => Array.from(x))).toEqual(comms.map(() => [3, 3, 3, 3, 3]));
    const lists = comms.map((_, r) => [f32(2, r + 1), f32(0), f32(3, 10 * (r + 1))]);
    await together(comms, (c, r) => c.allReduceCoalesced(lists[r]));
    for (const l of lists) expect(l.map((x) => Array.from(x))).toEqual([[3, 3], [], [30, 30, 30]]);
    expect(comms.map((c) => c.stats().pending)).toEqual([0, 0]);
  }

  it('a list mixing dtypes, on every rank: INVALID_ARGUMENT naming the first index that differs and both dtypes', async () => {
    const before = comms.map((c) => c.stats().ops);
    const allocs = comms.map((c) => vi.spyOn(c, 'alloc'));
    for (const c of comms) {
      const e = caught(() => c.allReduceCoalesced([f32(3), f32(4), new Float64Array(2), new Int32Array(1)]));
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.message).toMatch(/allReduceCoalesced: list\[2\] is f64 but list\[0\] is f32/);
      expect(e.details).toMatchObject({ index: 2, dtype: 'f64', expected: 'f32' });
      const h = caught(() =>
        c.broadcastCoalesced([
          { data: new Uint16Array(2), dtype: 'f16' },
          { data: new Uint16Array(2), dtype: 'bf16' },
        ]),
      );
      expect(h.code).toBe('INVALID_ARGUMENT');
      expect(h.message).toMatch(/broadcastCoalesced: list\[1\] is bf16 but list\[0\] is f16/);
    }
    expect(comms.map((c, r) => c.stats().ops - before[r])).toEqual([0, 0]); // no op issued, no bucket made
    for (const s of allocs) {
      expect(s).not.toHaveBeenCalled();
      s.mockRestore();
    }
    await stillInStep();
  });

  it('bad lists, elements and options', async () => {
    const before = comms.map((c) => c.stats().ops);
    for (const c of comms) {
      const cases: [() => unknown, string, RegExp][] = [
        [() => c.allReduceCoalesced(f32(3) as any), 'INVALID_ARGUMENT', /expected an array of buffers/],
        [() => c.allReduceCoalesced(null as any), 'INVALID_ARGUMENT', /expected an array/],
        [() => c.allReduceCoalesced([f32(3), 'x' as any]), 'INVALID_ARGUMENT', /list\[1\]: expected a TypedArray/],
        [() => c.allReduceCoalesced([f32(1), [1, 2] as any]), 'INVALID_ARGUMENT', /list\[1\]/],
        [() => c.allReduceCoalesced([new Uint16Array(2) as any]), 'INVALID_DTYPE', /list\[0\]/],
        [() => c.allReduceCoalesced([f32(3)], { op: 'mean' as any }), 'INVALID_OP', /mean/],
        [() => c.allReduceCoalesced([new Int32Array(3)], { op: 'avg' }), 'INVALID_OP', /avg/],
        [() => c.allReduceCoalesced([f32(3)], { root: 0 } as any), 'INVALID_ARGUMENT', /does not apply/],
        [() => c.allReduceCoalesced([f32(3)], { algo: 'ring' } as any), 'INVALID_ARGUMENT', /does not apply/],
        [() => c.allReduceCoalesced([f32(3)], { opp: 'max' } as any), 'INVALID_ARGUMENT', /did you mean "op"/],
        [() => c.allReduceCoalesced([f32(3)], { timeoutMs: 0 }), 'INVALID_ARGUMENT', /timeoutMs/],
        [() => c.allReduceCoalesced([f32(3)], 'max' as any), 'INVALID_ARGUMENT', /options must be an object/],
        [() => c.broadcastCoalesced([f32(3)], { root: 2 }), 'INVALID_ARGUMENT', /root/],
        [() => c.broadcastCoalesced([f32(3)], { op: 'max' } as any), 'INVALID_ARGUMENT', /does not apply/],
        [() => c.allReduceCoalesced([f32(3)], withBucket({}, 0)), 'INVALID_ARGUMENT', /bucket size/],
        [
          () =>
            c.allReduceCoalesced([
              { data: f32(6), shape: [1, 2, 3, 1], layout: 'NHWC' as const },
              { data: f32(6), shape: [1, 2, 3, 1], layout: 'NHWC' as const },
            ]),
          'INVALID_ARGUMENT',
          /list\[0\] is a NHWC tensor/,
        ],
      ];
      for (const [call, code, message] of cases) {
        const e = caught(call);
        expect({ code: e.code, message: e.message }).toMatchObject({ code, message: expect.stringMatching(message) });
      }
      // Two arrays over the same bytes: each would receive the other's result.
      const base = f32(10);
      const o = caught(() => c.allReduceCoalesced([f32(2), base.subarray(0, 6), f32(1), base.subarray(4, 10)]));
      expect(o.code).toBe('INVALID_ARGUMENT');
      expect(o.details.overlap).toEqual([1, 3]);
      expect(caught(() => c.allReduceCoalesced([base, base])).details.overlap).toEqual([0, 1]);
    }
    expect(comms.map((c, r) => c.stats().ops - before[r])).toEqual([0, 0]);
    // A TensorLike in row-major (NCHW) is plain data.
    const t = comms.map((_, r) => ({ data: f32(6, r + 1), shape: [1, 2, 3, 1], layout: 'NCHW' as const }));
    await together(comms, (c, r) => c.allReduceCoalesced([t[r], f32(1)]));
    expect(Array.from(t[1].data)).toEqual([3, 3, 3, 3, 3, 3]);
    await stillInStep();
  });

  it('an array an op not yet waited for holds is BUFFER_BUSY, and so is an array a pending call holds', async () => {
    const xs = comms.map(() => f32(4, 1));
    const pending = comms.map((c, r) => c.allReduce(xs[r]));
    for (const [r, c] of comms.entries()) {
      const e = caught(() => c.allReduceCoalesced([f32(2), xs[r]]));
      expect(e.code).toBe('BUFFER_BUSY');
      expect(e.message).toMatch(/list\[1\] is still in use by allReduce #\d+/);
    }
    await settleAll(pending);
    const lists = comms.map((_, r) => [f32(3, r), xs[r]]);
    const calls = comms.map((c, r) => c.allReduceCoalesced(lists[r]));
    for (const [r, c] of comms.entries()) {
      const e = caught(() => c.allReduce(lists[r][0]));
      expect(e.code).toBe('BUFFER_BUSY');
      expect(e.message).toMatch(/allReduceCoalesced #\d+/);
    }
    await settleAll(calls);
    expect(lists.map((l) => Array.from(l[1]))).toEqual([
      [4, 4, 4, 4],
      [4, 4, 4, 4],
    ]);
    await stillInStep(); // (the arrays are free again: ops on them are accepted)
    await together(comms, (c, r) => c.allReduce(lists[r][0]));
  });
});

describe('one Work for the whole call', () => {
  it('awaited, wait(), isCompleted(), stats', async () => {
    const comms = inprocRanks(2);
    const lists = comms.map((_, r) => [new Float32Array(300).fill(r + 1), new Float32Array(7).fill(1)]);
    const first = comms[0].allReduceCoalesced(lists[0], withBucket({}, 256));
    expect(comms[0].stats().pending).toBe(5); // 1228 bytes in 256-byte buckets, issued at once
    expect(first.isCompleted()).toBe(false); // (rank 1 has not issued yet)
    const ws = [first, comms[1].allReduceCoalesced(lists[1], withBucket({}, 256))];
    for (const w of ws) {
      expect(w).toBeInstanceOf(Work);
      expect(w.name).toBe('allReduceCoalesced');
    }
    expect(ws[0].seq).toBe(0); // the first bucket's number in the op sequence
    const bothDone = await settleAll(ws);
    expect(bothDone).toEqual([undefined, undefined]);
    await ws[0];
    await ws[1].wait();
    expect(ws.map((w) => w.isCompleted())).toEqual([true, true]);
    expect(ws[0].durationMs).toBeGreaterThanOrEqual(0);
    expect(comms.map((c) => c.stats()).map((s) => [s.ops, s.pending, s.failed])).toEqual([
      [5, 0, 0],
      [5, 0, 0],
    ]);
    expect(Array.from(lists[1][0].subarray(0, 3))).toEqual([3, 3, 3]);
    expect(Array.from(lists[0][1])).toEqual(new Array(7).fill(2));
    // The next op's number follows the buckets'.
    const next = comms.map((c) => c.barrier());
    expect(next[0].seq).toBe(5);
    await settleAll(next);
  });

  it('waitSync() where the thread may block (one rank: the ops end at issue), and an empty list', () => {
    const [c] = inprocRanks(1);
    const x = [new Float64Array(3).fill(2), new Float64Array(0)];
    const w = c.allReduceCoalesced(x, { op: 'max' });
    w.waitSync();
    expect(w.isCompleted()).toBe(true);
    expect(Array.from(x[0])).toEqual([2, 2, 2]);
    const empty = c.broadcastCoalesced([]);
    expect(empty.isCompleted()).toBe(true);
    empty.waitSync();
    expect(empty.seq).toBe(-1); // it took no place in the op sequence
    expect(c.stats().ops).toBe(1);
  });
});

describe('the buckets go back to the heap', () => {
  /** comm.free spied on: the buckets freed so far. */
  const spyFree = (c: Communicator) => vi.spyOn(c, 'free');

  it('when the call is seen to end', async () => {
    const comms = inprocRanks(2);
    const frees = comms.map(spyFree);
    const lists = comms.map(() => [new Int32Array(40), new Int32Array(9)]);
    const ws = comms.map((c, r) => c.allReduceCoalesced(lists[r], withBucket({}, 64)));
    expect(frees.map((f) => f.mock.calls.length)).toEqual([0, 0]);
    await settleAll(ws);
    expect(frees.map((f) => f.mock.calls.length)).toEqual([4, 4]); // 196 bytes in 64-byte buckets
  });

  it('when it fails (ranks disagree on the lengths): MISMATCH on every rank, the arrays keep their inputs', async () => {
    const comms = inprocRanks(2);
    const frees = comms.map(spyFree);
    const lists = comms.map((_, r) => [new Float32Array(4 + r).fill(r + 1)]);
    const errs = await settleAll(comms.map((c, r) => c.allReduceCoalesced(lists[r])));
    expect(errs.map((e) => (e as { code?: string })?.code)).toEqual(['MISMATCH', 'MISMATCH']);
    expect(lists.map((l) => l[0][0])).toEqual([1, 2]);
    expect(frees.map((f) => f.mock.calls.length)).toEqual([1, 1]);
    // The communicator stays usable.
    const xs = comms.map((_, r) => new Float32Array(2).fill(r));
    await together(comms, (c, r) => c.allReduce(xs[r]));
    expect(Array.from(xs[0])).toEqual([1, 1]);
  });

  it("when it is aborted: ABORTED; and a group names itself in the call's error", async () => {
    const comms = inprocRanks(2);
    const frees = comms.map(spyFree);
    const w = comms[0].allReduceCoalesced([new Float32Array(8), new Float32Array(8)], withBucket({}, 32));
    comms[0].abort('stop here');
    const [e] = await settleAll([w]);
    expect((e as { code?: string }).code).toBe('ABORTED');
    expect(frees[0].mock.calls.length).toBe(2);

    const world = inprocRanks(2);
    const groups = (await Promise.all(world.map((c) => c.createGroup([1, 0])))) as Communicator[];
    const gerrs = await settleAll(groups.map((g, r) => g.allReduceCoalesced([new Float32Array(3 + r)])));
    expect(gerrs.map((x) => (x as Error).message)).toEqual([
      expect.stringMatching(/in the group of world ranks 1, 0/),
      expect.stringMatching(/in the group of world ranks 1, 0/),
    ]);
  });

  it('when a later op is seen to end first, and when the communicator is destroyed', async () => {
    const comms = inprocRanks(2);
    const frees = comms.map(spyFree);
    const lists = comms.map((_, r) => [new Float32Array(3).fill(r + 1)]);
    const calls = comms.map((c, r) => c.allReduceCoalesced(lists[r]));
    await settleAll(comms.map((c) => c.barrier())); // the call ended before it: let go unseen
    const xs = comms.map(() => new Float32Array(1));
    const next = comms.map((c, r) => c.allReduce(xs[r]));
    expect(frees.map((f) => f.mock.calls.length)).toEqual([1, 1]);
    await settleAll(next);
    expect(lists.map((l) => Array.from(l[0]))).toEqual([
      [3, 3, 3],
      [3, 3, 3],
    ]);
    await Promise.all(calls.map((w) => w.wait())); // still awaitable, after the fact

    // A bucket's memory handed out again once the call was let go: an op on it is accepted.
    const fresh = inprocRanks(2);
    const allocs = fresh.map((c) => vi.spyOn(c, 'alloc'));
    const again = fresh.map((c, r) => c.allReduceCoalesced([new Float32Array(64).fill(r)]));
    const buckets = allocs.map((s) => s.mock.results[0].value as Float32Array);
    await settleAll(fresh.map((c) => c.barrier()));
    await together(fresh, (c, r) => c.allReduce(xs[r])); // lets the call go: its bucket is freed
    const reused = fresh.map((c) => c.alloc('f32', 64) as Float32Array);
    expect(reused.map((x) => x.byteOffset)).toEqual(buckets.map((x) => x.byteOffset)); // (first fit)
    reused.forEach((x, r) => x.fill(r + 1));
    await together(fresh, (c, r) => c.allReduce(reused[r]));
    expect([reused[0][0], reused[1][63]]).toEqual([3, 3]);
    await settleAll(again);

    const [one] = inprocRanks(1);
    const freeOne = spyFree(one);
    one.allReduceCoalesced([new Float32Array(5), new Float32Array(2)]); // ends at issue; never looked at
    expect(freeOne).not.toHaveBeenCalled();
    one.destroy();
    expect(freeOne).toHaveBeenCalledTimes(1);
  });
});

it('COALESCED_BUCKET_BYTES is 64 MiB', () => {
  expect(COALESCED_BUCKET_BYTES).toBe(64 * 1024 * 1024);
});

describe('under every launch form (the built CLI)', () => {
  const f = launchFixture(new URL('fixtures/coalesced-check.mjs', import.meta.url), 'coalesced');
  const forms: [Form, number][] = [
    ['threads', 2],
    ['threads', 4],
    ['procs', 2],
    ['nnodes', 4],
  ];
  for (const [form, n] of forms) {
    it(`${form}, ${n} ranks: results equal one op per array, a refused call leaves the ranks in step`, async () => {
      const runs = await launchForm(f, form, n, []);
      expectExit(runs);
      const out = stdoutOf(runs);
      for (let r = 0; r < n; r++) expect(out).toContain(`ok rank ${r} of ${n}`);
    });
  }

  it('examples/coalesced.mjs on 2 thread ranks', () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const r = spawnSync(process.execPath, ['bin/webccl.js', 'run', '-n', '2', 'examples/coalesced.mjs'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 180_000,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/4 gradients \(1003 floats\) averaged in 1 allReduce: 0.5, 0.5, empty, 0.5/);
    expect(r.stdout).toMatch(/parameters 0.25, 1.25: broadcast from rank 0 in 1 op/);
  });
});
