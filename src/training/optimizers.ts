// Element-wise optimizer updates for createShardedOptimizer. Each works on any contiguous slice
// of the flattened parameters, with state sized to that slice: given a rank's shard, it holds
// the state of that shard only, and its results equal the same update applied to the whole vector.

import { fail } from '../core/errors.js';
import { checkOptions, number, type OptionSpec } from '../core/options.js';

/**
 * An optimizer's state for one slice of the parameters: whatever the update keeps between
 * steps (typed arrays as long as the slice, scalars). It starts empty; the update fills it on
 * its first step.
 */
export type OptimizerState = Record<string, unknown>;

/**
 * One optimizer step over a slice: updates `param` in place from `grad` (the reduced gradient
 * of the same elements), keeping what it needs in `state`. `step` counts from 1.
 */
export type UpdateFn = (param: Float32Array, grad: Float32Array, state: OptimizerState, step: number) => void;

/** Options of `sgd`. */
export interface SgdOptions {
  /** The learning rate. */
  lr: number;
  /** Momentum (default 0: plain SGD), as torch.optim.SGD: buf = momentum·buf + grad, param −= lr·buf. */
  momentum?: number;
}

/** Options of `adam`. */
export interface AdamOptions {
  /** The learning rate (default 1e-3). */
  lr?: number;
  /** Decay of the first moment (default 0.9). */
  beta1?: number;
  /** Decay of the second moment (default 0.999). */
  beta2?: number;
  /** Added to the denominator (default 1e-8). */
  eps?: number;
}

const SGD_OPTIONS = { lr: number(0, Number.MAX_VALUE), momentum: number(0, 1) } as const satisfies OptionSpec;
const ADAM_OPTIONS = {
  lr: number(0, Number.MAX_VALUE),
  beta1: number(0, 0.999999999),
  beta2: number(0, 0.999999999),
  eps: number(0, Number.MAX_VALUE),
} as const satisfies OptionSpec;

/** Stochastic gradient descent with optional momentum (state: one momentum buffer when momentum > 0). */
export function sgd(options: SgdOptions): UpdateFn {
  const o = checkOptions<SgdOptions>('sgd', options, SGD_OPTIONS, '{ lr: 0.1, momentum: 0.9 }');
  if (options === undefined || o.lr === undefined)
    fail('INVALID_ARGUMENT', 'sgd: option lr (the learning rate) is required, e.g. sgd({ lr: 0.1 })', {
      option: 'lr',
    });
  const lr = o.lr;
  const momentum = o.momentum ?? 0;
  return (param, grad, state) => {
    if (momentum === 0) {
      for (let i = 0; i < param.length; i++) param[i] -= lr * grad[i];
      return;
    }
    let buf = state.momentum as Float32Array | undefined;
    if (!buf) {
      buf = state.momentum = Float32Array.from(grad); // torch: the first step's buffer is the gradient
    } else {
      for (let i = 0; i < buf.length; i++) buf[i] = momentum * buf[i] + grad[i];
    }
    for (let i = 0; i < param.length; i++) param[i] -= lr * buf[i];
  };
}

/** Adam (Kingma and Ba) with bias correction (state: the first and second moments, f32 each). */
export function adam(options?: AdamOptions): UpdateFn {
  const o = checkOptions<AdamOptions>('adam', options, ADAM_OPTIONS, '{ lr: 0.001, beta1: 0.9 }');
  const lr = o.lr ?? 1e-3;
  const beta1 = o.beta1 ?? 0.9;
  const beta2 = o.beta2 ?? 0.999;
  const eps = o.eps ?? 1e-8;
  return (param, grad, state, step) => {
    const m = (state.m ??= new Float32Array(param.length)) as Float32Array;
    const v = (state.v ??= new Float32Array(param.length)) as Float32Array;
    const c1 = 1 - beta1 ** step;
    const c2 = 1 - beta2 ** step;
    for (let i = 0; i < param.length; i++) {
      const g = grad[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      param[i] -= (lr * (m[i] / c1)) / (Math.sqrt(v[i] / c2) + eps);
    }
  };
}

/** Bytes of the typed arrays an optimizer state holds (its own values, and arrays of them). */
export function stateBytes(state: OptimizerState): number {
  let n = 0;
  const count = (v: unknown) => {
    if (ArrayBuffer.isView(v)) n += v.byteLength;
    else if (Array.isArray(v)) v.forEach(count);
  };
  Object.values(state).forEach(count);
  return n;
}
