// Data-parallel gradient reduction (torch's DistributedDataParallel, Horovod's
// DistributedOptimizer): gradients are copied into buckets of the node's shared memory as the
// backward pass hands them in, each bucket's allReduce is issued the moment its last gradient
// arrives (so it runs under the rest of the pass), and synchronize() waits and hands back the
// averaged gradients. docs/training.md describes the semantics this file promises.

import { DTYPE_SIZE, type Dtype } from '../core/dtypes.js';
import { fail, WebcclError } from '../core/errors.js';
import { boolean, type Check, checkOptions, integer, type OptionSpec, timeoutMs } from '../core/options.js';
import type { Work } from '../engine/work.js';
import { convertDtype } from '../layouts/convert.js';
import { type BucketPlan, planBuckets } from './buckets.js';
import { checkComm, checkGrad, checkGradList, checkParams, settle, type TrainingComm } from './comm.js';

/** The dtype gradients cross the wire in: f32 (exact), or bf16 / f16 (half the bytes, rounded). */
export type WireDtype = 'f32' | 'bf16' | 'f16';

/** Options of `createDataParallel`. */
export interface DataParallelOptions {
  /**
   * Bytes of each bucket's buffer on the wire (counted in `wireDtype`); default 25 MiB, torch's
   * default bucket size. A parameter larger than this gets a bucket of its own.
   */
  bucketBytes?: number;
  /** Divide the reduced gradients by the number of ranks (default true): the mean over ranks. */
  average?: boolean;
  /** The dtype the buckets cross the wire in (default 'f32'); see docs/training.md for the error of halves. */
  wireDtype?: WireDtype;
  /** The rank whose parameters `broadcastParameters()` sends (default 0). */
  root?: number;
  /** Deadline of every collective issued, ms (default: the communicator's). */
  timeoutMs?: number;
}

/** Counters of a data-parallel object since it was made. */
export interface DataParallelStats {
  /** Buckets the parameters fall into. */
  buckets: number;
  /** Synchronizations finished, refused ones included. */
  steps: number;
  /** Steps refused because ranks disagreed on when to synchronise (MISMATCH). */
  refused: number;
  /** allReduces issued: one per bucket per step, plus each step's agreement check. */
  opsIssued: number;
  /** Bytes of bucket buffers reduced, in the wire dtype, over all steps. */
  bytesReduced: number;
  /** Time `synchronize()` spent waiting for the step's ops, ms, summed over steps. */
  waitMs: number;
  /** From each step's first issue to its last completion, ms, summed over steps. */
  commMs: number;
  /** `waitMs` of the last step. */
  lastWaitMs: number;
  /** `commMs` of the last step. */
  lastCommMs: number;
}

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

const MIB = 1 << 20;
const wireDtype: Check = (v) => (v === 'f32' || v === 'bf16' || v === 'f16' ? undefined : "'f32', 'bf16' or 'f16'");
const OPTIONS = {
  bucketBytes: integer(1, 0x7fffffff),
  average: boolean,
  wireDtype,
  root: integer(0, 0x7fffffff),
  timeoutMs,
} as const satisfies OptionSpec;

interface Bucket {
  readonly plan: BucketPlan;
  /** Gradients in f32: accumulated here, reduced here when the wire is f32. */
  readonly f32: Float32Array;
  /** The wire buffer when the wire is a half dtype. */
  readonly half: { data: Uint16Array; dtype: Dtype } | undefined;
  /** Parameters of the bucket not yet handed in this micro-batch. */
  pending: number;
  work: Work | undefined;
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
  const o = checkOptions<DataParallelOptions>(where, options, OPTIONS, "{ bucketBytes: 1 << 20, wireDtype: 'bf16' }");
  if (o.root !== undefined && o.root >= c.size)
    fail('INVALID_ARGUMENT', `${where}: root ${o.root} is outside the communicator's 0..${c.size - 1} range`, {
      option: 'root',
      value: o.root,
    });
  return new DataParallelImpl(c, ps, o) as DataParallel;
}

class DataParallelImpl implements DataParallel {
  readonly buckets: readonly BucketPlan[];
  private readonly sizes: number[];
  private readonly list: Bucket[];
  private readonly bucketOf: Int32Array;
  private readonly offsetOf: Int32Array;
  private readonly wire: WireDtype;
  private readonly average: boolean;
  private readonly root: number;
  private readonly timeoutMs: number | undefined;
  private readonly layout: number;
  /** Parameter i's slice of its bucket holds gradients of this step (else it is zeroed at issue). */
  private readonly written: Uint8Array;
  /** Parameter i was handed in this micro-batch. */
  private readonly handed: Uint8Array;
  /** The array last handed in for each parameter this step: where its result goes by default. */
  private readonly target: (Float32Array | undefined)[];
  private next = 0;
  private check: { buf: Float64Array; work: Work } | undefined;
  private accumulated = 0;
  private inProgress = false;
  private accumulating = false;
  private busy = false;
  private destroyed = false;
  private step = 0;
  private firstIssueAt = Number.NaN;
  private readonly counters: DataParallelStats;

  constructor(
    private readonly comm: TrainingComm,
    private readonly params: Float32Array[],
    o: DataParallelOptions,
  ) {
    this.wire = o.wireDtype ?? 'f32';
    this.average = o.average ?? true;
    this.root = o.root ?? 0;
    this.timeoutMs = o.timeoutMs;
    this.sizes = params.map((p) => p.length);
    const cap = Math.max(1, Math.floor((o.bucketBytes ?? 25 * MIB) / DTYPE_SIZE[this.wire]));
    this.buckets = planBuckets(this.sizes, cap);
    this.bucketOf = new Int32Array(params.length).fill(-1);
    this.offsetOf = new Int32Array(params.length);
    this.buckets.forEach((b, k) =>
      b.params.forEach((p, j) => {
        this.bucketOf[p] = k;
        this.offsetOf[p] = b.offsets[j];
      }),
    );
    this.list = [];
    try {
      for (const plan of this.buckets) {
        const f32 = comm.alloc('f32', plan.count) as Float32Array;
        let half: Bucket['half'];
        try {
          half = this.wire === 'f32' ? undefined : (comm.alloc(this.wire, plan.count) as Bucket['half']);
        } catch (e) {
          comm.free(f32);
          throw e;
        }
        this.list.push({ plan, f32, half, pending: plan.params.length, work: undefined });
      }
    } catch (e) {
      this.freeBuffers();
      throw e;
    }
    this.written = new Uint8Array(params.length);
    this.handed = new Uint8Array(params.length);
    this.target = new Array(params.length).fill(undefined);
    this.layout = layoutHash(this.sizes, this.wire, cap, this.average);
    this.counters = {
      buckets: this.buckets.length,
      steps: 0,
      refused: 0,
      opsIssued: 0,
      bytesReduced: 0,
      waitMs: 0,
      commMs: 0,
      lastWaitMs: 0,
      lastCommMs: 0,
    };
  }

  async broadcastParameters(): Promise<void> {
    this.usable('broadcastParameters');
    if (this.stepStarted())
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
    const k = this.bucketOf[i];
    const b = k < 0 ? undefined : this.list[k];
    if (b?.work)
      fail(
        'BUFFER_BUSY',
        `${where}: gradient ${i} came after its bucket's allReduce was issued (every gradient of that bucket had been handed in this micro-batch): hand each gradient once per micro-batch, and accumulate micro-batches under noSync()`,
        { index: i, bucket: k },
      );
    if (b) {
      const off = this.offsetOf[i];
      if (this.written[i]) addInto(b.f32, off, grad);
      else b.f32.set(grad, off);
    }
    this.written[i] = 1;
    this.target[i] = grad;
    if (this.accumulating) return;
    this.inProgress = true;
    if (b && !this.handed[i]) {
      this.handed[i] = 1;
      b.pending--;
    }
    // Buckets go out in their order only: every rank then issues the same allReduces in the same
    // order, whatever order its backward pass produced gradients in.
    while (this.next < this.list.length && this.list[this.next].pending === 0) this.issue(this.list[this.next]);
  }

  async synchronize(out?: Float32Array[]): Promise<Float32Array[]> {
    this.usable('synchronize');
    if (this.accumulating)
      fail('INVALID_ARGUMENT', 'synchronize: called inside noSync(); call it after noSync returns');
    const outs = out === undefined ? undefined : checkGradList('synchronize (out)', out, this.sizes);
    this.busy = true;
    try {
      let failure: unknown;
      try {
        while (this.next < this.list.length) this.issue(this.list[this.next]);
        if (!this.check) this.issueCheck(); // no bucket at all
      } catch (e) {
        failure = e;
      }
      const t0 = performance.now();
      const checkFailure = this.check ? await settle([this.check.work]) : undefined;
      const buckets = this.list.map((b) => b.work).filter((w): w is Work => w !== undefined);
      const bucketFailure = await settle(buckets); // every op ends before the step does
      failure = failure ?? checkFailure ?? bucketFailure;
      const t1 = performance.now();
      const done = [this.check?.work, ...buckets].map((w) => w?.timing.completedAt ?? Number.NaN);
      const finite = done.filter(Number.isFinite);
      const last = finite.length ? Math.max(...finite) : t1;
      this.counters.lastWaitMs = t1 - t0;
      this.counters.lastCommMs = Number.isFinite(this.firstIssueAt) ? Math.max(0, last - this.firstIssueAt) : 0;
      this.counters.waitMs += this.counters.lastWaitMs;
      this.counters.commMs += this.counters.lastCommMs;
      this.counters.steps++;
      // A disagreement the check saw comes first: the buckets' own failures (ranks whose
      // buckets differ fail them with the library's MISMATCH) follow from it.
      if (this.check && checkFailure === undefined) this.agree(this.check.buf);
      if (failure) throw failure;
      this.step++;
      return this.deliver(outs);
    } finally {
      this.endStep();
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
    if (this.inProgress)
      fail(
        'INVALID_ARGUMENT',
        'noSync: gradients of this micro-batch were already handed outside noSync() (their allReduces may be issued): synchronize first',
      );
    this.accumulating = true;
    const stop = (counted: boolean) => {
      this.accumulating = false;
      if (counted) this.accumulated++;
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
    return { ...this.counters };
  }

  destroy(): void {
    if (this.destroyed) return;
    if (this.busy || this.check || this.list.some((b) => b.work))
      fail('INVALID_ARGUMENT', 'destroy: a step is under way (its allReduces are issued): await synchronize() first');
    this.destroyed = true;
    this.freeBuffers();
  }

  // ---------------------------------------------------------------- the step

  /** The step's agreement check, then the bucket's allReduce. */
  private issue(b: Bucket): void {
    if (!this.check) this.issueCheck();
    this.next++;
    b.plan.params.forEach((p, j) => {
      // A parameter handed nothing this step (unused by the model on this rank) counts as zero.
      if (!this.written[p]) b.f32.fill(0, b.plan.offsets[j], b.plan.offsets[j] + this.sizes[p]);
    });
    const opts = { timeoutMs: this.timeoutMs };
    if (b.half) {
      // Scaled before the rounding, as torch's fp16 compression hook does: the sum over ranks
      // then stays within the half type's range wherever the gradients themselves do.
      if (this.average && this.comm.size > 1) scale(b.f32, 1 / this.comm.size);
      convertDtype(b.f32, this.wire, { out: b.half });
      b.work = this.comm.allReduce(b.half, { ...opts, op: 'sum' });
    } else {
      b.work = this.comm.allReduce(b.f32, { ...opts, op: this.average ? 'avg' : 'sum' });
    }
    this.counters.opsIssued++;
    this.counters.bytesReduced += b.plan.count * DTYPE_SIZE[this.wire];
  }

  /**
   * Before the step's first bucket: every rank's micro-batch count, step number and bucket
   * layout, as [x, -x] under max, so each rank learns the maximum and the minimum of each.
   */
  private issueCheck(): void {
    const k = this.accumulated + (this.inProgress ? 1 : 0);
    const buf = Float64Array.of(k, -k, this.step, -this.step, this.layout, -this.layout);
    this.firstIssueAt = performance.now();
    const work = this.comm.allReduce(buf, { op: 'max', timeoutMs: this.timeoutMs });
    this.check = { buf, work };
    this.counters.opsIssued++;
  }

  /** Throws MISMATCH (the same on every rank: each reads the same maxima) when ranks disagree. */
  private agree(c: Float64Array): void {
    const [maxK, minK, maxStep, minStep, maxLayout, minLayout] = [c[0], -c[1], c[2], -c[3], c[4], -c[5]];
    if (maxK === minK && maxStep === minStep && maxLayout === minLayout) return;
    this.counters.refused++;
    const local = this.accumulated + (this.inProgress ? 1 : 0);
    this.step = maxStep + 1; // every rank starts the next step from the same number
    const field = maxLayout !== minLayout ? 'parameters' : maxK !== minK ? 'microBatches' : 'step';
    const why =
      field === 'parameters'
        ? 'the ranks made their data-parallel objects from different parameter lists or options (sizes, wireDtype, bucketBytes, average)'
        : field === 'microBatches'
          ? `ranks disagree on when to synchronise: they accumulated ${minK} to ${maxK} micro-batches this step (this rank ${local})`
          : `ranks are at different steps (${minStep} to ${maxStep}): one skipped a synchronize`;
    throw new WebcclError(
      'MISMATCH',
      `synchronize: ${why}; no rank applied this step's gradients, every rank of the communicator got this error, and the next step starts afresh`,
      { field, microBatches: [minK, maxK], steps: [minStep, maxStep], local, rank: this.comm.rank },
    );
  }

  /** The reduced gradients, from the buckets into the caller's arrays. */
  private deliver(outs: Float32Array[] | undefined): Float32Array[] {
    const result = this.sizes.map((n, i) => outs?.[i] ?? this.target[i] ?? new Float32Array(n));
    for (const b of this.list) {
      if (b.half) convertDtype(b.half, 'f32', { out: b.f32 });
      b.plan.params.forEach((p, j) => {
        const off = b.plan.offsets[j];
        result[p].set(b.f32.subarray(off, off + this.sizes[p]));
      });
    }
    return result;
  }

  /** Forgets the step, whether it succeeded or not: the next gradient starts a new one. */
  private endStep(): void {
    for (const b of this.list) {
      b.work = undefined;
      b.pending = b.plan.params.length;
    }
    this.next = 0;
    this.check = undefined;
    this.accumulated = 0;
    this.inProgress = false;
    this.firstIssueAt = Number.NaN;
    this.written.fill(0);
    this.handed.fill(0);
    this.target.fill(undefined);
  }

  private stepStarted(): boolean {
    return this.inProgress || this.accumulated > 0 || this.written.some((w) => w !== 0);
  }

  private wholeMicroBatch(where: string, grads: Float32Array[]): Float32Array[] {
    this.usable(where);
    const gs = checkGradList(where, grads, this.sizes);
    if (this.accumulating) fail('INVALID_ARGUMENT', `${where}: called inside noSync()`);
    if (this.inProgress)
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

  private freeBuffers(): void {
    for (const b of this.list) {
      this.comm.free(b.f32);
      if (b.half) this.comm.free(b.half);
    }
    this.list.length = 0;
  }
}

function addInto(dst: Float32Array, off: number, src: Float32Array): void {
  for (let j = 0; j < src.length; j++) dst[off + j] += src[j];
}

function scale(x: Float32Array, f: number): void {
  for (let j = 0; j < x.length; j++) x[j] *= f;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof (v as { then?: unknown } | null)?.then === 'function';
}

/** A number every rank computes alike from what must agree (FNV-1a over the parameter sizes and options). */
function layoutHash(sizes: readonly number[], wire: WireDtype, cap: number, average: boolean): number {
  let h = 0x811c9dc5;
  const mix = (v: number) => {
    h = Math.imul(h ^ (v & 0xffff), 0x01000193) >>> 0;
    h = Math.imul(h ^ (v >>> 16), 0x01000193) >>> 0;
  };
  mix(sizes.length);
  for (const s of sizes) mix(s);
  mix(DTYPE_SIZE[wire] + (wire === 'bf16' ? 8 : 0));
  mix(cap);
  mix(average ? 1 : 0);
  return h;
}
