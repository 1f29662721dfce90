// Collectives on tensors with layouts, ranks in one thread over shared memory: equal layouts
// (no conversion; the padding rule: output padding is zero whatever any rank's padding held),
// mixed layouts with wireLayout (each rank converts at its end; stats count it), mixed layouts
// without it (row-major; shapes that disagree are a MISMATCH on 'shape'), and the checks at the boundary.
import { describe, expect, it } from 'vitest';
import type { Layout, TensorLayout } from '../../src/core/tensor-layout.js';
import { caught } from '../helpers/caught.js';
import { inprocRanks, settleAll, together } from '../helpers/inproc.js';
import { c0Of, type Dt, tensor, val, wrongIn, zeroCopy } from '../helpers/layout-ref.js';

const SHAPES = [
  [2, 5, 3, 1],
  [1, 17, 2, 2],
  [0, 5, 2, 2],
  [1, 1, 1, 1],
  [3, 33, 1, 3],
];
const DTS: Dt[] = ['f32', 'f16', 'bf16', 'i8', 'i32', 'f64'];

for (const build of ['simd', 'scalar'] as const) {
  describe(`${build} build`, () => {
    it('equal layouts: allReduce sum / max, in place, out of place and zero-copy, with garbage padding on one rank', async () => {
      const n = 3;
      const cs = inprocRanks(n, { slotBytes: 4096, simd: build === 'simd' });
      const wrong: string[] = [];
      for (const dt of DTS)
        for (const layout of ['NCHW', 'NHWC', 'NC1HWC0'] as Layout[])
          for (const shape of SHAPES)
            for (const op of ['sum', 'max'] as const)
              for (const mode of ['in-place', 'out-of-place', 'zero-copy']) {
                const c0 = layout === 'NC1HWC0' && dt === 'f32' ? 4 : c0Of(dt);
                const l: TensorLayout = { shape: shape as TensorLayout['shape'], layout, c0 };
                const xs = cs.map((c, r) =>
                  tensor(dt, layout, shape, c0, (...i) => val(r, ...i), {
                    garbage: r === 1,
                    data: mode === 'zero-copy' ? zeroCopy(c, dt, l) : undefined,
                  }),
                );
                const outs = cs.map((_, r) =>
                  mode === 'out-of-place' ? tensor(dt, layout, shape, c0, () => 1, { garbage: true }) : xs[r],
                );
                await together(cs, (c, r) => c.allReduce(xs[r] as any, { op, out: outs[r] as any }));
                const want = (...i: [number, number, number, number]) => {
                  const vs = cs.map((_, r) => val(r, ...i));
                  return op === 'sum' ? vs.reduce((a, b) => a + b) : Math.max(...vs);
                };
                outs.forEach((o, r) => {
                  const w = wrongIn(o, want);
                  if (w) wrong.push(`${dt} ${layout} [${shape}] ${op} ${mode} rank ${r}: ${w}`);
                });
              }
      expect(wrong.slice(0, 5)).toEqual([]);
      for (const c of cs) expect(c.stats().conversions).toBe(0);
    });

    it('equal layouts: allGather and reduceScatter split along N; broadcast and reduce', async () => {
      const n = 2;
      const cs = inprocRanks(n, { slotBytes: 4096, simd: build === 'simd' });
      for (const dt of ['f16', 'u8', 'f32'] as Dt[])
        for (const layout of ['NHWC', 'NC1HWC0'] as Layout[]) {
          const c0 = c0Of(dt);
          const shape = [2, 19, 2, 3];
          const big = [2 * n, 19, 2, 3];
          const ins = cs.map((_, r) => tensor(dt, layout, shape, c0, (...i) => val(r, ...i) + 3, { garbage: true }));
          const outs = cs.map(() => tensor(dt, layout, big, c0, () => 0));
          await together(cs, (c, r) => c.allGather(outs[r] as any, ins[r] as any));
          outs.forEach((o) =>
            expect(wrongIn(o, (m, c, h, w) => val(Math.floor(m / 2), m % 2, c, h, w) + 3)).toBeUndefined(),
          );

          const rsIn = cs.map((_, r) => tensor(dt, layout, big, c0, (...i) => val(r, ...i) + 3, { garbage: true }));
          const rsOut = cs.map(() => tensor(dt, layout, shape, c0, () => 0));
          await together(cs, (c, r) => c.reduceScatter(rsOut[r] as any, rsIn[r] as any));
          rsOut.forEach((o, r) =>
            expect(
              wrongIn(o, (m, c, h, w) => val(0, m + 2 * r, c, h, w) + val(1, m + 2 * r, c, h, w) + 6),
            ).toBeUndefined(),
          );

          const bc = cs.map((_, r) =>
            tensor(dt, layout, shape, c0, (...i) => (r === 1 ? val(5, ...i) + 3 : 0), { garbage: true }),
          );
          await together(cs, (c, r) => c.broadcast(bc[r] as any, { root: 1 }));
          bc.forEach((o) => expect(wrongIn(o, (...i) => val(5, ...i) + 3)).toBeUndefined());
        }
    });

    it('mixed layouts with wireLayout: every rank converts at its end, in its own layout; stats count it', async () => {
      const n = 3;
      const cs = inprocRanks(n, { slotBytes: 4096, simd: build === 'simd' });
      const layouts: Layout[] = ['NC1HWC0', 'NHWC', 'NCHW'];
      for (const dt of ['f32', 'bf16', 'i8', 'f64'] as Dt[])
        for (const shape of [
          [2, 5, 3, 2],
          [1, 1, 1, 1],
          [0, 3, 2, 2],
          [1, 20, 1, 5],
        ]) {
          for (const wire of ['NCHW', 'NHWC', 'NC1HWC0'] as Layout[]) {
            const c0 = dt === 'f32' ? 4 : c0Of(dt);
            const xs = cs.map((_, r) => tensor(dt, layouts[r], shape, c0, (...i) => val(r, ...i), { garbage: true }));
            await together(cs, (c, r) => c.allReduce(xs[r] as any, { wireLayout: wire }));
            const want = (...i: [number, number, number, number]) => cs.reduce((a, _, r) => a + val(r, ...i), 0);
            xs.forEach((o, r) => expect(wrongIn(o, want), `${dt} [${shape}] wire ${wire} rank ${r}`).toBeUndefined());

            const big = [shape[0] * n, ...shape.slice(1)];
            const ins = cs.map((_, r) => tensor(dt, layouts[r], shape, c0, (...i) => val(r, ...i)));
            const outs = cs.map((_, r) => tensor(dt, layouts[(r + 1) % n], big, c0, () => 1));
            // A rank's input and output share one layout: here they differ, so each converts its input first.
            const err = caught(() => cs[0].allGather(outs[0] as any, ins[0] as any, { wireLayout: wire }));
            expect([err.code, err.details.layouts]).toEqual(['INVALID_ARGUMENT', [layouts[0], layouts[1]]]);
            const gOuts = cs.map((_, r) => tensor(dt, layouts[r], big, c0, () => 1, { garbage: true }));
            await together(cs, (c, r) => c.allGather(gOuts[r] as any, ins[r] as any, { wireLayout: wire }));
            gOuts.forEach((o, r) =>
              expect(
                wrongIn(o, (m, c, h, w) => val(Math.floor(m / shape[0]), m % shape[0], c, h, w)),
                `allGather ${dt} [${shape}] wire ${wire} rank ${r}`,
              ).toBeUndefined(),
            );
          }
        }
      // The rank whose layout is the wire layout never converts; the others convert input and output.
      const before = cs.map((c) => c.stats());
      const t = cs.map((_, r) => tensor('f32', layouts[r], [1, 6, 4, 4], 4, (...i) => val(r, ...i)));
      await together(cs, (c, r) => c.allReduce(t[r] as any, { wireLayout: 'NCHW' }));
      const after = cs.map((c) => c.stats());
      expect(after.map((s, r) => s.conversions - before[r].conversions)).toEqual([2, 2, 0]);
      // NC1HWC0 (c0 4: 8 channels) in, NCHW out
      expect(after[0].conversionBytes - before[0].conversionBytes).toBe(4 * (8 * 16 + 6 * 16));
      expect(after[1].conversionBytes - before[1].conversionBytes).toBe(2 * 4 * 6 * 16);
    });

    it('mixed layouts without wireLayout cross in row-major (test/layouts/mixed.test.ts); disagreeing shapes fail with MISMATCH on every rank', async () => {
      const cs = inprocRanks(2, { slotBytes: 4096, simd: build === 'simd' });
      for (const [a, b, c0b] of [
        ['NCHW', 'NHWC', 16],
        ['NC1HWC0', 'NC1HWC0', 8],
        ['NC1HWC0', 'NCHW', 16],
      ] as [Layout, Layout, number][]) {
        const xs = [tensor('f32', a, [1, 5, 2, 2], 16, () => 1), tensor('f32', b, [1, 5, 2, 2], c0b, () => 2)];
        await together(cs, (c, r) => c.allReduce(xs[r] as any));
        for (const x of xs) expect(wrongIn(x, () => 3)).toBeUndefined();
        const ys = [tensor('f32', a, [1, 5, 2, 2], 16, () => 1), tensor('f32', b, [1, 5, 1, 4], c0b, () => 1)];
        const errs = await settleAll(cs.map((c, r) => c.allReduce(ys[r] as any)));
        for (const e of errs) expect([(e as any)?.code, (e as any)?.details.field]).toEqual(['MISMATCH', 'shape']);
      }
      const later = [new Float32Array(4).fill(1), new Float32Array(4).fill(2)];
      await together(cs, (c, r) => c.allReduce(later[r]));
      expect(Array.from(later[0])).toEqual([3, 3, 3, 3]);
    });
  });
}

describe('checks at the boundary', () => {
  it('refuses tensors whose data, shapes or layouts do not fit, before anything moves', () => {
    const [c] = inprocRanks(1);
    const x = { data: new Float32Array(30), shape: [2, 5, 3, 1], layout: 'NCHW' as const };
    let e = caught(() => c.allReduce({ ...x, shape: [2, 5, 3, 2] } as any));
    expect([e.code, e.details.expected, e.details.actual]).toEqual(['SIZE_MISMATCH', 60, 30]);
    e = caught(() => c.allReduce({ ...x, layout: 'NC1HWC0' } as any));
    expect([e.code, e.details.expected]).toEqual(['SIZE_MISMATCH', 2 * 16 * 3]);
    e = caught(() => c.allReduce(x as any, { wireLayout: 'CHWN' as any }));
    expect([e.code, e.details.option]).toEqual(['INVALID_ARGUMENT', 'layout']);
    e = caught(() => c.allReduce(new Float32Array(4), { wireLayout: 'NCHW' }));
    expect([e.code, e.details.option]).toEqual(['INVALID_ARGUMENT', 'wireLayout']);
    e = caught(() =>
      c.allReduce(x as any, { out: { data: new Float32Array(30), shape: [2, 5, 1, 3], layout: 'NCHW' } as any }),
    );
    expect(e.code).toBe('SIZE_MISMATCH');
    e = caught(() =>
      c.allReduce(x as any, { out: { data: new Float32Array(30), shape: [2, 5, 3, 1], layout: 'NHWC' } as any }),
    );
    expect([e.code, e.details.layouts]).toEqual(['INVALID_ARGUMENT', ['NCHW', 'NHWC']]);
    e = caught(() => c.allGather({ data: new Float32Array(30), shape: [2, 5, 1, 3], layout: 'NCHW' } as any, x as any));
    expect(e.code).toBe('SIZE_MISMATCH');
    e = caught(() => c.allReduce({ data: new Uint16Array(30), shape: [2, 5, 3, 1], layout: 'NCHW' } as any));
    expect(e.code).toBe('INVALID_DTYPE');
    expect(c.stats().ops).toBe(0);
  });

  it('a tensor may leave dtype to its array; a plain array beside a tensor takes its layout', async () => {
    const [c] = inprocRanks(1);
    const x = {
      data: Float32Array.from({ length: 2 * 16 * 2 }, (_, i) => i),
      shape: [2, 3, 2, 1],
      layout: 'NC1HWC0' as const,
    };
    const out = new Float32Array(x.data.length).fill(9);
    await together([c], (cc) => cc.allReduce(x, { out }));
    expect(out.filter((v, i) => i % 16 >= 3 && v !== 0).length).toBe(0); // padding zeroed
    expect(out[16 + 2]).toBe(18);
  });
});
