// When every rank had joined a shared-memory op: its wait for peers ends there (Work.waitMs).
//
// Each rank stamps the wall-clock time it starts an op (performance.timeOrigin + now, the same
// clock in every thread) into its signature record for the op, before its first step posts.
// The op's first step waits for every rank's post, so once the op is done every rank's stamp
// for it is there to read; a rank cannot overwrite it before this one starts its next op (the
// records alternate by sequence parity, and a rank two ops ahead would need this one's posts).
// joinedAt is the latest stamp: the start of the last rank to arrive. Reading the stamps rather
// than watching for the arrival makes it exact, whenever this rank looks (a rank that computes
// while its op waits is not charged the computing as waiting, nor the waiting as moving).
import { SIG_START, sigOffset } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';

/** This thread's clock origin, read once (the getter costs more than the rest of a stamp). */
const ORIGIN = performance.timeOrigin;

let f64: Float64Array | undefined;
let of: Int32Array | undefined;

/** An f64 view of the memory behind `i32` (the runner renews i32 when the memory grew). */
function view(i32: Int32Array): Float64Array {
  if (of !== i32 || !f64) {
    of = i32;
    f64 = new Float64Array(i32.buffer);
  }
  return f64;
}

/**
 * Rank `ctx` starts op `seq` at `startedAt` (performance.now() ms): stamp it before the op's first step.
 */
export function stampStart(
  i32: Int32Array,
  ctx: Pick<RankContext, 'comm' | 'size' | 'rank'>,
  seq: number,
  startedAt: number,
): void {
  view(i32)[(sigOffset(ctx.comm, ctx.size, ctx.rank, seq) + SIG_START) >> 3] = ORIGIN + startedAt;
}

/** The latest start among the op's ranks, in this thread's performance.now() ms; call once op `seq` is done. */
export function joinTime(i32: Int32Array, comm: number, nranks: number, seq: number): number {
  const v = view(i32);
  let latest = 0;
  for (let r = 0; r < nranks; r++) latest = Math.max(latest, v[(sigOffset(comm, nranks, r, seq) + SIG_START) >> 3]);
  return latest - ORIGIN;
}
