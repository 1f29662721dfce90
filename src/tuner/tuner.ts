// Picks the algorithm and chunk size of a collective from its size and the node, unless the
// call, the communicator or WEBCCL_ALGO says otherwise (in that order of precedence).
// The size threshold comes from the cost model (cost-model.ts, fitted by `webccl tune`): direct
// needs one synchronisation per chunk but reads n·C bytes per rank; twoshot reads ~C but
// synchronises three times, so direct wins while synchronisation dominates.
import { envNumber } from '../core/config.js';
import { fail } from '../core/errors.js';
import { enabled } from '../core/log.js';
import { ALGO, type Algo } from '../core/shm-map.js';
import { envAllReduceAlgo } from './algo-env.js';
import type { CostModel } from './cost-model.js';
import { activeModel } from './model-source.js';
import { isNetAlgo } from './names.js';
import { crossoverBytes, explain, machineCores, shmPredictions } from './predict.js';

export const ALGORITHMS = Object.keys(ALGO) as Algo[];

export function parseAlgo(a: unknown, from: string): Algo {
  if (typeof a === 'string' && (ALGORITHMS as string[]).includes(a)) return a as Algo;
  return fail(
    'INVALID_ARGUMENT',
    `${from}: unknown algorithm ${JSON.stringify(a)} (expected ${ALGORITHMS.join(' or ')})`,
  );
}

/**
 * Largest allReduce (bytes) that runs direct on `nranks` ranks: where the model predicts
 * direct no slower than twoshot (on comm.alloc() buffers, where twoshot runs zero-copy; with
 * plain arrays twoshot falls back to direct chunks after its handshake, so past the threshold
 * it pays one synchronisation more, nothing else). WEBCCL_DIRECT_MAX_BYTES overrides it.
 */
export function directMaxBytes(
  nranks: number,
  model: CostModel = activeModel().model,
  cores = machineCores(model),
): number {
  const forced = envNumber('WEBCCL_DIRECT_MAX_BYTES');
  if (forced !== undefined) return forced;
  return crossoverBytes((b) => shmPredictions(model, nranks, b, cores), 'direct');
}

/** A communicator's standing choice, resolved once (environment reads are slow on hot paths). */
export interface Tuning {
  /** Forced by the communicator's option or WEBCCL_ALGO; undefined: by size. */
  algo?: Algo;
  /** Why `algo` is forced, for the INFO line. */
  forcedBy?: string;
  directMaxBytes: number;
  nranks: number;
  model: CostModel;
  cores: number;
}

export function resolveTuning(
  nranks: number,
  commAlgo?: unknown,
  model: CostModel = activeModel().model,
  cores = machineCores(model),
): Tuning {
  const env = envAllReduceAlgo();
  // A network algorithm named in WEBCCL_ALGO is for communicators across nodes, not this one.
  const forNode = env !== undefined && !isNetAlgo(env) ? parseAlgo(env, 'WEBCCL_ALGO') : undefined;
  const algo = commAlgo !== undefined ? parseAlgo(commAlgo, 'communicator algo option') : forNode;
  const forcedBy = commAlgo !== undefined ? 'communicator algo option' : forNode ? 'WEBCCL_ALGO' : undefined;
  return { algo, forcedBy, directMaxBytes: directMaxBytes(nranks, model, cores), nranks, model, cores };
}

/** Collectives whose peers read a rank's comm.alloc() input in place (assembly/engine/in-place-read.ts). */
const READ_IN_PLACE = new Set(['allGather', 'allToAll', 'gather', 'scatter']);

/**
 * Largest input (bytes) a rank keeps to itself, staging it through its slot, rather than let
 * its peers read it in place: when the ranks outnumber the cores, an input that fits one slot.
 * Read in place, an op synchronises twice (the peers learn where the inputs are, then tell
 * their owners they are done with them); staged in one chunk, once. Each synchronisation there
 * is a round of sleeps and wake-ups (~76 µs at 4 ranks on 2 cores, bench/sync-floor.mjs)
 * against microseconds of copying; an input of several chunks synchronises once per chunk,
 * which costs more than reading in place. WEBCCL_KEEP_INPUT_MAX_BYTES overrides it.
 */
export function keepInputMaxBytes(nranks: number, cores: number, slotBytes: number): number {
  return envNumber('WEBCCL_KEEP_INPUT_MAX_BYTES') ?? (nranks > cores ? slotBytes : 0);
}

/** Whether a `kind` op keeps an input of `inputBytes` (staged, not read in place), below `maxBytes`. */
export const keepsInput = (kind: string, inputBytes: number, maxBytes: number): boolean =>
  inputBytes <= maxBytes && READ_IN_PLACE.has(kind);

export function chooseAllReduceAlgo(bytes: number, t: Tuning, callAlgo?: unknown): Algo {
  const algo =
    callAlgo !== undefined
      ? parseAlgo(callAlgo, 'algo option')
      : (t.algo ?? (bytes <= t.directMaxBytes ? 'direct' : 'twoshot'));
  // Checked here: the INFO line's text and closure are not worth building on every op.
  if (enabled('INFO')) {
    explain(
      'allReduce',
      bytes,
      `${t.nranks} ranks (1 node, shm)`,
      algo,
      () => shmPredictions(t.model, t.nranks, bytes, t.cores),
      callAlgo !== undefined ? 'algo option' : t.forcedBy,
    );
  }
  return algo;
}

/** Kinds whose chunk stages one piece for each of the n ranks in a slot. */
const PIECES_PER_SLOT = new Set(['reduceScatter', 'allToAll', 'scatter']);

/**
 * Elements per chunk: what fits one slot (reduceScatter, allToAll and scatter stage n pieces
 * per slot, so their chunk is a piece: per rank block).
 */
export function chunkElems(kind: string, slotBytes: number, elemBytes: number, nranks: number): number {
  const per = PIECES_PER_SLOT.has(kind)
    ? Math.floor(slotBytes / (elemBytes * nranks))
    : Math.floor(slotBytes / elemBytes);
  // Whole 64-byte lines per chunk keep every slice of the kernels aligned.
  const line = 64 / elemBytes;
  return Math.max(line, Math.floor(per / line) * line);
}
