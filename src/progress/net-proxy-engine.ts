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
import { addCounts, type Engine, isP2p, type OpCounters, type OpSpec } from '../engine/engine.js';
import { FlightRecorder } from '../engine/flight-recorder.js';
import { Work, type WorkDriver } from '../engine/work.js';
import { BLOCK_SLICE_MS, mayBlockFor, nextTurn } from '../net/blocking-await.js';
import type { NetEngine } from '../net/engine.js';
import { ShmRunner } from '../shm/runner.js';
import { hubReason, hubState, onThreadLost, ringHub } from './net-hub.js';
import { askAbort, type NetPostboxConfig, openNetPostbox } from './net-postbox.js';
import { rankRuns } from './net-route.js';
import { type HandedOp, PostboxClient } from './postbox-client.js';
import { closePostbox } from './postbox-life.js';
import { settleFrom, stageOp, threadEnded } from './postbox-outcomes.js';
import { AWAITED_SHOWN, L, type OpOutcome, PROGRESS_GONE, PROGRESS_RUNNING } from './postboxes.js';

interface PostedNetOp extends HandedOp {
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
  /** The ops handed to the network progress thread, through this rank's postbox. */
  private readonly box: PostboxClient<PostedNetOp>;
  /** The heap blocks of the postbox's description and of an abort's reason (0: none). */
  private config = 0;
  private abortBlock = 0;
  private broken: WebcclError | undefined;
  /** Every collective not yet settled, in issue order (they settle in that order). */
  private readonly order: Issued[] = [];
  /** When the last collective settled ended: the next cannot have ended before (its handle waited for it). */
  private lastEnd = -Infinity;
  readonly progressMode: 'auto' | 'thread';
  /** Why waitSync() refuses an op the rank runs itself (made once: every such op carries it). */
  private readonly whyNoBlock: string;

  private readonly recorder: FlightRecorder;
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
    this.box = new PostboxClient(ctx, {
      open: () => {
        const opened = openNetPostbox(ctx, c, c.members[c.rank], hub);
        this.config = opened.config;
        return opened.postbox;
      },
      graceUntil: () => 0,
      ring: () => ringHub(ctx.core.memory, hub),
      // The call's algorithm option rides unchecked: the thread's engine judges it, as the rank's would.
      postedAlgo: (t) => t.spec.algo,
      timeoutMs: c.timeoutMs,
      // Freed only once the thread let go: its sends may still read the ops' copies. The thread
      // lets go on its own event loop, so this short wait needs nothing of this thread (even
      // where several ranks share it, as in tests).
      letGo: (postbox) =>
        closePostbox(
          { ...ctx, canBlock: true },
          postbox,
          DETACH_MS,
          () => hubState(ctx.core.memory, hub) === PROGRESS_GONE,
          () => ringHub(ctx.core.memory, hub),
        ),
    });
    this.whyNoBlock = `cannot complete this op: it runs on the rank's own connections (an allToAll, or another collective of at most ${rankRunsMax} bytes, across nodes in 'auto' progress mode) and ends on the event loop; WEBCCL_PROGRESS=thread on every rank hands every collective to the network progress thread, where waitSync() works`;
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
    // It waits, as abort() does, until the thread has told them: the rank may end its process
    // next, and the peers' threads would then see closed connections instead of the reason.
    direct.onBroken = (err) => {
      this.awaitToldPeers(this.tellThread(`rank ${c.members[c.rank]} failed: ${err.reason} (${err.code})`));
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
    const started = this.box.postbox ? Atomics.load(this.box.words(), this.box.at(L.STARTED)) : 0;
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
    if (!this.box.postbox) return [];
    const i32 = this.box.words();
    const n = Math.min(Atomics.load(i32, this.box.at(L.AWAITED)), AWAITED_SHOWN);
    return Array.from({ length: n }, (_, k) => i32[this.box.at(L.AWAITED_LIST + 4 * k)]);
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
    this.box.openOnce();
    const staged = stageOp(this.ctx, s);
    s.check?.atStart(seq);
    const t: PostedNetOp = { spec: s, work, seq, algo, ...staged };
    this.order.push({ work, postbox: t });
    if (this.threadRuns()) {
      this.box.hand(t);
    } else {
      this.box.ops.push(t);
      this.threadGone();
    }
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
    return this.box.ended;
  }

  algorithms(): Record<string, number> {
    return addCounts(this.direct.algorithms(), this.box.algos);
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
    this.awaitToldPeers(asked);
    this.fail(this.direct.failure()!);
  }

  /** Waits (at most ABORT_SEND_MS) until the thread has sent the abort it was `asked` (0: not asked now). */
  private awaitToldPeers(asked: number): void {
    const at = this.box.at(L.ABORT_SENT);
    const until = performance.now() + ABORT_SEND_MS;
    while (asked && Atomics.load(this.box.words(), at) === 0 && this.threadRuns() && performance.now() < until)
      Atomics.wait(this.box.words(), at, 0, 20);
  }

  /**
   * Asks the thread to abort this communicator (it tells every peer's thread); the reason block, or 0 when asked
   * before.
   */
  private tellThread(reason: string): number {
    this.box.openOnce();
    const asked = askAbort(this.ctx, this.box.postbox, reason, this.hub);
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
    if (!this.box.detach()) return;
    for (const b of [this.config, this.abortBlock]) if (b) this.ctx.heap.free(b);
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
      const done = this.box.done();
      if (done === this.box.read) {
        if (!this.threadRuns()) return this.threadGone();
        this.box.sleep(done, WAIT_SLICE_MS);
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
    let blocked = false;
    try {
      while (!w.settled) {
        const first = this.head();
        if (first?.inner) {
          await first.inner.wait().catch(() => undefined);
          this.collect();
          continue;
        }
        const done = this.box.done();
        if (done === this.box.read) {
          if (!this.threadRuns()) return this.threadGone();
          if (mayBlockFor(this.ctx.canBlock)) {
            // Blocked from the next job, not in wait(): the caller's code runs on first, as on one
            // node (it may issue more, or end); then everything is looked at again.
            if (!blocked) {
              blocked = true;
              await undefined;
              continue;
            }
            this.box.sleep(done, BLOCK_SLICE_MS);
            this.collect();
            // (a slice that ended nothing lets the event loop run once: timers, the rank's own sockets)
            if (!w.settled && this.box.done() === done) await nextTurn();
            continue;
          }
          alive ??= setTimeout(() => undefined, 1 << 30);
          await this.box.sleepAsync(done, WAIT_SLICE_MS);
        }
        this.collect();
      }
    } finally {
      if (alive !== undefined) clearTimeout(alive);
    }
  }

  // ---------------------------------------------------------------- the postbox

  private threadRuns(): boolean {
    return hubState(this.ctx.core.memory, this.hub) === PROGRESS_RUNNING;
  }

  /** Reads back the ops the thread has ended: copies results out, frees copies, settles. */
  private collect(): void {
    this.box.collect((t, o, err) => {
      if (!err)
        t.outcome = o; // settled in issue order (release)
      else if (settleFrom(t, o, err)) {
        this.counters.failed++;
        this.fail(err);
      } // (else failed here already: an abort)
    });
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
        if (settleFrom(t, t.outcome, undefined, this.lastEnd)) this.box.count(this.counters, t);
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
    for (const t of this.box.ops) if (!t.work.settled) t.work.settle(err);
    this.recorder.broke(err);
    this.direct.failWith(err);
  }

  /** The thread ended with ops of ours in hand: they fail (its connections closed, so peers' ops fail too). */
  private threadGone(): void {
    const err = threadEnded(this.ctx, 'network progress thread', hubReason(this.ctx.core.memory, this.hub));
    this.fail(err);
    for (const t of this.box.dropAll()) if (!t.work.settled) t.work.settle(err);
  }
}
