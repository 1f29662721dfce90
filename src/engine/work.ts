// Work: the handle every collective returns. Thenable (await comm.allReduce(x)), with wait(),
// isCompleted() and the op's timing. Completion is driven by whoever asks for it.

import { WebcclError } from '../core/errors.js';
import type { OpTrace } from '../core/trace.js';
import { nowMs } from './clock.js';
import { loopIdle } from './loop-ops.js';

/**
 * When the op passed each point, in this thread's performance.now() ms (NaN until it has):
 * issued (the call), started (it reached the head of its communicator's queue: issue to start
 * is queueing behind earlier ops), joined (every rank it needs had joined it: see waitMs), and
 * completed.
 */
export interface WorkTiming {
  issuedAt: number;
  startedAt: number;
  /**
   * Shared memory: the latest start of the op among its ranks (each rank stamps its start in
   * its signature record before its first step). Across nodes: when the op's first message
   * from a peer arrived (after the node phase, in the hierarchical schedule). Never before
   * startedAt; NaN when unknown (the op failed first), when this rank needs no peer's message
   * (across nodes, a broadcast's root: it waited for nobody), and for send and recv, which are
   * not split: their waitMs is then 0.
   */
  joinedAt: number;
  completedAt: number;
}

export interface WorkDriver {
  /** Makes progress on `w`; with block, returns only when `w` has completed or failed. */
  progress(w: Work, block: boolean): void;
  /** Completes `w` without blocking the thread (for threads that may not block). */
  progressAsync(w: Work): Promise<void>;
  /** Told when the caller starts to wait for `w` (wait(), await, waitSync()), before any progress. */
  waiting?(w: Work): void;
}

const DONE = Promise.resolve();

/** Told once when the caller sees an op end (what remembers the buffers of ops in flight: in-flight.ts). */
export interface SeenListener {
  opSeen(): void;
}

/**
 * The handle of one op, as every Communicator op returns it (torch's Work, MPI's request):
 * awaitable (`await comm.allReduce(x)`), with wait(), waitSync(), isCompleted() and the op's
 * timing. It resolves once the op has ended on this rank and rejects with the op's WebcclError if
 * it failed. Until the caller has seen the op end (await or wait() settled, waitSync() returned or
 * threw, isCompleted() answered true) the op holds its buffers: read or write them only after.
 */
export class Work implements PromiseLike<void> {
  /** The op: 'allReduce', 'broadcast', 'send', ... ('allReduceCoalesced' for a coalesced call). */
  readonly name: string;
  /**
   * The op's number on its communicator, the `#seq` of its errors (sends and recvs are numbered
   * apart from collectives); a coalesced call has its first bucket's, or -1 when it issued none.
   */
  readonly seq: number;
  /** When the op was issued, started, joined by its peers and completed: see {@link WorkTiming}. */
  readonly timing: WorkTiming = { issuedAt: NaN, startedAt: NaN, joinedAt: NaN, completedAt: NaN };
  /** @internal The op's events on its rank's trace track (WEBCCL_TRACE only). */
  trace: OpTrace | undefined;
  /** @internal Told when the caller sees the op end (in-flight.ts), unless it no longer cares. */
  holder: SeenListener | undefined = undefined;
  private state: 'pending' | 'done' | 'failed' = 'pending';
  private error: WebcclError | undefined;
  private promise: Promise<void> | undefined;
  /** The caller has begun to wait (the driver was told: begin()). */
  private waitBegun = false;
  private seen = false;
  private relabel: ((e: WebcclError) => WebcclError) | undefined;
  private finisher: ((error?: WebcclError) => void) | undefined;

  /**
   * @internal Made by the engines, never by users. `noBlock` says why waitSync() may not block,
   * when canBlock is false. `awaitsAsync`: wait() and await go through the driver's
   * progressAsync even where waitSync() may block (an op the network progress thread runs: the
   * rank's loop may still have sockets of its own to serve; the driver blocks only when not).
   */
  constructor(
    name: string,
    seq: number,
    private readonly driver: WorkDriver,
    private readonly canBlock: boolean,
    private readonly noBlock = "would block a thread that may not block (a page's main thread)",
    private readonly awaitsAsync = !canBlock,
  ) {
    this.name = name;
    this.seq = seq;
  }

  /**
   * Moves the op along without blocking, then says whether it has ended, done or failed (it never
   * throws the op's error: wait() does). `true` counts as the caller seeing it end.
   */
  isCompleted(): boolean {
    if (this.state === 'pending') this.driver.progress(this, false);
    if (this.state === 'pending') return false;
    this.see();
    return true;
  }

  /** Completes the op; rejects with the op's WebcclError if it failed. */
  wait(): Promise<void> {
    if (this.state === 'done') {
      this.see();
      return DONE;
    }
    if (this.begin()) {
      this.see();
      return DONE;
    }
    // Where the thread may block, the op completes in the next job (the caller's code runs on first).
    this.promise ??= this.blocksOnAwait() ? DONE.then(() => this.waitSync()) : this.awaitAsync();
    return this.promise;
  }

  /**
   * The caller starts to wait (once): the driver is told. True when that look alone ended the op
   * (often: one the progress thread ended while the rank computed).
   */
  private begin(): boolean {
    if (this.waitBegun) return false;
    this.waitBegun = true;
    this.driver.waiting?.(this);
    return (this.state as Work['state']) === 'done';
  }

  /** The wait through the driver's progressAsync, the event loop running meanwhile. */
  private awaitAsync(): Promise<void> {
    // Where the thread might have blocked (Node), nothing else may keep it alive meanwhile, and a
    // pending Atomics.waitAsync does not: a worker would end in the middle of the op.
    const alive = this.awaitsAsync ? undefined : setTimeout(() => undefined, 0x7fffffff);
    return this.driver
      .progressAsync(this)
      .then(() => {
        if (this.settled) this.see();
        this.rethrow();
      })
      .finally(() => clearTimeout(alive));
  }

  /**
   * Whether `await` (or wait()) blocks the thread until the op ends, as waitSync() does: where the
   * thread may block and the driver does not ask otherwise, unless ops of this thread that only
   * its event loop moves are in flight (loop-ops.ts): a blocked thread would stop them, and a
   * peer may need one of them first. Then the wait goes through the driver's progressAsync.
   */
  private blocksOnAwait(): boolean {
    return !this.awaitsAsync && loopIdle();
  }

  /** Blocks the calling thread until the op completes (worker threads and Node only). */
  waitSync(): void {
    if (this.state === 'pending' && !this.canBlock) {
      throw new WebcclError(
        'UNSUPPORTED',
        `${this.name} #${this.seq}: waitSync() ${this.noBlock}; use await or wait()`,
      );
    }
    if (this.state === 'pending' && !this.begin()) this.driver.progress(this, true);
    if (this.settled) this.see();
    this.rethrow();
  }

  /**
   * What makes a Work awaitable: `await work` is `await work.wait()`.
   * @param onDone - Called once the op has ended well.
   * @param onFail - Called with the op's WebcclError if it failed.
   * @returns A promise of what the callback called returns.
   */
  // biome-ignore lint/suspicious/noThenProperty: a Work is thenable by design (`await comm.allReduce(x)`)
  then<A = void, B = never>(
    // biome-ignore lint/suspicious/noConfusingVoidType: an awaited Work's value is void, as a PromiseLike<void>'s
    onDone?: ((v: void) => A | PromiseLike<A>) | null,
    onFail?: ((e: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    if (!this.blocksOnAwait() || this.promise !== undefined || this.state !== 'pending' || this.begin())
      return this.wait().then(onDone, onFail);
    // `await work` where the thread may block: the op completes and the callback runs in one job,
    // where wait().then() takes two, the wait's and then the callback's (a small op's await cost a
    // third more than waitSync()).
    return DONE.then(() => {
      try {
        this.waitSync();
      } catch (e) {
        if (onFail) return onFail(e);
        throw e;
      }
      return onDone ? onDone() : (undefined as A);
    });
  }

  /**
   * Duration from start to completion in ms (NaN while pending): waiting for the peers
   * included (waitMs + moveMs); the queueing from issue to start (behind this communicator's
   * earlier ops) is not.
   */
  get durationMs(): number {
    return this.timing.completedAt - this.timing.startedAt;
  }

  /**
   * Of durationMs, the time spent waiting until every rank the op needs had joined it (see WorkTiming.joinedAt); 0 when
   * it needed nobody. NaN while pending.
   */
  get waitMs(): number {
    const { startedAt, joinedAt, completedAt } = this.timing;
    if (Number.isNaN(completedAt)) return NaN;
    return Number.isNaN(joinedAt) ? 0 : Math.min(Math.max(joinedAt, startedAt), completedAt) - startedAt;
  }

  /** Of durationMs, the rest: moving and reducing data once every rank had joined. NaN while pending. */
  get moveMs(): number {
    return this.durationMs - this.waitMs;
  }

  /** @internal The op's first message from a peer arrived (the first call counts). */
  joined(): void {
    if (Number.isNaN(this.timing.joinedAt)) this.timing.joinedAt = nowMs();
  }

  /**
   * @internal Whether the caller has seen the op end (wait or await settled, waitSync returned
   * or threw, isCompleted() answered true): until then the op holds its buffers.
   */
  get observed(): boolean {
    return this.seen;
  }

  /** @internal Settled, without driving progress. */
  get settled(): boolean {
    return this.state !== 'pending';
  }

  /** @internal The error the op failed with (undefined while pending, or once done). */
  get failure(): WebcclError | undefined {
    return this.error;
  }

  /**
   * @internal Runs `fn` when the op ends, before anyone sees it end (a layout conversion of the
   * result); an error it throws fails the op.
   */
  beforeSettle(fn: (error?: WebcclError) => void): void {
    if (this.state === 'pending') {
      this.finisher = fn;
      return;
    }
    // Ended already (inside submit): nobody has seen it yet, so finish it now.
    try {
      fn(this.error);
    } catch (e) {
      this.state = 'failed';
      this.error ??= WebcclError.is(e)
        ? e
        : new WebcclError('INTERNAL', `${this.name} #${this.seq}: finishing the op failed: ${(e as Error).message}`);
    }
  }

  /** @internal `completedAt`: when it ended on the thread that ran it (default: now). */
  settle(error?: WebcclError, completedAt?: number): void {
    if (this.state !== 'pending') return;
    const finish = this.finisher;
    this.finisher = undefined;
    try {
      finish?.(error);
    } catch (e) {
      error ??= WebcclError.is(e)
        ? e
        : new WebcclError('INTERNAL', `${this.name} #${this.seq}: finishing the op failed: ${(e as Error).message}`);
    }
    this.timing.completedAt = completedAt ?? nowMs();
    this.state = error ? 'failed' : 'done';
    this.error = error && this.relabel ? this.relabel(error) : error;
    this.trace?.end(this, this.error);
  }

  /** @internal Rewrites the error the op fails with (a group names itself): now, or when it fails. */
  label(relabel: (e: WebcclError) => WebcclError): void {
    if (this.error) this.error = relabel(this.error);
    else this.relabel = relabel;
  }

  private see(): void {
    if (this.seen) return;
    this.seen = true;
    this.holder?.opSeen();
  }

  private rethrow(): void {
    if (this.state === 'failed') throw this.error;
  }
}

/**
 * Completes `w` without blocking the thread: polls, yielding to the event loop between looks
 * with pauses growing to `maxPauseMs`. For waits that must leave the thread to others: several
 * ranks sharing it (a page, a test), or ops of other communicators that need its event loop.
 */
export async function settledWithoutBlocking(w: Work, maxPauseMs: number): Promise<void> {
  for (let pause = 0; !w.isCompleted(); pause = Math.min(maxPauseMs, pause * 2 || 0.125)) {
    await new Promise((resolve) =>
      pause < 1 && typeof setImmediate === 'function' ? setImmediate(resolve) : setTimeout(resolve, pause),
    );
  }
  return w.wait();
}
