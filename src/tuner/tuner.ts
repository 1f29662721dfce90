// Picks the algorithm and chunk size of a collective from its size and the node, unless the
// call, the communicator or WEBCCL_ALGO says otherwise (in that order of precedence).
// The size threshold comes from bench/ (see the README's algorithm table): direct needs one
// synchronisation per chunk but reads n·C bytes per rank; twoshot reads ~C but synchronises
// twice (three times zero-copy), so direct wins while synchronisation dominates.
import { envNumber, envString } from '../core/config.js';
import { fail } from '../core/errors.js';
import { ALGO, type Algo } from '../core/shm-map.js';
import { isNetAlgo } from './net-tuner.js';

export const ALGORITHMS = Object.keys(ALGO) as Algo[];

export function parseAlgo(a: unknown, from: string): Algo {
  if (typeof a === 'string' && (ALGORITHMS as string[]).includes(a)) return a as Algo;
  return fail('INVALID_ARGUMENT', `${from}: unknown algorithm ${JSON.stringify(a)} (expected ${ALGORITHMS.join(' or ')})`);
}

/**
 * Largest allReduce (bytes) that runs direct, by rank count. Measured with
 * `webccl perf allreduce -a direct` against `-a twoshot` on comm.alloc() buffers: twoshot's
 * zero-copy path wins from 256 KiB with 2 ranks (69 against 114 us) and from 512 KiB with 4
 * (277 against 310 us). With plain arrays twoshot falls back to direct chunks after its
 * handshake, so past the threshold they pay one synchronisation more, nothing else.
 */
export function directMaxBytes(nranks: number): number {
  const forced = envNumber('WEBCCL_DIRECT_MAX_BYTES');
  if (forced !== undefined) return forced;
  return nranks <= 2 ? 128 * 1024 : 256 * 1024;
}

/** A communicator's standing choice, resolved once (environment reads are slow on hot paths). */
export interface Tuning {
  /** Forced by the communicator's option or WEBCCL_ALGO; undefined: by size. */
  algo?: Algo;
  directMaxBytes: number;
}

export function resolveTuning(nranks: number, commAlgo?: unknown): Tuning {
  const env = envString('WEBCCL_ALGO');
  // A network algorithm named in WEBCCL_ALGO is for communicators across nodes, not this one.
  const forNode = env !== undefined && !isNetAlgo(env) ? parseAlgo(env, 'WEBCCL_ALGO') : undefined;
  const algo = commAlgo !== undefined ? parseAlgo(commAlgo, 'communicator algo option') : forNode;
  return { algo, directMaxBytes: directMaxBytes(nranks) };
}

export function chooseAllReduceAlgo(bytes: number, t: Tuning, callAlgo?: unknown): Algo {
  if (callAlgo !== undefined) return parseAlgo(callAlgo, 'algo option');
  return t.algo ?? (bytes <= t.directMaxBytes ? 'direct' : 'twoshot');
}

/** Kinds whose chunk stages one piece for each of the n ranks in a slot. */
const PIECES_PER_SLOT = new Set(['reduceScatter', 'allToAll', 'scatter']);

/**
 * Elements per chunk: what fits one slot (reduceScatter, allToAll and scatter stage n pieces
 * per slot, so their chunk is a piece: per rank block).
 */
export function chunkElems(kind: string, slotBytes: number, elemBytes: number, nranks: number): number {
  const per = PIECES_PER_SLOT.has(kind) ? Math.floor(slotBytes / (elemBytes * nranks)) : Math.floor(slotBytes / elemBytes);
  // Whole 64-byte lines per chunk keep every slice of the kernels aligned.
  const line = 64 / elemBytes;
  return Math.max(line, Math.floor(per / line) * line);
}
