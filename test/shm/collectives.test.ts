// Every collective over the grid ranks × dtypes × ops × sizes × algorithms × in-place/out-of-
// place × plain/zero-copy buffers × SIMD/scalar build, on closed-form data. Small slots (4 KiB)
// make modest sizes cross chunk boundaries. Then the same collectives on real worker threads
// started by the launcher (test/ranks/scenario.mjs): real concurrency, blocking waits, 2 to 8
// ranks on 2 cores, both wasm builds, ops on the ranks or on the node's progress thread.
import { describe, expect, it } from 'vitest';
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
import { inprocRanks, together } from '../helpers/inproc.js';
import { runScenario } from '../helpers/threads.js';

const SLOT = 4096;
const sizesFor = (dtype: string) => {
  const chunk = SLOT / SIZE[dtype];
  return [0, 1, 3, 17, chunk - 1, chunk, chunk + 1, 2 * chunk + 37];
};
type Buf = { arg: any; data: any };
const alloc = (c: Communicator, dtype: string, count: number): Buf => {
  const a = c.alloc(dtype as any, count) as any;
  return { arg: a, data: a.data ?? a };
};
const place = (c: Communicator, dtype: string, count: number, zeroCopy: boolean): Buf =>
  zeroCopy ? alloc(c, dtype, count) : makeBuffer(dtype, count);

function describeWrong(
  what: string,
  data: any,
  want: ((i: number) => unknown) | ArrayLike<unknown>,
): string | undefined {
  const i = firstWrong(data, want);
  return i < 0
    ? undefined
    : `${what}: element ${i} is ${data[i]}, expected ${typeof want === 'function' ? want(i) : want[i]}`;
}

for (const build of ['simd', 'scalar'] as const) {
  describe(`${build} build`, () => {
    for (const n of [1, 2, 3, 4, 8]) {
      const comms = () => inprocRanks(n, { slotBytes: SLOT, simd: build === 'simd' });

      it(`allReduce over ${n} rank(s)`, async () => {
        const cs = comms();
        const wrong: string[] = [];
        for (const dtype of DTYPES)
          for (const op of opsFor(dtype))
            for (const count of sizesFor(dtype))
              for (const algo of ['direct', 'twoshot'])
                for (const mode of ['in-place', 'out-of-place', 'zero-copy in-place', 'zero-copy out-of-place']) {
                  const zc = mode.startsWith('zero');
                  const bufs = cs.map((c, r) => {
                    const x = place(c, dtype, count, zc);
                    fill(x.data, dtype, op, r);
                    return { x, out: mode.endsWith('out-of-place') ? place(c, dtype, count, zc) : x };
                  });
                  await together(cs, (c, r) =>
                    c.allReduce(bufs[r].x.arg, { op: op as any, algo: algo as any, out: bufs[r].out.arg }),
                  );
                  const exp = expectedArray(op, dtype, n, count);
                  bufs.forEach((b, r) => {
                    const w = describeWrong(`${dtype} ${op} count ${count} ${algo} ${mode} rank ${r}`, b.out.data, exp);
                    if (w) wrong.push(w);
                    if (b.out !== b.x) {
                      const w2 = describeWrong(
                        `${dtype} ${op} ${algo} ${mode}: input changed on rank ${r}`,
                        b.x.data,
                        inputArray(op, dtype, r, count),
                      );
                      if (w2) wrong.push(w2);
                    }
                    if (zc) {
                      cs[r].free(b.x.arg);
                      if (b.out !== b.x) cs[r].free(b.out.arg);
                    }
                  });
                }
        expect(wrong.slice(0, 5)).toEqual([]);
      });

      it(`allGather, reduceScatter, broadcast, reduce over ${n} rank(s)`, async () => {
        const cs = comms();
        const wrong: string[] = [];
        // zero-copy buffers go back to the pool after each dtype and size
        const taken: [Communicator, any][] = [];
        let zc = false;
        const kept = (c: Communicator, dtype: string, count: number) => {
          const b = place(c, dtype, count, zc);
          if (zc) taken.push([c, b.arg]);
          return b;
        };
        const check = (what: string, data: any, want: ((i: number) => unknown) | ArrayLike<unknown>) => {
          const w = describeWrong(what, data, want);
          if (w) wrong.push(w);
        };
        for (const dtype of DTYPES)
          for (const count of sizesFor(dtype))
            for (zc of [false, true]) {
              const tag = `${dtype} count ${count}${zc ? ' zero-copy' : ''}`;
              // allGather, out of place and in place (input = this rank's block of the output)
              for (const inPlace of [false, true]) {
                const outs = cs.map((c) => kept(c, dtype, n * count));
                const inputs = cs.map((c, r) => {
                  if (inPlace) {
                    const o = outs[r];
                    const sub = o.data.subarray(r * count, (r + 1) * count);
                    fill(sub, dtype, 'sum', r);
                    return o.arg.dtype ? { data: sub, dtype } : sub;
                  }
                  const x = kept(c, dtype, count);
                  fill(x.data, dtype, 'sum', r);
                  return x.arg;
                });
                await together(cs, (c, r) => c.allGather(outs[r].arg, inputs[r]));
                const blocks = cs.map((_, q) => inputArray('sum', dtype, q, count));
                outs.forEach((o, r) =>
                  check(
                    `allGather ${tag}${inPlace ? ' in-place' : ''} rank ${r}`,
                    o.data,
                    (i) => blocks[Math.floor(i / count)][i % count],
                  ),
                );
              }
              for (const op of opsFor(dtype)) {
                const inputs = cs.map((c, r) => {
                  const x = kept(c, dtype, n * count);
                  fill(x.data, dtype, op, r);
                  return x;
                });
                const outs = cs.map((c) => kept(c, dtype, count));
                await together(cs, (c, r) => c.reduceScatter(outs[r].arg, inputs[r].arg, { op: op as any }));
                const exp = expectedArray(op, dtype, n, n * count);
                outs.forEach((o, r) =>
                  check(`reduceScatter ${tag} ${op} rank ${r}`, o.data, exp.subarray(r * count, (r + 1) * count)),
                );
              }
              for (const root of [0, n - 1]) {
                const xs = cs.map((c, r) => {
                  const x = kept(c, dtype, count);
                  if (r === root) fill(x.data, dtype, 'max', 99);
                  return x;
                });
                await together(cs, (c, r) => c.broadcast(xs[r].arg, { root }));
                const sent = inputArray('max', dtype, 99, count);
                xs.forEach((x, r) => check(`broadcast ${tag} root ${root} rank ${r}`, x.data, sent));
                const outs = cs.map((c) => kept(c, dtype, count));
                await together(cs, (c, r) => c.broadcast(xs[r].arg, { root, out: outs[r].arg }));
                outs.forEach((o, r) => check(`broadcast out-of-place ${tag} root ${root} rank ${r}`, o.data, sent));
                for (const op of opsFor(dtype)) {
                  const ys = cs.map((c, r) => {
                    const y = kept(c, dtype, count);
                    fill(y.data, dtype, op, r);
                    return y;
                  });
                  const outs = cs.map((c) => kept(c, dtype, count));
                  await together(cs, (c, r) => c.reduce(ys[r].arg, { op: op as any, root, out: outs[r].arg }));
                  check(`reduce ${tag} ${op} root ${root}`, outs[root].data, expectedArray(op, dtype, n, count));
                  ys.forEach((y, r) =>
                    check(`reduce ${tag} ${op}: input changed on rank ${r}`, y.data, inputArray(op, dtype, r, count)),
                  );
                }
              }
              for (const [c, a] of taken.splice(0)) c.free(a);
            }
        await together(cs, (c) => c.barrier());
        expect(wrong.slice(0, 5)).toEqual([]);
      });
    }
  });
}

describe('collectives on worker threads', () => {
  for (const simd of [true, false]) {
    for (const n of [2, 3, 4, 8]) {
      it(`${n} ranks, ${simd ? 'simd' : 'scalar'} build`, async () => {
        const { result, reports } = await runScenario(
          n,
          'grid',
          { dtypes: ['f32', 'i8', 'bf16', 'f64', 'i64'], counts: [0, 1, 17, 1025, 3000] },
          { simd, slotBytes: 4096 },
        );
        expect(result.failure?.message).toBeUndefined();
        for (const [r, rep] of reports.entries())
          expect({ rank: r, ...rep[0] }).toEqual({ rank: r, ok: true, wrong: [] });
      });
    }
  }
  // The same grid run by the node's progress thread (every op handed over, none taken back).
  for (const [n, simd] of [
    [2, true],
    [3, false],
    [8, true],
  ] as const) {
    it(`${n} ranks, ${simd ? 'simd' : 'scalar'} build, WEBCCL_PROGRESS=thread`, async () => {
      const { result, reports } = await runScenario(
        n,
        'grid',
        { dtypes: ['f32', 'i8', 'bf16', 'f64', 'i64'], counts: [0, 1, 17, 1025, 3000] },
        { simd, slotBytes: 4096, env: { WEBCCL_PROGRESS: 'thread' } },
      );
      expect(result.failure?.message).toBeUndefined();
      for (const [r, rep] of reports.entries())
        expect({ rank: r, ...rep[0] }).toEqual({ rank: r, ok: true, wrong: [] });
    });
  }
});
