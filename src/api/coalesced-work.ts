// The one Work of a coalesced call (coalesced.ts): it ends when every bucket's op has ended,
// copying the results out of the buckets first, and fails with the first bucket's error (the
// arrays then keep what they held). The buckets' memory goes back to the heap once the caller's
// record of ops in flight lets the call go (in-flight.ts): freed earlier, a later alloc() could
// hand out a block that the record still counts as a bucket's and refuse its op with BUFFER_BUSY
// on this rank only, depending on how far the ops had run.

import { WebcclError } from '../core/errors.js';
import type { Buf } from '../engine/buffers.js';
import { Work, type WorkDriver } from '../engine/work.js';
import type { HeldMore } from './in-flight.js';

/** One byte range moved between a caller's array and a bucket. */
export interface Piece {
  array: Uint8Array;
  arrayAt: number;
  bucket: Uint8Array;
  bucketAt: number;
  bytes: number;
}

export interface CoalescedPlan {
  name: string;
  /** Copies the results out of the buckets when every bucket succeeded (false: a broadcast's root). */
  copyOut: boolean;
  pieces: readonly Piece[];
  /** Gives the buckets back to the node heap (never throws). */
  freeBuckets(): void;
  /** A group's name for a bucket's error, as its Work gives it once settled (the hook sees it first). */
  label: ((e: WebcclError) => WebcclError) | undefined;
}

/**
 * Drives the buckets' ops and settles the call's Work when the last has ended. Only the last
 * bucket still pending is driven, and only when the call's own Work is: its engine runs the
 * ops before it first (collectives complete in issue order), and the caller never sees an
 * earlier bucket end while the call is still pending (seeing an op end releases the buffers of
 * every op before it: that must follow from the caller's calls alone, never from progress).
 */
export class CoalescedWork implements WorkDriver, HeldMore {
  readonly work: Work;
  private readonly errors: (WebcclError | undefined)[] = [];
  /** Buckets not yet ended. */
  private pending: number;
  private ended = false;
  private lettingGo = false;
  private freed = false;

  /**
   * `buckets`: their ops, as issued (the first's sequence number is the call's); `refused`: the
   * op of the bucket after them was refused at issue (the communicator broke meanwhile), which
   * the call then fails with. `bufs`: the caller's arrays, held while the call is in flight.
   */
  constructor(
    private readonly plan: CoalescedPlan,
    private readonly buckets: readonly Work[],
    refused: WebcclError | undefined,
    issuedAt: number,
    readonly bufs: readonly Buf[],
  ) {
    // awaitsAsync: awaiting drives each bucket as its own Work is awaited (some may never block).
    this.work = new Work(plan.name, buckets[0]?.seq ?? -1, this, true, undefined, true);
    this.work.timing.issuedAt = issuedAt;
    this.errors[buckets.length] = refused;
    this.pending = buckets.length;
    // (a bucket that ended at issue runs its hook at once)
    buckets.forEach((b, k) => b.beforeSettle((e) => this.bucketEnded(k, e)));
    if (this.pending === 0) this.end();
  }

  // ---------------------------------------------------------------- WorkDriver

  progress(w: Work, block: boolean): void {
    while (!w.settled) {
      const b = this.lastPending();
      if (!b) return;
      if (!block) {
        b.isCompleted();
        return;
      }
      try {
        b.waitSync();
      } catch (e) {
        // A bucket that failed ends the call (or the next pending bucket is driven); one that
        // cannot be waited for here (UNSUPPORTED) leaves the call pending: say so in its name.
        if (!b.settled) throw WebcclError.is(e) ? this.renamed(e, b) : e;
      }
    }
  }

  async progressAsync(w: Work): Promise<void> {
    while (!w.settled) {
      const b = this.lastPending();
      if (!b) return;
      try {
        await b.wait();
      } catch (e) {
        if (!b.settled) throw e;
      }
    }
  }

  // ---------------------------------------------------------------- HeldMore

  /** The record of ops in flight let the call go: its buckets may go back once it has ended. */
  letGo(): void {
    this.lettingGo = true;
    if (this.ended) this.free();
  }

  // ----------------------------------------------------------------

  private lastPending(): Work | undefined {
    for (let k = this.buckets.length - 1; k >= 0; k--) if (!this.buckets[k].settled) return this.buckets[k];
    return undefined;
  }

  private bucketEnded(k: number, e: WebcclError | undefined): void {
    this.errors[k] = e;
    if (--this.pending === 0) this.end();
  }

  /** Every bucket has ended: copy the results out (if all succeeded) and settle the call's Work. */
  private end(): void {
    if (this.ended) return;
    this.ended = true;
    let error = this.firstError();
    if (!error && this.plan.copyOut) {
      try {
        for (const p of this.plan.pieces) p.array.set(p.bucket.subarray(p.bucketAt, p.bucketAt + p.bytes), p.arrayAt);
      } catch (e) {
        error = new WebcclError(
          'INVALID_ARGUMENT',
          `${this.plan.name} #${this.work.seq}: copying a result out failed (${(e as Error).message}): was an array's ArrayBuffer transferred while the op was in flight?`,
          { detached: true },
        );
      }
    }
    const first = this.buckets[0]?.timing;
    const t = this.work.timing;
    t.startedAt = first?.startedAt ?? t.issuedAt;
    t.joinedAt = first?.joinedAt ?? NaN;
    this.work.settle(error, first ? undefined : t.issuedAt);
    if (this.lettingGo) this.free();
  }

  /** The first bucket's error, named as that bucket's Work names it. */
  private firstError(): WebcclError | undefined {
    const k = this.errors.findIndex((e) => e !== undefined);
    if (k < 0) return undefined;
    const b = this.buckets[k];
    if (b === undefined) return this.errors[k]; // refused at issue, as the collective itself throws it
    // Settled: its Work has named the error; else its settle is running this hook, with the error not yet named.
    return b.settled ? b.failure : (this.plan.label?.(this.errors[k]!) ?? this.errors[k]);
  }

  private free(): void {
    if (this.freed) return;
    this.freed = true;
    this.plan.freeBuckets();
  }

  private renamed(e: WebcclError, b: Work): WebcclError {
    return new WebcclError(
      e.code,
      e.reason.replace(`${b.name} #${b.seq}`, `${this.work.name} #${this.work.seq}`),
      e.details,
    );
  }
}
