// Which collectives a rank with a network progress thread runs itself (the fast path) and which
// it hands to the thread. The thread lets an op go on while its rank computes, but every op it
// runs pays two hand-offs between threads (70-110 µs each on a loaded 2-core machine): for a
// small op that is most of its time, and the overlap it could buy is as short as the op. So in
// the job's default mode ('auto') collectives up to RANK_RUNS_MAX_BYTES run on the rank's own
// connections, as without a thread, and larger ones on the thread's.
//
// The two paths use different connections, so every rank must route each op the same way: the
// rule reads only what ranks agree on for a well-formed op (collective, count, dtype, communicator
// size), never timing or how the op is awaited. Ranks that disagree on a count across the
// threshold run the op on different paths; the rank's engine keeps the fields of the ops it
// handed over, so the stray message is still found as a MISMATCH naming the field.
import { DTYPE_SIZE } from '../core/dtypes.js';
import type { OpSpec } from '../comm/engine.js';

/**
 * Largest message (nccl-tests' size: the whole buffer, or all ranks' blocks) a rank runs itself
 * in 'auto' mode. From bench/progress-cost.mjs on this 2-core machine: a waited loop on the
 * thread costs 2.1-3.3× the rank's own at 8 B to 2 KiB, while at 64 KiB an op lasts about
 * 0.3 ms, no more than the hand-offs it would pay to overlap.
 */
export const RANK_RUNS_MAX_BYTES = 64 * 1024;

/**
 * The op's size as nccl-tests names it (bytes of the whole result), when every rank of a
 * well-formed op agrees on it. Not for allToAll: one rank may pass equal blocks of n and another
 * per-peer counts of n each (the same exchange), and with uneven counts no total is shared.
 */
export function messageBytes(s: OpSpec, size: number): number | undefined {
  if (s.name === 'allToAll') return undefined;
  const bytes = s.count * DTYPE_SIZE[s.dtype];
  switch (s.name) {
    case 'allGather': case 'gather': case 'reduceScatter': case 'scatter':
      return bytes * size;
    default:
      return bytes;
  }
}

/** Whether the rank runs collective `s` itself; `maxBytes` 0: never (the job asked for the thread for every op). */
export function rankRuns(s: OpSpec, size: number, maxBytes: number): boolean {
  const bytes = messageBytes(s, size);
  return maxBytes > 0 && bytes !== undefined && bytes <= maxBytes;
}
