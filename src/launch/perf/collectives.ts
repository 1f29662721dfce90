// What `webccl perf` knows about each collective: how a sweep size maps to element counts and
// buffer lengths, and the bus-bandwidth factor of nccl-tests' doc/PERFORMANCE.md:
//
//   allreduce       busbw = algbw · 2(n−1)/n    size = bytes of the vector
//   allgather       busbw = algbw · (n−1)/n     size = bytes of the whole output (n blocks)
//   reducescatter   busbw = algbw · (n−1)/n     size = bytes of the whole input (n blocks)
//   broadcast       busbw = algbw               size = bytes of the vector
//   reduce          busbw = algbw               size = bytes of the vector
//   alltoall        busbw = algbw · (n−1)/n     size = bytes of the whole input (n blocks, one per peer)
//   gather          busbw = algbw · (n−1)/n     size = bytes of the root's whole output (n blocks)
//   scatter         busbw = algbw · (n−1)/n     size = bytes of the root's whole input (n blocks)
//   sendrecv        busbw = algbw               size = bytes each rank sends to rank+1 (and
//                                               receives from rank−1, at once)
//   pingpong        busbw = algbw               size = bytes of one message; time = half a round
//                                               trip (not in nccl-tests; osu_latency's convention)
//
// algbw = size / time, in GB/s with GB = 1e9 bytes, as nccl-tests prints it.
import { DTYPE_SIZE, type Dtype } from '../../core/dtypes.js';

export const COLLECTIVES = [
  'allreduce',
  'allgather',
  'reducescatter',
  'broadcast',
  'reduce',
  'alltoall',
  'gather',
  'scatter',
  'sendrecv',
  'pingpong',
] as const;
export type Collective = (typeof COLLECTIVES)[number];

/** Spellings accepted on the command line (nccl-tests binary names and torch names too). */
const ALIASES: Record<string, Collective> = {
  allreduce: 'allreduce',
  all_reduce: 'allreduce',
  'all-reduce': 'allreduce',
  allgather: 'allgather',
  all_gather: 'allgather',
  'all-gather': 'allgather',
  reducescatter: 'reducescatter',
  reduce_scatter: 'reducescatter',
  'reduce-scatter': 'reducescatter',
  broadcast: 'broadcast',
  bcast: 'broadcast',
  reduce: 'reduce',
  alltoall: 'alltoall',
  all_to_all: 'alltoall',
  'all-to-all': 'alltoall',
  gather: 'gather',
  scatter: 'scatter',
  sendrecv: 'sendrecv',
  send_recv: 'sendrecv',
  'send-recv': 'sendrecv',
  pingpong: 'pingpong',
  ping_pong: 'pingpong',
  'ping-pong': 'pingpong',
};

export function collectiveNamed(name: string): Collective | undefined {
  return ALIASES[name.toLowerCase()];
}

/** Whether the collective takes a reduction op / a root (the table prints "none" / -1 otherwise). */
export const HAS_OP: Record<Collective, boolean> = {
  allreduce: true,
  allgather: false,
  reducescatter: true,
  broadcast: false,
  reduce: true,
  alltoall: false,
  gather: false,
  scatter: false,
  sendrecv: false,
  pingpong: false,
};
export const HAS_ROOT: Record<Collective, boolean> = {
  allreduce: false,
  allgather: false,
  reducescatter: false,
  broadcast: true,
  reduce: true,
  alltoall: false,
  gather: true,
  scatter: true,
  sendrecv: false,
  pingpong: false,
};

/**
 * Whether the collective has an in-place form (the table's second half). allToAll refuses
 * overlapping buffers, and a recv into the buffer its own send is still reading would race:
 * those rows print N/A there, and the JSON holds `ip: null`.
 */
export const HAS_IN_PLACE: Record<Collective, boolean> = {
  allreduce: true,
  allgather: true,
  reducescatter: true,
  broadcast: true,
  reduce: true,
  alltoall: false,
  gather: true,
  scatter: true,
  sendrecv: false,
  pingpong: false,
};

/** Ranks the collective needs (sendrecv: a peer other than itself; pingpong: exactly one pair), or undefined. */
export function ranksNeeded(coll: Collective, nranks: number): string | undefined {
  if (coll === 'sendrecv' && nranks < 2)
    return 'sendrecv needs at least 2 ranks (each sends to rank+1, which must be another rank)';
  if (coll === 'pingpong' && nranks !== 2) return `pingpong runs between exactly 2 ranks, not ${nranks}`;
  return undefined;
}

/**
 * Messages one call of the collective sends one after the other (pingpong: there and back); its time is per message.
 */
export const LEGS: Record<Collective, number> = {
  allreduce: 1,
  allgather: 1,
  reducescatter: 1,
  broadcast: 1,
  reduce: 1,
  alltoall: 1,
  gather: 1,
  scatter: 1,
  sendrecv: 1,
  pingpong: 2,
};

export function busBwFactor(coll: Collective, nranks: number): number {
  const n = nranks;
  switch (coll) {
    case 'allreduce':
      return (2 * (n - 1)) / n;
    case 'allgather':
    case 'reducescatter':
    case 'alltoall':
    case 'gather':
    case 'scatter':
      return (n - 1) / n;
    case 'broadcast':
    case 'reduce':
    case 'sendrecv':
    case 'pingpong':
      return 1;
  }
}

/** algbw and busbw in GB/s (1e9 B/s) of `bytes` moved in `timeUs` microseconds. */
export function bandwidths(
  coll: Collective,
  nranks: number,
  bytes: number,
  timeUs: number,
): { algbw: number; busbw: number } {
  const algbw = timeUs > 0 ? bytes / (timeUs * 1e3) : 0;
  return { algbw, busbw: algbw * busBwFactor(coll, nranks) };
}

/** One point of a sweep, in elements of the dtype. */
export interface Shape {
  /** Bytes the row reports (after rounding to whole elements and whole blocks). */
  bytes: number;
  /**
   * The count the collective is called with, as nccl-tests prints it: the per-rank block for allgather, reducescatter,
   * alltoall, gather and scatter.
   */
  count: number;
  /** Elements of the send and receive buffers on each rank. */
  sendCount: number;
  recvCount: number;
}

/**
 * Maps a requested size to buffer shapes. At least one element per rank block, so that
 * every row moves data (nccl-tests would print a zero-byte row instead; the MPI and Gloo
 * benchmarks of bench/ round the same way, so their sizes line up).
 */
export function shapeOf(coll: Collective, dtype: Dtype, nranks: number, requestedBytes: number): Shape {
  const es = DTYPE_SIZE[dtype];
  const elems = Math.max(1, Math.floor(requestedBytes / es));
  switch (coll) {
    case 'allgather':
    case 'gather': {
      const per = Math.max(1, Math.floor(elems / nranks));
      return { bytes: per * nranks * es, count: per, sendCount: per, recvCount: per * nranks };
    }
    case 'reducescatter':
    case 'scatter': {
      const per = Math.max(1, Math.floor(elems / nranks));
      return { bytes: per * nranks * es, count: per, sendCount: per * nranks, recvCount: per };
    }
    case 'alltoall': {
      const per = Math.max(1, Math.floor(elems / nranks));
      return { bytes: per * nranks * es, count: per, sendCount: per * nranks, recvCount: per * nranks };
    }
    default:
      return { bytes: elems * es, count: elems, sendCount: elems, recvCount: elems };
  }
}

/** The sizes of a sweep: min, min·f, min·f², … ≤ max (or min, min+step, … when f is 1). */
export function sweepSizes(minBytes: number, maxBytes: number, factor: number, stepBytes: number): number[] {
  const sizes: number[] = [];
  for (let s = minBytes; s <= maxBytes; s = factor > 1 ? s * factor : s + stepBytes) {
    sizes.push(s);
    if (sizes.length > 10_000) break;
  }
  return sizes;
}
