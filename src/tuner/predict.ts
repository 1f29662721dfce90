// The cost model's predictions for the choices the tuners make, and the INFO line that
// explains a choice: printed once per (collective, size class, topology), not per op.
import { enabled, log } from '../core/log.js';
import { ringChannels } from './channels.js';
import { type CostModel, predictUs } from './cost-model.js';
import { ringPieceBytes } from './ring-pieces.js';
import { hierarchicalCounts, netCounts, onPath, shmCounts } from './schedules.js';

export interface Prediction {
  algo: string;
  us: number;
}

/** Cores of this machine (what ranks beyond them share); the model's own when unknown. */
export function machineCores(model: CostModel): number {
  const p = (globalThis as { process?: { getBuiltinModule?: (n: string) => unknown } }).process;
  const os = p?.getBuiltinModule?.('node:os') as { availableParallelism?: () => number; cpus(): unknown[] } | undefined;
  const n = os
    ? (os.availableParallelism?.() ?? os.cpus().length)
    : (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;
  return n && n > 0 ? n : model.cores;
}

/** One node's allReduce: direct and two-shot on `n` ranks (threads of one machine). */
export function shmPredictions(model: CostModel, n: number, bytes: number, cores: number): Prediction[] {
  return (['direct', 'twoshot'] as const).map((algo) => ({
    algo,
    us: predictUs(model, onPath('shm', shmCounts(algo, n, bytes)), n, cores),
  }));
}

/**
 * A flat network allReduce over `n` ranks, `sharing` of them on each machine (all of them on
 * loopback), `channels` connections per pair; the ring in the pieces and over the connections
 * the model picks for it (ring-pieces.ts, channels.ts).
 */
export function flatPredictions(
  model: CostModel,
  n: number,
  bytes: number,
  cores: number,
  sharing = n,
  channels = 1,
): Prediction[] {
  const piece = ringPieceBytes(model, n, bytes, sharing, cores);
  const ways = { ring: ringChannels(model, n, bytes, piece, sharing, cores, channels), doubling: channels };
  return (['doubling', 'ring'] as const).map((algo) => ({
    algo,
    us: predictUs(model, onPath('tcp', netCounts(algo, n, bytes, piece, ways[algo])), sharing, cores),
  }));
}

export const fastest = (ps: readonly Prediction[]): Prediction => ps.reduce((a, b) => (b.us < a.us ? b : a));

/**
 * Hierarchical over `nodes` × `perNode`: the node phase on shm and the flat schedule the model
 * picks for the shard across nodes, `sharing` ranks on each machine.
 */
export function hierarchicalPrediction(
  model: CostModel,
  h: { nodes: number; perNode: number; bytes: number; cores: number; sharing?: number; channels?: number },
): Prediction & { across: 'ring' | 'doubling' } {
  const { nodes, perNode, bytes, cores, sharing = perNode, channels = 1 } = h;
  const shard = bytes / perNode;
  const across = fastest(flatPredictions(model, nodes, shard, cores, sharing, channels)).algo as 'ring' | 'doubling';
  const piece = ringPieceBytes(model, nodes, shard, sharing, cores);
  const c = hierarchicalCounts(
    nodes,
    perNode,
    bytes,
    across,
    piece,
    across === 'ring' ? ringChannels(model, nodes, shard, piece, sharing, cores, channels) : channels,
  );
  return { algo: 'hierarchical', us: predictUs(model, c, sharing, cores), across };
}

/**
 * Largest size (bytes) at which `small` is predicted no slower than the other candidate: the
 * crossover, found by bisection (the schedules' costs grow with size, and the small-message one
 * faster). 0 when it never is, `max` when it always is.
 */
export function crossoverBytes(predict: (bytes: number) => Prediction[], small: string, max = 2 ** 32): number {
  const smallWins = (b: number) => fastest(predict(b)).algo === small;
  if (!smallWins(1)) return 0;
  if (smallWins(max)) return max;
  let lo = 1;
  let hi = max;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (smallWins(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

const explained = new Set<string>();

const showUs = (us: number) => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} us`);

/** Size class of a message: the power of two at or below it. */
export const sizeClass = (bytes: number): number => (bytes < 1 ? 0 : 2 ** Math.floor(Math.log2(bytes)));

/**
 * At INFO: `allReduce 1 MiB class on 4 ranks (1 node x 4): twoshot (model: twoshot 210.0 us,
 * direct 290.1 us)`, once per collective, size class and topology. `why` says what forced a
 * choice the model did not make.
 */
export function explain(
  collective: string,
  bytes: number,
  topology: string,
  chosen: string,
  preds: () => readonly Prediction[],
  why?: string,
  what = 'predicted',
): void {
  if (!enabled('INFO')) return;
  const cls = sizeClass(bytes);
  const key = `${collective}|${cls}|${topology}|${chosen}`;
  if (explained.has(key)) return;
  explained.add(key);
  const alts = [...preds()]
    .sort((a, b) => a.us - b.us)
    .map((p) => `${p.algo} ${showUs(p.us)}`)
    .join(', ');
  log(
    'INFO',
    `tuner: ${collective} of ${showBytes(cls)} class on ${topology}: ${chosen}${why ? ` (${why})` : ''}; ${what} ${alts}`,
  );
}

export function showBytes(b: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) {
    b /= 1024;
    i++;
  }
  return `${b} ${units[i]}`;
}
