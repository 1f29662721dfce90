// The sharded optimizer step (ZeRO stage 1) on ranks of one node in this thread: with sgd and
// adam it gives what the same update gives applied to the whole vectors, bit for bit when the
// reduction is exact, and within 1e-5 training the test model; each rank holds 1/size of the
// optimizer state; the flat vector's padding (67 elements over 2, 3, 4 ranks) never shows.
import { describe, expect, it } from 'vitest';
import { adam, type OptimizerState, sgd, stateBytes, type UpdateFn } from '../../src/training/optimizers.js';
import { createShardedOptimizer } from '../../src/training/sharded.js';
import { caught } from '../helpers/caught.js';
// @ts-expect-error: a plain-JS model shared with the rank scripts, without declarations
import { gradients, initParams, makeData, maxDiff, SIZES, shardOf } from './fixtures/model.mjs';
import { onAll, world } from './fixtures/world.js';

const TOTAL = (SIZES as number[]).reduce((a, b) => a + b, 0);

/** Gradients that sum exactly in f32 in any order: multiples of 1/64 below 4, on each rank. */
const dyadic = (rank: number, step: number) =>
  (SIZES as number[]).map((n, i) =>
    Float32Array.from({ length: n }, (_, j) => (((j * 7 + i * 13 + rank * 5 + step * 3) % 17) - 8) / 64),
  );

/** The unsharded optimizer: `update` on the whole flattened vector, with the exact mean gradient. */
function unsharded(update: UpdateFn, n: number, steps: number): { params: Float32Array[]; state: OptimizerState } {
  const params = initParams(1) as Float32Array[];
  const flat = new Float32Array(TOTAL);
  const state: OptimizerState = {};
  for (let s = 1; s <= steps; s++) {
    const mean = new Float32Array(TOTAL);
    for (let r = 0; r < n; r++) {
      let off = 0;
      for (const g of dyadic(r, s)) {
        g.forEach((v, j) => (mean[off + j] += v));
        off += g.length;
      }
    }
    for (let j = 0; j < TOTAL; j++) mean[j] /= n;
    let off = 0;
    for (const p of params) {
      flat.set(p, off);
      off += p.length;
    }
    update(flat, mean, state, s);
    off = 0;
    for (const p of params) {
      p.set(flat.subarray(off, off + p.length));
      off += p.length;
    }
  }
  return { params, state };
}

const UPDATES: [string, () => UpdateFn][] = [
  ['sgd', () => sgd({ lr: 0.1 })],
  ['sgd with momentum', () => sgd({ lr: 0.1, momentum: 0.9 })],
  ['adam', () => adam({ lr: 0.01 })],
];

describe('ZeRO-1 equals the unsharded optimizer', () => {
  for (const [name, make] of UPDATES) {
    for (const n of [2, 3, 4]) {
      const exact = (n & (n - 1)) === 0; // the mean of dyadic values over 2 or 4 ranks is exact; over 3 it rounds
      it(`${name}, ${n} ranks, 3 steps: ${exact ? 'bit for bit' : 'within 1e-6'}; each rank holds its block's state only`, async () => {
        const steps = 3;
        const want = unsharded(make(), n, steps);
        const res = await onAll(world(n), async (c, r) => {
          const p = initParams(r === 0 ? 1 : 9 + r) as Float32Array[];
          const opt = createShardedOptimizer(c, p, make());
          await opt.broadcastParameters();
          for (let s = 1; s <= steps; s++) await opt.step(dyadic(r, s));
          const mem = opt.memoryPerRank();
          const shard = opt.shard;
          opt.destroy();
          return { p, mem, shard, steps: opt.steps };
        });
        const full = stateBytes(want.state);
        let sum = 0;
        for (const { p, mem, shard, steps: taken } of res) {
          expect(maxDiff(p, want.params)).toBeLessThanOrEqual(exact ? 0 : 1e-6);
          expect(taken).toBe(steps);
          expect(mem.totalElements).toBe(TOTAL);
          expect(mem.shardElements).toBe(shard.end - shard.start);
          expect(mem.stateBytes).toBeLessThanOrEqual(Math.ceil(TOTAL / n) * (full / TOTAL));
          expect(mem.bufferBytes).toBe(2 * 4 * Math.ceil(TOTAL / n) * n);
          sum += mem.stateBytes;
        }
        expect(sum).toBe(full); // the blocks partition the state: 1/size of it on each rank
        expect(res.map((x) => x.shard)).toEqual(
          Array.from({ length: n }, (_, r) => {
            const b = Math.ceil(TOTAL / n);
            return { start: Math.min(TOTAL, r * b), end: Math.min(TOTAL, (r + 1) * b) };
          }),
        );
      });
    }
  }

  it('adam training the test model on 4 ranks, each on its shard of the batch: within 1e-5 of one process', async () => {
    const steps = 5;
    const update = () => adam({ lr: 0.01 });
    const grad = gradients as (p: Float32Array[], b: unknown[]) => { grads: Float32Array[] };
    // One process: the same update on the whole vector, with the whole batch's gradient.
    const ref = initParams(1) as Float32Array[];
    const refOpt = createShardedOptimizer(world(1)[0], ref, update());
    for (let s = 0; s < steps; s++) await refOpt.step(grad(ref, makeData(100 + s, 24)).grads);
    const got = await onAll(world(4), async (c, r) => {
      const p = initParams(1) as Float32Array[];
      const opt = createShardedOptimizer(c, p, update());
      for (let s = 0; s < steps; s++) await opt.step(grad(p, shardOf(makeData(100 + s, 24), r, 4)).grads);
      return p;
    });
    for (const p of got) expect(maxDiff(p, ref)).toBeLessThanOrEqual(1e-5);
    expect(maxDiff(ref, initParams(1))).toBeGreaterThan(0.01); // it did move
  });

  it('average: false sums the gradients; a model smaller than the rank count leaves some ranks no element', async () => {
    const res = await onAll(world(4), async (c, r) => {
      const p = [Float32Array.of(1, 2), new Float32Array(0), Float32Array.of(3)];
      const opt = createShardedOptimizer(c, p, sgd({ lr: 1 }), { average: false });
      await opt.step([Float32Array.of(r, 1), new Float32Array(0), Float32Array.of(-1)]);
      return { p: p.map((x) => Array.from(x)), shard: opt.shard, state: opt.memoryPerRank().shardElements };
    });
    for (const { p } of res) expect(p).toEqual([[1 - 6, 2 - 4], [], [3 + 4]]);
    expect(res.map((x) => x.state)).toEqual([1, 1, 1, 0]);
  });
});

describe('refusals', () => {
  it('bad arguments are refused with a code', async () => {
    const [c] = world(1);
    const code = (f: () => unknown) => caught(f).code;
    expect(code(() => createShardedOptimizer(c, [new Float32Array(2)], 'sgd' as never))).toBe('INVALID_ARGUMENT');
    expect(code(() => createShardedOptimizer(c, [new Float32Array(2)], sgd({ lr: 1 }), { avg: true } as never))).toBe(
      'INVALID_ARGUMENT',
    );
    expect(code(() => sgd({} as never))).toBe('INVALID_ARGUMENT');
    expect(code(() => sgd(undefined as never))).toBe('INVALID_ARGUMENT');
    expect(code(() => adam({ beta1: 1 }))).toBe('INVALID_ARGUMENT');
    const opt = createShardedOptimizer(c, [new Float32Array(2)], sgd({ lr: 1 }));
    await expect(opt.step([new Float32Array(3)])).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
    await expect(opt.step([])).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
    opt.destroy();
    await expect(opt.step([new Float32Array(2)])).rejects.toMatchObject({ code: 'ABORTED' });
  });
});
