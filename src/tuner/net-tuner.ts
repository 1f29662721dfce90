// Picks the allReduce schedule of a communicator whose ranks span nodes, from the cost model for
// the message size and the topology, unless the call, the communicator or WEBCCL_ALGO says
// otherwise. Names of the shared-memory algorithms in WEBCCL_ALGO are left to the node phase
// (see tuner.ts).
import { fail } from '../core/errors.js';
import { enabled, log } from '../core/log.js';
import { envAllReduceAlgo } from './algo-env.js';
import { ringChannelCosts, ringChannels } from './channels.js';
import type { CostModel } from './cost-model.js';
import { activeModel } from './model-source.js';
import { isNetAlgo, NET_ALGORITHMS, type NetAlgo } from './names.js';
import {
  crossoverBytes,
  explain,
  fastest,
  flatPredictions,
  hierarchicalPrediction,
  machineCores,
  type Prediction,
  showBytes,
} from './predict.js';
import { ringPieceBytes, ringPieceCosts } from './ring-pieces.js';

export { isNetAlgo, NET_ALGORITHMS, type NetAlgo };

/** A cost model, the cores its ranks share, and where it came from ('built-in', a path, "rank R's ..."). */
export interface TuningBasis {
  model: CostModel;
  cores: number;
  from: string;
}

/**
 * The model the network tuner uses, and the cores its ranks share: this process's own, resolved
 * once, until a job's ranks agree on one (adoptJobModel).
 */
let standingModel: TuningBasis | undefined;
export function netTuningBasis(): TuningBasis {
  if (!standingModel) {
    const { model: m, from } = activeModel();
    standingModel = { model: m, cores: machineCores(m), from };
  }
  return standingModel;
}

/** Uses `m` (and `cores`) from now on instead of the model in force (tests, the simulator). */
export function useNetModel(m: CostModel | undefined, cores?: number): void {
  standingModel = m && { model: m, cores: cores ?? machineCores(m), from: 'useNetModel' };
  crossovers.clear();
}

/**
 * Tunes with the basis a job's ranks agreed on (net-world.ts: the first rank to reach the store
 * sets it, the others take it), so that ranks on machines with other core counts or another
 * model file still pick the same schedule and piece size: each decides alone, op by op, and
 * ranks that pick differently fail with MISMATCH. Said at INFO when it is not this rank's own.
 */
export function adoptJobModel(agreed: TuningBasis, rank: number): void {
  const own = netTuningBasis();
  if (sameBasis(own, agreed)) return;
  if (enabled('INFO'))
    log(
      'INFO',
      `rank ${rank}: tuner: tunes with the job's cost model (${agreed.from}, ${agreed.cores} cores), not this rank's own (${own.from}, ${own.cores} cores), so that every rank picks the same algorithm and piece size`,
    );
  standingModel = agreed;
  crossovers.clear();
}

/** A model's costs alone (without `source`, which may carry a whole sweep's rows). */
export const modelCosts = (m: CostModel): CostModel => ({ version: m.version, cores: m.cores, shm: m.shm, tcp: m.tcp });

const sameBasis = (a: TuningBasis, b: TuningBasis): boolean =>
  a.cores === b.cores && JSON.stringify(modelCosts(a.model)) === JSON.stringify(modelCosts(b.model));

const crossovers = new Map<string, number>();

/**
 * Largest allReduce (bytes) that runs recursive doubling rather than the ring over a group of
 * `size` ranks, `sharing` of them on each machine: where the model predicts doubling (log2(n)
 * exchanges of the whole buffer) no slower than the ring (2(n−1) messages of 1/n of it, in
 * pieces). On loopback each message costs system calls (the model's tcp α, ~100 µs).
 */
export function doublingMaxBytes(size: number, sharing = size, channels = 1): number {
  const key = `${size}/${sharing}/${channels}`;
  let x = crossovers.get(key);
  if (x === undefined) {
    const { model: m, cores } = netTuningBasis();
    x = crossoverBytes((b) => flatPredictions(m, size, b, cores, sharing, channels), 'doubling');
    crossovers.set(key, x);
  }
  return x;
}

export interface NetTopology {
  nodes: number;
  /** Ranks on every node when all nodes have the same count, else 0. */
  perNode: number;
  /**
   * Ranks on each machine, sharing its cores (the cost model's contention): all of them when
   * the rendezvous is on loopback, else the most that any node of the communicator holds (the
   * same number on every rank). Default: every rank.
   */
  sharing?: number;
  /** Connections per pair of ranks (the transport's, WEBCCL_NCHANNELS); default 1. */
  channels?: number;
}

export function parseNetAlgo(a: unknown, from: string): NetAlgo {
  if (isNetAlgo(a)) return a;
  return fail(
    'INVALID_ARGUMENT',
    `${from}: unknown algorithm ${JSON.stringify(a)} for a communicator across nodes (expected ${NET_ALGORITHMS.join(', ')})`,
  );
}

/** The communicator's standing choice: its option, else WEBCCL_ALGO when that names a network algorithm. */
export function resolveNetAlgo(commAlgo: unknown, topo: NetTopology): NetAlgo | undefined {
  const env = envAllReduceAlgo();
  const algo =
    commAlgo !== undefined ? parseNetAlgo(commAlgo, 'communicator algo option') : isNetAlgo(env) ? env : undefined;
  if (algo === 'hierarchical' && topo.perNode === 0) {
    fail('INVALID_ARGUMENT', 'hierarchical allReduce needs the same number of ranks on every node');
  }
  return algo;
}

/** The model's predictions for every schedule that can run on this topology. */
export function netPredictions(bytes: number, size: number, topo: NetTopology): Prediction[] {
  const { model: m, cores } = netTuningBasis();
  const sharing = topo.sharing ?? size;
  const preds = flatPredictions(m, size, bytes, cores, sharing, topo.channels);
  if (topo.nodes > 1 && topo.perNode > 1)
    preds.push(
      hierarchicalPrediction(m, {
        nodes: topo.nodes,
        perNode: topo.perNode,
        bytes,
        cores,
        sharing,
        channels: topo.channels,
      }),
    );
  return preds;
}

const topoText = (size: number, topo: NetTopology) =>
  `${size} ranks (${topo.nodes} nodes${topo.perNode ? ` x ${topo.perNode}` : ', uneven'}, tcp, ${topo.sharing ?? size} per machine)`;

/**
 * How many of its `channels` connections per pair a ring allReduce of `bytes` over `size` ranks
 * (`sharing` of them on each machine) in pieces of `pieceBytes` spreads its messages over: the
 * model's choice (channels.ts), explained at INFO with each count's predicted time.
 */
export function ringWays(bytes: number, size: number, sharing: number, pieceBytes: number, channels: number): number {
  const { model: m, cores } = netTuningBasis();
  const k = ringChannels(m, size, bytes, pieceBytes, sharing, cores, channels);
  if (enabled('INFO') && channels > 1) {
    const costs = () =>
      ringChannelCosts(m, size, bytes, pieceBytes, sharing, cores, channels).map((c) => ({
        algo: `${c.channels}`,
        us: c.us,
      }));
    explain(
      'ring allReduce channels',
      bytes,
      `${size} ranks (tcp, ${sharing} per machine, ${channels} connections per pair, ${showBytes(pieceBytes)} pieces)`,
      `${k}`,
      costs,
    );
  }
  return k;
}

export function chooseNetAllReduce(
  bytes: number,
  size: number,
  topo: NetTopology,
  standing: NetAlgo | undefined,
  callAlgo?: unknown,
): NetAlgo {
  let algo: NetAlgo;
  let why: string | undefined;
  if (callAlgo !== undefined) {
    algo = parseNetAlgo(callAlgo, 'algo option');
    if (algo === 'hierarchical' && topo.perNode === 0)
      fail('INVALID_ARGUMENT', 'hierarchical allReduce needs the same number of ranks on every node');
    why = 'algo option';
  } else if (standing) {
    algo = standing;
    why = 'communicator algo option or WEBCCL_ALGO';
  } else if (topo.nodes > 1 && topo.perNode > 1) {
    algo = fastest(netPredictions(bytes, size, topo)).algo as NetAlgo;
  } else {
    algo = flatAlgo(bytes, size, topo.sharing, topo.channels);
  }
  if (enabled('INFO'))
    explain('allReduce', bytes, topoText(size, topo), algo, () => netPredictions(bytes, size, topo), why);
  return algo;
}

/**
 * The ring's piece size for an allReduce of `bytes` over a network group of `size` ranks,
 * `sharing` of them on each machine: `forced` (WEBCCL_PIECE_BYTES) when given, else the model's
 * (ring-pieces.ts), explained at INFO with the piece-dependent cost of each size weighed.
 */
export function ringPiece(bytes: number, size: number, sharing = size, forced?: number): number {
  if (forced !== undefined) return forced;
  const { model: m, cores } = netTuningBasis();
  const piece = ringPieceBytes(m, size, bytes, sharing, cores);
  if (enabled('INFO')) {
    const costs = () =>
      ringPieceCosts(m, size, bytes, sharing, cores).map((c) => ({ algo: `${showBytes(c.pieceBytes)}`, us: c.us }));
    explain(
      'ring allReduce pieces',
      bytes,
      `${size} ranks (tcp, ${sharing} per machine)`,
      showBytes(piece),
      costs,
      undefined,
      'piece-dependent time',
    );
  }
  return piece;
}

/**
 * The flat schedule for `bytes` over a network group of `size` ranks, `sharing` of them on each machine, `channels`
 * connections per pair.
 */
export const flatAlgo = (bytes: number, size: number, sharing = size, channels = 1): 'ring' | 'doubling' =>
  bytes <= doublingMaxBytes(size, sharing, channels) ? 'doubling' : 'ring';
