// The TensorFlow.js glue against a small fake of TF.js that behaves as its CPU backend does:
// dataSync() returns the tensor's own storage, tf.tensor(array) keeps the array itself, and
// assign() makes the variable share the given tensor's storage. Training the test model through
// it must match one process; no tensor the caller holds may be written, and no tensor it gets
// may share storage with webccl's buffers or with another result. Real TF.js is not a
// dependency: the glue is duck-typed.
import { describe, expect, it } from 'vitest';
import { type TfTensorLike, tfjsDataParallel } from '../../src/training/tfjs.js';
// @ts-expect-error: a plain-JS model shared with the rank scripts, without declarations
import { gradients, initParams, makeData, maxDiff, NAMES, sgdStep, shardOf } from './fixtures/model.mjs';
import { onAll, world } from './fixtures/world.js';

class FakeTensor implements TfTensorLike {
  disposed = false;
  constructor(
    public values: Float32Array | Int32Array,
    readonly shape: number[],
    readonly dtype: string = 'float32',
  ) {}
  dataSync() {
    if (this.disposed) throw new Error('Tensor is disposed');
    return this.values; // its own storage, as the CPU backend gives it
  }
  dispose() {
    this.disposed = true;
  }
}

class FakeVariable extends FakeTensor {
  constructor(
    readonly name: string,
    values: Float32Array | Int32Array,
    shape: number[],
    dtype = 'float32',
  ) {
    super(values, shape, dtype);
  }
  assign(t: TfTensorLike) {
    this.values = (t as FakeTensor).values; // shares the storage, as tf.Variable.assign does
  }
}

/** Every array a fake tf.tensor was made from: none may be reused, none may lie in shared memory. */
const made: Float32Array[] = [];
const tf = {
  tensor: (values: Float32Array, shape?: number[], dtype?: 'float32') => {
    made.push(values);
    return new FakeTensor(values, shape ?? [values.length], dtype); // kept, not copied
  },
};

const shapeOf = (n: number) => (n === 0 ? [0] : n % 7 === 0 && n > 7 ? [n / 7, 7] : [n]);
const variablesOf = (params: Float32Array[]) =>
  params.map((p, i) => new FakeVariable((NAMES as string[])[i], p.slice(), shapeOf(p.length)));

describe('tfjsDataParallel', () => {
  it('2 ranks: broadcast, then training through reduceGrads matches one process; inputs stay unwritten', async () => {
    const steps = 3;
    const lr = 0.2;
    const grad = gradients as (p: Float32Array[], b: unknown[]) => { grads: Float32Array[] };
    const ref = initParams(1) as Float32Array[];
    for (let s = 0; s < steps; s++) sgdStep(ref, grad(ref, makeData(100 + s, 24)).grads, lr);
    made.length = 0;
    const res = await onAll(world(2), async (c, r) => {
      const vars = variablesOf(initParams(r === 0 ? 1 : 77) as Float32Array[]);
      const dp = tfjsDataParallel(tf, c, vars);
      const before = vars.map((v) => v.values);
      await dp.broadcastVariables();
      vars.forEach((v, i) => {
        expect(v.values).not.toBe(before[i]); // assigned a fresh copy
        expect(v.values.buffer).toBeInstanceOf(ArrayBuffer); // not a view of shared memory
      });
      const results: Record<string, TfTensorLike>[] = [];
      for (let s = 0; s < steps; s++) {
        const p = vars.map((v) => v.values as Float32Array);
        const g = grad(p, shardOf(makeData(100 + s, 24), r, 2)).grads;
        const gradMap = Object.fromEntries(vars.map((v, i) => [v.name, new FakeTensor(g[i], v.shape)]));
        const copies = g.map((x) => x.slice());
        const reduced = await dp.reduceGrads({
          value: new FakeTensor(Float32Array.of(0), []),
          grads: gradMap,
        } as never);
        g.forEach((x, i) => expect(x).toEqual(copies[i])); // the gradient tensors' storage is only read
        expect(Object.keys(reduced).sort()).toEqual([...(NAMES as string[])].sort());
        // An optimizer step as TF.js does it: new tensors for the variables.
        vars.forEach((v) => {
          const gv = reduced[v.name].dataSync() as Float32Array;
          v.assign(
            tf.tensor(
              Float32Array.from(v.values, (x, j) => x - lr * gv[j]),
              v.shape,
            ),
          );
        });
        results.push(reduced);
      }
      // Results made earlier are unchanged by later steps: nothing of webccl holds their storage.
      const first = results[0][NAMES[3]].dataSync() as Float32Array;
      return { params: vars.map((v) => v.values as Float32Array), first: first.slice(), firstNow: first, dp };
    });
    for (const { params, first, firstNow, dp } of res) {
      expect(maxDiff(params, ref)).toBeLessThanOrEqual(1e-5);
      expect(firstNow).toEqual(first);
      expect(dp.stats().steps).toBe(steps);
      dp.destroy();
    }
    const buffers = new Set(made.map((a) => a.buffer));
    expect(buffers.size).toBe(made.length); // every tensor made from an array of its own
    for (const a of made) expect(a.buffer).toBeInstanceOf(ArrayBuffer);
  });

  it('applyGradients hands the optimizer the reduced gradients and disposes them; accumulate adds micro-batches', async () => {
    const res = await onAll(world(3), async (c, r) => {
      const vars = [new FakeVariable('a', new Float32Array(4), [2, 2]), new FakeVariable('b', new Float32Array(1), [])];
      const dp = tfjsDataParallel(tf, c, vars, { average: false });
      dp.accumulate({ a: new FakeTensor(new Float32Array(4).fill(r), [2, 2]) });
      let seen: Record<string, number[]> = {};
      const given: FakeTensor[] = [];
      await dp.applyGradients(
        {
          applyGradients: (g) => {
            seen = Object.fromEntries(Object.entries(g).map(([k, t]) => [k, Array.from(t.dataSync())]));
            given.push(...(Object.values(g) as FakeTensor[]));
          },
        },
        { b: new FakeTensor(Float32Array.of(1), []) },
      );
      expect(given.every((t) => t.disposed)).toBe(true);
      dp.destroy();
      return seen;
    });
    // a: 0 + 1 + 2 accumulated, no gradient in the last micro-batch; b: 1 on every rank.
    for (const seen of res) expect(seen).toEqual({ a: [3, 3, 3, 3], b: [3] });
  });

  it('refuses what is not TF.js values, saying what to pass', async () => {
    const [c] = world(1);
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e as { code: string; message: string };
      }
      return { code: 'none', message: '' };
    };
    expect(err(() => tfjsDataParallel({} as never, c, [])).message).toMatch(/TensorFlow.js namespace/);
    expect(err(() => tfjsDataParallel(tf, c, { w: 1 } as never)).message).toMatch(/array of tf.Variable/);
    expect(err(() => tfjsDataParallel(tf, c, [{ name: 'w', shape: [1] }] as never)).message).toMatch(
      /not a tf.Variable.*trainableWeights/,
    );
    const mixed = [
      new FakeVariable('w', new Float32Array(2), [2]),
      new FakeVariable('i', new Int32Array(2), [2], 'int32'),
    ];
    expect(err(() => tfjsDataParallel(tf, c, mixed))).toMatchObject({ code: 'INVALID_DTYPE' });
    expect(err(() => tfjsDataParallel(tf, c, [mixed[0], mixed[0]])).message).toMatch(/two variables are named "w"/);
    const dp = tfjsDataParallel(tf, c, [mixed[0]]);
    const w = new FakeTensor(new Float32Array(2), [2]);
    await expect(dp.reduceGrads({ w: [1, 2] } as never)).rejects.toThrow(/not a tensor; pass what tf.variableGrads/);
    await expect(dp.reduceGrads([w] as never)).rejects.toThrow(/got an array/);
    await expect(dp.reduceGrads(null as never)).rejects.toThrow(/pass what tf.variableGrads/);
    await expect(dp.reduceGrads({ v: w })).rejects.toThrow(/names no variable/);
    await expect(dp.reduceGrads({ w: new FakeTensor(new Float32Array(3), [3]) })).rejects.toMatchObject({
      code: 'SIZE_MISMATCH',
    });
    await expect(dp.reduceGrads({ w: new FakeTensor(new Int32Array(2), [2], 'int32') as never })).rejects.toMatchObject(
      {
        code: 'INVALID_DTYPE',
      },
    );
    await expect(dp.applyGradients({} as never, { w })).rejects.toThrow(/TF.js optimizer/);
    expect(dp.stats().opsIssued).toBe(0); // every refusal came before anything moved
    const out = await dp.reduceGrads({ grads: { w } } as never);
    expect(Array.from(out.w.dataSync())).toEqual([0, 0]);
    dp.destroy();
  });
});
