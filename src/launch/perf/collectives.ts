// What `webccl perf` knows about each collective: how a sweep size maps to element counts and
// buffer lengths, and the bus-bandwidth factor of nccl-tests' doc/PERFORMANCE.md:
//
//   allreduce       busbw = algbw · 2(n−1)/n    size = bytes of the vector
//   allgather       busbw = algbw · (n−1)/n     size = bytes of the whole output (n blocks)
//   reducescatter   busbw = algbw · (n−1)/n     size = bytes of the whole input (n blocks)
//   broadcast       busbw = algbw               size = bytes of the vector
//   reduce          busbw = algbw               size = bytes of the vector
//
// algbw = size / time, in GB/s with GB = 1e9 bytes, as nccl-tests prints it.
import { DTYPE_SIZE, type Dtype } from '../../core/dtypes.js';

export const COLLECTIVES = ['allreduce', 'allgather', 'reducescatter', 'broadcast', 'reduce'] as const;
export type Collective = (typeof COLLECTIVES)[number];

/** Spellings accepted on the command line (nccl-tests binary names and torch names too). */
const ALIASES: Record<string, Collective> = {
  allreduce: 'allreduce', all_reduce: 'allreduce', 'all-reduce': 'allreduce',
  allgather: 'allgather', all_gather: 'allgather', 'all-gather': 'allgather',
  reducescatter: 'reducescatter', reduce_scatter: 'reducescatter', 'reduce-scatter': 'reducescatter',
  broadcast: 'broadcast', bcast: 'broadcast',
  reduce: 'reduce',
};

export function collectiveNamed(name: string): Collective | undefined {
  return ALIASES[name.toLowerCase()];
}

/** Whether the collective takes a reduction op / a root (the table prints "none" / -1 otherwise). */
export const HAS_OP: Record<Collective, boolean> = {
  allreduce: true, allgather: false, reducescatter: true, broadcast: false, reduce: true,
};
export const HAS_ROOT: Record<Collective, boolean> = {
  allreduce: false, allgather: false, reducescatter: false, broadcast: true, reduce: true,
};

export function busBwFactor(coll: Collective, nranks: number): number {
  const n = nranks;
  switch (coll) {
    case 'allreduce':
      return (2 * (n - 1)) / n;
    case 'allgather':
    case 'reducescatter':
      return (n - 1) / n;
    case 'broadcast':
    case 'reduce':
      return 1;
  }
}

/** algbw and busbw in GB/s (1e9 B/s) of `bytes` moved in `timeUs` microseconds. */
export function bandwidths(coll: Collective, nranks: number, bytes: number, timeUs: number): { algbw: number; busbw: number } {
  const algbw = timeUs > 0 ? bytes / (timeUs * 1e3) : 0;
  return { algbw, busbw: algbw * busBwFactor(coll, nranks) };
}

/** One point of a sweep, in elements of the dtype. */
export interface Shape {
  /** Bytes the row reports (after rounding to whole elements and whole blocks). */
  bytes: number;
  /** The count the collective is called with, as nccl-tests prints it: per-rank block for allgather/reducescatter. */
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
    case 'allgather': {
      const per = Math.max(1, Math.floor(elems / nranks));
      return { bytes: per * nranks * es, count: per, sendCount: per, recvCount: per * nranks };
    }
    case 'reducescatter': {
      const per = Math.max(1, Math.floor(elems / nranks));
      return { bytes: per * nranks * es, count: per, sendCount: per * nranks, recvCount: per };
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
