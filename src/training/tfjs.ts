// Data-parallel training of TensorFlow.js variables, duck-typed (webccl does not depend on
// TF.js). Two facts of TF.js decide how values move: a tensor's dataSync() may return the
// tensor's own storage (the CPU backend does, and the WebGL backend once it has read a texture
// back), and tf.tensor(array) may keep the array as the new tensor's storage. So values are only
// ever read from dataSync() and copied into buffers of this file, and every tensor made here is
// made from a fresh array nothing else holds. docs/training.md has the details per backend.

import { fail } from '../core/errors.js';
import { showValue } from '../core/options.js';
import type { TrainingComm } from './comm.js';
import { createDataParallel, type DataParallelOptions, type DataParallelStats } from './data-parallel.js';

/** What the glue reads of a TF.js tensor. */
export interface TfTensorLike {
  /** The values, flat (only read: it may be the tensor's own storage). */
  dataSync(): ArrayLike<number>;
  /** The tensor's shape. */
  readonly shape: readonly number[];
  /** 'float32' for the tensors the glue takes. */
  readonly dtype?: string;
  /** Frees the tensor (TF.js tensors have it). */
  dispose?(): void;
}

/** What the glue uses of a `tf.Variable`. */
export interface TfVariableLike extends TfTensorLike {
  /** The name `tf.variableGrads` keys its gradient by. */
  readonly name: string;
  /** Sets the variable's value. */
  assign(value: TfTensorLike): void;
}

/** What the glue uses of the `tf` namespace: `tf.tensor`. */
export interface TfNamespaceLike {
  /** Makes a tensor of `values` (TF.js may keep the array itself as the tensor's storage). */
  tensor(values: Float32Array, shape?: number[], dtype?: 'float32'): TfTensorLike;
}

/** Gradients by variable name, as `tf.variableGrads(f).grads` gives them. */
export type TfGradMap = Record<string, TfTensorLike>;

/** What `tfjsDataParallel` returns. */
export interface TfjsDataParallel {
  /** Sets every rank's variables to the root's values (before training). */
  broadcastVariables(): Promise<void>;
  /**
   * The gradients averaged over ranks (by default), as new tensors keyed by variable name, one
   * for every variable (a variable missing from `grads` counts as a zero gradient). Takes what
   * `tf.variableGrads(f)` returns or its `grads`. The tensors given are only read; the caller
   * disposes both them and the result.
   */
  reduceGrads(grads: TfGradMap | { grads: TfGradMap }): Promise<Record<string, TfTensorLike>>;
  /** `reduceGrads`, then `optimizer.applyGradients(...)` with the result, which is then disposed. */
  applyGradients(
    optimizer: { applyGradients(g: Record<string, TfTensorLike>): unknown },
    grads: TfGradMap | { grads: TfGradMap },
  ): Promise<void>;
  /** A micro-batch that only accumulates (nothing is communicated until the next `reduceGrads`). */
  accumulate(grads: TfGradMap | { grads: TfGradMap }): void;
  /** The counters of the data-parallel object underneath. */
  stats(): DataParallelStats;
  /** Frees the buckets' shared memory. */
  destroy(): void;
}

const ACCEPTS =
  'pass what tf.variableGrads(f) returns ({ value, grads }) or its grads: an object of float32 tensors keyed by variable name';

/**
 * Data-parallel training of TF.js `variables` (each a float32 `tf.Variable`, the same list on
 * every rank) over `comm`: `tf` is the TF.js namespace (for `tf.tensor`), `options` those of
 * `createDataParallel`.
 */
export function tfjsDataParallel(
  tf: TfNamespaceLike,
  comm: TrainingComm,
  variables: TfVariableLike[],
  options?: DataParallelOptions,
): TfjsDataParallel {
  const where = 'tfjsDataParallel';
  if (typeof (tf as Partial<TfNamespaceLike> | null)?.tensor !== 'function')
    fail(
      'INVALID_ARGUMENT',
      `${where}: tf must be the TensorFlow.js namespace (import * as tf from '@tensorflow/tfjs'), got ${showValue(tf)}`,
      {
        option: 'tf',
      },
    );
  const vars = checkVariables(where, variables);
  const params = vars.map((v) => Float32Array.from(values(where, v, `variable ${JSON.stringify(v.name)}`)));
  const dp = createDataParallel(comm, params, options);
  const index = new Map(vars.map((v, i) => [v.name, i]));
  const sizes = params.map((p) => p.length);

  /** The gradients as this rank's own Float32Arrays, in variable order (zeros for a missing one). */
  const gradArrays = (what: string, input: unknown): Float32Array[] => {
    const map = gradMap(what, input);
    const out: (Float32Array | undefined)[] = new Array(vars.length).fill(undefined);
    for (const [name, t] of Object.entries(map)) {
      const i = index.get(name);
      if (i === undefined)
        fail(
          'INVALID_ARGUMENT',
          `${what}: gradient ${JSON.stringify(name)} names no variable given to tfjsDataParallel (known: ${[...index.keys()].join(', ')})`,
          { name },
        );
      const data = values(what, t, `gradient ${JSON.stringify(name)}`);
      if (data.length !== sizes[i])
        fail(
          'SIZE_MISMATCH',
          `${what}: gradient ${JSON.stringify(name)} holds ${data.length} values; its variable has ${sizes[i]}`,
          {
            name,
            expected: sizes[i],
            actual: data.length,
          },
        );
      // dataSync() may be the gradient tensor's own storage: the buckets copy it, never write it.
      out[i] = data instanceof Float32Array ? data : Float32Array.from(data);
    }
    return out.map((g, i) => g ?? new Float32Array(sizes[i]));
  };

  const reduceGrads = async (grads: TfGradMap | { grads: TfGradMap }) => {
    const gs = gradArrays('reduceGrads', grads);
    // Fresh arrays for the results: tf.tensor keeps them, so nothing here may hold them after.
    const fresh = sizes.map((n) => new Float32Array(n));
    const reduced = await dp.reduceGradients(gs, fresh);
    const out: Record<string, TfTensorLike> = {};
    vars.forEach((v, i) => {
      out[v.name] = tf.tensor(reduced[i], [...v.shape], 'float32');
    });
    return out;
  };

  return {
    async broadcastVariables() {
      vars.forEach((v, i) => params[i].set(values('broadcastVariables', v, `variable ${JSON.stringify(v.name)}`)));
      await dp.broadcastParameters();
      vars.forEach((v, i) => {
        const t = tf.tensor(params[i].slice(), [...v.shape], 'float32'); // a copy the variable may keep
        v.assign(t);
        t.dispose?.();
      });
    },
    reduceGrads,
    async applyGradients(optimizer, grads) {
      if (typeof (optimizer as { applyGradients?: unknown } | null)?.applyGradients !== 'function')
        fail(
          'INVALID_ARGUMENT',
          `applyGradients: optimizer must be a TF.js optimizer (tf.train.sgd(0.1), ...), got ${showValue(optimizer)}`,
        );
      const reduced = await reduceGrads(grads);
      try {
        optimizer.applyGradients(reduced);
      } finally {
        for (const t of Object.values(reduced)) t.dispose?.();
      }
    },
    accumulate(grads) {
      dp.accumulate(gradArrays('accumulate', grads));
    },
    stats: () => dp.stats(),
    destroy: () => dp.destroy(),
  };
}

function checkVariables(where: string, variables: unknown): TfVariableLike[] {
  if (!Array.isArray(variables))
    fail(
      'INVALID_ARGUMENT',
      `${where}: variables must be an array of tf.Variable (objects with name, shape, dataSync() and assign()), got ${showValue(variables)}`,
      { option: 'variables' },
    );
  const seen = new Set<string>();
  variables.forEach((v, i) => {
    const x = v as Partial<TfVariableLike> | null;
    if (
      typeof x?.dataSync !== 'function' ||
      typeof x.assign !== 'function' ||
      typeof x.name !== 'string' ||
      !Array.isArray(x.shape)
    )
      fail(
        'INVALID_ARGUMENT',
        `${where}: variables[${i}] is not a tf.Variable (it needs name, shape, dataSync() and assign()), got ${showValue(v)}; pass tf.variable(...)s, or a layers model's weights as model.trainableWeights.map((w) => w.val)`,
        { index: i },
      );
    if (x.dtype !== undefined && x.dtype !== 'float32')
      fail(
        'INVALID_DTYPE',
        `${where}: variable ${JSON.stringify(x.name)} has dtype ${x.dtype}; only float32 variables are trained: leave the others out of the list`,
        { index: i, dtype: x.dtype },
      );
    if (seen.has(x.name))
      fail(
        'INVALID_ARGUMENT',
        `${where}: two variables are named ${JSON.stringify(x.name)}; gradients are matched by name`,
        {
          index: i,
        },
      );
    seen.add(x.name);
  });
  return variables as TfVariableLike[];
}

/** The map of gradients from what tf.variableGrads returns or its grads; refusals say what to pass. */
function gradMap(where: string, input: unknown): TfGradMap {
  if (Array.isArray(input))
    fail(
      'INVALID_ARGUMENT',
      `${where}: got an array; ${ACCEPTS} (tf.grads returns a list in argument order: key it by variable name first)`,
    );
  if (typeof input !== 'object' || input === null)
    fail('INVALID_ARGUMENT', `${where}: got ${showValue(input)}; ${ACCEPTS}`);
  const o = input as Record<string, unknown>;
  const map = (
    'grads' in o &&
    typeof o.grads === 'object' &&
    o.grads !== null &&
    typeof (o.grads as TfTensorLike).dataSync !== 'function'
      ? o.grads
      : o
  ) as Record<string, unknown>;
  for (const [name, t] of Object.entries(map)) {
    if (typeof (t as Partial<TfTensorLike> | null)?.dataSync !== 'function')
      fail(
        'INVALID_ARGUMENT',
        `${where}: grads[${JSON.stringify(name)}] is ${showValue(t)}, not a tensor; ${ACCEPTS}`,
        {
          name,
        },
      );
  }
  return map as TfGradMap;
}

/** A float32 tensor's values (dataSync(): only read); INVALID_DTYPE for another dtype. */
function values(where: string, t: TfTensorLike, what: string): ArrayLike<number> {
  if (t.dtype !== undefined && t.dtype !== 'float32')
    fail('INVALID_DTYPE', `${where}: ${what} has dtype ${t.dtype}; ${ACCEPTS}`, { dtype: t.dtype });
  const data = t.dataSync();
  if (typeof data !== 'object' || data === null || typeof data.length !== 'number')
    fail('INVALID_ARGUMENT', `${where}: ${what}'s dataSync() returned ${showValue(data)}, not an array of numbers`);
  return data;
}
