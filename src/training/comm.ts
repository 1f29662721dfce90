// What the training helpers need of a communicator, and the argument checks they share. They
// take any object with these members (a Communicator, a group made by split or createGroup),
// so they depend on the public calls only, never on how the communicator is built.

import type { Dtype, DtypeName, ReduceOp } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import { showValue } from '../core/options.js';
import type { BufferArg, TypedArray } from '../engine/buffers.js';
import type { Work } from '../engine/work.js';

/**
 * The members of a `Communicator` the training helpers call: pass the world communicator
 * (`initCommGroup()`) or a group's (`split`, `createGroup`) — the data-parallel group when a job
 * also splits its model.
 */
export interface TrainingComm {
  /** This rank's number in the communicator. */
  readonly rank: number;
  /** How many ranks the communicator has. */
  readonly size: number;
  /** As `Communicator.allReduce`. */
  allReduce(x: BufferArg, opts?: { op?: ReduceOp; timeoutMs?: number }): Work;
  /** As `Communicator.broadcast`. */
  broadcast(x: BufferArg, opts?: { root?: number; timeoutMs?: number }): Work;
  /** As `Communicator.reduceScatter`. */
  reduceScatter(out: BufferArg, input: BufferArg, opts?: { op?: ReduceOp; timeoutMs?: number }): Work;
  /** As `Communicator.allGather`. */
  allGather(out: BufferArg, input: BufferArg, opts?: { timeoutMs?: number }): Work;
  /** As `Communicator.alloc`: a buffer in the node's shared memory. */
  alloc(dtype: DtypeName, count: number): TypedArray | { data: Uint16Array; dtype: Dtype };
  /** As `Communicator.free`. */
  free(x: BufferArg): void;
}

const MEMBERS = ['allReduce', 'broadcast', 'reduceScatter', 'allGather', 'alloc', 'free'] as const;

/** `comm` as a TrainingComm, or INVALID_ARGUMENT saying what to pass. */
export function checkComm(where: string, comm: unknown): TrainingComm {
  const c = comm as Partial<Record<string, unknown>> | null;
  const missing =
    typeof c !== 'object' || c === null
      ? ['rank', 'size', ...MEMBERS]
      : [
          ...(['rank', 'size'] as const).filter((k) => !Number.isInteger(c[k])),
          ...MEMBERS.filter((k) => typeof c[k] !== 'function'),
        ];
  if (missing.length)
    fail(
      'INVALID_ARGUMENT',
      `${where}: comm must be a Communicator (what initCommGroup() returns, or a group from split or createGroup), got ${showValue(comm)}`,
      { missing },
    );
  return comm as TrainingComm;
}

/** `params` as a list of Float32Arrays, or INVALID_ARGUMENT naming the first that is not one. */
export function checkParams(where: string, params: unknown): Float32Array[] {
  if (!Array.isArray(params))
    fail(
      'INVALID_ARGUMENT',
      `${where}: params must be an array of Float32Array (one per parameter tensor of the model), got ${showValue(params)}`,
      { option: 'params' },
    );
  params.forEach((p, i) => {
    if (!(p instanceof Float32Array))
      fail('INVALID_ARGUMENT', `${where}: params[${i}] must be a Float32Array, got ${showValue(p)}`, { index: i });
  });
  return params as Float32Array[];
}

/**
 * `grads` as one Float32Array per parameter, each as long as its parameter; INVALID_ARGUMENT or
 * SIZE_MISMATCH naming the first that is wrong. Checked whole before anything is used, so a
 * refused call changes nothing.
 */
export function checkGradList(where: string, grads: unknown, sizes: readonly number[]): Float32Array[] {
  if (!Array.isArray(grads))
    fail(
      'INVALID_ARGUMENT',
      `${where}: grads must be an array of Float32Array, one per parameter (${sizes.length}), got ${showValue(grads)}`,
    );
  if (grads.length !== sizes.length)
    fail('SIZE_MISMATCH', `${where}: ${grads.length} gradients for ${sizes.length} parameters`, {
      expected: sizes.length,
      actual: grads.length,
    });
  grads.forEach((g, i) => checkGrad(where, i, g, sizes[i]));
  return grads as Float32Array[];
}

/** One gradient: a Float32Array of `size` elements. */
export function checkGrad(where: string, i: number, g: unknown, size: number): Float32Array {
  if (!(g instanceof Float32Array))
    fail('INVALID_ARGUMENT', `${where}: gradient ${i} must be a Float32Array, got ${showValue(g)}`, { index: i });
  if (g.length !== size)
    fail('SIZE_MISMATCH', `${where}: gradient ${i} holds ${g.length} elements; parameter ${i} has ${size}`, {
      index: i,
      expected: size,
      actual: g.length,
    });
  return g;
}

/** Waits for every op in order (they end in issue order) and returns the first failure, if any. */
export async function settle(works: readonly Work[]): Promise<unknown> {
  let first: unknown;
  for (const w of works) {
    try {
      await w.wait();
    } catch (e) {
      first ??= e;
    }
  }
  return first;
}
