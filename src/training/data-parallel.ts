// Data-parallel gradient reduction (torch's DistributedDataParallel, Horovod's
// DistributedOptimizer): gradients are copied into buckets of the node's shared memory as the
// backward pass hands them in, each bucket's allReduce is issued the moment its last gradient
// arrives (so it runs under the rest of the pass), and synchronize() waits and hands back the
// averaged gradients. docs/training.md describes the semantics this file promises. This file
// holds the public object and its argument checks; gradient-step.ts holds the step itself.

import { DTYPE_SIZE } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import type { Work } from '../engine/work.js';
import { allocBuckets, type Bucket, freeBuckets } from './bucket-buffers.js';
import { type BucketPlan, planBuckets } from './buckets.js';
import { checkComm, checkGrad, checkGradList, checkParams, settle, type TrainingComm } from './comm.js';
import { type DataParallelOptions, type DataParallelSettings, dataParallelSettings } from './data-parallel-options.js';
import { type DataParallelStats, GradientStep } from './gradient-step.js';
import { layoutHash } from './step-agreement.js';

export type { DataParallelOptions, WireDtype } from './data-parallel-options.js';
export type { DataParallelStats } from './gradient-step.js';

/** What `createDataParallel` returns: the gradient reduction of one model's parameters. */
export interface DataParallel {
  /** The buckets, in the order their allReduces are issued (the parameters from last to first). */
  readonly buckets: readonly BucketPlan[];
  /** Sends the root's parameters to every rank, into each rank's own arrays (before training). */
  broadcastParameters(): Promise<void>;
  /**
   * Gradient `i` is ready (a backward pass calls this as each gradient is produced): it is
   * copied into its bucket (added, within a step that accumulates), and once every parameter of
   * the bucket and of the buckets before it has been handed in, the bucket's allReduce is issued
   * at once. Under `noSync` nothing is issued. `grad` is only read; `synchronize()` writes the
   * reduced gradient back into it.
   */
  gradientReady(i: number, grad: Float32Array): void;
  /**
   * Issues what is left of the step, waits for every bucket, and writes the reduced gradients
   * into `out` (one array per parameter), or else into the arrays last handed in for each
   * parameter (a new array for one never handed in). Rejects with MISMATCH, on every rank alike,
   * when ranks disagree on the micro-batches of the step; the step is then dropped everywhere.
   */
  synchronize(out?: Float32Array[]): Promise<Float32Array[]>;
  /** One micro-batch's gradients at once: `gradientReady` for each, last to first, then `synchronize(out)`. */
  reduceGradients(grads: Float32Array[], out?: Float32Array[]): Promise<Float32Array[]>;
  /**
   * Runs `fn` (sync or async) as a micro-batch that only accumulates: gradients handed in
   * during it are added into the buckets and nothing is communicated. The next step that
   * synchronizes reduces the sum of every micro-batch since the last one.
   */
  noSync<T>(fn: () => T): T;
  /** A micro-batch that only accumulates: `noSync` around handing in `grads`. */
  accumulate(grads: Float32Array[]): void;
  /** Counters since creation. */
  stats(): DataParallelStats;
  /** Frees the buckets' shared memory; refused while a step is under way. */
  destroy(): void;
}

/**
 * Data-parallel gradient reduction over `comm` for a model whose parameters are `params` (one
 * Float32Array per parameter tensor, owned by the caller; the same list, in the same order, on
 * every rank). Allocates the buckets in the node's shared memory.
 */
export function createDataParallel(comm: TrainingComm, params: Float32Array[], options?: DataParallelOptions) {
  const where = 'createDataParallel';
  const c = checkComm(where, comm);
  const ps = checkParams(where, params);
  const settings = dataParallelSettings(where, c.size, options);
  return new DataParallelImpl(c, ps, settings) as DataParallel;
}

class DataParallelImpl implements DataParallel {
  readonly buckets: readonly BucketPlan[];
  private readonly sizes: number[];
  private readonly list: Bucket[];
  private readonly root: number;
  private readonly timeoutMs: number | undefined;
  private readonly grads: GradientStep;
  private accumulating = false;
  private busy = false;
  private destroyed = false;

  constructor(
    private readonly comm: TrainingComm,
    private readonly params: Float32Array[],
    s: DataParallelSettings,
  ) {
    this.root = s.root;
    this.timeoutMs = s.timeoutMs;
    this.sizes = params.map((p) => p.length);
    const cap = Math.max(1, Math.floor(s.bucketBytes / DTYPE_SIZE[s.wire]));
    this.buckets = planBuckets(this.sizes, cap);
    this.list = allocBuckets(comm, this.buckets, s.wire);
    const layout = layoutHash(this.sizes, s.wire, cap, s.average);
    this.grads = new GradientStep(comm, this.list, this.sizes, { ...s, layout });
  }

  async broadcastParameters(): Promise<void> {
    this.usable('broadcastParameters');
    if (this.grads.started())
      fail(
        'INVALID_ARGUMENT',
        'broadcastParameters: gradients of a step are held (handed since the last synchronize): broadcast before the first step or right after a synchronize',
      );
    this.busy = true;
    try {
      const works: Work[] = [];
      let failure: unknown;
      try {
        for (const b of this.list) {
          b.plan.params.forEach((p, j) => b.f32.set(this.params[p], b.plan.offsets[j]));
          works.push(this.comm.broadcast(b.f32, { root: this.root, timeoutMs: this.timeoutMs }));
        }
      } catch (e) {
        failure = e;
      }
      failure = (await settle(works)) ?? failure;
      if (failure) throw failure;
      for (const b of this.list)
        b.plan.params.forEach((p, j) => {
          const off = b.plan.offsets[j];
          this.params[p].set(b.f32.subarray(off, off + this.sizes[p]));
        });
    } finally {
      this.busy = false;
    }
  }

  gradientReady(i: number, grad: Float32Array): void {
    const where = 'gradientReady';
    this.usable(where);
    if (!Number.isInteger(i) || i < 0 || i >= this.sizes.length)
      fail('INVALID_ARGUMENT', `${where}: parameter index ${i} is outside 0..${this.sizes.length - 1}`, { index: i });
    checkGrad(where, i, grad, this.sizes[i]);
    this.grads.add(where, i, grad);
    if (this.accumulating) return;
    this.grads.hand(i);
  }

  async synchronize(out?: Float32Array[]): Promise<Float32Array[]> {
    this.usable('synchronize');
    if (this.accumulating)
      fail('INVALID_ARGUMENT', 'synchronize: called inside noSync(); call it after noSync returns');
    const outs = out === undefined ? undefined : checkGradList('synchronize (out)', out, this.sizes);
    this.busy = true;
    try {
      return await this.grads.finish(outs);
    } finally {
      this.busy = false;
    }
  }

  reduceGradients(grads: Float32Array[], out?: Float32Array[]): Promise<Float32Array[]> {
    try {
      const gs = this.wholeMicroBatch('reduceGradients', grads);
      if (out !== undefined) checkGradList('reduceGradients (out)', out, this.sizes);
      for (let i = gs.length - 1; i >= 0; i--) this.gradientReady(i, gs[i]);
      return this.synchronize(out);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  noSync<T>(fn: () => T): T {
    this.usable('noSync');
    if (typeof fn !== 'function') fail('INVALID_ARGUMENT', 'noSync: pass a function (the micro-batch to accumulate)');
    if (this.accumulating) fail('INVALID_ARGUMENT', 'noSync: already inside noSync()');
    if (this.grads.inProgress)
      fail(
        'INVALID_ARGUMENT',
        'noSync: gradients of this micro-batch were already handed outside noSync() (their allReduces may be issued): synchronize first',
      );
    this.accumulating = true;
    const stop = (counted: boolean) => {
      this.accumulating = false;
      if (counted) this.grads.countMicroBatch();
    };
    let r: T;
    try {
      r = fn();
    } catch (e) {
      stop(false);
      throw e;
    }
    if (isThenable(r))
      return r.then(
        (v) => {
          stop(true);
          return v;
        },
        (e) => {
          stop(false);
          throw e;
        },
      ) as T;
    stop(true);
    return r;
  }

  accumulate(grads: Float32Array[]): void {
    const gs = this.wholeMicroBatch('accumulate', grads);
    this.noSync(() => {
      for (let i = gs.length - 1; i >= 0; i--) this.gradientReady(i, gs[i]);
    });
  }

  stats(): DataParallelStats {
    return this.grads.stats();
  }

  destroy(): void {
    if (this.destroyed) return;
    if (this.busy || this.grads.issued())
      fail('INVALID_ARGUMENT', 'destroy: a step is under way (its allReduces are issued): await synchronize() first');
    this.destroyed = true;
    freeBuckets(this.comm, this.list);
  }

  private wholeMicroBatch(where: string, grads: Float32Array[]): Float32Array[] {
    this.usable(where);
    const gs = checkGradList(where, grads, this.sizes);
    if (this.accumulating) fail('INVALID_ARGUMENT', `${where}: called inside noSync()`);
    if (this.grads.inProgress)
      fail(
        'INVALID_ARGUMENT',
        `${where}: gradients of this micro-batch were already handed in with gradientReady(): call synchronize()`,
      );
    return gs;
  }

  private usable(where: string): void {
    if (this.destroyed) fail('ABORTED', `${where}: this data-parallel object was destroyed`);
    if (this.busy)
      fail('INVALID_ARGUMENT', `${where}: synchronize() or broadcastParameters() is in progress: await it first`);
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof (v as { then?: unknown } | null)?.then === 'function';
}
