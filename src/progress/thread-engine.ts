// A rank's engine on a node that has a progress thread: it hands collectives to that thread
// through the rank's lane (lanes.ts), so they go on while the rank computes, and keeps the fast
// path of running an op itself. Buffers from comm.alloc() are used in place; a plain TypedArray
// is copied into a heap block when the op is posted and out of it when its outcome is read.
//
// Who runs an op (WEBCCL_PROGRESS, or the communicator's `progress` option):
// - 'caller': this rank, while it waits or polls (the engine of a node without progress thread);
// - 'thread': the progress thread;
// - 'auto': decided per op from how the rank completed its last op. A rank that waited for it
//   at once (`await comm.allReduce(x)`, waitSync() right after the call) is expected to do so
//   again: its next op is held, unstarted, until the rank calls webccl again. A wait for that
//   op runs it on the rank itself, as fast as without a progress thread (no copy, no hand-over);
//   any other call (the next op, a poll with isCompleted()) hands it to the thread, and the rank
//   is then expected to go on computing: its next ops go to the thread at once. An op handed
//   over stays untouched for 0.1 ms: a wait begun meanwhile takes it back.
//   Ops issued behind ops one runner holds go to the same runner, to keep the order.
// Send/recv always run on this rank (they keep no place in the collective order).
import { DTYPE_SIZE } from '../core/dtypes.js';
import { type ErrorCode, WebcclError } from '../core/errors.js';
import type { Algo, Kind } from '../core/shm-map.js';
import { readReasonText } from '../core/reason-text.js';
import { type ProgressMode, resolveProgressMode } from '../core/progress-mode.js';
import { type Tuning, chooseAllReduceAlgo, resolveTuning } from '../tuner/tuner.js';
import { sameView, type Buf } from '../comm/buffers.js';
import { type Engine, type OpCounters, type OpSpec, countDone, isP2p } from '../comm/engine.js';
import type { RankContext } from '../comm/context.js';
import { ShmEngine } from '../comm/shm-engine.js';
import { checkMode } from '../comm/input-check.js';
import { Work, type WorkDriver } from '../comm/work.js';
import {
  L, LANE_BYTES, LANE_CLOSING, LANE_DETACHED, LANE_OPEN, LANE_SLOTS, MAX_LANES, PROGRESS_GONE, PROGRESS_RUNNING, T, TABLE_BYTES,
  SLOT_RECLAIMED, claimSlot, laneTable, progressState, readSlot, ringProgress, slotAt, writeSlot,
} from './lanes.js';
import { N, NODE_BASE } from '../core/shm-map.js';
import { log } from '../core/log.js';

/** An op as the rank posts it (the slot's JSON; its buffers' addresses ride beside it). */
export interface PostedOp {
  name: Kind;
  algo: Algo;
  dtype: OpSpec['dtype'];
  op: OpSpec['op'];
  count: number;
  root: number;
  counts?: OpSpec['counts'];
  timeoutMs: number;
  layout: number;
  seq: number;
  input: { count: number } | null;
  output: { count: number } | null;
  inPlace: boolean;
  /**
   * Epoch ms before which the progress thread leaves the op alone (auto mode): a rank that waits
   * right after issuing takes it back in that time and runs it itself, without a thread hop.
   */
  graceUntil: number;
  /** Tensors: the logical shape class behind `count` (OpSpec.shape). */
  shape: number;
  /** A tensor op already row-major on the wire: when ranks hold different layouts, it runs again as it is. */
  relayout: boolean;
}

/** What the progress thread writes back: when the op ran (epoch ms) and how it failed, if it did. */
export interface OpOutcome {
  startedAt: number;
  completedAt: number;
  /** When every rank the op needed had joined it (NaN: not known). */
  joinedAt: number;
  error?: { code: ErrorCode; message: string; details: Record<string, unknown> };
}

interface ThreadOp {
  spec: OpSpec;
  work: Work;
  seq: number;
  algo: Algo;
  /** Heap blocks that hold a copy of a plain buffer (0: the buffer is used in place). */
  stagedIn: number;
  stagedOut: number;
  /** Taken back by this rank before the progress thread took it (it runs in `forwarded`). */
  reclaimed: boolean;
}

/** The same while this rank has send/recv pending (their peers' posts do not ring the lane). */
const P2P_SLICE_MS = 1;
/** Longest single sleep while waiting for the progress thread (it is checked for life between). */
const SLICE_MS = 50;
/** A wait begun this soon after the call returned counts as waiting at once (a synchronous-style call). */
const AT_ONCE_MS = 0.5;
/** How long the progress thread leaves a new op to its rank in auto mode (a wait right after issue takes it back). */
const GRACE_MS = 1;
/** How long closing waits for the progress thread to let go of the lane. */
const DETACH_MS = 10_000;

/**
 * The engine of a communicator whose ranks are all on `ctx`'s node: ops handed to the node's
 * progress thread where it runs (mode thread or auto), else run by the rank itself.
 */
export function nodeEngine(ctx: RankContext, counters: OpCounters, commAlgo: unknown, timeoutMs: number, progress: unknown): Engine {
  const mode = resolveProgressMode(progress);
  // WEBCCL_CHECK hashes the buffers between the rank's own slices of an op: it needs the rank to run them.
  if (mode === 'caller' || ctx.size === 1 || checkMode()) return new ShmEngine(ctx, counters, commAlgo, timeoutMs);
  if (!hasProgressThread(ctx)) {
    if (mode === 'auto') return new ShmEngine(ctx, counters, commAlgo, timeoutMs);
    throw new WebcclError('UNSUPPORTED', "progress 'thread' (WEBCCL_PROGRESS): this node has no progress thread (webccl's launchers and createNode() start one in Node; createNode({ nranks, progress: false }) and pages have none)", { option: 'progress' });
  }
  return new ThreadEngine(ctx, counters, commAlgo, timeoutMs, mode);
}

/**
 * The spec without its trace, for an op whose handle already drew its issue (it ends the
 * op's slice): copied only when traced, since a spread makes a slow dictionary object.
 */
function untraced(s: OpSpec): OpSpec {
  return s.trace ? { ...s, trace: undefined } : s;
}

/** Whether `ctx`'s node has a running progress thread. */
export function hasProgressThread(ctx: RankContext): boolean {
  return progressState(new Int32Array(ctx.core.memory.buffer)) === PROGRESS_RUNNING;
}

export class ThreadEngine implements Engine, WorkDriver {
  private readonly local: ShmEngine;
  private readonly tuning: Tuning;
  private seq = 0;
  private lane = 0;
  /** Ops handed to the progress thread and not yet read back, in order (the first `posted - read` are in slots). */
  private readonly inThread: ThreadOp[] = [];
  private posted = 0;
  private read = 0;
  /** Ops this rank took back to run itself: their handle here and the local engine's. */
  private readonly forwarded = new Map<Work, Work>();
  private readonly threadAlgos: Record<string, number> = {};
  private broken: WebcclError | undefined;
  private fromThread = 0;
  /** Auto mode: whether this rank waited for its last op right after issuing it (see submit). */
  private waitsAtOnce = false;
  /** Auto mode: the op held until the rank's next call says who runs it (see the top). */
  private held: { spec: OpSpec; seq: number; work: Work } | undefined;
  /** The op submit() returned last, and when. */
  private lastIssued: Work | undefined;
  private lastReturnedAt = 0;
  readonly flight;

  constructor(private readonly ctx: RankContext, private readonly counters: OpCounters, commAlgo: unknown, private readonly timeoutMs: number, readonly mode: Exclude<ProgressMode, 'caller'>) {
    this.local = new ShmEngine(ctx, counters, commAlgo, timeoutMs);
    this.tuning = resolveTuning(ctx.size, commAlgo);
    this.flight = this.local.flight;
  }

  submit(s: OpSpec): Work {
    if (this.broken) throw this.broken;
    if (isP2p(s.name)) return this.local.submit(s);
    this.release(undefined);
    const seq = this.seq++;
    s.seq = seq; // the spec is this call's own: numbered here, whichever engine runs it
    const work = new Work(s.name, seq, this, this.ctx.canBlock);
    // A tensor op whose data crosses in a layout of its own must convert on this rank if ranks
    // turn out to hold different layouts (see layout-plan.ts): it runs here, behind the ops the
    // thread holds.
    const convertsHere = s.relayout !== undefined && (s.layout ?? 0) !== 0;
    if (convertsHere) this.drainThread();
    const threadBusy = this.inThread.some((t) => !t.reclaimed);
    if (convertsHere || this.local.pendingCollectives() > 0) this.runHere(s, seq, work);
    else if (!threadBusy && this.mode === 'auto' && this.waitsAtOnce) this.hold(s, seq, work);
    else this.toThread(s, seq, work);
    this.lastIssued = work;
    this.lastReturnedAt = performance.now();
    return work;
  }

  /** Keeps an op unstarted until the rank's next call (auto mode, a rank that waits at once). */
  private hold(s: OpSpec, seq: number, work: Work): void {
    work.timing.issuedAt = performance.now();
    this.flight.submitted(work, s, this.algoOf(s));
    if (s.trace) work.trace = s.trace.issue(work, this.algoOf(s));
    this.held = { spec: s, seq, work };
  }

  /**
   * The rank called again while an op is held: a wait for that op (`waited`) runs it here;
   * anything else hands it to the thread, and the rank is taken to go on computing from now.
   */
  private release(waited: Work | undefined): void {
    const h = this.held;
    if (!h) return;
    this.held = undefined;
    if (h.work === waited) {
      this.runHere(untraced(h.spec), h.seq, h.work, false);
      return;
    }
    this.waitsAtOnce = false;
    this.toThread({ ...h.spec, trace: undefined }, h.seq, h.work, false);
  }

  /** Waits until the progress thread has ended every op of this communicator it holds. */
  private drainThread(): void {
    for (let t = this.inThread.findLast((x) => !x.reclaimed); t && !t.work.settled; t = this.inThread.findLast((x) => !x.reclaimed)) this.progress(t.work, true);
  }

  /** Runs an op on this rank (the local engine), behind the handle the caller holds (`fresh`: not issued before). */
  private runHere(s: OpSpec, seq: number, w: Work, fresh = true): Work {
    if (fresh) w.timing.issuedAt = performance.now();
    const lw = this.local.submit(s);
    this.forwarded.set(w, lw);
    this.settleForwarded(w, lw);
    return w;
  }

  pending(): number {
    return this.local.pending() + this.inThread.filter((t) => !t.work.settled && !t.reclaimed).length + (this.held ? 1 : 0);
  }

  get progressMode(): 'auto' | 'thread' {
    return this.mode;
  }

  /** Ops the progress thread has ended for this rank. */
  threadOps(): number {
    return this.fromThread;
  }

  algorithms(): Record<string, number> {
    const all = this.local.algorithms();
    for (const [a, n] of Object.entries(this.threadAlgos)) all[a] = (all[a] ?? 0) + n;
    return all;
  }

  abort(reason: string): void {
    this.local.abort(reason);
    this.fail(this.local.failure()!);
  }

  failure(): WebcclError | undefined {
    return this.broken ?? this.local.failure();
  }

  close(): void {
    this.local.close();
    this.broken ??= new WebcclError('ABORTED', 'communicator destroyed');
    if (this.lane) this.detach();
  }

  // ---------------------------------------------------------------- WorkDriver

  /** In auto mode, a wait begun before the progress thread took the op takes it back (see the top). */
  waiting(w: Work): void {
    // How this rank completes its ops (at once, or after other work) predicts the next one's.
    this.waitsAtOnce = w === this.lastIssued && performance.now() - this.lastReturnedAt <= AT_ONCE_MS;
    this.release(w);
    this.collect();
    if (this.mode !== 'auto') return;
    // Only an op with nothing of this communicator ahead of it in the thread's hands (ops taken
    // back earlier ran here), and still in its slot untaken.
    const i = this.inThread.findIndex((t) => t.work === w);
    if (i < 0 || this.read + i >= this.posted || this.inThread.some((t, k) => k !== i && !t.reclaimed)) return;
    const t = this.inThread[i];
    if (!claimSlot(this.ctx.core.memory, slotAt(this.lane, this.read + i), SLOT_RECLAIMED)) return;
    t.reclaimed = true;
    this.unstage(t);
    try {
      // Its trace was issued with `w`, which ends it: the local run records no second slice.
      const lw = this.local.submit(untraced(t.spec));
      this.forwarded.set(w, lw);
      this.settleForwarded(w, lw);
    } catch (e) {
      w.settle(WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e)));
    }
  }

  progress(w: Work, block: boolean): void {
    if (!block) this.waitsAtOnce = false; // it polls: it goes on with other work meanwhile
    this.release(block ? w : undefined);
    const lw = this.forwarded.get(w);
    if (lw) {
      this.local.progress(lw, block);
      this.settleForwarded(w, lw);
      return;
    }
    this.collect();
    while (block && !w.settled) {
      const i32 = this.i32();
      const done = Atomics.load(i32, (this.lane + L.DONE) >> 2);
      // A peer may wait for this rank's send/recv while it waits here: those run on this rank.
      const p2p = this.local.pending() > 0;
      if (done === this.read && !(p2p && this.local.pollP2p())) {
        if (progressState(i32) !== PROGRESS_RUNNING) return this.threadGone();
        Atomics.wait(i32, (this.lane + L.DONE) >> 2, done, p2p ? P2P_SLICE_MS : SLICE_MS);
      }
      this.collect();
    }
  }

  async progressAsync(w: Work): Promise<void> {
    this.release(w);
    const lw = this.forwarded.get(w);
    if (lw) {
      await this.local.progressAsync(lw);
      this.settleForwarded(w, lw);
      return;
    }
    this.collect();
    while (!w.settled) {
      const i32 = this.i32();
      const done = Atomics.load(i32, (this.lane + L.DONE) >> 2);
      const p2p = this.local.pending() > 0;
      if (done === this.read && !(p2p && this.local.pollP2p())) {
        if (progressState(i32) !== PROGRESS_RUNNING) return this.threadGone();
        const r = Atomics.waitAsync(i32, (this.lane + L.DONE) >> 2, done, p2p ? P2P_SLICE_MS : SLICE_MS);
        if (r.async) await r.value;
      }
      this.collect();
    }
  }

  // ---------------------------------------------------------------- who runs what

  private settleForwarded(w: Work, lw: Work): void {
    if (!lw.settled) return;
    this.forwarded.delete(w);
    w.timing.issuedAt = Math.min(w.timing.issuedAt, lw.timing.issuedAt) || lw.timing.issuedAt;
    w.timing.startedAt = lw.timing.startedAt;
    w.timing.joinedAt = lw.timing.joinedAt;
    w.settle(lw.failure, lw.timing.completedAt);
  }

  private algoOf(s: OpSpec): Algo {
    return s.name === 'allReduce' ? chooseAllReduceAlgo(s.count * DTYPE_SIZE[s.dtype], this.tuning, s.algo) : 'direct';
  }

  private i32(): Int32Array {
    return new Int32Array(this.ctx.core.memory.buffer);
  }

  // ---------------------------------------------------------------- the lane

  /** Hands an op to the progress thread (`fresh`: not issued before, e.g. held). */
  private toThread(s: OpSpec, seq: number, work: Work, fresh = true): Work {
    const algo = this.algoOf(s);
    if (fresh) {
      this.flight.submitted(work, s, algo);
      work.timing.issuedAt = performance.now();
    }
    if (s.trace) work.trace = s.trace.issue(work, algo);
    if (this.broken) {
      work.settle(this.broken);
      return work;
    }
    if (!this.lane) this.lane = this.openLane();
    if (progressState(this.i32()) !== PROGRESS_RUNNING) {
      this.inThread.push({ spec: s, work, seq, algo, stagedIn: 0, stagedOut: 0, reclaimed: false });
      this.threadGone();
      return work;
    }
    const stage = (b: Buf | null, copyIn: boolean): number => {
      if (!b || b.addr) return 0;
      const addr = this.ctx.heap.alloc(b.bytes.byteLength);
      if (copyIn) new Uint8Array(this.ctx.core.memory.buffer, addr, b.bytes.byteLength).set(b.bytes);
      return addr;
    };
    const inPlace = s.input !== null && s.output !== null && sameView(s.input.bytes, s.output.bytes);
    const stagedIn = stage(s.input, true);
    const stagedOut = inPlace ? stagedIn : stage(s.output, false);
    s.check?.atStart(seq);
    this.inThread.push({ spec: s, work, seq, algo, stagedIn, stagedOut, reclaimed: false });
    this.postWaiting();
    return work;
  }

  /** Posts the ops that wait for a free slot, as far as slots allow. */
  private postWaiting(): void {
    const mem = this.ctx.core.memory;
    while (this.posted < this.read + this.inThread.length && this.posted - this.read < LANE_SLOTS) {
      const t = this.inThread[this.posted - this.read];
      const s = t.spec;
      const p: PostedOp = {
        name: s.name, algo: t.algo, dtype: s.dtype, op: s.op, count: s.count, root: s.root, counts: s.counts,
        timeoutMs: s.timeoutMs ?? this.timeoutMs, layout: s.layout ?? 0, seq: t.seq,
        shape: s.shape ?? 0, relayout: s.relayout !== undefined,
        graceUntil: this.mode === 'auto' ? performance.timeOrigin + performance.now() + GRACE_MS : 0,
        input: s.input && { count: s.input.count }, output: s.output && { count: s.output.count }, inPlace: t.stagedOut !== 0 && t.stagedOut === t.stagedIn || (s.input !== null && s.output !== null && sameView(s.input.bytes, s.output.bytes)),
      };
      const inAddr = t.stagedIn || s.input?.addr || 0;
      const outAddr = t.stagedOut || s.output?.addr || 0;
      if (!writeSlot(mem, slotAt(this.lane, this.posted), inAddr, outAddr, p)) {
        throw new WebcclError('INTERNAL', `${s.name} #${t.seq}: the op's description does not fit a progress-thread slot`);
      }
      this.posted++;
      const i32 = this.i32();
      Atomics.store(i32, (this.lane + L.POSTED) >> 2, this.posted);
      ringProgress(i32);
    }
  }

  /** Reads back the ops the progress thread has ended: copies results out, frees copies, settles. */
  private collect(): void {
    if (!this.lane) return;
    const done = Atomics.load(this.i32(), (this.lane + L.DONE) >> 2);
    const mem = this.ctx.core.memory;
    for (; this.read < done; this.read++) {
      const t = this.inThread.shift()!;
      if (t.reclaimed) continue; // ended by the local engine (forwarded)
      const { value: o } = readSlot<OpOutcome>(mem, slotAt(this.lane, this.read));
      let err = o.error && new WebcclError(o.error.code, o.error.message, o.error.details);
      if (!err && t.stagedOut && t.spec.output) {
        try {
          t.spec.output.bytes.set(new Uint8Array(mem.buffer, t.stagedOut, t.spec.output.bytes.byteLength));
        } catch (e) {
          err = new WebcclError('INVALID_ARGUMENT', `${t.spec.name} #${t.seq}: its output buffer was detached (transferred) while the op was in flight`, { detached: true });
        }
      }
      this.unstage(t);
      if (!err) {
        try {
          t.spec.check?.atEnd(t.seq);
        } catch (e) {
          err = WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e));
        }
      }
      this.end(t, o, err);
    }
    this.postWaiting();
  }

  private end(t: ThreadOp, o: OpOutcome, err: WebcclError | undefined): void {
    this.fromThread++;
    if (t.work.settled) return; // failed here already (abort)
    t.work.timing.startedAt = o.startedAt - performance.timeOrigin;
    t.work.timing.joinedAt = (o.joinedAt ?? NaN) - performance.timeOrigin; // JSON turns NaN into null
    t.work.settle(err, o.completedAt - performance.timeOrigin);
    if (err) {
      this.counters.failed++;
      if (err.code !== 'MISMATCH') this.fail(err);
      return;
    }
    countDone(this.counters, t.work);
    if (t.spec.name === 'allReduce') this.threadAlgos[t.algo] = (this.threadAlgos[t.algo] ?? 0) + 1;
  }

  private unstage(t: ThreadOp): void {
    if (t.stagedIn) this.ctx.heap.free(t.stagedIn);
    if (t.stagedOut && t.stagedOut !== t.stagedIn) this.ctx.heap.free(t.stagedOut);
    t.stagedIn = t.stagedOut = 0;
  }

  /** The communicator is unusable: every op not yet ended fails with `err` (copies stay until the thread lets go). */
  private fail(err: WebcclError): void {
    this.broken ??= err;
    if (this.held) {
      this.held.work.settle(err);
      this.held = undefined;
    }
    for (const t of this.inThread) if (!t.work.settled && !t.reclaimed) t.work.settle(err);
    this.flight.broke(err);
  }

  /** The progress thread ended with ops of ours in hand: they fail, and so does the communicator on every rank. */
  private threadGone(): void {
    const table = laneTable(this.i32());
    const why = table ? readReasonText(this.ctx.core.memory, table + T.REASON) : '';
    const err = new WebcclError('ABORTED', `the node's progress thread ended with this rank's ops in hand${why ? ` (${why})` : ''}`, { progressThread: true, reason: why });
    this.local.abort(err.reason);
    for (const t of this.inThread.splice(0)) {
      this.unstage(t);
      if (!t.work.settled && !t.reclaimed) t.work.settle(err);
    }
    this.posted = this.read;
    this.fail(err);
  }

  /** A lane in the node heap, listed in the node's lane table (made by the first rank that needs it). */
  private openLane(): number {
    const { heap, core } = this.ctx;
    let table = laneTable(this.i32());
    if (!table) {
      const t = heap.alloc(TABLE_BYTES);
      new Uint8Array(core.memory.buffer, t, TABLE_BYTES).fill(0);
      const was = Atomics.compareExchange(this.i32(), (NODE_BASE + N.LANES) >> 2, 0, t);
      if (was === 0) table = t;
      else {
        heap.free(t);
        table = was;
      }
    }
    const lane = heap.alloc(LANE_BYTES);
    const u8 = new Uint8Array(core.memory.buffer, lane, L.SLOTS);
    u8.fill(0);
    const i32 = this.i32();
    i32[(lane + L.COMM) >> 2] = this.ctx.comm;
    i32[(lane + L.RANK) >> 2] = this.ctx.rank;
    i32[(lane + L.SIZE) >> 2] = this.ctx.size;
    i32[(lane + L.SIMD) >> 2] = core.simd ? 1 : 0;
    u8.set(this.ctx.localOf, L.LOCAL_OF);
    Atomics.store(i32, (lane + L.STATE) >> 2, LANE_OPEN);
    for (let k = 0; k < MAX_LANES; k++) {
      if (Atomics.compareExchange(i32, (table + T.ENTRIES + 4 * k) >> 2, 0, lane) !== 0) continue;
      for (;;) {
        const high = Atomics.load(i32, (table + T.HIGH) >> 2);
        if (high > k || Atomics.compareExchange(i32, (table + T.HIGH) >> 2, high, k + 1) === high) break;
      }
      ringProgress(i32);
      return lane;
    }
    heap.free(lane);
    throw new WebcclError('UNSUPPORTED', `the node's progress thread serves at most ${MAX_LANES} communicator ranks at once; destroy communicators no longer used, or set WEBCCL_PROGRESS=caller`, { limit: MAX_LANES });
  }

  /** Asks the progress thread to let go of the lane, then frees it (left in place if the thread does not answer). */
  private detach(): void {
    const lane = this.lane;
    this.lane = 0;
    const i32 = this.i32();
    Atomics.store(i32, (lane + L.STATE) >> 2, LANE_CLOSING);
    ringProgress(i32);
    const until = performance.now() + DETACH_MS;
    while (Atomics.load(this.i32(), (lane + L.STATE) >> 2) !== LANE_DETACHED) {
      if (progressState(this.i32()) === PROGRESS_GONE) break;
      const left = until - performance.now();
      if (left <= 0 || !this.ctx.canBlock) {
        log('WARN', `rank ${this.ctx.rank}: the progress thread did not let go of a closed communicator's lane; its memory is left in place`);
        return;
      }
      Atomics.wait(this.i32(), (lane + L.STATE) >> 2, LANE_CLOSING, Math.min(left, SLICE_MS));
    }
    for (const t of this.inThread.splice(0)) this.unstage(t);
    const table = laneTable(this.i32());
    for (let k = 0; k < MAX_LANES; k++) {
      if (Atomics.compareExchange(this.i32(), (table + T.ENTRIES + 4 * k) >> 2, lane, 0) === lane) break;
    }
    this.ctx.heap.free(lane);
  }
}
