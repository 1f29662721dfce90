// Collectives on tensors with layouts across nodes over TCP on loopback: equal layouts named by
// wireLayout with garbage padding on one rank (nothing converted), mixed layouts converted at
// each end with wireLayout (every width, NC1HWC0 with C not a multiple of C0, N = 0,
// [1, 1, 1, 1]), and wireLayouts that disagree refused with MISMATCH on field 'layout' (found in
// the op signature). Mixed layouts without wireLayout: test/layouts/mixed.test.ts.
import { afterAll, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import type { Layout } from '../../src/core/tensor-layout.js';
import { c0Of, type Dt, tensor, val, wrongIn } from '../helpers/layout-ref.js';
import { all, destroyAll, netRanks } from '../helpers/net-world.js';

for (const [nodes, perNode] of [
  [2, 1],
  [2, 2],
] as const) {
  describe(`${nodes} nodes × ${perNode} rank(s)`, () => {
    let cs: Communicator[] = [];
    const comms = async () => (cs.length ? cs : (cs = await netRanks(nodes, perNode, { simd: true })));
    afterAll(() => destroyAll(cs));
    const n = nodes * perNode;

    it('equal layouts with wireLayout naming them: allReduce and allGather with garbage padding on one rank, nothing converted', async () => {
      const c = await comms();
      for (const dt of ['f32', 'f16', 'i8', 'f64'] as Dt[])
        for (const shape of [
          [2, 5, 3, 2],
          [0, 3, 2, 2],
          [1, 1, 1, 1],
          [1, 33, 2, 1],
        ]) {
          const c0 = c0Of(dt);
          const xs = c.map((_, r) => tensor(dt, 'NC1HWC0', shape, c0, (...i) => val(r, ...i), { garbage: r === 1 }));
          await all(c, (cm, r) => cm.allReduce(xs[r] as any, { wireLayout: 'NC1HWC0' }));
          xs.forEach((x, r) =>
            expect(
              wrongIn(x, (...i) => c.reduce((a, _, q) => a + val(q, ...i), 0)),
              `${dt} [${shape}] rank ${r}`,
            ).toBeUndefined(),
          );
          const big = [shape[0] * n, ...shape.slice(1)];
          const ins = c.map((_, r) => tensor(dt, 'NC1HWC0', shape, c0, (...i) => val(r, ...i), { garbage: true }));
          const outs = c.map(() => tensor(dt, 'NC1HWC0', big, c0, () => 1));
          await all(c, (cm, r) => cm.allGather(outs[r] as any, ins[r] as any, { wireLayout: 'NC1HWC0' }));
          outs.forEach((o, r) =>
            expect(
              wrongIn(o, (m, ch, h, w) => val(Math.floor(m / shape[0]), m % shape[0], ch, h, w)),
              `allGather ${dt} [${shape}] rank ${r}`,
            ).toBeUndefined(),
          );
        }
      for (const x of c) expect(x.stats().conversions).toBe(0);
    });

    it('mixed layouts: data crosses in the wire layout and each rank converts at its end', async () => {
      const c = await comms();
      const layouts: Layout[] = ['NC1HWC0', 'NHWC', 'NCHW', 'NC1HWC0'];
      for (const dt of ['f32', 'bf16', 'u8', 'f64'] as Dt[])
        for (const shape of [
          [2, 5, 3, 2],
          [0, 3, 2, 2],
          [1, 1, 1, 1],
          [1, 20, 1, 5],
        ]) {
          const c0 = dt === 'f32' ? 4 : c0Of(dt);
          const xs = c.map((_, r) => tensor(dt, layouts[r], shape, c0, (...i) => val(r, ...i) + 3, { garbage: true }));
          await all(c, (cm, r) => cm.allReduce(xs[r] as any, { wireLayout: 'NCHW' }));
          xs.forEach((x, r) =>
            expect(
              wrongIn(x, (...i) => c.reduce((a, _, q) => a + val(q, ...i) + 3, 0)),
              `${dt} [${shape}] rank ${r}`,
            ).toBeUndefined(),
          );
          const big = [shape[0] * n, ...shape.slice(1)];
          const ins = c.map((_, r) => tensor(dt, layouts[r], shape, c0, (...i) => val(r, ...i) + 3));
          const outs = c.map((_, r) => tensor(dt, layouts[r], big, c0, () => 1, { garbage: true }));
          await all(c, (cm, r) => cm.allGather(outs[r] as any, ins[r] as any, { wireLayout: 'NHWC' }));
          outs.forEach((o, r) =>
            expect(
              wrongIn(o, (m, ch, h, w) => val(Math.floor(m / shape[0]), m % shape[0], ch, h, w) + 3),
              `allGather ${dt} [${shape}] rank ${r}`,
            ).toBeUndefined(),
          );
        }
      // Per dtype: shapes [2,5,3,2] and [1,20,1,5] convert input and output; N = 0 and C = 1
      // (NCHW = NHWC) place bytes alike and convert nothing, but NC1HWC0 [1,1,1,1] has padding.
      expect(c[0].stats().conversions).toBe(4 * (6 + 6)); // NC1HWC0: both ops
      expect(c[1].stats().conversions).toBe(4 * 4); // NHWC: the allReduce over NCHW only
      if (n > 2) expect(c[2].stats().conversions).toBe(4 * 4); // NCHW: the allGather over NHWC only
    });

    it('without wireLayout, tensors cross in row-major (test/layouts/mixed.test.ts); wireLayouts that disagree: MISMATCH on the layout field on every rank', async () => {
      const c = await comms();
      const xs = c.map(() => tensor('f32', 'NHWC', [1, 3, 2, 2], 16, () => 1));
      const errs = await Promise.all(
        c.map((cm, r) =>
          cm
            .allReduce(xs[r] as any, { wireLayout: r % 2 ? 'NHWC' : 'NCHW' })
            .wait()
            .then(
              () => undefined,
              (e) => e,
            ),
        ),
      );
      for (const e of errs) expect([e?.code, e?.details.field]).toEqual(['MISMATCH', 'layout']);
    });
  });
}
