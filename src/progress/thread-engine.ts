// A rank's engine on a node that has a progress thread: it hands collectives to that thread
// through the rank's postbox (postboxes.ts), so they go on while the rank computes, and keeps the fast
// path of running an op itself. Buffers from comm.alloc() are used in place; a plain TypedArray
// is copied into a heap block when the op is posted and out of it when its outcome is read.
//
// Which ops it hands over and which it runs itself: the modes are told in node-engine.ts.

import { DTYPE_SIZE } from '../core/dtypes.js';
import { WebcclError } from '../core/errors.js';
import { freshI32 } from '../core/fresh-buffer.js';
import type { ProgressMode } from '../core/progress-mode.js';
import type { Algo } from '../core/shm-map.js';
import { WAIT_SLICE_MS } from '../core/waits.js';
import type { Buf } from '../engine/buffers.js';
import { nowMs } from '../engine/clock.js';
import type { RankContext } from '../engine/context.js';
import { addCounts, type Engine, isP2p, type OpCounters, type OpSpec, type P2pKind } from '../engine/engine.js';
import {
  joinThreadQueues,
  leaveThreadQueues,
  OTHERS_LOOK_MS,
  othersQueued,
  type QueueServer,
  releaseHoldsElsewhere,
  serveOthers,
} from '../engine/thread-queues.js';
import { Work, type WorkDriver } from '../engine/work.js';
import { ShmEngine } from '../shm/engine.js';
import { chooseAllReduceAlgo, resolveTuning, type Tuning } from '../tuner/tuner.js';
import { AT_ONCE_MS, type Held, oneExchange, SETTLE_MS, ShapeMemory, UNSTAGED } from './auto-choice.js';
import { HeldSlot, type ThreadOp, untraced } from './held-slot.js';
import { nodeProgressThread } from './node-postbox.js';
import { PostboxClient } from './postbox-client.js';
import { settleFrom, stageOp, threadEnded, unstage } from './postbox-outcomes.js';
import { type OpOutcome, PROGRESS_RUNNING, progressState } from './postboxes.js';

/** An op this rank took back from the postbox: the local engine ended it. */
const reclaimed = (t: ThreadOp): boolean => t.reclaimed;

/** How long a wait sleeps while this rank has send/recv pending (their peers' posts do not ring the postbox). */
const P2P_SLICE_MS = 1;

export class ThreadEngine implements Engine, WorkDriver, QueueServer {
  private readonly local: ShmEngine;
  private readonly tuning: Tuning;
  private seq = 0;
  /** The ops handed to the progress thread, through this rank's postbox. */
  private readonly box: PostboxClient<ThreadOp>;
  private broken: WebcclError | undefined;
  /** Auto mode: whether this rank waited for its last op right after issuing it (see submit). */
  private waitsAtOnce = false;
  /** Auto mode: the op held until the rank's next call says who runs it (see hold). */
  private held: Held | undefined;
  /** Where a held op lies written, in the postbox's next slot. */
  private readonly holds: HeldSlot;
  private readonly shapes = new ShapeMemory();
  /** The op submit() returned last, and when. */
  private lastIssued: Work | undefined;
  private lastReturnedAt = 0;
  readonly flight;

  constructor(
    private readonly ctx: RankContext,
    private readonly counters: OpCounters,
    commAlgo: unknown,
    readonly timeoutMs: number,
    readonly mode: Exclude<ProgressMode, 'caller'>,
  ) {
    this.local = new ShmEngine(ctx, counters, commAlgo, timeoutMs);
    this.tuning = resolveTuning(ctx.size, commAlgo);
    this.flight = this.local.flight;
    this.box = new PostboxClient(ctx, nodeProgressThread(ctx, mode, timeoutMs));
    this.holds = new HeldSlot(ctx, this.box, timeoutMs);
    joinThreadQueues(this);
  }

  submit(s: OpSpec): Work {
    if (this.broken) throw this.broken;
    if (isP2p(s.name)) return this.local.submit(s);
    // Whatever can refuse the call (an algorithm this node does not have) comes before it takes
    // a number or moves a held op along: a refused call leaves this rank's sequence where its
    // peers' is, whichever of them the call was refused on.
    const algo = this.algoOf(s);
    this.release(undefined);
    releaseHoldsElsewhere(this);
    const seq = this.seq++;
    s.seq = seq; // the spec is this call's own: numbered here, whichever engine runs it
    const work = new Work(s.name, seq, this, this.ctx.canBlock);
    // A tensor op whose data crosses in a layout of its own must convert on this rank if ranks
    // turn out to hold different layouts (see layouts/plan.ts): it runs here, behind the ops the
    // thread holds.
    const convertsHere = s.relayout !== undefined && (s.layout ?? 0) !== 0;
    if (convertsHere) this.drainThread();
    const threadBusy = this.box.ops.length > 0 && this.box.ops.some((t) => !t.reclaimed);
    if (convertsHere || (this.local.pendingCollectives() > 0 && !this.settleHere())) this.runHere(s, work, algo);
    else if (!threadBusy && this.mode === 'auto' && this.waitsAtOnce && oneExchange(s, this.ctx))
      this.runHere(s, work, algo);
    else if (!threadBusy && this.mode === 'auto' && this.waitsAtOnce && this.shapes.mayHold(s, work))
      this.hold(s, seq, work, algo);
    else this.toThread(s, seq, work, algo);
    this.lastIssued = work;
    // When the call returns, by a stamp taken just now where there is one (a clock read costs as
    // much as a small op's checks): a held op's issue, an op that ended at issue's end.
    this.lastReturnedAt =
      this.held?.work === work ? work.timing.issuedAt : work.settled ? work.timing.completedAt : nowMs();
    return work;
  }

  sendRecv(name: P2pKind, buf: Buf, peer: number, tag: number, timeoutMs: number | undefined): Work {
    if (this.broken) throw this.broken;
    return this.local.sendRecv(name, buf, peer, tag, timeoutMs);
  }

  /**
   * Holds an op for a rank that waits at once (auto mode): its next call says who runs it. A
   * wait for the op runs it here, as fast as without a progress thread; any other call hands it
   * to the thread. Meanwhile it lies written in the postbox's next slot, uncounted, tagged in
   * L.HOLD: a rank that computes instead of calling leaves it to the thread, which takes it
   * HOLD_MS after it first sees it (hosts/shm-host.ts takeHold). A ring wakes the thread only when it is not looking
   * at the postboxes every HOLD_MS already (PROGRESS_LOOK), which it keeps doing while ranks hold.
   */
  private hold(s: OpSpec, seq: number, work: Work, algo: Algo): void {
    work.timing.issuedAt = nowMs();
    this.flight.submitted(work, s, algo);
    if (s.trace) work.trace = s.trace.issue(work, algo);
    const h: Held = { spec: s, seq, work, algo, tag: 0, staged: UNSTAGED };
    this.held = h;
    this.holds.place(h);
  }

  /**
   * The rank called again while an op is held: a wait for that op (`waited`) runs it here;
   * anything else hands it to the thread, and the rank is taken to go on computing from now.
   */
  private release(waited: Work | undefined): void {
    const h = this.held;
    if (!h) return;
    this.held = undefined;
    if (!this.holds.takeBack(h)) {
      if (h.work !== waited) this.waitsAtOnce = false;
      return;
    }
    if (h.work === waited) {
      unstage(this.ctx, h.staged);
      this.runHere(untraced(h.spec), h.work, h.algo, false);
      return;
    }
    this.waitsAtOnce = false;
    if (!h.tag) {
      this.toThread(untraced(h.spec), h.seq, h.work, h.algo, false);
      return;
    }
    // Written already (with no grace): counted posted now, for the thread to take at once.
    this.holds.post(h);
  }

  /** The held op fails with the communicator: taken back (or followed to the thread), its copies freed. */
  private dropHold(err: WebcclError): void {
    const h = this.held;
    if (!h) return;
    this.held = undefined;
    h.work.settle(err);
    if (this.holds.takeBack(h)) unstage(this.ctx, h.staged);
  }

  /** QueueServer: the op held for this rank's next call, which only this thread starts. */
  queued(): number {
    return this.held ? 1 : 0;
  }

  /** QueueServer: a wait on another communicator is such a call: the held op goes to the thread. */
  serveQueued(): boolean {
    if (!this.held) return false;
    this.release(undefined);
    return true;
  }

  releaseHold(): void {
    this.release(undefined);
  }

  /** Waits until the progress thread has ended every op of this communicator it holds. */
  private drainThread(): void {
    for (
      let t = this.box.ops.findLast((x) => !x.reclaimed);
      t && !t.work.settled;
      t = this.box.ops.findLast((x) => !x.reclaimed)
    )
      this.progress(t.work, true);
  }

  /**
   * Runs an op on this rank: the local engine runs it under the handle the caller holds, which
   * it settles (`fresh`: the op was neither issued nor entered in the flight record before).
   */
  private runHere(s: OpSpec, w: Work, algo: Algo, fresh = true): void {
    // (its issue time: stamped by the local engine, as its start when it starts at once)
    if (fresh) this.flight.submitted(w, s, algo);
    this.local.submit(s, w, algo);
  }

  /** Whether `w` (pending) runs on this rank, not in the progress thread's hands. */
  private runsHere(w: Work): boolean {
    return this.box.ops.length === 0 || !this.box.ops.some((t) => t.work === w && !t.reclaimed);
  }

  pending(): number {
    return (
      this.local.pending() + this.box.ops.filter((t) => !t.work.settled && !t.reclaimed).length + (this.held ? 1 : 0)
    );
  }

  get progressMode(): 'auto' | 'thread' {
    return this.mode;
  }

  /** Ops the progress thread has ended for this rank. */
  threadOps(): number {
    return this.box.ended;
  }

  /** Ops held at issue for the rank's next call (see the top). */
  heldOps(): number {
    return this.holds.count;
  }

  algorithms(): Record<string, number> {
    return addCounts(this.local.algorithms(), this.box.algos);
  }

  abort(reason: string): void {
    this.local.abort(reason);
    this.fail(this.local.failure()!);
  }

  failure(): WebcclError | undefined {
    return this.broken ?? this.local.failure();
  }

  close(): void {
    leaveThreadQueues(this);
    this.local.close();
    this.broken ??= new WebcclError('ABORTED', 'communicator destroyed');
    this.dropHold(this.broken);
    this.box.detach();
  }

  // ---------------------------------------------------------------- WorkDriver

  /** In auto mode, a wait begun before the progress thread took the op takes it back (see the top). */
  waiting(w: Work): void {
    // How this rank completes its ops (at once, or after other work) predicts the next one's.
    // A held op waited for starts here and now (release runs it): its start time is the clock.
    const held = this.held?.work === w;
    this.release(w);
    const now = held && !Number.isNaN(w.timing.startedAt) ? w.timing.startedAt : nowMs();
    this.waitsAtOnce = w === this.lastIssued && now - this.lastReturnedAt <= AT_ONCE_MS;
    this.shapes.learn(w, this.waitsAtOnce);
    this.collect();
    if (this.mode !== 'auto') return;
    const t = this.holds.reclaim(w);
    if (!t) return;
    try {
      // Its trace was issued with `w`, which ends it: the local run records no second slice.
      this.local.submit(untraced(t.spec), w, t.algo); // (in the flight record since toThread)
    } catch (e) {
      w.settle(WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e)));
    }
  }

  progress(w: Work, block: boolean): void {
    if (!block) {
      this.waitsAtOnce = false; // it polls: it goes on with other work meanwhile
      this.shapes.learn(w, false);
    }
    this.release(block ? w : undefined);
    releaseHoldsElsewhere(this);
    if (this.runsHere(w)) return this.local.progress(w, block);
    this.collect();
    while (block && !w.settled) {
      const sleep = this.look();
      if (sleep === 'gone') return this.threadGone();
      if (sleep) this.box.sleep(sleep.seen, sleep.ms);
      this.collect();
    }
  }

  async progressAsync(w: Work): Promise<void> {
    this.release(w);
    releaseHoldsElsewhere(this);
    if (this.runsHere(w)) return this.local.progressAsync(w);
    this.collect();
    while (!w.settled) {
      const sleep = this.look();
      if (sleep === 'gone') return this.threadGone();
      if (sleep) await this.box.sleepAsync(sleep.seen, sleep.ms);
      this.collect();
    }
  }

  /**
   * One look while a thread-run op is awaited: undefined when something moved (collect
   * again), 'gone' when the thread has ended, else what to sleep on (the postbox's DONE word).
   * A peer may wait for this rank's send/recv meanwhile, or for an op of another of its
   * communicators that this rank runs itself: those are moved here, and the sleep is short
   * while any is pending (their posts do not ring the postbox; see thread-queues.ts).
   */
  private look(): { seen: number; ms: number } | 'gone' | undefined {
    const done = this.box.done();
    const p2p = this.local.pending() > 0;
    if (done !== this.box.read || (p2p && this.local.pollP2p()) || serveOthers(this.local)) return undefined;
    if (progressState(this.box.words()) !== PROGRESS_RUNNING) return 'gone';
    return {
      seen: done,
      ms: p2p ? P2P_SLICE_MS : othersQueued(this.local) ? OTHERS_LOOK_MS : WAIT_SLICE_MS,
    };
  }

  // ---------------------------------------------------------------- who runs what

  /**
   * Ends the ops this rank started at issue (see RANK_STARTS_MAX), waiting up to SETTLE_MS for
   * their peers: an op of this communicator starts only once the ones before it have ended, so a
   * second op issued behind a pending one would sit unstarted (its data unposted) while the rank
   * computes. False when they have not ended (the new op then queues behind them here).
   */
  private settleHere(): boolean {
    return this.local.settleQueued(this.ctx.canBlock ? SETTLE_MS : 0);
  }

  private algoOf(s: OpSpec): Algo {
    return s.name === 'allReduce' ? chooseAllReduceAlgo(s.count * DTYPE_SIZE[s.dtype], this.tuning, s.algo) : 'direct';
  }

  private i32(): Int32Array {
    return freshI32(this.ctx.core.memory);
  }

  // ---------------------------------------------------------------- the postbox

  /** Hands an op to the progress thread (`fresh`: not issued before, e.g. held). */
  private toThread(s: OpSpec, seq: number, work: Work, algo: Algo, fresh = true): Work {
    if (fresh) {
      this.flight.submitted(work, s, algo);
      work.timing.issuedAt = nowMs();
    }
    if (s.trace) work.trace = s.trace.issue(work, algo);
    if (this.broken) {
      work.settle(this.broken);
      return work;
    }
    this.box.openOnce();
    if (progressState(this.i32()) !== PROGRESS_RUNNING) {
      this.box.ops.push({ spec: s, work, seq, algo, stagedIn: 0, stagedOut: 0, inPlace: false, reclaimed: false });
      this.threadGone();
      return work;
    }
    const staged = stageOp(this.ctx, s);
    s.check?.atStart(seq);
    this.box.hand({ spec: s, work, seq, algo, ...staged, reclaimed: false });
    return work;
  }

  /** Reads back the ops the progress thread has ended: copies results out, frees copies, settles. */
  private collect(): void {
    if (this.box.postbox) this.box.collect(this.ended, reclaimed);
  }

  /** collect()'s reader, made once (every wait collects). */
  private readonly ended = (t: ThreadOp, o: OpOutcome, err: WebcclError | undefined): void => this.end(t, o, err);

  private end(t: ThreadOp, o: OpOutcome, err: WebcclError | undefined): void {
    if (!settleFrom(t, o, err)) return; // failed here already (abort)
    if (err) {
      this.counters.failed++;
      if (err.code !== 'MISMATCH') this.fail(err);
      return;
    }
    this.box.count(this.counters, t);
  }

  /** The communicator is unusable: every op not yet ended fails with `err` (copies stay until the thread lets go). */
  private fail(err: WebcclError): void {
    this.broken ??= err;
    this.dropHold(err);
    for (const t of this.box.ops) if (!t.work.settled && !t.reclaimed) t.work.settle(err);
    this.flight.broke(err);
  }

  /** The progress thread ended with ops of ours in hand: they fail, and so does the communicator on every rank. */
  private threadGone(): void {
    const err = threadEnded(this.ctx, 'progress thread');
    this.local.abort(err.reason);
    for (const t of this.box.dropAll()) if (!t.work.settled && !t.reclaimed) t.work.settle(err);
    this.fail(err);
  }
}
