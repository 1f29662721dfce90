// Data-parallel gradient reduction on ranks of one node in this thread: the buckets (their
// order, a parameter larger than a bucket, empty parameters), training a small model that must
// match the single-process run on the same global batch, accumulation over micro-batches, the
// refusal when ranks disagree on when to synchronise, and gradients that cross the wire in bf16
// and f16 within the bound docs/training.md states. test/training/launch.test.ts runs the same
// features under every launch form.
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/index.js';
import { planBuckets } from '../../src/training/buckets.js';
import { createDataParallel, type DataParallel } from '../../src/training/data-parallel.js';
import { caught } from '../helpers/caught.js';
// @ts-expect-error: a plain-JS model shared with the rank scripts, without declarations
import { gradients, initParams, makeData, maxDiff, SIZES, sgdStep, shardOf } from './fixtures/model.mjs';
import { onAll, onEvery, world } from './fixtures/world.js';

const LR = 0.2;
const STEPS = 4;
const BATCH = 24; // divisible by 2, 3 and 4 ranks

type Grads = { grads: Float32Array[]; loss: number };
const grad = gradients as (p: Float32Array[], b: unknown[], scale?: number) => Grads;

/** The single-process run: STEPS of SGD on the whole batch of each step. */
function reference(steps = STEPS): Float32Array[] {
  const p = initParams(1) as Float32Array[];
  for (let s = 0; s < steps; s++) sgdStep(p, grad(p, makeData(100 + s, BATCH)).grads, LR);
  return p;
}

describe('buckets', () => {
  it('fill from the last parameter; a parameter over the cap is alone; empty ones are in none', () => {
    expect(planBuckets(SIZES, 10)).toEqual([
      { params: [5, 4], offsets: [0, 1], count: 4 },
      { params: [3], offsets: [0], count: 21 },
      { params: [1], offsets: [0], count: 7 },
      { params: [0], offsets: [0], count: 35 },
    ]);
    expect(planBuckets(SIZES, 1000)).toEqual([{ params: [5, 4, 3, 1, 0], offsets: [0, 1, 4, 25, 32], count: 67 }]);
    expect(planBuckets([0, 0], 4)).toEqual([]);
    expect(planBuckets([3, 3, 3], 6)).toEqual([
      { params: [2, 1], offsets: [0, 3], count: 6 },
      { params: [0], offsets: [0], count: 3 },
    ]);
  });

  it("bucketBytes counts the wire dtype's bytes", () => {
    const [c] = world(1);
    const p = initParams(1) as Float32Array[];
    const counts = (o: Parameters<typeof createDataParallel>[2]) => {
      const dp = createDataParallel(c, p, o);
      dp.destroy();
      return dp.buckets.map((b) => b.count);
    };
    expect(counts({ bucketBytes: 64 })).toEqual([4, 21, 7, 35]);
    expect(counts({ bucketBytes: 64, wireDtype: 'bf16' })).toEqual([32, 35]);
    expect(counts({ bucketBytes: 80, wireDtype: 'f16' })).toEqual([32, 35]);
  });
});

/** Each rank trains STEPS steps on its shard of each global batch through `step`; returns its parameters. */
async function train(
  comms: Communicator[],
  opts: Parameters<typeof createDataParallel>[2],
  step: (dp: DataParallel, p: Float32Array[], rank: number, s: number) => Promise<void>,
): Promise<Float32Array[][]> {
  return onAll(comms, async (c, r) => {
    // Different starting points on each rank: the broadcast must make them equal.
    const p = initParams(r === 0 ? 1 : 50 + r) as Float32Array[];
    const dp = createDataParallel(c, p, opts);
    await dp.broadcastParameters();
    for (let s = 0; s < STEPS; s++) await step(dp, p, r, s);
    dp.destroy();
    return p;
  });
}

describe('data-parallel training equals the single-process run on the global batch', () => {
  const want = reference();
  for (const n of [2, 3, 4]) {
    for (const bucketBytes of [undefined, 40]) {
      it(`${n} ranks, ${bucketBytes ? `${bucketBytes}-byte buckets (4 of them)` : 'one bucket'}: reduceGradients`, async () => {
        const got = await train(world(n), { bucketBytes }, async (dp, p, r, s) => {
          const { grads } = grad(p, shardOf(makeData(100 + s, BATCH), r, n));
          await dp.reduceGradients(grads);
          sgdStep(p, grads, LR);
        });
        for (const p of got) expect(maxDiff(p, want)).toBeLessThanOrEqual(1e-5);
      });
    }
  }

  it('4 ranks, gradients handed one by one as a backward pass makes them: each bucket goes out at once', async () => {
    const issuedBeforeSync: number[][] = [];
    const got = await train(world(4), { bucketBytes: 40 }, async (dp, p, r, s) => {
      const { grads } = grad(p, shardOf(makeData(100 + s, BATCH), r, 4));
      const before = dp.stats().opsIssued;
      const seen: number[] = [];
      for (let i = grads.length - 1; i >= 0; i--) {
        dp.gradientReady(i, grads[i]);
        seen.push(dp.stats().opsIssued - before);
      }
      if (r === 0) issuedBeforeSync.push(seen);
      const out = await dp.synchronize();
      expect(out[0]).toBe(grads[0]); // written back into the arrays handed in
      sgdStep(p, grads, LR);
    });
    // s, then b2: bucket 0 complete (the step's check and its allReduce); w2: bucket 1; the
    // empty parameter: nothing; b1: bucket 2; w1: bucket 3.
    for (const seen of issuedBeforeSync) expect(seen).toEqual([0, 2, 3, 3, 4, 5]);
    for (const p of got) expect(maxDiff(p, want)).toBeLessThanOrEqual(1e-5);
  });

  it('gradients handed first to last: buckets still go out in their order (the last one completes them all)', async () => {
    const got = await train(world(2), { bucketBytes: 40 }, async (dp, p, r, s) => {
      const { grads } = grad(p, shardOf(makeData(100 + s, BATCH), r, 2));
      const before = dp.stats().opsIssued;
      for (let i = 0; i < grads.length - 1; i++) dp.gradientReady(i, grads[i]);
      expect(dp.stats().opsIssued - before).toBe(0);
      dp.gradientReady(grads.length - 1, grads[grads.length - 1]);
      expect(dp.stats().opsIssued - before).toBe(5);
      await dp.synchronize();
      sgdStep(p, grads, LR);
    });
    for (const p of got) expect(maxDiff(p, want)).toBeLessThanOrEqual(1e-5);
  });

  it('average: false sums; out receives the result and the handed arrays are left alone; stats count the step', async () => {
    const comms = world(3);
    const res = await onAll(comms, async (c, r) => {
      const dp = createDataParallel(c, [new Float32Array(5), new Float32Array(0), new Float32Array(2)], {
        average: false,
      });
      const g = [Float32Array.of(1, 2, 3, 4, r), new Float32Array(0), Float32Array.of(r, -r)];
      const out = [new Float32Array(5), new Float32Array(0), new Float32Array(2)];
      const back = await dp.reduceGradients(g, out);
      expect(back).toEqual(out);
      expect(Array.from(g[0])).toEqual([1, 2, 3, 4, r]);
      const st = dp.stats();
      dp.destroy();
      return { out: out.map((x) => Array.from(x)), st };
    });
    for (const { out, st } of res) {
      expect(out).toEqual([[3, 6, 9, 12, 3], [], [3, -3]]);
      expect(st).toMatchObject({ buckets: 1, steps: 1, refused: 0, opsIssued: 2, bytesReduced: 28 });
      expect(st.waitMs).toBeGreaterThanOrEqual(0);
      expect(st.commMs).toBeGreaterThanOrEqual(0);
    }
  });
});

describe('accumulation over micro-batches', () => {
  // torch's semantics: micro-batches add up, ranks are averaged; the caller scales each
  // micro-batch's loss by 1/k, so k micro-batches give the large batch's mean gradient.
  const want = reference();
  for (const n of [2, 3]) {
    it(`${n} ranks, k = 2 under noSync and the last one synchronizing: the large-batch step`, async () => {
      const k = 2;
      const got = await train(world(n), { bucketBytes: 40 }, async (dp, p, r, s) => {
        const mine = shardOf(makeData(100 + s, BATCH), r, n);
        const micro = Array.from({ length: k }, (_, m) => shardOf(mine, m, k));
        for (let m = 0; m < k - 1; m++) {
          const { grads } = grad(p, micro[m], 1 / k);
          dp.noSync(() => {
            for (let i = grads.length - 1; i >= 0; i--) dp.gradientReady(i, grads[i]);
          });
          expect(dp.stats().opsIssued).toBe(s * 5); // nothing issued while accumulating
        }
        const { grads } = grad(p, micro[k - 1], 1 / k);
        const out = await dp.reduceGradients(grads);
        sgdStep(p, out, LR);
      });
      for (const p of got) expect(maxDiff(p, want)).toBeLessThanOrEqual(1e-5);
    });
  }

  it('4 ranks, k = 3 with accumulate() and an async noSync, then synchronize() alone', async () => {
    const k = 3;
    const got = await train(world(4), {}, async (dp, p, r, s) => {
      const mine = shardOf(makeData(100 + s, BATCH), r, 4);
      const micro = Array.from({ length: k }, (_, m) => grad(p, shardOf(mine, m, k), 1 / k).grads);
      dp.accumulate(micro[0]);
      await dp.noSync(async () => {
        await new Promise((res) => setTimeout(res, 1));
        for (let i = 0; i < micro[1].length; i++) dp.gradientReady(i, micro[1][i]);
      });
      dp.accumulate(micro[2]);
      const out = await dp.synchronize();
      expect(out[3]).toBe(micro[2][3]); // the arrays last handed in
      sgdStep(p, out, LR);
    });
    for (const p of got) expect(maxDiff(p, want)).toBeLessThanOrEqual(1e-5);
  });
});

describe('ranks that disagree on when to synchronise', () => {
  /** The last rank accumulates one micro-batch before its step; the others synchronize each. */
  async function disagree(n: number) {
    const comms = world(n, 20_000);
    return onAll(comms, async (c, r) => {
      const p = [new Float32Array(6), new Float32Array(0), new Float32Array(3)];
      const dp = createDataParallel(c, p, { bucketBytes: 12 });
      const g = () => [new Float32Array(6).fill(r + 1), new Float32Array(0), new Float32Array(3).fill(-(r + 1))];
      if (r === n - 1) dp.accumulate(g());
      const err = await dp.reduceGradients(g()).then(
        () => undefined,
        (e) => e,
      );
      // Everyone goes on: one step on which all agree.
      const out = await dp.reduceGradients(g());
      const st = dp.stats();
      dp.destroy();
      return { err, out: out.map((x) => Array.from(x)), st };
    });
  }

  for (const n of [2, 3]) {
    it(`${n} ranks: MISMATCH on every rank, no gradient mixed, and the next step runs`, async () => {
      const res = await disagree(n);
      const mean = (n + 1) / 2;
      res.forEach(({ err, out, st }, r) => {
        expect(err, `rank ${r}`).toMatchObject({
          code: 'MISMATCH',
          details: { field: 'microBatches', microBatches: [1, 2], local: r === n - 1 ? 2 : 1, rank: r },
        });
        expect(err.message).toMatch(/accumulated 1 to 2 micro-batches/);
        expect(out).toEqual([new Array(6).fill(mean), [], new Array(3).fill(-mean)]);
        expect(st).toMatchObject({ steps: 2, refused: 1 });
      });
    });
  }

  it('ranks whose options differ (average on some, not on others): MISMATCH naming the parameters', async () => {
    const comms = world(2, 20_000);
    const res = await onEvery(comms, async (c, r) => {
      const dp = createDataParallel(c, [new Float32Array(4)], { average: r === 0 });
      return dp.reduceGradients([new Float32Array(4).fill(1)]);
    });
    for (const e of res) expect(e).toMatchObject({ code: 'MISMATCH', details: { field: 'parameters' } });
  });
});

describe('gradients on the wire in half precision', () => {
  /** Unit roundoff: 2^-8 for bf16 (8 significant bits), 2^-11 for f16 (11). */
  const U = { bf16: 2 ** -8, f16: 2 ** -11 } as const;
  const measured: string[] = [];

  for (const wire of ['bf16', 'f16'] as const) {
    for (const n of [2, 3, 4]) {
      it(`${wire}, ${n} ranks: every element within ((1+u)^(n+1) − 1) · mean |g| of the exact mean`, async () => {
        const count = 3000;
        const gOf = (r: number) =>
          Float32Array.from({ length: count }, (_, j) => Math.sin(j * 0.37 + r * 1.3) * (1 + (j % 7)) * 0.01);
        const outs = await onAll(world(n), async (c, r) => {
          const dp = createDataParallel(c, [new Float32Array(count)], { wireDtype: wire, bucketBytes: 1024 });
          const [out] = await dp.reduceGradients([gOf(r)]);
          dp.destroy();
          return out;
        });
        const all = Array.from({ length: n }, (_, r) => gOf(r));
        const factor = (1 + U[wire]) ** (n + 1) - 1;
        let worst = 0;
        for (let j = 0; j < count; j++) {
          let exact = 0;
          let abs = 0;
          for (const g of all) {
            exact += g[j];
            abs += Math.abs(g[j]);
          }
          exact /= n;
          abs /= n;
          const bound = factor * abs + (wire === 'f16' ? n * 2 ** -25 : 0);
          for (const o of outs) {
            expect(Math.abs(o[j] - exact)).toBeLessThanOrEqual(bound);
            worst = Math.max(worst, Math.abs(o[j] - exact) / abs);
          }
        }
        expect(outs.every((o) => o.every((v, j) => v === outs[0][j]))).toBe(true); // the same on every rank
        measured.push(
          `${wire} ${n} ranks: max |error| / mean|g| = ${worst.toExponential(2)} (bound ${factor.toExponential(2)})`,
        );
      });
    }
  }

  it('reports the measured errors', () => {
    console.log(measured.join('\n'));
  });
});

describe('refusals', () => {
  it('bad arguments are refused with a code, and a refused call changes nothing', async () => {
    const [c] = world(1);
    const code = (f: () => unknown) => caught(f).code;
    expect(code(() => createDataParallel({} as never, []))).toBe('INVALID_ARGUMENT');
    expect(code(() => createDataParallel(c, [[1, 2]] as never))).toBe('INVALID_ARGUMENT');
    expect(code(() => createDataParallel(c, [], { bucketbytes: 4 } as never))).toBe('INVALID_ARGUMENT');
    expect(code(() => createDataParallel(c, [], { wireDtype: 'f64' as never }))).toBe('INVALID_ARGUMENT');
    expect(code(() => createDataParallel(c, [], { root: 1 }))).toBe('INVALID_ARGUMENT');
    const dp = createDataParallel(c, [new Float32Array(3), new Float32Array(2)], { bucketBytes: 8 });
    expect(code(() => dp.gradientReady(2, new Float32Array(2)))).toBe('INVALID_ARGUMENT');
    expect(code(() => dp.gradientReady(1, new Float32Array(3)))).toBe('SIZE_MISMATCH');
    expect(code(() => dp.gradientReady(1, new Float64Array(2) as never))).toBe('INVALID_ARGUMENT');
    await expect(dp.reduceGradients([new Float32Array(3)])).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
    expect(dp.stats().opsIssued).toBe(0);
    dp.gradientReady(1, new Float32Array(2)); // bucket 0: issued at once
    expect(code(() => dp.gradientReady(1, new Float32Array(2)))).toBe('BUFFER_BUSY');
    expect(code(() => dp.noSync(() => undefined))).toBe('INVALID_ARGUMENT');
    expect(code(() => dp.destroy())).toBe('INVALID_ARGUMENT');
    await expect(dp.broadcastParameters()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const out = await dp.synchronize();
    expect(out.map((x) => x.length)).toEqual([3, 2]); // parameter 0 never handed: a new array of zeros
    expect(Array.from(out[0])).toEqual([0, 0, 0]);
    await expect(dp.noSync(() => dp.synchronize())).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    dp.destroy();
    await expect(dp.synchronize()).rejects.toMatchObject({ code: 'ABORTED' });
  });
});
