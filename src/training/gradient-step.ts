// One step of the data-parallel reduction, from the first gradient handed in to the reduced
// gradients handed back: which gradients each bucket holds, when its allReduce goes out (in
// bucket order only), the agreement check before the first, waiting, and the counters of steps.

import { DTYPE_SIZE } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import type { Work } from '../engine/work.js';
import { type Bucket, reduceBucket, widenBucket } from './bucket-buffers.js';
import { settle, type TrainingComm } from './comm.js';
import type { WireDtype } from './data-parallel-options.js';
import { agreementBuffer, disagreement } from './step-agreement.js';

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

/** What shapes the reduction of every step. */
export interface StepSettings {
  readonly wire: WireDtype;
  readonly average: boolean;
  readonly timeoutMs: number | undefined;
  /** `layoutHash` of the parameter sizes and the options that shape the buckets. */
  readonly layout: number;
}

/** The step under way over the buckets `list` of parameters of `sizes` elements, and the steps before it. */
export class GradientStep {
  /** A micro-batch outside noSync() has handed gradients in this step. */
  inProgress = false;
  private readonly bucketOf: Int32Array;
  private readonly offsetOf: Int32Array;
  /** Parameter i's slice of its bucket holds gradients of this step (else it is zeroed at issue). */
  private readonly written: Uint8Array;
  /** Parameter i was handed in this micro-batch. */
  private readonly handed: Uint8Array;
  /** The array last handed in for each parameter this step: where its result goes by default. */
  private readonly target: (Float32Array | undefined)[];
  private next = 0;
  private check: { buf: Float64Array; work: Work } | undefined;
  private accumulated = 0;
  private step = 0;
  private firstIssueAt = Number.NaN;
  private readonly counters: DataParallelStats;

  constructor(
    private readonly comm: TrainingComm,
    private readonly list: Bucket[],
    private readonly sizes: readonly number[],
    private readonly settings: StepSettings,
  ) {
    this.bucketOf = new Int32Array(sizes.length).fill(-1);
    this.offsetOf = new Int32Array(sizes.length);
    list.forEach(({ plan }, k) =>
      plan.params.forEach((p, j) => {
        this.bucketOf[p] = k;
        this.offsetOf[p] = plan.offsets[j];
      }),
    );
    this.written = new Uint8Array(sizes.length);
    this.handed = new Uint8Array(sizes.length);
    this.target = new Array(sizes.length).fill(undefined);
    this.counters = {
      buckets: list.length,
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

  /** Gradient `i` into its bucket: copied, or added when the step already holds one for it. */
  add(where: string, i: number, grad: Float32Array): void {
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
  }

  /** Gradient `i`, added, counts for a micro-batch that synchronizes: issues every bucket now complete. */
  hand(i: number): void {
    this.inProgress = true;
    const k = this.bucketOf[i];
    const b = k < 0 ? undefined : this.list[k];
    if (b && !this.handed[i]) {
      this.handed[i] = 1;
      b.pending--;
    }
    // Buckets go out in their order only: every rank then issues the same allReduces in the same
    // order, whatever order its backward pass produced gradients in.
    while (this.next < this.list.length && this.list[this.next].pending === 0) this.issue(this.list[this.next]);
  }

  /** A micro-batch that only accumulated has ended. */
  countMicroBatch(): void {
    this.accumulated++;
  }

  /** Whether the step holds gradients (handed since the last synchronize). */
  started(): boolean {
    return this.inProgress || this.accumulated > 0 || this.written.some((w) => w !== 0);
  }

  /** Whether ops of the step are issued. */
  issued(): boolean {
    return this.check !== undefined || this.list.some((b) => b.work);
  }

  /**
   * Issues what is left of the step, waits for every op, and hands back the reduced gradients in
   * `outs`, else in the arrays last handed in (new ones for parameters never handed in). Throws
   * MISMATCH when the ranks disagree. The step ends either way.
   */
  async finish(outs: Float32Array[] | undefined): Promise<Float32Array[]> {
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
      this.end();
    }
  }

  stats(): DataParallelStats {
    return { ...this.counters };
  }

  /** The step's agreement check, then the bucket's allReduce. */
  private issue(b: Bucket): void {
    if (!this.check) this.issueCheck();
    this.next++;
    b.plan.params.forEach((p, j) => {
      // A parameter handed nothing this step (unused by the model on this rank) counts as zero.
      if (!this.written[p]) b.f32.fill(0, b.plan.offsets[j], b.plan.offsets[j] + this.sizes[p]);
    });
    const { wire, average, timeoutMs } = this.settings;
    b.work = reduceBucket(this.comm, b, wire, average, timeoutMs);
    this.counters.opsIssued++;
    this.counters.bytesReduced += b.plan.count * DTYPE_SIZE[wire];
  }

  /** Before the step's first bucket: every rank's micro-batch count, step number and bucket layout. */
  private issueCheck(): void {
    const buf = agreementBuffer(this.microBatches(), this.step, this.settings.layout);
    this.firstIssueAt = performance.now();
    const work = this.comm.allReduce(buf, { op: 'max', timeoutMs: this.settings.timeoutMs });
    this.check = { buf, work };
    this.counters.opsIssued++;
  }

  /** Throws MISMATCH (the same on every rank) when ranks disagree; every rank then takes the same step number. */
  private agree(c: Float64Array): void {
    const refusal = disagreement(c, this.microBatches(), this.comm.rank);
    if (!refusal) return;
    this.counters.refused++;
    this.step = refusal.nextStep;
    throw refusal.error;
  }

  /** The micro-batches of this step, the synchronizing one included. */
  private microBatches(): number {
    return this.accumulated + (this.inProgress ? 1 : 0);
  }

  /** The reduced gradients, from the buckets into the caller's arrays. */
  private deliver(outs: Float32Array[] | undefined): Float32Array[] {
    const result = this.sizes.map((n, i) => outs?.[i] ?? this.target[i] ?? new Float32Array(n));
    for (const b of this.list) {
      widenBucket(b);
      b.plan.params.forEach((p, j) => {
        const off = b.plan.offsets[j];
        result[p].set(b.f32.subarray(off, off + this.sizes[p]));
      });
    }
    return result;
  }

  /** Forgets the step, whether it succeeded or not: the next gradient starts a new one. */
  private end(): void {
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
}

function addInto(dst: Float32Array, off: number, src: Float32Array): void {
  for (let j = 0; j < src.length; j++) dst[off + j] += src[j];
}
