// allToAll (equal blocks and per-peer counts), gather and scatter on shared memory, and the
// in-place reads of comm.alloc() sources (allGather too): grid of ranks × dtypes × sizes ×
// buffer placement (plain arrays, alloc() buffers, and a mixture: rank 0 plain, the others
// alloc()) × SIMD/scalar build; mismatches (root, count, counts matrix) fail every rank with a
// coded error and leave the communicator usable. Small slots (4 KiB) make modest sizes cross
// chunk boundaries.

import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import { D } from '../../src/core/shm-map.js';
import { encode, firstWrong, SIZE } from '../helpers/closed-form.mjs';
import { inprocRanks, settleAll, together } from '../helpers/inproc.js';
import { runScenario } from '../helpers/threads.js';

const SLOT = 4096;
const DTYPES = ['f32', 'f64', 'i8', 'u8', 'bf16', 'i64'];
const PLACEMENTS = ['plain', 'alloc', 'mixed'] as const;
type Placement = (typeof PLACEMENTS)[number];
const ARRAY: Record<string, any> = {
  f32: Float32Array,
  f64: Float64Array,
  i8: Int8Array,
  u8: Uint8Array,
  bf16: Uint16Array,
  i64: BigInt64Array,
};

/** Element i of rank r's data: distinct along i for 101 elements, and between ranks. */
const val = (dtype: string, r: number, i: number) =>
  encode(dtype, ((r * 31 + i * 7) % 101) - (dtype === 'u8' ? 0 : 50));

type B = { arg: any; data: any; shared: boolean };
function buffer(c: Communicator, dtype: string, count: number, shared: boolean): B {
  if (shared) {
    const a = c.alloc(dtype as any, count) as any;
    return { arg: a, data: a.data ?? a, shared };
  }
  const data = new ARRAY[dtype](count);
  return { arg: dtype === 'bf16' ? { data, dtype } : data, data, shared };
}
const sharedOn = (p: Placement, r: number) => p === 'alloc' || (p === 'mixed' && r !== 0);
function filled(c: Communicator, dtype: string, count: number, shared: boolean, r: number): B {
  const b = buffer(c, dtype, count, shared);
  for (let i = 0; i < count; i++) b.data[i] = val(dtype, r, i);
  return b;
}
const release = (cs: Communicator[], bufs: (B | null)[][]) =>
  bufs.forEach((row) => row.forEach((b, r) => b?.shared && cs[r].free(b.arg)));

/** Block sizes around a chunk of `per` elements. */
const sizesAround = (per: number) => [0, 1, 3, per - 1, per + 1, 2 * per + 5];
const pieceElems = (dtype: string, n: number) =>
  Math.max(64 / SIZE[dtype], Math.floor(SLOT / (SIZE[dtype] * n) / (64 / SIZE[dtype])) * (64 / SIZE[dtype]));

/** A deterministic uneven matrix: m[j][i] elements go from rank j to rank i, some zero, some past a chunk. */
function countsMatrix(n: number, per: number, seed: number): number[][] {
  return Array.from({ length: n }, (_, j) =>
    Array.from({ length: n }, (_, i) => {
      const h = (i * 7 + j * 13 + seed * 5) % 11;
      return h < 3 ? 0 : h < 6 ? h : h < 9 ? per + h * 3 : 2 * per + h;
    }),
  );
}

function wrongIn(what: string, data: any, want: (i: number) => unknown, wrong: string[]): void {
  const i = firstWrong(data, want);
  if (i >= 0) wrong.push(`${what}: element ${i} is ${data[i]}, expected ${want(i)}`);
}

for (const build of ['simd', 'scalar'] as const) {
  describe(`${build} build`, () => {
    for (const n of [1, 2, 3, 4, 8]) {
      const comms = () => inprocRanks(n, { slotBytes: SLOT, simd: build === 'simd' });

      it(`allToAll with equal blocks over ${n} rank(s)`, async () => {
        const cs = comms();
        const wrong: string[] = [];
        for (const dtype of DTYPES)
          for (const block of sizesAround(pieceElems(dtype, n)))
            for (const p of PLACEMENTS) {
              const ins = cs.map((c, r) => filled(c, dtype, n * block, sharedOn(p, r), r));
              const outs = cs.map((c, r) => buffer(c, dtype, n * block, sharedOn(p, r)));
              await together(cs, (c, r) => c.allToAll(outs[r].arg, ins[r].arg));
              outs.forEach((o, i) =>
                wrongIn(
                  `${dtype} block ${block} ${p} rank ${i}`,
                  o.data,
                  (x) => val(dtype, Math.floor(x / block), i * block + (x % block)),
                  wrong,
                ),
              );
              ins.forEach((b, r) =>
                wrongIn(
                  `${dtype} block ${block} ${p}: input of rank ${r} changed`,
                  b.data,
                  (x) => val(dtype, r, x),
                  wrong,
                ),
              );
              release(cs, [ins, outs]);
            }
        expect(wrong.slice(0, 5)).toEqual([]);
      });

      it(`allToAll with per-peer counts over ${n} rank(s)`, async () => {
        const cs = comms();
        const wrong: string[] = [];
        for (const dtype of DTYPES)
          for (const seed of [0, 1, 2])
            for (const p of PLACEMENTS) {
              const m =
                seed === 2
                  ? countsMatrix(n, 0, 0).map((row) => row.map(() => 0))
                  : countsMatrix(n, pieceElems(dtype, n), seed);
              const send = (r: number) => m[r];
              const recv = (r: number) => m.map((row) => row[r]);
              const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
              const offs = (a: number[]) => a.map((_, k) => sum(a.slice(0, k)));
              const ins = cs.map((c, r) => filled(c, dtype, sum(send(r)), sharedOn(p, r), r));
              const outs = cs.map((c, r) => buffer(c, dtype, sum(recv(r)), sharedOn(p, r)));
              await together(cs, (c, r) =>
                c.allToAll(outs[r].arg, ins[r].arg, { sendCounts: send(r), recvCounts: recv(r) }),
              );
              outs.forEach((o, i) => {
                const ro = offs(recv(i));
                const want = new Array(o.data.length);
                for (let j = 0; j < n; j++) {
                  const so = offs(send(j))[i];
                  for (let k = 0; k < m[j][i]; k++) want[ro[j] + k] = val(dtype, j, so + k);
                }
                wrongIn(`${dtype} matrix ${seed} ${p} rank ${i}`, o.data, (x) => want[x], wrong);
              });
              release(cs, [ins, outs]);
            }
        expect(wrong.slice(0, 5)).toEqual([]);
      });

      it(`gather and scatter over ${n} rank(s)`, async () => {
        const cs = comms();
        const wrong: string[] = [];
        for (const dtype of DTYPES)
          for (const count of sizesAround(pieceElems(dtype, n)))
            for (const p of PLACEMENTS)
              for (const root of new Set([0, n - 1])) {
                const tag = `${dtype} count ${count} ${p} root ${root}`;
                // gather
                const ins = cs.map((c, r) => filled(c, dtype, count, sharedOn(p, r), r));
                const outs = cs.map((c, r) => (r === root ? buffer(c, dtype, n * count, sharedOn(p, r)) : null));
                await together(cs, (c, r) => c.gather(outs[r]?.arg ?? null, ins[r].arg, { root }));
                wrongIn(`gather ${tag}`, outs[root]!.data, (x) => val(dtype, Math.floor(x / count), x % count), wrong);
                // scatter: rank i gets block i of the root's input
                const src = cs.map((c, r) => (r === root ? filled(c, dtype, n * count, sharedOn(p, r), 1000) : null));
                const got = cs.map((c, r) => buffer(c, dtype, count, sharedOn(p, r)));
                await together(cs, (c, r) => c.scatter(got[r].arg, src[r]?.arg ?? null, { root }));
                got.forEach((g, i) =>
                  wrongIn(`scatter ${tag} rank ${i}`, g.data, (x) => val(dtype, 1000, i * count + x), wrong),
                );
                wrongIn(`scatter ${tag}: root input changed`, src[root]!.data, (x) => val(dtype, 1000, x), wrong);
                release(cs, [ins, outs, src, got]);
              }
        expect(wrong.slice(0, 5)).toEqual([]);
      });

      it(`gather and scatter in place at the root, and allGather with mixed buffers, over ${n} rank(s)`, async () => {
        const cs = comms();
        const wrong: string[] = [];
        for (const dtype of ['f32', 'u8', 'bf16'])
          for (const count of sizesAround(SLOT / SIZE[dtype]))
            for (const p of PLACEMENTS) {
              const root = n - 1;
              const tag = `${dtype} count ${count} ${p}`;
              const big = cs.map((c, r) => buffer(c, dtype, n * count, sharedOn(p, r)));
              const own = (r: number) => {
                const sub = big[r].data.subarray(r * count, (r + 1) * count);
                return dtype === 'bf16' || big[r].arg.dtype ? { data: sub, dtype } : sub;
              };
              const ins = cs.map((c, r) => (r === root ? null : filled(c, dtype, count, sharedOn(p, r), r)));
              for (let x = 0; x < count; x++) big[root].data[root * count + x] = val(dtype, root, x);
              await together(cs, (c, r) =>
                c.gather(r === root ? big[r].arg : null, r === root ? own(r) : ins[r]!.arg, { root }),
              );
              wrongIn(
                `gather in place ${tag}`,
                big[root].data,
                (x) => val(dtype, Math.floor(x / count), x % count),
                wrong,
              );
              // allGather: every rank's input is its block of its output
              for (let r = 0; r < n; r++) for (let x = 0; x < count; x++) big[r].data[r * count + x] = val(dtype, r, x);
              await together(cs, (c, r) => c.allGather(big[r].arg, own(r)));
              big.forEach((b, r) =>
                wrongIn(
                  `allGather in place ${tag} rank ${r}`,
                  b.data,
                  (x) => val(dtype, Math.floor(x / count), x % count),
                  wrong,
                ),
              );
              // allGather out of place
              const outs = cs.map((c, r) => buffer(c, dtype, n * count, sharedOn(p, r)));
              const xs = cs.map((c, r) => filled(c, dtype, count, sharedOn(p, r), r + 7));
              await together(cs, (c, r) => c.allGather(outs[r].arg, xs[r].arg));
              outs.forEach((o, r) =>
                wrongIn(
                  `allGather ${tag} rank ${r}`,
                  o.data,
                  (x) => val(dtype, Math.floor(x / count) + 7, x % count),
                  wrong,
                ),
              );
              // scatter with the root's output its block of its input
              for (let x = 0; x < n * count; x++) big[root].data[x] = val(dtype, 500, x);
              const got = cs.map((c, r) => (r === root ? null : buffer(c, dtype, count, sharedOn(p, r))));
              await together(cs, (c, r) =>
                c.scatter(r === root ? own(r) : got[r]!.arg, r === root ? big[r].arg : null, { root }),
              );
              got.forEach(
                (g, i) =>
                  g &&
                  wrongIn(`scatter in place ${tag} rank ${i}`, g.data, (x) => val(dtype, 500, i * count + x), wrong),
              );
              wrongIn(`scatter in place ${tag} root`, big[root].data, (x) => val(dtype, 500, x), wrong);
              release(cs, [big, ins, outs, xs, got]);
            }
        expect(wrong.slice(0, 5)).toEqual([]);
      });
    }
  });
}

describe('mismatches fail every rank with a coded error, and the communicator goes on', () => {
  const codes = (errs: (Error | undefined)[]) => errs.map((e: any) => e?.code);

  for (const n of [2, 3, 4]) {
    it(`${n} ranks: disagreeing root, count, collective variant, counts matrix`, async () => {
      for (const shared of [false, true]) {
        const cs = inprocRanks(n, { slotBytes: SLOT, timeoutMs: 10_000 });
        const mk = (c: Communicator, count: number) => buffer(c, 'f32', count, shared).arg;
        // gather: rank n-1 names another root
        let errs = await settleAll(
          cs.map((c, r) => {
            const root = r === n - 1 ? 1 : 0;
            return c.gather(r === root ? mk(c, 4 * n) : null, mk(c, 4), { root });
          }),
        );
        expect(codes(errs)).toEqual(Array(n).fill('MISMATCH'));
        errs.forEach((e: any) => expect(e.details.field).toBe('root'));
        // scatter: rank 1 has a different count
        errs = await settleAll(
          cs.map((c, r) => c.scatter(mk(c, r === 1 ? 5 : 4), r === 0 ? mk(c, 4 * n) : null, { root: 0 })),
        );
        expect(codes(errs)).toEqual(Array(n).fill('MISMATCH'));
        errs.forEach((e: any) => expect([e.details.field, e.details.values]).toEqual(['count', ['4', '5']]));
        // allToAll: rank 0 with equal blocks, the others with per-peer counts
        errs = await settleAll(
          cs.map((c, r) => {
            const ones = Array(n).fill(1);
            return r === 0
              ? c.allToAll(mk(c, n), mk(c, n))
              : c.allToAll(mk(c, n), mk(c, n), { sendCounts: ones, recvCounts: ones });
          }),
        );
        expect(codes(errs)).toEqual(Array(n).fill('MISMATCH'));
        errs.forEach((e: any) =>
          expect([e.details.field, e.details.values]).toEqual(['count', ['1', 'per-peer counts']]),
        );
        // allToAll: the last rank expects 2 elements from rank 0 where rank 0 sends 1
        errs = await settleAll(
          cs.map((c, r) => {
            const send = Array(n).fill(1);
            const recv = Array(n).fill(1);
            if (r === n - 1) recv[0] = 2; // rank 0 sends it 1
            return c.allToAll(mk(c, r === n - 1 ? n + 1 : n), mk(c, n), { sendCounts: send, recvCounts: recv });
          }),
        );
        expect(codes(errs)).toEqual(Array(n).fill('MISMATCH'));
        errs.forEach((e: any) =>
          expect([e.details.field, e.details.ranks, e.details.values]).toEqual([
            'counts',
            [0, n - 1],
            [`sendCounts[${n - 1}]=1`, 'recvCounts[0]=2'],
          ]),
        );
        // the communicator is still usable: an allToAll with counts, then an allReduce
        const outs = cs.map((c) => buffer(c, 'f32', n, shared));
        await together(cs, (c, r) => {
          const ins = buffer(c, 'f32', n, shared);
          ins.data.fill(r);
          const ones = Array(n).fill(1);
          return c.allToAll(outs[r].arg, ins.arg, { sendCounts: ones, recvCounts: ones });
        });
        outs.forEach((o) => expect(Array.from(o.data)).toEqual(Array.from({ length: n }, (_, j) => j)));
        const xs = cs.map((c) => buffer(c, 'f32', 3, shared));
        xs.forEach((x) => x.data.fill(1));
        await together(cs, (c, r) => c.allReduce(xs[r].arg));
        xs.forEach((x) => expect(Array.from(x.data)).toEqual([n, n, n]));
        // the flight record names the new collectives
        const rec = cs[0].flightRecord() as any;
        const names = (rec.ops ?? rec).map((o: any) => o.collective);
        expect(names).toEqual(expect.arrayContaining(['gather', 'scatter', 'allToAll']));
      }
    });
  }
});

describe('on worker threads', () => {
  const cases: [number, boolean, string[], string[]][] = [
    [2, true, ['plain', 'alloc', 'mixed'], ['f32', 'u8', 'bf16', 'f64']],
    [2, false, ['plain', 'alloc', 'mixed'], ['f32', 'i8']],
    [3, true, ['plain', 'mixed'], ['f32', 'i8']],
    // eight threads with alloc() buffers and rooted ops: a past heap corruption's shape
    [8, true, ['alloc', 'mixed'], ['f32', 'bf16']],
  ];
  for (const [n, simd, placements, dtypes] of cases) {
    it(`${n} thread ranks (${simd ? 'simd' : 'scalar'}): ${placements.join(', ')} buffers; mismatches on every rank`, async () => {
      const { result, reports } = await runScenario(
        n,
        'moreCollectives',
        { placements, dtypes, counts: [0, 1, 3, 700, 2100] },
        { simd, slotBytes: SLOT, env: { WEBCCL_TIMEOUT_MS: '60000' } },
      );
      expect(result.failure?.message).toBeUndefined();
      for (let r = 0; r < n; r++) {
        expect({ rank: r, wrong: reports[r].at(-1)?.wrong }).toEqual({ rank: r, wrong: [] });
        expect(reports[r].at(-1)?.codes).toEqual(['MISMATCH', 'MISMATCH']);
      }
    }, 240_000);
  }
});

type Issue = (c: Communicator, r: number, mk: (k: number) => any) => any;
/** The collectives whose sources may be read in place, over n ranks with blocks of `count`, buffers from mk. */
function inPlaceOps(n: number, count: number): [string, Issue][] {
  const ones = Array(n).fill(count);
  return [
    ['allGather', (c, _r, mk) => c.allGather(mk(n * count), mk(count))],
    ['allToAll', (c, _r, mk) => c.allToAll(mk(n * count), mk(n * count))],
    [
      'allToAll per-peer',
      (c, _r, mk) => c.allToAll(mk(n * count), mk(n * count), { sendCounts: ones, recvCounts: ones }),
    ],
    ['gather', (c, r, mk) => c.gather(r === 0 ? mk(n * count) : null, mk(count), { root: 0 })],
    ['scatter', (c, r, mk) => c.scatter(mk(count), r === 0 ? mk(n * count) : null, { root: 0 })],
  ];
}
/** Where a rank's next op starts counting steps: its descriptor's base plus the steps its last op used. */
function nextStep(c: Communicator): number {
  const e = (c as any).engine;
  return (e.runner.field(e.desc, D.BASE) + e.runner.field(e.desc, D.STEPS_USED)) as number;
}

describe('comm.alloc() sources are read in place', () => {
  it('the op takes two steps (three with per-peer counts) whatever its size; plain arrays one per chunk', async () => {
    const n = 3;
    const cs = inprocRanks(n, { slotBytes: SLOT, cores: 1 });
    const count = 10 * 1024; // 40 KiB of f32 per block: ten 4 KiB slots
    const run = async (shared: boolean, issue: Issue) => {
      const before = nextStep(cs[0]);
      await together(cs, (c, r) => issue(c, r, (k) => buffer(c, 'f32', k, shared).arg));
      return nextStep(cs[0]) - before;
    };
    const got: Record<string, [number, number]> = {};
    for (const [name, issue] of inPlaceOps(n, count)) got[name] = [await run(true, issue), await run(false, issue)];
    expect(got).toEqual({
      allGather: [2, 10], // a slot holds 1024 f32 of each rank's block
      allToAll: [2, 31], // a slot holds n pieces of 336 (1024 / 3, in 16s) f32
      'allToAll per-peer': [3, 32],
      gather: [2, 10],
      scatter: [2, 31],
    });
  });
});

describe('small comm.alloc() inputs are kept (staged) when the ranks outnumber the cores', () => {
  const n = 3;
  const count = 256; // 1 KiB of f32 per block: every input fits one 4 KiB slot
  /** Steps each op takes on `cores` cores, with comm.alloc() buffers, checking every result. */
  async function stepsOn(cores: number): Promise<Record<string, number>> {
    const cs = inprocRanks(n, { slotBytes: SLOT, cores });
    const got: Record<string, number> = {};
    for (const [name, issue] of inPlaceOps(n, count)) {
      const before = nextStep(cs[0]);
      const bufs: B[][] = cs.map(() => []);
      const mk = (c: Communicator, r: number) => (k: number) => {
        const b = filled(c, 'f32', k, true, r);
        bufs[r].push(b);
        return b.arg;
      };
      await together(cs, (c, r) => issue(c, r, mk(c, r)));
      got[name] = nextStep(cs[0]) - before;
      // allGather and gather: block j of the output is rank j's input; allToAll: block j is block r of rank j's input;
      // scatter: block r of the root's.
      const wrong: string[] = [];
      for (let r = 0; r < n; r++) {
        const first = bufs[r][0]; // the first buffer each issue made: the output (scatter: the output too)
        if (name === 'allGather')
          wrongIn(`${name} rank ${r}`, first.data, (x) => val('f32', Math.floor(x / count), x % count), wrong);
        else if (name.startsWith('allToAll'))
          wrongIn(
            `${name} rank ${r}`,
            first.data,
            (x) => val('f32', Math.floor(x / count), r * count + (x % count)),
            wrong,
          );
        else if (name === 'gather' && r === 0)
          wrongIn(`${name}`, first.data, (x) => val('f32', Math.floor(x / count), x % count), wrong);
        else if (name === 'scatter')
          wrongIn(`${name} rank ${r}`, first.data, (x) => val('f32', 0, r * count + x), wrong);
      }
      expect(wrong).toEqual([]);
      bufs.forEach((mine, r) => mine.forEach((b) => cs[r].free(b.arg)));
    }
    cs.forEach((c) => c.destroy());
    return got;
  }

  it('3 ranks on 1 core: one step (two with per-peer counts), read from the slots', async () => {
    expect(await stepsOn(1)).toEqual({ allGather: 1, allToAll: 1, 'allToAll per-peer': 2, gather: 1, scatter: 1 });
  });

  it('3 ranks with a core each: read in place, two steps (three with per-peer counts)', async () => {
    expect(await stepsOn(64)).toEqual({ allGather: 2, allToAll: 2, 'allToAll per-peer': 3, gather: 2, scatter: 2 });
  });

  it('WEBCCL_KEEP_INPUT_MAX_BYTES: 0 never keeps, a size keeps up to it whatever the cores, a bad value is refused', async () => {
    const old = process.env.WEBCCL_KEEP_INPUT_MAX_BYTES;
    try {
      process.env.WEBCCL_KEEP_INPUT_MAX_BYTES = '0';
      expect(await stepsOn(1)).toEqual({ allGather: 2, allToAll: 2, 'allToAll per-peer': 3, gather: 2, scatter: 2 });
      process.env.WEBCCL_KEEP_INPUT_MAX_BYTES = String(1 << 20);
      expect(await stepsOn(64)).toEqual({ allGather: 1, allToAll: 1, 'allToAll per-peer': 2, gather: 1, scatter: 1 });
      process.env.WEBCCL_KEEP_INPUT_MAX_BYTES = '-5';
      expect(() => inprocRanks(2, { slotBytes: SLOT })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    } finally {
      if (old === undefined) delete process.env.WEBCCL_KEEP_INPUT_MAX_BYTES;
      else process.env.WEBCCL_KEEP_INPUT_MAX_BYTES = old;
    }
  });
});
