// Every collective across nodes over real TCP on loopback, in this process: topologies (nodes ×
// ranks per node) × dtypes × ops × sizes × algorithms × in-place/out-of-place × plain/zero-copy
// buffers × SIMD/scalar build, on the same closed-form data as the shared-memory grid. Sizes
// cross the 512 KiB pieces the ring and chain pipeline in, and don't divide by the rank count.
// Across processes, under both launch forms that cross nodes (webccl run --procs, 3 processes,
// and --nnodes, 2 nodes × 1): an allReduce out of place on comm.alloc() buffers with the ring
// and with doubling, which read the input in place (bench/RESULTS.md, 2026-12-02 (early
// morning)); the rank script (test/net/fixtures/out-of-place.mjs) checks every result itself.
import { afterAll, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import {
  DTYPES,
  expectedArray,
  fill,
  firstWrong,
  inputArray,
  makeBuffer,
  opsFor,
  SIZE,
} from '../helpers/closed-form.mjs';
import { launchFixture } from '../helpers/launch-fixture.js';
import { launchForm, stdoutOf } from '../helpers/launch-forms.js';
import { all, destroyAll, netRanks } from '../helpers/net-world.js';

const PIECE = 512 * 1024;
const TOPOLOGIES: [number, number][] = [
  [2, 1],
  [3, 1],
  [4, 1],
  [2, 2],
  [3, 2],
];
const sizesFor = (dtype: string, big: boolean) => [
  0,
  1,
  3,
  17,
  1001,
  ...(big ? [Math.ceil((2.5 * PIECE) / SIZE[dtype]) + 7] : []),
];
const BIG = new Set(['f32', 'bf16', 'i64']);
/** The scalar build runs the same schedules; two topologies show its kernels reduce what arrives. */
const topologiesFor = (build: string) =>
  build === 'simd' ? TOPOLOGIES : TOPOLOGIES.filter(([a, b]) => a * b === 4 || (a === 3 && b === 1));

type Buf = { arg: any; data: any };
const place = (c: Communicator, dtype: string, count: number, zeroCopy: boolean): Buf => {
  if (!zeroCopy) return makeBuffer(dtype, count);
  const a = c.alloc(dtype as any, count) as any;
  return { arg: a, data: a.data ?? a };
};
const wrongAt = (what: string, data: any, want: ArrayLike<unknown>): string | undefined => {
  const i = firstWrong(data, want);
  return i < 0 ? undefined : `${what}: element ${i} is ${data[i]}, expected ${want[i]}`;
};

for (const build of ['simd', 'scalar'] as const) {
  describe(`${build} build, across nodes over TCP`, () => {
    for (const [nodes, perNode] of topologiesFor(build)) {
      const n = nodes * perNode;
      const topo = `${nodes} node(s) × ${perNode} rank(s)`;
      let cs: Communicator[] = [];
      const comms = async () => (cs.length ? cs : (cs = await netRanks(nodes, perNode, { simd: build === 'simd' })));
      afterAll(() => destroyAll(cs));

      it(`allReduce over ${topo}`, async () => {
        const c = await comms();
        const wrong: string[] = [];
        const algos = perNode > 1 ? ['ring', 'doubling', 'hierarchical', undefined] : ['ring', 'doubling', undefined];
        for (const dtype of DTYPES)
          for (const op of opsFor(dtype))
            for (const count of sizesFor(dtype, BIG.has(dtype) && op === 'sum'))
              for (const algo of algos)
                for (const mode of dtype === 'f32'
                  ? ['in-place', 'out-of-place', 'zero-copy in-place', 'zero-copy out-of-place']
                  : ['in-place', 'zero-copy out-of-place']) {
                  const zc = mode.startsWith('zero');
                  const bufs = c.map((cm, r) => {
                    const x = place(cm, dtype, count, zc);
                    fill(x.data, dtype, op, r);
                    return { x, out: mode.endsWith('out-of-place') ? place(cm, dtype, count, zc) : x };
                  });
                  await all(c, (cm, r) => cm.allReduce(bufs[r].x.arg, { op: op as any, algo, out: bufs[r].out.arg }));
                  const exp = expectedArray(op, dtype, n, count);
                  bufs.forEach((b, r) => {
                    const tag = `${dtype} ${op} count ${count} ${algo ?? 'tuned'} ${mode} rank ${r}`;
                    const w = wrongAt(tag, b.out.data, exp);
                    if (w) wrong.push(w);
                    if (b.out !== b.x) {
                      const input = inputArray(op, dtype, r, count);
                      const w2 = wrongAt(`${tag}: input changed`, b.x.data, input);
                      if (w2) wrong.push(w2);
                    }
                    if (zc) {
                      c[r].free(b.x.arg);
                      if (b.out !== b.x) c[r].free(b.out.arg);
                    }
                  });
                }
        expect(wrong.slice(0, 5)).toEqual([]);
        const used = c[0].stats().allReduceAlgorithms;
        expect(used.ring).toBeGreaterThan(0);
        expect(used.doubling).toBeGreaterThan(0);
        if (perNode > 1) expect(used.hierarchical).toBeGreaterThan(0);
      });

      it(`allGather, reduceScatter, broadcast, reduce, barrier over ${topo}`, async () => {
        const c = await comms();
        const wrong: string[] = [];
        const check = (what: string, data: any, want: ArrayLike<unknown>) => {
          const w = wrongAt(what, data, want);
          if (w) wrong.push(w);
        };
        for (const dtype of DTYPES)
          for (const count of sizesFor(dtype, dtype === 'f32'))
            for (const zc of [false, true]) {
              const tag = `${dtype} count ${count}${zc ? ' zero-copy' : ''}`;
              const inputs = (op: string) => c.map((_, r) => inputArray(op, dtype, r, n * count));
              // allGather: rank r's block is its own input
              const outs = c.map((cm) => place(cm, dtype, n * count, zc));
              const ins = c.map((cm, r) => fill(place(cm, dtype, count, zc).data, dtype, 'sum', r));
              await all(c, (cm, r) =>
                cm.allGather(outs[r].arg, dtype === 'bf16' || dtype === 'f16' ? { data: ins[r], dtype } : ins[r]),
              );
              const sums = inputs('sum');
              outs.forEach((o, r) =>
                sums.forEach((sum, q) =>
                  check(`allGather ${tag} rank ${r} block ${q}`, o.data.subarray(q * count, (q + 1) * count), sum),
                ),
              );
              // reduceScatter with sum and max: block r of the reduction lands on rank r
              for (const op of ['sum', 'max']) {
                const big = c.map((cm, r) => fill(place(cm, dtype, n * count, zc).data, dtype, op, r));
                const res = c.map((cm) => place(cm, dtype, count, zc));
                const arg = (d: any) => (dtype === 'bf16' || dtype === 'f16' ? { data: d, dtype } : d);
                await all(c, (cm, r) => cm.reduceScatter(res[r].arg, arg(big[r]), { op: op as any }));
                const exp = expectedArray(op, dtype, n, n * count);
                res.forEach((o, r) => check(`reduceScatter ${op} ${tag} rank ${r}`, o.data, exp.subarray(r * count)));
                const given = inputs(op);
                big.forEach((b, r) => check(`reduceScatter ${op} ${tag}: input changed on rank ${r}`, b, given[r]));
              }
              // broadcast and reduce from the last rank (not 0, so the chain wraps)
              const root = n - 1;
              const bx = c.map((cm, r) => {
                const b = place(cm, dtype, count, zc);
                fill(b.data, dtype, 'sum', r === root ? root : 0);
                return b;
              });
              await all(c, (cm, r) => cm.broadcast(bx[r].arg, { root }));
              bx.forEach((b, r) => check(`broadcast ${tag} rank ${r}`, b.data, sums[root]));
              const rx = c.map((cm, r) => fill(place(cm, dtype, count, zc).data, dtype, 'sum', r));
              await all(c, (cm, r) =>
                cm.reduce(dtype === 'bf16' || dtype === 'f16' ? { data: rx[r], dtype } : rx[r], { root }),
              );
              const exp = expectedArray('sum', dtype, n, count);
              check(`reduce ${tag} root`, rx[root], exp);
              rx.forEach(
                (b, r) => r !== root && check(`reduce ${tag}: non-root input changed on rank ${r}`, b, sums[r]),
              );
            }
        await all(c, (cm) => cm.barrier());
        expect(wrong.slice(0, 5)).toEqual([]);
      });
    }
  });
}

const outOfPlace = launchFixture(new URL('fixtures/out-of-place.mjs', import.meta.url), 'oop');

describe.each([
  ['procs', 3],
  ['nnodes', 2],
] as const)('webccl run --%s, %i ranks across nodes', (form, n) => {
  it('out-of-place allReduce on alloc() buffers, ring and doubling: the sum in the output, the input unchanged', async () => {
    const runs = await launchForm(outOfPlace, form, n, [], {}, { guardMs: 120_000 });
    for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
    const ok = stdoutOf(runs).match(/^ok rank \d of \d$/gm) ?? [];
    expect(ok.sort()).toEqual(Array.from({ length: n }, (_, r) => `ok rank ${r} of ${n}`));
  });
});
