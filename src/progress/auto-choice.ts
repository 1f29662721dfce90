// What 'auto' progress decides per op on a node (thread-engine.ts runs it): which ops start on
// their rank at issue, which are held for the rank's next call, and what a hold writes. Every
// number here was chosen on a 2-core machine whose every core runs a rank, where a hand-off to
// the progress thread costs 30-50 µs and each of its looks costs a rank its core for a while.

import { DTYPE_SIZE } from '../core/dtypes.js';
import type { Algo } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';
import type { OpSpec } from '../engine/engine.js';
import type { Work } from '../engine/work.js';
import { chunkElems } from '../tuner/tuner.js';
import type { PostboxOp } from './postbox-outcomes.js';

/** A wait begun this soon after the call returned counts as waiting at once (a synchronous-style call). */
export const AT_ONCE_MS = 0.5;

/**
 * Plain (not alloc()) buffers up to this many bytes in all are copied into the node heap when
 * their op is held, so that the progress thread can take it; a larger one is held unwritten
 * where its rank waited for the last op of its shape at once (ShapeMemory).
 */
export const HOLD_COPY_MAX = 64 * 1024;

/** An op held for this rank's next call (auto mode, see hold). */
export interface Held {
  spec: OpSpec;
  seq: number;
  work: Work;
  algo: Algo;
  /** In slot `posted` of the postbox, under this tag in L.HOLD (0: not written: a large plain buffer's op). */
  tag: number;
  staged: Pick<PostboxOp, 'stagedIn' | 'stagedOut' | 'inPlace'>;
}

/**
 * Auto mode: collectives of at most this many bytes (the larger of input and output) that fit
 * one chunk start on the rank at issue, as without a progress thread. By the time the call
 * returns, the rank's data is posted where its peers read it (every shared-memory algorithm at
 * these sizes is one exchange), so they complete without this rank even if it computes before it
 * waits; and such an op lasts a few µs to a few tens, where a hand-off or a hold costs as much again (a hold
 * costs its rank ~0.5 µs, and the progress thread's looks at held ops ~15% of a 2-core machine
 * whose every core runs a rank).
 */
export const RANK_STARTS_MAX = 64 * 1024;

/**
 * How long an op's issue waits for ops this rank started at issue to end (their peers are
 * issuing them too, so this is short unless a peer is late), so that the new op starts at issue
 * or goes to the thread; past this it queues behind them on the rank (a communicator's ops run
 * in order, one at a time, on one runner). 20 ms was too short for 8 thread ranks on 2 busy
 * cores, where a rank may wait that long for a core before it issues the same op.
 */
export const SETTLE_MS = 100;

/** The larger of an op's input and output, in bytes. */
/** Small enough to start on the rank (see RANK_STARTS_MAX): one exchange of one chunk. */
export function oneExchange(s: OpSpec, ctx: RankContext): boolean {
  return (
    s.counts === undefined &&
    opBytes(s) <= RANK_STARTS_MAX &&
    s.count <= chunkElems(s.name, ctx.slotBytes, DTYPE_SIZE[s.dtype], ctx.size)
  );
}

export const opBytes = (s: OpSpec): number => Math.max(s.input?.bytes.byteLength ?? 0, s.output?.bytes.byteLength ?? 0);

/** The copies of an op whose buffers all live in the node memory: none. */
export const UNSTAGED: Held['staged'] = Object.freeze({ stagedIn: 0, stagedOut: 0, inPlace: false });

/** Bytes of `s`'s buffers that are not in the node memory (copied when the op is handed over). */
export function plainBytes(s: OpSpec): number {
  const n = (b: OpSpec['input']) => (b && !b.addr ? b.bytes.byteLength : 0);
  return n(s.input) + (s.output === s.input ? 0 : n(s.output));
}

/** Whether ops `a` (run with `a.algo`) and `s` (with `algo`) post the same description but for their numbers. */
export function sameOp(a: { spec: OpSpec; algo: Algo }, s: OpSpec, algo: Algo): boolean {
  const b = a.spec;
  return (
    a.algo === algo &&
    b.name === s.name &&
    b.dtype === s.dtype &&
    b.op === s.op &&
    b.count === s.count &&
    b.root === s.root &&
    b.timeoutMs === s.timeoutMs &&
    b.layout === s.layout &&
    b.shape === s.shape &&
    b.relayout === undefined &&
    s.relayout === undefined &&
    b.input?.addr === s.input?.addr &&
    b.input?.count === s.input?.count &&
    b.output?.addr === s.output?.addr &&
    b.output?.count === s.output?.count &&
    (b.input === b.output) === (s.input === s.output)
  );
}

/** What names an op's shape, for how its rank waits for it (ShapeMemory). */
const shapeKey = (s: OpSpec): string => `${s.name}/${s.dtype}/${s.count}/${s.root}`;

/**
 * How a rank waited for the last op of each shape on large plain buffers: at once (then the next
 * may be held unwritten, with no copy) or late (then it is handed over, copies and all, and goes
 * on while the rank computes).
 */
export class ShapeMemory {
  /** Shapes this rank last waited for at once. */
  private readonly atOnce = new Set<string>();
  /** The shape of each large plain-buffer op looked at, for the wait that tells its pattern. */
  private readonly shapeOf = new WeakMap<Work, string>();
  private any = false;

  /**
   * Whether `s` may be held. Any op may, but one on large plain buffers is held unwritten (its
   * copy would cost a rank that waits at once as much as the op), and so starts only at the
   * rank's next call: only where this rank waited for the last op of its shape at once.
   */
  mayHold(s: OpSpec, work: Work): boolean {
    if (plainBytes(s) <= HOLD_COPY_MAX) return true;
    const key = shapeKey(s);
    this.shapeOf.set(work, key);
    this.any = true;
    return this.atOnce.has(key);
  }

  /** The rank waits for `w` at once (or late, or polls it). */
  learn(w: Work, atOnce: boolean): void {
    if (!this.any) return; // (every wait pays for this look)
    const key = this.shapeOf.get(w);
    if (key === undefined) return;
    if (!atOnce) this.atOnce.delete(key);
    else if (this.atOnce.size < 256) this.atOnce.add(key);
  }
}

// ---------------------------------------------------------------- who runs a waited op
//
// Auto mode, for an op its rank waits for at once: who runs it faster, the rank itself (the op
// is held, and the wait runs it: see held-slot.ts) or the node's progress thread (handed over at
// once)? Neither wins everywhere. The thread runs every rank's part of an op in one core's cache
// and pays two hand-offs; the ranks run their parts at once and pay for every line that crosses
// between cores. On the 2-core development machine, 2 ranks (`webccl perf`, interleaved, µs): a 1 MiB
// broadcast 200 on the ranks against 127 on the thread, a 2 MiB allReduce 301 against 252, but
// 16 MiB 3,030 against 5,264, and with 4 ranks on 2 cores the thread lost at every size. Which
// side wins moves with the machine's caches, the ranks per core and where buffers lie, so it is
// measured, not predicted: per op shape (collective and bytes), blocks of ops on each runner,
// the faster by median kept, the other tried again now and then.
//
// Who runs an op never changes what it computes or its order: the thread runs the same steps on
// the same descriptor (hosts/shm-host.ts), so ranks need not agree on the runner.

/** Ops of a shape run on the rank before any is timed (the first runs compile code, touch buffers). */
const WARM_OPS = 2;
/** Ops in a row on one runner. */
const BLOCK = 4;
/** Blocks per runner before the first choice; each runner's first block is not kept (its code is cold then). */
const FIRST_BLOCKS = 3;
/** Samples kept per runner: the median of the last WINDOW decides. */
const WINDOW = 8;
/**
 * After a choice, ops of the shape before the other runner gets a block again: doubled each time
 * the choice stands (up to RETRY_MAX), so that a settled loop pays for retries less and less.
 */
const RETRY_MIN = 128;
const RETRY_MAX = 8192;
/** The thread must be this much faster to be chosen: on a tie the rank runs it (the thread serves every rank). */
const THREAD_MARGIN = 0.95;
/** Shapes remembered (a program that sweeps sizes keeps the latest). */
const MAX_SHAPES = 64;

export type Runner = 'rank' | 'thread';

interface Shape {
  /** Ops of this shape chosen for so far. */
  n: number;
  rank: number[];
  thread: number[];
  /** The runner chosen after the first blocks (undefined while they run). */
  chosen: Runner | undefined;
  /** Where the current block of the other runner began (-1: none running). */
  retryAt: number;
  /** The op count at which the other runner is tried next, and the gap after that. */
  nextRetry: number;
  every: number;
}

/** The op chosen for last, until its wait ends. */
interface Pending {
  key: string;
  runner: Runner;
  /** Whether its time counts (not the first block of a runner). */
  keep: boolean;
}

export class RunnerChoice {
  private readonly shapes = new Map<string, Shape>();
  private pending: Pending | undefined;
  private pendingWork: Work | undefined;

  /** Who runs op `s` (its handle `work`), issued by a rank that waits at once. */
  choose(s: OpSpec, work: Work): Runner {
    const key = runnerKey(s);
    let sh = this.shapes.get(key);
    if (!sh) {
      if (this.shapes.size >= MAX_SHAPES) this.shapes.delete(this.shapes.keys().next().value!);
      sh = { n: 0, rank: [], thread: [], chosen: undefined, retryAt: -1, nextRetry: 0, every: RETRY_MIN };
      this.shapes.set(key, sh);
    }
    const n = sh.n++;
    let runner: Runner = 'rank';
    let keep = false;
    if (n >= WARM_OPS) {
      const k = n - WARM_OPS;
      const block = Math.floor(k / BLOCK);
      // The first op of a block after a switch pays for the other runner's idle time (a thread
      // woken from its sleep, caches the other side warmed): the rest of the block is timed.
      const settled = k % BLOCK !== 0;
      if (sh.chosen === undefined) {
        runner = block % 2 === 0 ? 'rank' : 'thread';
        keep = block >= 2 && settled; // each runner's first block warms its code
        if (block >= 2 * FIRST_BLOCKS) {
          sh.chosen = faster(sh);
          sh.nextRetry = n + sh.every;
          runner = sh.chosen;
          keep = false;
        }
      } else {
        runner = sh.chosen;
        if (sh.retryAt < 0 && n >= sh.nextRetry) sh.retryAt = n;
        if (sh.retryAt >= 0) {
          if (n - sh.retryAt < BLOCK) {
            runner = other(sh.chosen);
            keep = n > sh.retryAt;
          } else {
            const was = sh.chosen;
            sh.chosen = faster(sh);
            sh.every = sh.chosen === was ? Math.min(2 * sh.every, RETRY_MAX) : RETRY_MIN;
            sh.nextRetry = n + sh.every;
            sh.retryAt = -1;
            runner = sh.chosen;
          }
        }
        // The chosen runner's own times stay fresh too, so that a retry compares like with like.
        keep ||= k % BLOCK === 1;
      }
    }
    this.pending = { key, runner, keep };
    this.pendingWork = work;
    return runner;
  }

  /** The rank's wait for `work` has ended: from its issue to now is its time, if it was the op chosen for last. */
  ended(work: Work): void {
    if (this.pendingWork !== work) return;
    const p = this.pending!;
    this.pending = undefined;
    this.pendingWork = undefined;
    if (!p.keep) return;
    const sh = this.shapes.get(p.key);
    if (!sh) return;
    const times = p.runner === 'rank' ? sh.rank : sh.thread;
    times.push(performance.now() - work.timing.issuedAt);
    if (times.length > WINDOW) times.shift();
  }

  /** The op chosen for last was not waited for at once (the rank went on with other work): its time says nothing. */
  forget(work: Work): void {
    if (this.pendingWork === work) {
      this.pending = undefined;
      this.pendingWork = undefined;
    }
  }

  /** What was learnt of a shape (tests, statistics). */
  learnt(s: OpSpec): { chosen: Runner | undefined; rank: readonly number[]; thread: readonly number[] } | undefined {
    const sh = this.shapes.get(runnerKey(s));
    return sh && { chosen: sh.chosen, rank: sh.rank, thread: sh.thread };
  }
}

const other = (r: Runner): Runner => (r === 'rank' ? 'thread' : 'rank');

function median(xs: readonly number[]): number {
  if (xs.length === 0) return Infinity;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The rank, unless the thread's median is clearly lower. */
function faster(sh: Shape): Runner {
  return median(sh.thread) < THREAD_MARGIN * median(sh.rank) ? 'thread' : 'rank';
}

/** An op's shape as far as who runs it faster goes: the collective, its bytes, in place or not. */
const runnerKey = (s: OpSpec): string => `${s.name}/${opBytes(s)}/${s.input === s.output ? 'in' : 'out'}`;
