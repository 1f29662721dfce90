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
import { N, NODE_BASE } from '../core/shm-map.js';
import { WAIT_SLICE_MS } from '../core/waits.js';
import type { Buf } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import {
  addCounts,
  countDone,
  type Engine,
  isP2p,
  type OpCounters,
  type OpSpec,
  type P2pKind,
} from '../engine/engine.js';
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
import { chooseAllReduceAlgo, chunkElems, resolveTuning, type Tuning } from '../tuner/tuner.js';
import {
  AT_ONCE_MS,
  type Held,
  HOLD_COPY_MAX,
  opBytes,
  plainBytes,
  RANK_STARTS_MAX,
  SETTLE_MS,
  ShapeMemory,
  sameOp,
  UNSTAGED,
} from './auto-choice.js';
import { closePostbox, openPostbox } from './postbox-life.js';
import { type PostboxOp, readBack, settleFrom, stageOp, threadEnded, unstage } from './postbox-outcomes.js';
import {
  claimSlot,
  HOLD_MS,
  L,
  type OpOutcome,
  POSTBOX_SLOTS,
  PROGRESS_RUNNING,
  postedOp,
  progressState,
  ringProgress,
  SLOT_RECLAIMED,
  slotAt,
} from './postboxes.js';
import { renewPosted, type SlotViews, slotViews, specFitsWords, writePosted } from './slot-codec.js';

interface ThreadOp extends PostboxOp {
  algo: Algo;
  /** Taken back by this rank before the progress thread took it (the local engine runs it). */
  reclaimed: boolean;
}

/** The same while this rank has send/recv pending (their peers' posts do not ring the postbox). */
const P2P_SLICE_MS = 1;
/** How long closing waits for the progress thread to let go of the postbox. */
const DETACH_MS = 10_000;

/**
 * The spec without its trace, for an op whose handle already drew its issue (it ends the
 * op's slice): copied only when traced, since a spread makes a slow dictionary object.
 */
function untraced(s: OpSpec): OpSpec {
  return s.trace ? { ...s, trace: undefined } : s;
}

export class ThreadEngine implements Engine, WorkDriver, QueueServer {
  private readonly local: ShmEngine;
  private readonly tuning: Tuning;
  private seq = 0;
  private postbox = 0;
  /** Ops handed to the progress thread and not yet read back, in order (the first `posted - read` are in slots). */
  private readonly inThread: ThreadOp[] = [];
  private posted = 0;
  private read = 0;
  private readonly threadAlgos: Record<string, number> = {};
  private broken: WebcclError | undefined;
  private fromThread = 0;
  /** Auto mode: whether this rank waited for its last op right after issuing it (see submit). */
  private waitsAtOnce = false;
  /** Auto mode: the op held until the rank's next call says who runs it (see hold). */
  private held: Held | undefined;
  /**
   * The op a hold last wrote into slot `rewritten` (the postbox's next): a hold of the same op renews it (see hold).
   */
  private lastHeld: { spec: OpSpec; algo: Algo } | undefined;
  private rewritten = -1;
  private readonly shapes = new ShapeMemory();
  private heldCount = 0;
  /** The op submit() returned last, and when. */
  private lastIssued: Work | undefined;
  private lastReturnedAt = 0;
  /** See postboxWords(). */
  private views: SlotViews | undefined;
  readonly flight;

  constructor(
    private readonly ctx: RankContext,
    private readonly counters: OpCounters,
    commAlgo: unknown,
    private readonly timeoutMs: number,
    readonly mode: Exclude<ProgressMode, 'caller'>,
  ) {
    this.local = new ShmEngine(ctx, counters, commAlgo, timeoutMs);
    this.tuning = resolveTuning(ctx.size, commAlgo);
    this.flight = this.local.flight;
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
    const threadBusy = this.inThread.length > 0 && this.inThread.some((t) => !t.reclaimed);
    if (convertsHere || (this.local.pendingCollectives() > 0 && !this.settleHere())) this.runHere(s, work, algo);
    else if (!threadBusy && this.mode === 'auto' && this.waitsAtOnce && this.oneExchange(s))
      this.runHere(s, work, algo);
    else if (!threadBusy && this.mode === 'auto' && this.waitsAtOnce && this.shapes.mayHold(s, work))
      this.hold(s, seq, work, algo);
    else this.toThread(s, seq, work, algo);
    this.lastIssued = work;
    // A held op was stamped as it was held, just now: one clock read fewer for the common case.
    this.lastReturnedAt = this.held?.work === work ? work.timing.issuedAt : performance.now();
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
    work.timing.issuedAt = performance.now();
    this.flight.submitted(work, s, algo);
    if (s.trace) work.trace = s.trace.issue(work, algo);
    const h: Held = { spec: s, seq, work, algo, tag: 0, staged: UNSTAGED };
    this.held = h;
    this.heldCount++;
    const last = this.lastHeld;
    if (last && this.rewritten === this.posted && sameOp(last, s, algo)) {
      // The op held last, taken back by its rank (a loop of one op waited at once): its slot
      // holds this one already, but for its number. Every op pays for this path.
      renewPosted(this.views!, slotAt(this.postbox, this.posted), seq);
    } else if (!this.writeHeld(h)) {
      return;
    }
    h.tag = (seq % 0x3fffffff) + 1;
    const i32 = this.views!.i32;
    Atomics.store(i32, (this.postbox + L.HOLD) >> 2, h.tag);
    i32[(this.postbox + L.HOLDS) >> 2] = this.heldCount; // (the thread only lingers by it)
    if (Atomics.load(i32, (NODE_BASE + N.PROGRESS_LOOK) >> 2) === 0) ringProgress(this.i32());
  }

  /** Writes the held op into the postbox's next slot; false when it cannot go there (it stays held unwritten). */
  private writeHeld(h: Held): boolean {
    const { spec: s, seq, algo } = h;
    this.lastHeld = undefined;
    const room = this.posted === this.read + this.inThread.length && this.posted - this.read < POSTBOX_SLOTS;
    const plain = plainBytes(s);
    if (!room || !specFitsWords(s, algo) || plain > HOLD_COPY_MAX) return false;
    this.openPostboxOnce();
    if (progressState(this.postboxWords()) !== PROGRESS_RUNNING) return false;
    if (plain) h.staged = stageOp(this.ctx, s);
    const inPlace = h.staged.inPlace || (plain === 0 && s.input !== null && s.input === s.output);
    const p = postedOp(s, seq, algo, s.timeoutMs ?? this.timeoutMs, 0, inPlace);
    writePosted(
      this.ctx.core.memory,
      this.views!,
      slotAt(this.postbox, this.posted),
      h.staged.stagedIn || s.input?.addr || 0,
      h.staged.stagedOut || s.output?.addr || 0,
      p,
    );
    // Only an op on node-memory buffers is written again as it was (a copy is made per op).
    if (!plain) this.lastHeld = { spec: s, algo };
    this.rewritten = this.posted;
    return true;
  }

  /**
   * Takes the held op back from its slot: true when it is still this rank's; false when the
   * progress thread took it (it is then counted posted, and this rank follows it there).
   */
  private unhold(h: Held): boolean {
    if (!h.tag) return true;
    const i32 = this.postboxWords();
    if (Atomics.compareExchange(i32, (this.postbox + L.HOLD) >> 2, h.tag, 0) === h.tag) return true;
    Atomics.compareExchange(i32, (this.postbox + L.POSTED) >> 2, this.posted, this.posted + 1);
    this.posted++;
    this.followHeld(h);
    return false;
  }

  /** The held op, written in its slot, is the thread's now: this rank reads its outcome as any other's. */
  private followHeld(h: Held): void {
    h.spec.check?.atStart(h.seq);
    this.inThread.push({
      spec: untraced(h.spec),
      work: h.work,
      seq: h.seq,
      algo: h.algo,
      ...h.staged,
      reclaimed: false,
    });
  }

  /**
   * The rank called again while an op is held: a wait for that op (`waited`) runs it here;
   * anything else hands it to the thread, and the rank is taken to go on computing from now.
   */
  private release(waited: Work | undefined): void {
    const h = this.held;
    if (!h) return;
    this.held = undefined;
    if (!this.unhold(h)) {
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
    this.followHeld(h);
    this.posted++;
    const i32 = this.i32();
    Atomics.store(i32, (this.postbox + L.POSTED) >> 2, this.posted);
    ringProgress(i32);
  }

  /** The held op fails with the communicator: taken back (or followed to the thread), its copies freed. */
  private dropHold(err: WebcclError): void {
    const h = this.held;
    if (!h) return;
    this.held = undefined;
    h.work.settle(err);
    if (this.unhold(h)) unstage(this.ctx, h.staged);
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
      let t = this.inThread.findLast((x) => !x.reclaimed);
      t && !t.work.settled;
      t = this.inThread.findLast((x) => !x.reclaimed)
    )
      this.progress(t.work, true);
  }

  /**
   * Runs an op on this rank: the local engine runs it under the handle the caller holds, which
   * it settles (`fresh`: the op was neither issued nor entered in the flight record before).
   */
  private runHere(s: OpSpec, w: Work, algo: Algo, fresh = true): void {
    if (fresh) {
      w.timing.issuedAt = performance.now();
      this.flight.submitted(w, s, algo);
    }
    this.local.submit(s, w);
  }

  /** Whether `w` (pending) runs on this rank, not in the progress thread's hands. */
  private runsHere(w: Work): boolean {
    return this.inThread.length === 0 || !this.inThread.some((t) => t.work === w && !t.reclaimed);
  }

  pending(): number {
    return (
      this.local.pending() + this.inThread.filter((t) => !t.work.settled && !t.reclaimed).length + (this.held ? 1 : 0)
    );
  }

  get progressMode(): 'auto' | 'thread' {
    return this.mode;
  }

  /** Ops the progress thread has ended for this rank. */
  threadOps(): number {
    return this.fromThread;
  }

  /** Ops held at issue for the rank's next call (see the top). */
  heldOps(): number {
    return this.heldCount;
  }

  algorithms(): Record<string, number> {
    return addCounts(this.local.algorithms(), this.threadAlgos);
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
    if (this.postbox) this.detach();
  }

  // ---------------------------------------------------------------- WorkDriver

  /** In auto mode, a wait begun before the progress thread took the op takes it back (see the top). */
  waiting(w: Work): void {
    // How this rank completes its ops (at once, or after other work) predicts the next one's.
    // A held op waited for starts here and now (release runs it): its start time is the clock.
    const held = this.held?.work === w;
    this.release(w);
    const now = held && !Number.isNaN(w.timing.startedAt) ? w.timing.startedAt : performance.now();
    this.waitsAtOnce = w === this.lastIssued && now - this.lastReturnedAt <= AT_ONCE_MS;
    this.shapes.learn(w, this.waitsAtOnce);
    this.collect();
    if (this.mode !== 'auto') return;
    // Only an op with nothing of this communicator ahead of it in the thread's hands (ops taken
    // back earlier ran here), and still in its slot untaken.
    const i = this.inThread.length ? this.inThread.findIndex((t) => t.work === w) : -1;
    if (i < 0 || this.read + i >= this.posted || this.inThread.some((t, k) => k !== i && !t.reclaimed)) return;
    const t = this.inThread[i];
    if (!claimSlot(this.ctx.core.memory, slotAt(this.postbox, this.read + i), SLOT_RECLAIMED)) return;
    t.reclaimed = true;
    unstage(this.ctx, t);
    try {
      // Its trace was issued with `w`, which ends it: the local run records no second slice.
      this.local.submit(untraced(t.spec), w); // (in the flight record since toThread)
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
      if (sleep) Atomics.wait(this.postboxWords(), sleep.at, sleep.value, sleep.ms);
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
      if (sleep) {
        const r = Atomics.waitAsync(this.postboxWords(), sleep.at, sleep.value, sleep.ms);
        if (r.async) await r.value;
      }
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
  private look(): { at: number; value: number; ms: number } | 'gone' | undefined {
    const i32 = this.postboxWords();
    const done = Atomics.load(i32, (this.postbox + L.DONE) >> 2);
    const p2p = this.local.pending() > 0;
    if (done !== this.read || (p2p && this.local.pollP2p()) || serveOthers(this.local)) return undefined;
    if (progressState(i32) !== PROGRESS_RUNNING) return 'gone';
    return {
      at: (this.postbox + L.DONE) >> 2,
      value: done,
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

  /** Small enough to start on this rank (see RANK_STARTS_MAX): one exchange of one chunk. */
  private oneExchange(s: OpSpec): boolean {
    return (
      s.counts === undefined &&
      opBytes(s) <= RANK_STARTS_MAX &&
      s.count <= chunkElems(s.name, this.ctx.slotBytes, DTYPE_SIZE[s.dtype], this.ctx.size)
    );
  }

  private algoOf(s: OpSpec): Algo {
    return s.name === 'allReduce' ? chooseAllReduceAlgo(s.count * DTYPE_SIZE[s.dtype], this.tuning, s.algo) : 'direct';
  }

  private i32(): Int32Array {
    return freshI32(this.ctx.core.memory);
  }

  /**
   * A view of the node memory taken once the postbox was opened, for the postbox's words and the node
   * header only, which lie inside it (a view of a shared memory stays valid however the memory
   * grows): a new view per look cost every op waited in auto mode a typed array or two. Not for
   * ringProgress(), which may ring a communicator's doorbell allocated later.
   */
  private postboxWords(): Int32Array {
    return this.views?.i32 ?? this.i32();
  }

  // ---------------------------------------------------------------- the postbox

  /** Hands an op to the progress thread (`fresh`: not issued before, e.g. held). */
  private toThread(s: OpSpec, seq: number, work: Work, algo: Algo, fresh = true): Work {
    if (fresh) {
      this.flight.submitted(work, s, algo);
      work.timing.issuedAt = performance.now();
    }
    if (s.trace) work.trace = s.trace.issue(work, algo);
    if (this.broken) {
      work.settle(this.broken);
      return work;
    }
    this.openPostboxOnce();
    if (progressState(this.i32()) !== PROGRESS_RUNNING) {
      this.inThread.push({ spec: s, work, seq, algo, stagedIn: 0, stagedOut: 0, inPlace: false, reclaimed: false });
      this.threadGone();
      return work;
    }
    const staged = stageOp(this.ctx, s);
    s.check?.atStart(seq);
    this.inThread.push({ spec: s, work, seq, algo, ...staged, reclaimed: false });
    this.postWaiting();
    return work;
  }

  private openPostboxOnce(): void {
    if (this.postbox) return;
    this.postbox = openPostbox(this.ctx);
    this.views = slotViews(this.ctx.core.memory); // (after the postbox's allocation)
  }

  /** Posts the ops that wait for a free slot, as far as slots allow. */
  private postWaiting(): void {
    const mem = this.ctx.core.memory;
    while (this.posted < this.read + this.inThread.length && this.posted - this.read < POSTBOX_SLOTS) {
      const t = this.inThread[this.posted - this.read];
      const s = t.spec;
      // Auto mode: left alone for HOLD_MS, in which a wait takes it back (a rank may wait at once after all).
      const grace = this.mode === 'auto' ? performance.timeOrigin + performance.now() + HOLD_MS : 0;
      const p = postedOp(s, t.seq, t.algo, s.timeoutMs ?? this.timeoutMs, grace, t.inPlace);
      const inAddr = t.stagedIn || s.input?.addr || 0;
      const outAddr = t.stagedOut || s.output?.addr || 0;
      if (!writePosted(mem, this.views!, slotAt(this.postbox, this.posted), inAddr, outAddr, p)) {
        throw new WebcclError(
          'INTERNAL',
          `${s.name} #${t.seq}: the op's description does not fit a progress-thread slot`,
        );
      }
      this.posted++;
      const i32 = this.i32();
      Atomics.store(i32, (this.postbox + L.POSTED) >> 2, this.posted);
      // A thread that looks every HOLD_MS anyway needs no ring for an op it may not take sooner.
      if (!grace || Atomics.load(i32, (NODE_BASE + N.PROGRESS_LOOK) >> 2) === 0) ringProgress(i32);
    }
  }

  /** Reads back the ops the progress thread has ended: copies results out, frees copies, settles. */
  private collect(): void {
    if (!this.postbox) return;
    const done = Atomics.load(this.postboxWords(), (this.postbox + L.DONE) >> 2);
    for (; this.read < done; this.read++) {
      const t = this.inThread.shift()!;
      if (t.reclaimed) continue; // ended by the local engine
      const { o, err } = readBack(this.ctx, this.views!, slotAt(this.postbox, this.read), t);
      this.end(t, o, err);
    }
    this.postWaiting();
  }

  private end(t: ThreadOp, o: OpOutcome, err: WebcclError | undefined): void {
    this.fromThread++;
    if (!settleFrom(t, o, err)) return; // failed here already (abort)
    if (err) {
      this.counters.failed++;
      if (err.code !== 'MISMATCH') this.fail(err);
      return;
    }
    countDone(this.counters, t.work);
    if (t.spec.name === 'allReduce') this.threadAlgos[t.algo] = (this.threadAlgos[t.algo] ?? 0) + 1;
  }

  /** The communicator is unusable: every op not yet ended fails with `err` (copies stay until the thread lets go). */
  private fail(err: WebcclError): void {
    this.broken ??= err;
    this.dropHold(err);
    for (const t of this.inThread) if (!t.work.settled && !t.reclaimed) t.work.settle(err);
    this.flight.broke(err);
  }

  /** The progress thread ended with ops of ours in hand: they fail, and so does the communicator on every rank. */
  private threadGone(): void {
    const err = threadEnded(this.ctx, 'progress thread');
    this.local.abort(err.reason);
    for (const t of this.inThread.splice(0)) {
      unstage(this.ctx, t);
      if (!t.work.settled && !t.reclaimed) t.work.settle(err);
    }
    this.posted = this.read;
    this.fail(err);
  }

  /**
   * Asks the progress thread to let go of the postbox, then frees it and the copies (left in place if the thread does
   * not answer).
   */
  private detach(): void {
    const postbox = this.postbox;
    this.postbox = 0;
    if (!closePostbox(this.ctx, postbox, DETACH_MS)) return;
    for (const t of this.inThread.splice(0)) unstage(this.ctx, t);
    this.ctx.heap.free(postbox);
  }
}
