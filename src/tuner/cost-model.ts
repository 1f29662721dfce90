// The cost model: per path (shm: threads sharing memory; tcp: ranks joined by sockets), a
// latency α per step, a cost o per message sent, a transfer rate β and a reduction rate γ,
// plus what ranks beyond the machine's cores cost (they sleep and are woken at each step, and
// share the cores' time). A schedule's time is its counts (schedules.ts) times these costs:
//
//   T = steps·(α + wake·max(0, ranks − cores)) + max(1, ranks / cores)·(messages·o + bytes/β + reduced/γ)
//
// summed over the paths the schedule uses. `webccl tune` fits it on this machine (fit.ts).
import { fail } from '../core/errors.js';
import type { Path, PathCounts, StepCounts } from './schedules.js';

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

/** The five coefficients in the order fit.ts solves for them. */
export const COEFFS = ['alphaUs', 'wakeUs', 'usPerByte', 'usPerReducedByte', 'messageUs'] as const;

/** The features of one row: what multiplies each coefficient. */
export function features(c: StepCounts, ranks: number, cores: number): number[] {
  const share = Math.max(1, ranks / cores);
  return [c.steps, c.steps * Math.max(0, ranks - cores), share * c.bytes, share * c.reduced, share * c.messages];
}

const perByte = (rate: number | null): number => (rate === null ? 0 : 1 / rate);

export function pathTimeUs(p: PathCosts, c: StepCounts, ranks: number, cores: number): number {
  const f = features(c, ranks, cores);
  return f[0] * p.alphaUs + f[1] * p.wakeUs + f[2] * perByte(p.betaBytesPerUs) + f[3] * perByte(p.gammaBytesPerUs) + f[4] * (p.messageUs ?? 0);
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
  const bad = (field: string): never => fail('INVALID_ARGUMENT', `${from}: not a webccl cost model (${field})`, { field });
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
    if (c!.messageUs !== undefined && !nonNegative(c!.messageUs)) bad(`${p}.messageUs`);
  }
  return m as CostModel;
}

/** Coefficients (COEFFS order) as a path's costs. */
export function pathCosts(x: readonly number[]): PathCosts {
  const r = (v: number) => (v > 0 ? 1 / v : null);
  return { alphaUs: x[0], wakeUs: x[1], betaBytesPerUs: r(x[2]), gammaBytesPerUs: r(x[3]), messageUs: x[4] };
}
