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
 * or goes to the thread: as long as some peer arrives every SETTLE_MS (shm/engine.ts
 * settleQueued). Past that it queues behind them on the rank (a communicator's ops run in order,
 * one at a time, on one runner). 20 ms was too short for 8 thread ranks on 2 busy cores, where a
 * rank may wait that long for a core before it issues the same op; and 100 ms in all, under the
 * whole test suite, where 8 such ranks arrive one by one.
 */
export const SETTLE_MS = 100;

/** Small enough to start on the rank (see RANK_STARTS_MAX): one exchange of one chunk. */
export function oneExchange(s: OpSpec, ctx: RankContext): boolean {
  return (
    s.counts === undefined &&
    opBytes(s) <= RANK_STARTS_MAX &&
    s.count <= chunkElems(s.name, ctx.slotBytes, DTYPE_SIZE[s.dtype], ctx.size)
  );
}

/** The larger of an op's input and output, in bytes (from counts: a view's byteLength is a call per read). */
export const opBytes = (s: OpSpec): number => Math.max(bytesOf(s.input), bytesOf(s.output));
const bytesOf = (b: OpSpec['input']): number => (b ? b.count * DTYPE_SIZE[b.dtype] : 0);

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
