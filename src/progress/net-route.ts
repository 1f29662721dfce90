// Which collectives a rank with a network progress thread runs itself (the fast path) and which
// it hands to the thread. The thread lets an op go on while its rank computes, but every op it
// runs pays two hand-offs between threads (40-110 µs each on a loaded 2-core machine): up to a
// few hundred KiB they last as long as the op, so the overlap the thread could buy is no more
// than what it costs. In the job's default mode ('auto') collectives up to RANK_RUNS_MAX_BYTES
// run on the rank's own connections, as without a thread, and larger ones on the thread's.
//
// The two paths use different connections, so every rank must route each op the same way: the
// rule reads only what ranks agree on for a well-formed op (collective, count, dtype, communicator
// size), never timing or how the op is awaited. Ranks that disagree on a count across the
// threshold run the op on different paths; the rank's engine keeps the fields of the ops it
// handed over, so the stray message is still found as a MISMATCH naming the field.
import { DTYPE_SIZE } from '../core/dtypes.js';
import type { OpSpec } from '../engine/engine.js';

/**
 * Largest message (nccl-tests' size: the whole buffer, or all ranks' blocks) a rank runs itself
 * in 'auto' mode: where the op lasts about as long as the two hand-offs the thread would add,
 * the overlap the thread could buy is no more than what it costs a waited op. On the 2-core
 * development machine (`webccl perf allreduce --transport tcp --ranks 2`, rank's own path against
 * the thread's, interleaved): 128 KiB 103 against 254 µs, 256 KiB 153 against 307, 512 KiB 476
 * against 687, 1 MiB 557 against 580; bench/handoff-floor.mjs, no library, allows the thread
 * 0.61 of the rank's speed at 256 KiB and 0.74-0.98 at 1 MiB.
 */
export const RANK_RUNS_MAX_BYTES = 256 * 1024;

/**
 * The op's size as nccl-tests names it (bytes of the whole result), when every rank of a
 * well-formed op agrees on it. Not for allToAll: one rank may pass equal blocks of n and another
 * per-peer counts of n each (the same exchange), and with uneven counts no total is shared.
 */
export function messageBytes(s: OpSpec, size: number): number | undefined {
  if (s.name === 'allToAll') return undefined;
  const bytes = s.count * DTYPE_SIZE[s.dtype];
  switch (s.name) {
    case 'allGather':
    case 'gather':
    case 'reduceScatter':
    case 'scatter':
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
