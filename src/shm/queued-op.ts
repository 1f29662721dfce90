// An op as the shared-memory engine queues it: what its spec says, the schedule chosen for it,
// its chunking and deadline, made once at submit. A relayout changes it in place so the op runs
// again, at the head of the queue, on converted row-major copies.

import { DTYPE_SIZE, type Dtype, type ReduceOp } from '../core/dtypes.js';
import type { Algo, Kind } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';
import type { OpSpec } from '../engine/engine.js';
import type { InputCheck } from '../engine/input-check.js';
import type { Work } from '../engine/work.js';
import { chooseAllReduceAlgo, chunkElems, type Tuning } from '../tuner/tuner.js';
import type { RunningOp } from './runner.js';

export interface QueuedOp extends RunningOp {
  name: Kind;
  work: Work;
  algo: Algo;
  dtype: Dtype;
  op: ReduceOp;
  count: number;
  root: number;
  /** Wire layout signature value (OpSpec.layout). */
  layout: number;
  /** Logical shape class of tensors (OpSpec.shape), and how to run again in row-major (OpSpec.relayout). */
  shape: number;
  relayout: OpSpec['relayout'];
  /** The call's algorithm option, for choosing again after a relayout changed the count. */
  algoOption: unknown;
  chunk: number;
  counts: OpSpec['counts'];
  started: boolean;
  check: InputCheck | undefined;
}

/** What every op of one engine shares: its rank, its descriptor, its default deadline. */
export interface QueueSite {
  ctx: RankContext;
  desc: number;
  timeoutMs: number;
}

/** The op `s`, number `seq`, run as `work` by schedule `algo`. */
export function queuedOp(s: OpSpec, run: { seq: number; work: Work; algo: Algo }, at: QueueSite): QueuedOp {
  const es = DTYPE_SIZE[s.dtype];
  return {
    name: s.name,
    seq: run.seq,
    desc: at.desc,
    elemBytes: es,
    input: s.input,
    output: s.output,
    deadline: Infinity,
    timeoutMs: s.timeoutMs ?? at.timeoutMs,
    work: run.work,
    algo: run.algo,
    dtype: s.dtype,
    op: s.op,
    count: s.count,
    root: s.root,
    layout: s.layout ?? 0,
    shape: s.shape ?? 0,
    relayout: s.relayout,
    algoOption: s.algo,
    chunk: s.name === 'barrier' ? 0 : chunkElems(s.name, at.ctx.slotBytes, es, at.ctx.size),
    counts: s.counts,
    started: false,
    check: s.check,
  };
}

/**
 * `q` made to run again on its row-major copies (`relayout()`'s result), not started yet; an
 * allReduce chooses its algorithm again for the count it now has.
 */
export function relaidOut(q: QueuedOp, tuning: Tuning): void {
  const r = q.relayout!();
  Object.assign(q, {
    input: r.input,
    output: r.output,
    count: r.count,
    layout: 0,
    relayout: undefined,
    started: false,
  });
  if (q.name === 'allReduce') q.algo = chooseAllReduceAlgo(r.count * q.elemBytes, tuning, q.algoOption);
}
