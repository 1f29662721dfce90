// A rank's engine for a communicator across nodes when its node's network progress thread runs
// the collectives (net-host.ts): ops are posted through the rank's postbox and go on while the rank
// computes; the rank only reads their outcomes. Buffers from comm.alloc() are used in place; a
// plain TypedArray is copied into a heap block when the op is posted and out when it ends.
// Send and recv stay on the rank's own connections (`direct`, a NetEngine of its own), and so
// do small collectives in the job's 'auto' mode (net-route.ts): every rank makes the same
// split, so each message meets its receive on the same links. Ops end in issue order whichever
// path ran them. Unlike ops across nodes run by the rank, those the thread runs may be waited
// for with waitSync().

import { WebcclError } from '../core/errors.js';
import { ABORT_REASON } from '../core/shm-map.js';
import { WAIT_SLICE_MS } from '../core/waits.js';
import type { RankContext } from '../engine/context.js';
import { addCounts, countDone, type Engine, isP2p, type OpCounters, type OpSpec } from '../engine/engine.js';
import { FlightRecorder } from '../engine/flight-recorder.js';
import { Work, type WorkDriver } from '../engine/work.js';
import type { NetEngine } from '../net/engine.js';
import { ShmRunner } from '../shm/runner.js';
import { hubReason, hubState, onThreadLost, ringHub } from './net-hub.js';
import { askAbort, type NetPostboxConfig, openNetPostbox } from './net-postbox.js';
import { rankRuns } from './net-route.js';
import { closePostbox } from './postbox-life.js';
import { type PostboxOp, readBack, settleFrom, stageOp, threadEnded, unstage } from './postbox-outcomes.js';
import {
  AWAITED_SHOWN,
  L,
  type OpOutcome,
  POSTBOX_BYTES,
  POSTBOX_SLOTS,
  PROGRESS_GONE,
  PROGRESS_RUNNING,
  postedOp,
  slotAt,
} from './postboxes.js';
import { type SlotViews, viewsReaching, writePosted } from './slot-codec.js';

interface PostedNetOp extends PostboxOp {
  /** The schedule the thread's engine runs it with (the same choice on both threads). */
  algo: string;
  /** Read back, not yet settled (an earlier op is still running). */
  outcome?: OpOutcome;
}

/**
 * A collective in issue order: posted to the thread (`postbox`), or run by the rank itself (`inner`, the direct
 * engine's handle).
 */
interface Issued {
  work: Work;
  postbox?: PostedNetOp;
  inner?: Work;
}

/** How long abort() waits for the thread to tell the peers. */
const ABORT_SEND_MS = 2000;
/** How long closing waits for the thread to let go of the postbox (it may be ending an op's sends). */
const DETACH_MS = 10_000;

export class NetProxyEngine implements Engine, WorkDriver {
  private seq = 0;
  private postbox = 0;
  private config = 0;
  private abortBlock = 0;
  /** Ops posted (or waiting for a slot) and not yet read back, in order. */
  private readonly ops: PostedNetOp[] = [];
  private posted = 0;
  private read = 0;
  private fromThread = 0;
  private readonly threadAlgos: Record<string, number> = {};
  private broken: WebcclError | undefined;
  /** Every collective not yet settled, in issue order (they settle in that order). */
  private readonly order: Issued[] = [];
  /** When the last collective settled ended: the next cannot have ended before (its handle waited for it). */
  private lastEnd = -Infinity;
  readonly progressMode: 'auto' | 'thread';
  /** Why waitSync() refuses an op the rank runs itself (made once: every such op carries it). */
  private readonly whyNoBlock: string;

  private readonly recorder: FlightRecorder;
  private slots: SlotViews | undefined;
  /** Takes back what the thread's loss would do (the communicator is closed: its block may be reused). */
  private unhook: (() => void) | undefined;

  /**
   * `hub`: the thread's state block (net-hub.ts). `rankRunsMax`: the largest collective the rank
   * runs itself (net-route.ts; 0: the thread runs them all).
   */
  constructor(
    private readonly ctx: RankContext,
    private readonly c: NetPostboxConfig,
    private readonly direct: NetEngine,
    private readonly counters: OpCounters,
    private readonly hub: number,
    private readonly rankRunsMax = 0,
  ) {
    this.progressMode = rankRunsMax > 0 ? 'auto' : 'thread';
    this.whyNoBlock = `cannot complete this op: it runs on the rank's own connections (a collective of at most ${rankRunsMax} bytes across nodes in 'auto' progress mode) and ends on the event loop; WEBCCL_PROGRESS=thread on every rank hands every collective to the network progress thread, where waitSync() works`;
    this.recorder = new FlightRecorder(c.rank, () =>
      this.head()?.inner ? this.direct.awaitedRanks() : this.awaitedInThread(),
    );
    direct.flight.mute(); // this record holds its ops too
    // The thread lost mid-op leaves its node mates' threads waiting for it in the node phase:
    // their communicator block is aborted, so that they fail (and tell their peers) at once.
    const node = c.node;
    if (node) {
      this.unhook = onThreadLost(ctx.core.memory, hub, () => {
        const who = `world rank ${c.members[c.rank]}'s network progress thread ended`;
        new ShmRunner(ctx.core, node.block, node.rank, node.localOf.length, node.localOf).abort(
          ABORT_REASON.PEER_ERROR,
          -1,
          who,
        );
      });
    }
    // The rank's own path failed (a peer's ABORT, a deadline, a disagreement found there): the
    // thread's ops fail too, here and on every peer (their ranks may wait on them).
    direct.onBroken = (err) => {
      this.tellThread(`rank ${c.members[c.rank]} failed: ${err.reason} (${err.code})`);
      this.fail(err);
    };
  }

  /** The flight record, with the ops the thread has started marked so (read from the postbox when asked). */
  get flight(): FlightRecorder {
    this.markStarted();
    return this.recorder;
  }

  /** Marks started the pending ops that have (the thread's, from the postbox; the rank's own, from their handles). */
  private markStarted(): void {
    const started = this.postbox ? Atomics.load(this.postboxWords(), (this.postbox + L.STARTED) >> 2) : 0;
    for (const e of this.order) {
      if (!Number.isNaN(e.work.timing.startedAt)) continue;
      if (e.inner) e.work.timing.startedAt = e.inner.timing.startedAt;
      else if (e.postbox!.seq < started) e.work.timing.startedAt = performance.now();
    }
  }

  /** The first collective not yet settled. */
  private head(): Issued | undefined {
    return this.order.find((e) => !e.work.settled);
  }

  /** The ranks the thread's running op awaits (the first few). */
  private awaitedInThread(): number[] {
    if (!this.postbox) return [];
    const i32 = this.postboxWords();
    const n = Math.min(Atomics.load(i32, (this.postbox + L.AWAITED) >> 2), AWAITED_SHOWN);
    return Array.from({ length: n }, (_, k) => i32[(this.postbox + L.AWAITED_LIST + 4 * k) >> 2]);
  }

  submit(s: OpSpec): Work {
    if (isP2p(s.name)) {
      const w = this.direct.submit(s);
      this.recorder.submitted(w, s, 'direct');
      return w;
    }
    this.collect(); // (a failure the thread has reported shows at issue)
    const failed = this.failure();
    if (failed) throw failed;
    const algo = this.direct.algorithmOf(s);
    const seq = this.seq;
    s.seq = seq;
    if (rankRuns(s, this.c.members.length, this.rankRunsMax)) return this.runHere(s, seq, algo);
    this.seq++;
    this.direct.ranElsewhere(s, seq, algo);
    const work = new Work(s.name, seq, this, this.ctx.canBlock, undefined, true);
    work.timing.issuedAt = performance.now();
    this.recorder.submitted(work, s, algo);
    if (s.trace) work.trace = s.trace.issue(work, algo);
    if (!this.postbox)
      ({ postbox: this.postbox, config: this.config } = openNetPostbox(
        this.ctx,
        this.c,
        this.c.members[this.c.rank],
        this.hub,
      ));
    const staged = stageOp(this.ctx, s);
    s.check?.atStart(seq);
    const t: PostedNetOp = { spec: s, work, seq, algo, ...staged };
    this.ops.push(t);
    this.order.push({ work, postbox: t });
    if (!this.threadRuns()) this.threadGone();
    else this.postWaiting();
    return work;
  }

  /** The fast path: the rank runs `s` on its own connections; the handle it returns ends in issue order. */
  private runHere(s: OpSpec, seq: number, algo: string): Work {
    const inner = this.direct.submit(s);
    this.seq++;
    const work = new Work(s.name, seq, this, false, this.whyNoBlock, true);
    work.timing.issuedAt = inner.timing.issuedAt;
    this.recorder.submitted(work, s, algo);
    this.order.push({ work, inner });
    if (inner.settled) this.release();
    return work;
  }

  pending(): number {
    return this.direct.p2pPending() + this.order.filter((e) => !e.work.settled).length;
  }

  threadOps(): number {
    return this.fromThread;
  }

  algorithms(): Record<string, number> {
    return addCounts(this.direct.algorithms(), this.threadAlgos);
  }

  /**
   * Aborts here (send/recv), in the thread (which tells every peer's thread) and fails what is
   * pending. Waits (briefly) until the thread has told the peers: a rank often ends its process
   * right after abort(), which would end the thread before it sent a word, and the peers would
   * then see closed connections instead of the reason.
   */
  abort(reason: string): void {
    const asked = this.tellThread(reason);
    this.direct.abort(reason);
    const at = (this.postbox + L.ABORT_SENT) >> 2;
    const until = performance.now() + ABORT_SEND_MS;
    while (asked && Atomics.load(this.postboxWords(), at) === 0 && this.threadRuns() && performance.now() < until)
      Atomics.wait(this.postboxWords(), at, 0, 20);
    this.fail(this.direct.failure()!);
  }

  /**
   * Asks the thread to abort this communicator (it tells every peer's thread); the reason block, or 0 when asked
   * before.
   */
  private tellThread(reason: string): number {
    if (!this.postbox)
      ({ postbox: this.postbox, config: this.config } = openNetPostbox(
        this.ctx,
        this.c,
        this.c.members[this.c.rank],
        this.hub,
      ));
    const asked = askAbort(this.ctx, this.postbox, reason, this.hub);
    this.abortBlock ||= asked;
    return asked;
  }

  failure(): WebcclError | undefined {
    return this.broken ?? this.direct.failure();
  }

  close(): void {
    this.unhook?.();
    this.direct.onBroken = undefined;
    this.direct.close();
    this.broken ??= new WebcclError('ABORTED', 'communicator destroyed');
    for (const e of this.order.splice(0)) e.work.settle(this.broken);
    if (!this.postbox) return;
    const postbox = this.postbox;
    this.postbox = 0;
    // Freed only once the thread let go: its sends may still read the ops' copies. The thread
    // lets go on its own event loop, so this short wait needs nothing of this thread (even
    // where several ranks share it, as in tests).
    if (
      !closePostbox(
        { ...this.ctx, canBlock: true },
        postbox,
        DETACH_MS,
        () => hubState(this.ctx.core.memory, this.hub) === PROGRESS_GONE,
        () => ringHub(this.ctx.core.memory, this.hub),
      )
    )
      return;
    for (const t of this.ops.splice(0)) unstage(this.ctx, t);
    for (const b of [postbox, this.config, this.abortBlock]) if (b) this.ctx.heap.free(b);
  }

  // ---------------------------------------------------------------- WorkDriver

  progress(w: Work, block: boolean): void {
    this.collect();
    while (block && !w.settled) {
      const first = this.head();
      if (first?.inner)
        throw new WebcclError(
          'UNSUPPORTED',
          `${w.name} #${w.seq}: waitSync() would wait behind ${first.work.name} #${first.work.seq}, which runs on the rank's own connections and ends on the event loop; await it instead`,
        );
      const i32 = this.postboxWords();
      const done = Atomics.load(i32, (this.postbox + L.DONE) >> 2);
      if (done === this.read) {
        if (!this.threadRuns()) return this.threadGone();
        Atomics.wait(i32, (this.postbox + L.DONE) >> 2, done, WAIT_SLICE_MS);
      }
      this.collect();
    }
  }

  async progressAsync(w: Work): Promise<void> {
    this.collect();
    if (w.settled) return;
    // Atomics.waitAsync does not keep the process alive: an awaited op must (`await comm.allReduce(x)`
    // at a script's end). Made at the first wait on the postbox: an op the rank runs keeps its own.
    let alive: ReturnType<typeof setTimeout> | undefined;
    try {
      while (!w.settled) {
        const first = this.head();
        if (first?.inner) {
          await first.inner.wait().catch(() => undefined);
          this.collect();
          continue;
        }
        const i32 = this.postboxWords();
        const done = Atomics.load(i32, (this.postbox + L.DONE) >> 2);
        if (done === this.read) {
          if (!this.threadRuns()) return this.threadGone();
          const r = Atomics.waitAsync(i32, (this.postbox + L.DONE) >> 2, done, WAIT_SLICE_MS);
          alive ??= setTimeout(() => undefined, 1 << 30);
          if (r.async) await r.value;
        }
        this.collect();
      }
    } finally {
      if (alive !== undefined) clearTimeout(alive);
    }
  }

  // ---------------------------------------------------------------- the postbox

  /**
   * The postbox's words (the postbox is open): the views kept for its slots, which reach it. Views made
   * anew for each look read the memory's buffer and built an array over it: ~10 µs of the wait
   * for an op that ended while the rank computed (caches cold, every object touched costs).
   */
  private postboxWords(): Int32Array {
    return this.views().i32;
  }

  /** Views that reach the postbox's slots (made once the postbox is open). */
  private views(): SlotViews {
    return (this.slots = viewsReaching(this.ctx.core.memory, this.slots, this.postbox + POSTBOX_BYTES));
  }

  private threadRuns(): boolean {
    return hubState(this.ctx.core.memory, this.hub) === PROGRESS_RUNNING;
  }

  /** Posts the ops that wait for a free slot, as far as slots allow. */
  private postWaiting(): void {
    const mem = this.ctx.core.memory;
    while (this.posted < this.read + this.ops.length && this.posted - this.read < POSTBOX_SLOTS) {
      const t = this.ops[this.posted - this.read];
      const s = t.spec;
      // The call's algorithm option rides unchecked: the thread's engine judges it, as the rank's would.
      const p = postedOp(s, t.seq, s.algo as never, s.timeoutMs ?? this.c.timeoutMs, 0, t.inPlace);
      if (
        !writePosted(
          mem,
          this.views(),
          slotAt(this.postbox, this.posted),
          t.stagedIn || s.input?.addr || 0,
          t.stagedOut || s.output?.addr || 0,
          p,
        )
      ) {
        throw new WebcclError(
          'INTERNAL',
          `${s.name} #${t.seq}: the op's description does not fit a progress-thread slot`,
        );
      }
      this.posted++;
      Atomics.store(this.postboxWords(), (this.postbox + L.POSTED) >> 2, this.posted);
      ringHub(mem, this.hub);
    }
  }

  /** Reads back the ops the thread has ended: copies results out, frees copies, settles. */
  private collect(): void {
    if (this.postbox) {
      const done = Atomics.load(this.postboxWords(), (this.postbox + L.DONE) >> 2);
      for (; this.read < done; this.read++) {
        const t = this.ops.shift()!;
        const { o, err } = readBack(this.ctx, this.views(), slotAt(this.postbox, this.read), t);
        this.fromThread++;
        if (!err) {
          t.outcome = o;
          continue;
        }
        if (!settleFrom(t, o, err)) continue; // failed here already (abort)
        this.counters.failed++;
        this.fail(err);
      }
      this.postWaiting();
    }
    this.release();
  }

  /** Settles, in issue order, the collectives that have ended (on the thread or here). */
  private release(): void {
    for (let e = this.order[0]; e; e = this.order[0]) {
      if (e.inner) {
        if (!e.inner.settled) return;
        const { startedAt, joinedAt, completedAt } = e.inner.timing;
        Object.assign(e.work.timing, { startedAt, joinedAt });
        e.work.settle(e.inner.failure, Math.max(completedAt, this.lastEnd));
      } else if (!e.work.settled) {
        const t = e.postbox!;
        if (!t.outcome) return;
        if (settleFrom(t, t.outcome, undefined, this.lastEnd)) {
          countDone(this.counters, t.work);
          if (t.spec.name === 'allReduce') this.threadAlgos[t.algo] = (this.threadAlgos[t.algo] ?? 0) + 1;
        }
      }
      this.lastEnd = Math.max(this.lastEnd, e.work.timing.completedAt);
      this.order.shift();
    }
  }

  /**
   * Unusable from here: every op not yet ended fails with `err` (copies stay until the thread
   * lets go), and so do the rank's own ops (its peers may be waiting on them).
   */
  private fail(err: WebcclError): void {
    this.broken ??= err;
    this.markStarted();
    for (const e of this.order.splice(0)) e.work.settle(err);
    for (const t of this.ops) if (!t.work.settled) t.work.settle(err);
    this.recorder.broke(err);
    this.direct.failWith(err);
  }

  /** The thread ended with ops of ours in hand: they fail (its connections closed, so peers' ops fail too). */
  private threadGone(): void {
    const err = threadEnded(this.ctx, 'network progress thread', hubReason(this.ctx.core.memory, this.hub));
    this.fail(err);
    for (const t of this.ops.splice(0)) {
      unstage(this.ctx, t);
      if (!t.work.settled) t.work.settle(err);
    }
    this.posted = this.read;
  }
}
