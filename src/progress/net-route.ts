// Which collectives a rank with a network progress thread runs itself (the fast path) and which
// it hands to the thread. The thread lets an op go on while its rank computes, but every op it
// runs pays two hand-offs between threads (40-110 µs each on a loaded 2-core machine) and more
// (see RANK_RUNS_MAX_BYTES): up to 8 MiB a waited op takes a tenth to a half longer there.
// In the job's default mode ('auto') collectives up to RANK_RUNS_MAX_BYTES run on the rank's
// own connections, as without a thread, and larger ones on the thread's.
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
 * in 'auto' mode: up to here the thread's hand-offs cost a waited op more than a tenth of its
 * time, beyond they cost less (the default may cost a waited op no more than that against the
 * better of 'caller' and 'thread'). The thread's path pays two hand-offs between threads, the
 * gap they leave between ops (a peer's early data then waits in a held copy), and on a machine
 * whose cores the ranks fill, the rank's wake-up taking the thread's core. On the 2-core
 * development machine (`bench/progress-modes.mjs`, 2 processes over TCP, the rank's own path
 * against the thread's, µs, best of 5 interleaved rounds): at 8 MiB allReduce 3810 against 4838,
 * allGather 1888 / 2919, broadcast 2388 / 2715, reduce 3074 / 3640, gather 1056 / 1472, scatter
 * 1568 / 2231, reduceScatter 3338 / 4243; at 16 MiB the two within the machine's spread (allReduce
 * 9812 / 9553, allGather 4719 / 5088, broadcast 5073 / 5574, reduce 6765 / 6796, gather 2421 /
 * 2253, scatter 3031 / 3523, reduceScatter 7166 / 7020). Ops this size or smaller left alone
 * while their rank computes move only while its event loop runs or at its next call
 * (WEBCCL_PROGRESS=thread hands every op to the thread).
 */
export const RANK_RUNS_MAX_BYTES = 8 * 1024 * 1024;

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

/**
 * Whether the rank runs collective `s` itself; `maxBytes` 0: never (the job asked for the thread
 * for every op). Every allToAll runs on the rank: it has no size all ranks agree on
 * (messageBytes), so it routes alike at every size, and the rank's path is the faster for a
 * waited one at every size measured (2 processes over TCP, best of 2 rounds: 8 B 46 against 92 µs
 * through the thread, 256 KiB 87 / 273, 2 MiB 265 / 484, 16 MiB 4631 / 4989).
 */
export function rankRuns(s: OpSpec, size: number, maxBytes: number): boolean {
  if (maxBytes <= 0) return false;
  if (s.name === 'allToAll') return true;
  const bytes = messageBytes(s, size);
  return bytes !== undefined && bytes <= maxBytes;
}
