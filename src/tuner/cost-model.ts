// The cost model: per path (shm: threads sharing memory; tcp: ranks joined by sockets), a
// latency α per step, a cost o per message sent, a transfer rate β and a reduction rate γ,
// plus what ranks beyond the machine's cores cost: they sleep and are woken at each step, and
// each core's worth of them (e = max(0, ranks / cores − 1)) adds its own costs per message,
// byte and reduced byte (o', 1/β', 1/γ'). A schedule's time is its counts (schedules.ts) times
// these costs:
//
// T = steps·(α + wake·max(0, ranks − cores)) + turns·ρ + messages·(o + e·o') + bytes·(1/β + e/β') + reduced·(1/γ +
// e/γ')
//       + (bytes / ways)·φ + steps·(ways − 1)·ω
//
// where turns counts, over the steps, the scheduling rounds beyond the first that a step takes
// when its busy ranks outnumber the cores (schedules.ts extraRounds), each costing ρ, and ways
// is how many connections a rank's messages to one peer spread over at once (network paths;
// the tuner picks how many an op may use, its channels): φ is what one connection serialises
// per byte (a flow slower than the path: the bytes spread over w connections pay φ/w), ω what
// each connection beyond the first costs per step (its own wake-ups and system calls). The
// two pull apart, so the best number of channels grows with the bytes per step.
// The whole is summed over the paths the schedule uses. `webccl tune` fits it on this machine (fit.ts).
// The crowded costs are apart from the base ones because ranks with a core each pay less per
// message and byte than ranks taking turns on one: with one set of costs (T scaling with
// ranks / cores, which a model without the crowded fields still means) the fit served the
// oversubscribed rows and overestimated 2 processes over TCP by 35–100%.
import { fail } from '../core/errors.js';
import { extraRounds, type Path, type PathCounts, type StepCounts } from './schedules.js';

export interface PathCosts {
  /** α: microseconds per step. */
  alphaUs: number;
  /** Microseconds more per step for each rank beyond the cores. */
  wakeUs: number;
  /** β: bytes per microsecond (MB/s); null: too fast to measure against the rest. */
  betaBytesPerUs: number | null;
  /** γ: bytes the reduction kernels read per microsecond; null as β. */
  gammaBytesPerUs: number | null;
  /** o: microseconds of CPU per message sent (0 when absent: models written before it). */
  messageUs?: number;
  /**
   * o', 1/β', 1/γ': microseconds more per message, per byte moved and per byte reduced for each
   * core's worth of ranks beyond the cores. Absent: the base costs again (T grows with
   * ranks / cores, as in models written before these fields).
   */
  crowdMessageUs?: number;
  crowdUsPerByte?: number;
  crowdUsPerReducedByte?: number;
  /**
   * ρ: microseconds per scheduling round beyond the first in a step whose busy ranks outnumber
   * the cores (0 when absent: models written before it). It tells a schedule that keeps every
   * rank busy at each step (the ring) from one that keeps fewer (doubling beyond a power of two).
   */
  roundUs?: number;
  /**
   * φ: microseconds per byte that one connection serialises, over the path's own 1/β (0 when
   * absent: a connection carries the path's whole rate, as in models written before it).
   */
  flowUsPerByte?: number;
  /** ω: microseconds per step for each connection beyond the first that a rank sends to a peer on (0 when absent). */
  channelStepUs?: number;
}

export interface CostModel {
  version: 1;
  /** Cores of the machine it was fitted on (what ranks beyond share). */
  cores: number;
  shm: PathCosts;
  tcp: PathCosts;
  /** How it was made: the tool, the date, the host, the rows it was fitted on. */
  source?: Record<string, unknown>;
}

/** The eleven coefficients in the order fit.ts solves for them. */
export const COEFFS = [
  'alphaUs',
  'wakeUs',
  'usPerByte',
  'usPerReducedByte',
  'messageUs',
  'crowdUsPerByte',
  'crowdUsPerReducedByte',
  'crowdMessageUs',
  'roundUs',
  'flowUsPerByte',
  'channelStepUs',
] as const;

/** The features of one row: what multiplies each coefficient. */
export function features(c: StepCounts, ranks: number, cores: number): number[] {
  const e = Math.max(0, ranks / cores - 1);
  const ways = c.ways ?? 0;
  return [
    c.steps,
    c.steps * Math.max(0, ranks - cores),
    c.bytes,
    c.reduced,
    c.messages,
    e * c.bytes,
    e * c.reduced,
    e * c.messages,
    extraRounds(c, ranks, cores),
    ways ? c.bytes / ways : 0,
    ways ? c.steps * (ways - 1) : 0,
  ];
}

const perByte = (rate: number | null): number => (rate === null ? 0 : 1 / rate);

/** A path's costs in COEFFS order (absent crowded costs are the base ones). */
function coefficients(p: PathCosts): number[] {
  const byte = perByte(p.betaBytesPerUs);
  const reduced = perByte(p.gammaBytesPerUs);
  const message = p.messageUs ?? 0;
  return [
    p.alphaUs,
    p.wakeUs,
    byte,
    reduced,
    message,
    p.crowdUsPerByte ?? byte,
    p.crowdUsPerReducedByte ?? reduced,
    p.crowdMessageUs ?? message,
    p.roundUs ?? 0,
    p.flowUsPerByte ?? 0,
    p.channelStepUs ?? 0,
  ];
}

export function pathTimeUs(p: PathCosts, c: StepCounts, ranks: number, cores: number): number {
  const x = coefficients(p);
  return features(c, ranks, cores).reduce((t, f, j) => t + f * x[j], 0);
}

/** Predicted microseconds of a schedule whose counts are `c`, with `ranks` sharing a machine of `cores`. */
export function predictUs(model: CostModel, c: PathCounts, ranks: number, cores = model.cores): number {
  return pathTimeUs(model.shm, c.shm, ranks, cores) + pathTimeUs(model.tcp, c.tcp, ranks, cores);
}

const PATHS: Path[] = ['shm', 'tcp'];
const nonNegative = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x) && x >= 0;
const rate = (x: unknown): boolean => x === null || (typeof x === 'number' && Number.isFinite(x) && x > 0);

/** A model read from a file, checked field by field (`from` names the file in errors). */
export function checkModel(m: unknown, from: string): CostModel {
  const bad = (field: string): never =>
    fail('INVALID_ARGUMENT', `${from}: not a webccl cost model (${field})`, { field });
  if (typeof m !== 'object' || m === null) return bad('not an object');
  const o = m as Record<string, unknown>;
  if (o.version !== 1) bad('version');
  if (!(Number.isInteger(o.cores) && (o.cores as number) >= 1)) bad('cores');
  for (const p of PATHS) {
    const c = o[p] as Record<string, unknown> | undefined;
    if (typeof c !== 'object' || c === null) bad(p);
    if (!nonNegative(c!.alphaUs)) bad(`${p}.alphaUs`);
    if (!nonNegative(c!.wakeUs)) bad(`${p}.wakeUs`);
    if (!rate(c!.betaBytesPerUs)) bad(`${p}.betaBytesPerUs`);
    if (!rate(c!.gammaBytesPerUs)) bad(`${p}.gammaBytesPerUs`);
    for (const f of [
      'messageUs',
      'crowdMessageUs',
      'crowdUsPerByte',
      'crowdUsPerReducedByte',
      'roundUs',
      'flowUsPerByte',
      'channelStepUs',
    ]) {
      if (c![f] !== undefined && !nonNegative(c![f])) bad(`${p}.${f}`);
    }
  }
  return m as CostModel;
}

/** Coefficients (COEFFS order) as a path's costs. */
export function pathCosts(x: readonly number[]): PathCosts {
  const r = (v: number) => (v > 0 ? 1 / v : null);
  return {
    alphaUs: x[0],
    wakeUs: x[1],
    betaBytesPerUs: r(x[2]),
    gammaBytesPerUs: r(x[3]),
    messageUs: x[4],
    crowdUsPerByte: x[5],
    crowdUsPerReducedByte: x[6],
    crowdMessageUs: x[7],
    roundUs: x[8],
    flowUsPerByte: x[9],
    channelStepUs: x[10],
  };
}
