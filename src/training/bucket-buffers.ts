// The buckets' buffers in the node's shared memory, and the dtype they cross the wire in:
// gradients are accumulated in an f32 buffer per bucket, and with a bf16 / f16 wire they are
// scaled, rounded into a half buffer, reduced there and widened back into the f32 one.

import type { Dtype } from '../core/dtypes.js';
import type { Work } from '../engine/work.js';
import { convertDtype } from '../layouts/convert.js';
import type { BucketPlan } from './buckets.js';
import type { TrainingComm } from './comm.js';
import type { WireDtype } from './data-parallel-options.js';

/** One bucket's buffers and its state in the current step. */
export interface Bucket {
  readonly plan: BucketPlan;
  /** Gradients in f32: accumulated here, reduced here when the wire is f32. */
  readonly f32: Float32Array;
  /** The wire buffer when the wire is a half dtype. */
  readonly half: { data: Uint16Array; dtype: Dtype } | undefined;
  /** Parameters of the bucket not yet handed in this micro-batch. */
  pending: number;
  work: Work | undefined;
}

/** The buffers of every bucket of `plans`, from `comm.alloc()`; on a failure, those made are freed. */
export function allocBuckets(comm: TrainingComm, plans: readonly BucketPlan[], wire: WireDtype): Bucket[] {
  const list: Bucket[] = [];
  try {
    for (const plan of plans) {
      const f32 = comm.alloc('f32', plan.count) as Float32Array;
      let half: Bucket['half'];
      try {
        half = wire === 'f32' ? undefined : (comm.alloc(wire, plan.count) as Bucket['half']);
      } catch (e) {
        comm.free(f32);
        throw e;
      }
      list.push({ plan, f32, half, pending: plan.params.length, work: undefined });
    }
  } catch (e) {
    freeBuckets(comm, list);
    throw e;
  }
  return list;
}

/** Frees every bucket's buffers and empties `list`. */
export function freeBuckets(comm: TrainingComm, list: Bucket[]): void {
  for (const b of list) {
    comm.free(b.f32);
    if (b.half) comm.free(b.half);
  }
  list.length = 0;
}

/** Issues the allReduce of bucket `b`'s f32 gradients in the wire dtype: the mean over ranks with `average`. */
export function reduceBucket(
  comm: TrainingComm,
  b: Bucket,
  wire: WireDtype,
  average: boolean,
  timeoutMs: number | undefined,
): Work {
  const opts = { timeoutMs };
  if (b.half) {
    // Scaled before the rounding, as torch's fp16 compression hook does: the sum over ranks
    // then stays within the half type's range wherever the gradients themselves do.
    if (average && comm.size > 1) scale(b.f32, 1 / comm.size);
    convertDtype(b.f32, wire, { out: b.half });
    return comm.allReduce(b.half, { ...opts, op: 'sum' });
  }
  return comm.allReduce(b.f32, { ...opts, op: average ? 'avg' : 'sum' });
}

/** After the reduction: the result in bucket `b`'s f32 buffer (widened from the wire buffer of a half wire). */
export function widenBucket(b: Bucket): void {
  if (b.half) convertDtype(b.half, 'f32', { out: b.f32 });
}

function scale(x: Float32Array, f: number): void {
  for (let j = 0; j < x.length; j++) x[j] *= f;
}
