// The double binary tree allreduce on the real network engine (algo: 'tree'), over TCP on
// loopback in this process: every dtype and op, sizes 0, 1, fewer than ranks, not divisible and
// across the 512 KiB pieces the trees pipeline in, plain and zero-copy buffers, in and out of place.
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
import { all, destroyAll, netRanks } from '../helpers/net-world.js';

const PIECE = 512 * 1024;
// 200 KiB + 3 elements: halves of ~100 KiB cut into 64 KiB pieces (the trees' pipeline); the
// big size: halves over two 512 KiB pieces.
const sizesFor = (dtype: string, big: boolean) => [
  0,
  1,
  3,
  17,
  1001,
  Math.ceil((200 * 1024) / SIZE[dtype]) + 3,
  ...(big ? [Math.ceil((2.5 * 2 * PIECE) / SIZE[dtype]) + 7] : []),
];

for (const [nodes, perNode] of [
  [3, 1],
  [2, 2],
  [5, 1],
] as const) {
  const n = nodes * perNode;
  describe(`tree allReduce over ${nodes} node(s) × ${perNode} rank(s)`, () => {
    let cs: Communicator[] = [];
    afterAll(() => destroyAll(cs));

    it('matches the closed form for every dtype and op', async () => {
      cs = await netRanks(nodes, perNode);
      const wrong: string[] = [];
      for (const dtype of DTYPES)
        for (const op of opsFor(dtype))
          for (const count of sizesFor(dtype, dtype === 'f32' && op === 'sum'))
            for (const zc of [false, true])
              for (const inPlace of [true, false]) {
                const place = (c: Communicator) => {
                  if (!zc) return makeBuffer(dtype, count);
                  const a = c.alloc(dtype as never, count) as any;
                  return { arg: a, data: a.data ?? a };
                };
                const bufs = cs.map((c, r) => {
                  const x = place(c);
                  fill(x.data, dtype, op, r);
                  return { x, out: inPlace ? x : place(c) };
                });
                await all(cs, (c, r) =>
                  c.allReduce(bufs[r].x.arg, { op: op as never, algo: 'tree', out: bufs[r].out.arg }),
                );
                const exp = expectedArray(op, dtype, n, count);
                bufs.forEach((b, r) => {
                  const tag = `${dtype} ${op} count ${count}${zc ? ' zero-copy' : ''} ${inPlace ? 'in' : 'out of'} place rank ${r}`;
                  const i = firstWrong(b.out.data, (k: number) => exp[k]);
                  if (i >= 0) wrong.push(`${tag}: element ${i} is ${b.out.data[i]}, expected ${exp[i]}`);
                  if (!inPlace) {
                    const given = inputArray(op, dtype, r, count);
                    if (firstWrong(b.x.data, (k: number) => given[k]) >= 0) wrong.push(`${tag}: input changed`);
                  }
                });
              }
      expect(wrong.slice(0, 5)).toEqual([]);
      expect(cs[0].stats().allReduceAlgorithms.tree).toBeGreaterThan(0);
    }, 300_000);
  });
}

describe('tree as a communicator-wide choice', () => {
  it("algo: 'tree' on the communicator runs every allReduce over the trees", async () => {
    const cs = await netRanks(4, 1, { algo: 'tree' });
    try {
      const xs = cs.map((_, r) => new Float64Array(5000).fill(r + 1));
      await all(cs, (c, r) => c.allReduce(xs[r]));
      for (const x of xs) expect(x.every((v) => v === 10)).toBe(true);
      expect(cs[0].stats().allReduceAlgorithms).toMatchObject({ tree: 1, ring: 0, doubling: 0 });
    } finally {
      destroyAll(cs);
    }
  }, 120_000);
});
