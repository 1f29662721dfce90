// allToAll's per-peer counts on shared memory: what the descriptor says and where the step loop
// finds the counts (see assembly/engine/alltoall-counts.ts).
import { scratchOffset } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';
import type { OpSpec } from '../engine/engine.js';

/** D_COUNT of an allToAll with per-peer counts: the step loop then reads the counts from scratch. */
export const PER_PEER = 0xffffffff;

/** The descriptor's count: elements per rank, or PER_PEER. */
export function descriptorCount(s: Pick<OpSpec, 'count' | 'counts'>): number {
  return s.counts ? PER_PEER : s.count;
}

/**
 * Writes this rank's sendCounts then recvCounts into its scratch (u32 each), where the
 * allToAll handshake reads them. Scratch is private to the rank and idle between ops.
 */
export function writeCounts(
  i32: Int32Array,
  counts: { send: number[]; recv: number[] },
  ctx: Pick<RankContext, 'comm' | 'size' | 'rank' | 'slotBytes'>,
): void {
  const at = scratchOffset(ctx.comm, ctx.size, ctx.rank, ctx.slotBytes) >> 2;
  i32.set(counts.send, at);
  i32.set(counts.recv, at + ctx.size);
}
