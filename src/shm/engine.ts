// The shared-memory engine: every rank of the communicator is on this node. Queues ops so they
// complete in issue order and hands each to the wasm step loops through this rank's
// descriptor; progress is made by whoever waits or polls.

import { DTYPE_SIZE } from '../core/dtypes.js';
import { WebcclError } from '../core/errors.js';
import { enabled, log } from '../core/log.js';
import { ABORT_REASON, type Algo, descOffset } from '../core/shm-map.js';
import type { Buf } from '../engine/buffers.js';
import { nowMs } from '../engine/clock.js';
import { type RankContext, worldRankOf } from '../engine/context.js';
import { countDone, type Engine, isP2p, type OpCounters, type OpSpec, type P2pKind } from '../engine/engine.js';
import { FlightRecorder } from '../engine/flight-recorder.js';
import type { InputCheck } from '../engine/input-check.js';
import { opLine } from '../engine/op-line.js';
import {
  joinThreadQueues,
  leaveThreadQueues,
  OTHERS_LOOK_MS,
  othersQueued,
  type QueueServer,
  serveOthers,
} from '../engine/thread-queues.js';
import { Work, type WorkDriver } from '../engine/work.js';
import { chooseAllReduceAlgo, keepInputMaxBytes, resolveTuning, type Tuning } from '../tuner/tuner.js';
import { signAgain, writeDescriptor } from './descriptor.js';
import { joinTime, stampStart } from './joined.js';
import { ShmP2p } from './p2p.js';
import { type QueuedOp, type QueueSite, queuedOp, relaidOut } from './queued-op.js';
import { ShmRunner } from './runner.js';

const trace = enabled('TRACE');
/** How often settleQueued looks for peers that arrived meanwhile (ms). */
const SETTLE_LOOK_MS = 5;

export class ShmEngine implements Engine, WorkDriver, QueueServer {
  private readonly runner: ShmRunner;
  /** This rank's descriptor in shared memory. */
  private readonly desc: number;
  /** Its descriptor and default deadline, which every op it queues shares. */
  private readonly site: QueueSite;
  private readonly queue: QueuedOp[] = [];
  private readonly tuning: Tuning;
  /** Inputs up to this size are staged, not read in place by peers (tuner.ts keepInputMaxBytes). */
  private readonly keepMaxBytes: number;
  private readonly byAlgorithm: Record<Algo, number> = { direct: 0, twoshot: 0 };
  private seq = 0;
  private broken: WebcclError | undefined;
  private closed = false;
  /** Point-to-point ops: outside the collective queue, moved along by every wait (none on a progress thread). */
  private readonly p2p: ShmP2p | null;
  readonly flight: FlightRecorder;

  /** `withP2p` false: collectives only (the progress thread's engines; the rank keeps send/recv). */
  constructor(
    private readonly ctx: RankContext,
    private readonly counters: OpCounters,
    commAlgo: unknown,
    private readonly timeoutMs: number,
    withP2p = true,
  ) {
    this.runner = new ShmRunner(ctx.core, ctx.comm, ctx.rank, ctx.size, ctx.localOf);
    this.desc = descOffset(ctx.comm, ctx.size, ctx.rank);
    this.site = { ctx, desc: this.desc, timeoutMs };
    this.tuning = resolveTuning(ctx.size, commAlgo);
    this.keepMaxBytes = keepInputMaxBytes(ctx.size, ctx.cores, ctx.slotBytes);
    this.flight = new FlightRecorder(ctx.rank, () => this.runner.missingRanks());
    joinThreadQueues(this);
    this.p2p = !withP2p
      ? null
      : new ShmP2p(ctx, this.runner, {
          serve: () => this.serveCollectives(),
          broke: (e) => this.fail(e),
          done: (w, failed) => {
            if (failed) this.counters.failed++;
            else countDone(this.counters, w);
          },
        });
  }

  /**
   * `runAs`: the handle the op runs under, made and entered in the flight record by the engine
   * that hands it here (the progress thread's engine, running an op on its rank: one it held,
   * or took back from the thread), whose timing it keeps. Without it, a handle of this engine's.
   * `chosen`: the schedule that engine chose for it (the same tuning: not chosen twice).
   */
  submit(s: OpSpec, runAs?: Work, chosen?: Algo): Work {
    if (this.broken) throw this.broken;
    if (isP2p(s.name)) {
      const w = this.sendRecv(
        s.name,
        (s.name === 'send' ? s.input : s.output)!,
        s.peer!,
        s.tag ?? 0,
        s.timeoutMs,
        s.check,
      );
      if (s.trace) w.trace = s.trace.issue(w, 'direct');
      return w;
    }
    const algo =
      chosen ??
      (s.name === 'allReduce' ? chooseAllReduceAlgo(s.count * DTYPE_SIZE[s.dtype], this.tuning, s.algo) : 'direct');
    const seq = s.seq ?? this.seq++;
    const work = runAs ?? new Work(s.name, seq, this, this.ctx.canBlock);
    const q = queuedOp(s, { seq, work, algo }, this.site);
    if (s.trace) q.work.trace = q.trace = s.trace.issue(q.work, algo);
    // An op that starts at once takes its start time as its issue time (one clock read fewer).
    if (this.queue.length && Number.isNaN(q.work.timing.issuedAt)) q.work.timing.issuedAt = nowMs();
    this.queue.push(q);
    if (!runAs) this.flight.submitted(q.work, s, algo);
    this.progress(q.work, false);
    return q.work;
  }

  sendRecv(
    name: P2pKind,
    buf: Buf,
    peer: number,
    tag: number,
    timeoutMs: number | undefined,
    check?: InputCheck,
  ): Work {
    if (this.broken) throw this.broken;
    if (!this.p2p) throw new WebcclError('INTERNAL', `${name}: this engine runs collectives only`);
    const w = this.p2p.submit(name, buf, peer, tag, timeoutMs ?? this.timeoutMs, check);
    this.flight.submittedP2p(w, buf, peer);
    return w;
  }

  /** Whether every rank has reached step `step` of the op in descriptor `desc` (the wait it stands in). */
  stepReached(desc: number, step: number): boolean {
    return this.runner.stepReached(desc, step) !== 0;
  }

  /** Moves pending send/recv along without blocking; true when one moved. */
  pollP2p(): boolean {
    return this.p2p?.poll() ?? false;
  }

  /** Collectives issued and not yet settled (send/recv aside). */
  pendingCollectives(): number {
    return this.queue.length;
  }

  /**
   * Runs the queued collectives until none is left, sleeping on the doorbell between steps, as
   * long as a peer arrives at this rank's step every `ms`: true when none is left, false once
   * `ms` passed with no peer arriving. For ops of one exchange that this rank started at issue,
   * whose peers are issuing them too (thread-engine.ts hands the next op on after them): with more
   * ranks than cores they arrive one by one as each gets a core, a peer that computes instead
   * not at all.
   */
  settleQueued(ms: number): boolean {
    let until = nowMs() + ms;
    let missing = this.runner.missingRanks().length;
    while (this.queue.length) {
      const q = this.queue[0];
      if (this.step(q, false)) continue;
      const now = nowMs();
      const m = this.runner.missingRanks().length;
      if (m < missing) until = now + ms; // a peer arrived: the others may be on their way
      missing = m;
      const left = until - now;
      if (left <= 0) return false;
      if (!this.ctx.canBlock) continue; // (a page's main thread: it looks again)
      try {
        // (in slices: the doorbell rings once every rank arrived, not at each arrival)
        this.runner.sleep(q, undefined, Math.min(left, SETTLE_LOOK_MS));
      } catch (e) {
        this.settleFailed(q, e);
      }
    }
    return true;
  }

  pending(): number {
    return this.queue.length + (this.p2p?.pending() ?? 0);
  }

  algorithms(): Record<string, number> {
    return { ...this.byAlgorithm };
  }

  abort(reason: string): void {
    this.runner.abort(ABORT_REASON.USER, this.ctx.rank, reason);
    this.fail(
      new WebcclError('ABORTED', `communicator aborted on rank ${this.ctx.rank}: ${reason}`, {
        by: this.ctx.rank,
        reason,
      }),
    );
  }

  failure(): WebcclError | undefined {
    return this.broken;
  }

  close(): void {
    leaveThreadQueues(this);
    this.broken ??= new WebcclError('ABORTED', 'communicator destroyed');
    if (!this.closed) this.p2p?.close();
    this.closed = true;
  }

  /** WorkDriver: runs queued ops in order until `w` completes (or, without block, until one would wait). */
  progress(w: Work, block: boolean): void {
    while (this.queue.length && !w.settled) {
      const q = this.queue[0];
      const others = othersQueued(this);
      if (!block || (!this.p2p?.pending() && !others)) {
        if (!this.step(q, block)) return;
        continue;
      }
      // A peer's send or recv, or an op of another of this thread's communicators, may wait for
      // this rank while it waits here: serve them all.
      if (this.step(q, false) || this.movedElsewhere()) continue;
      try {
        this.runner.sleep(q, () => this.movedElsewhere(), others ? OTHERS_LOOK_MS : undefined);
      } catch (e) {
        this.settleFailed(q, e);
      }
    }
  }

  async progressAsync(w: Work): Promise<void> {
    while (this.queue.length && !w.settled) {
      const q = this.queue[0];
      if (!this.step(q, false) && !this.movedElsewhere()) {
        await this.runner
          .sleepAsync(q, () => this.movedElsewhere(), othersQueued(this) ? OTHERS_LOOK_MS : undefined)
          .catch((e) => this.settleFailed(q, e));
      }
    }
  }

  /** This communicator's send/recv, or the thread's other communicators' ops, moved (thread-queues.ts). */
  private movedElsewhere(): boolean {
    return (this.p2p?.poll() ?? false) || serveOthers(this);
  }

  /** Moves queued collectives along without blocking (a p2p wait lends its time); true when one ended. */
  private serveCollectives(): boolean {
    let moved = false;
    while (this.queue.length && this.step(this.queue[0], false)) moved = true;
    return moved;
  }

  /** QueueServer: what only this thread moves (its collectives, its send/recv). */
  queued(): number {
    return this.queue.length + (this.p2p?.pending() ?? 0);
  }

  /** QueueServer: moves them along without blocking (another communicator's wait lends its time). */
  serveQueued(): boolean {
    const moved = this.serveCollectives();
    return (this.p2p?.poll() ?? false) || moved;
  }

  /** Starts/advances the head op; true when it settled. */
  private step(q: QueuedOp, block: boolean): boolean {
    try {
      if (this.broken) throw this.broken;
      if (!q.started) {
        if (this.runner.aborted()) throw this.runner.abortedOp(q)!;
        q.started = true;
        const now = nowMs();
        q.deadline = now + q.timeoutMs;
        q.work.timing.startedAt = now;
        if (Number.isNaN(q.work.timing.issuedAt)) q.work.timing.issuedAt = now;
        q.check?.atStart(q.seq);
        writeDescriptor(this.runner.views().i32, q, this.ctx, this.keepMaxBytes);
        stampStart(this.runner.views().i32, this.ctx, q.seq, now);
      } else q.check?.resume(q.seq);
      if (!this.runner.run(q, block, block ? this.ctx.spinPolls : this.ctx.tryPolls)) {
        q.check?.suspend();
        return false;
      }
      q.check?.atEnd(q.seq);
      this.queue.shift();
      q.work.timing.joinedAt = joinTime(this.runner.views().i32, this.ctx.comm, this.ctx.size, q.seq);
      q.work.settle();
      countDone(this.counters, q.work);
      if (q.name === 'allReduce') this.byAlgorithm[q.algo]++;
      if (trace)
        log('TRACE', `rank ${worldRankOf(this.ctx)}: ${opLine(q)} done in ${(q.work.durationMs * 1000).toFixed(1)} us`);
      return true;
    } catch (e) {
      this.settleFailed(q, e);
      return true;
    }
  }

  private settleFailed(q: QueuedOp, e: unknown): void {
    let err = WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e));
    if (err.details.relayout === true) {
      if (q.relayout) return this.relayout(q);
      // (tensors always carry their relayout) The peers run the op again: this rank must not go on as if it had failed
      // alone.
      err = new WebcclError(
        'INTERNAL',
        `${err.reason}, and ${q.name} #${q.seq} cannot run again in row-major on rank ${this.ctx.rank}`,
      );
    }
    this.counters.failed++;
    if (err.code === 'MISMATCH') {
      // Every rank saw the same disagreement at the op's first step: the communicator stays usable.
      this.queue.shift();
      q.work.settle(err);
      return;
    }
    // A failure of this rank's own (a WEBCCL_CHECK, a buffer detached in flight), not one it
    // learned from the communicator: abort it, so that the peers fail at once too, with its
    // reason. (A departed rank is seen by every peer itself, each naming it: no abort needed.)
    if (err.code !== 'ABORTED' && err.code !== 'TIMEOUT' && err.code !== 'CONNECTION_CLOSED') {
      this.runner.abort(ABORT_REASON.PEER_ERROR, this.ctx.rank, `${err.reason} (${err.code})`);
    }
    this.fail(err);
  }

  /**
   * Every rank's signature check found the op's tensors in different layouts of one shape (and
   * nothing else amiss), and ended the op at its first step: this rank converts its data to
   * row-major and the op runs again, still at the head of the queue, on every rank alike. It
   * signs in the other signature record (D.SIG_SHIFT): a slower rank may still be reading the
   * first run's, but all have finished with the op before it.
   */
  private relayout(q: QueuedOp): void {
    try {
      relaidOut(q, this.tuning);
      signAgain(this.runner.views().i32, q.desc);
    } catch (e) {
      this.settleFailed(q, e);
    }
  }

  /** The communicator is unusable: fail every queued op with the same error. */
  private fail(err: WebcclError): void {
    this.broken ??= err;
    for (const q of this.queue.splice(0)) q.work.settle(err);
    this.p2p?.fail(err);
    this.flight.broke(err);
  }
}
