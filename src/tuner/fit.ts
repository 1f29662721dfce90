// Fits the cost model to measured rows: for each path, the coefficients (α, wake, 1/β, 1/γ, o,
// the crowded o', 1/β', 1/γ', ρ, and the connections' φ and ω) that minimise the squared
// relative error of the predicted times over the rows (least squares on each row's features
// divided by its measured time, so a 1 KiB row counts as much as a 64 MiB one), none negative
// (every subset of coefficients is solved and the best one whose coefficients are all ≥ 0 is
// kept: eleven coefficients, 2,047 subsets, about a second for a sweep's rows; coefficients
// that no row exercises — φ and ω in shared memory — are left out of every subset).
import { fail } from '../core/errors.js';
import { type CostModel, features, pathCosts } from './cost-model.js';
import { netCounts, type Path, type StepCounts, shmCounts } from './schedules.js';

/** One measurement: an allReduce of `bytes` over `ranks` ranks on one path took `timeUs`. */
export interface PerfRow {
  path: Path;
  algo: string;
  ranks: number;
  bytes: number;
  timeUs: number;
  /**
   * tcp: the connections per pair the sweep ran with (WEBCCL_NCHANNELS), every op using them
   * all. Absent: rows recorded before channels were weighed, whose counts carry no connection
   * costs (their φ and ω stay out of the fit).
   */
  channels?: number;
}

/** The counts of the flat schedules a row can measure (hierarchical spans both paths). */
export function rowCounts(r: Pick<PerfRow, 'path' | 'algo' | 'ranks' | 'bytes' | 'channels'>): StepCounts {
  if (r.path === 'shm' && (r.algo === 'direct' || r.algo === 'twoshot')) return shmCounts(r.algo, r.ranks, r.bytes);
  if (r.path === 'tcp' && (r.algo === 'ring' || r.algo === 'doubling' || r.algo === 'tree')) {
    const c = netCounts(r.algo, r.ranks, r.bytes, undefined, r.channels ?? 1);
    if (r.channels !== undefined) return c;
    const { ways: _, ...unweighed } = c;
    return unweighed;
  }
  return fail('INVALID_ARGUMENT', `fit: no schedule ${r.algo} on ${r.path}`, { algo: r.algo, path: r.path });
}

/** Solves the square system a·x = b (Gaussian elimination, partial pivoting); null if singular. */
function solve(a: number[][], b: number[]): number[] | null {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r][c]) > Math.abs(m[p][c])) p = r;
    if (Math.abs(m[p][c]) < 1e-300) return null;
    [m[c], m[p]] = [m[p], m[c]];
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = m[r][c] / m[c][c];
      for (let k = c; k <= n; k++) m[r][k] -= f * m[c][k];
    }
  }
  return m.map((row, i) => row[n] / row[i]);
}

/**
 * Non-negative least squares of `y ≈ X·x` in relative terms (each row divided by y), by trying
 * every subset of the columns; columns that are zero in every row stay 0.
 */
export function fitRelative(x: number[][], y: number[]): number[] {
  const k = x[0]?.length ?? 0;
  const rows = x.map((f, i) => f.map((v) => v / y[i]));
  const used = Array.from({ length: k }, (_, j) => rows.some((r) => r[j] !== 0));
  let best: number[] = new Array<number>(k).fill(0);
  let bestErr = Infinity;
  for (let mask = 1; mask < 1 << k; mask++) {
    const cols = [...Array(k).keys()].filter((j) => mask & (1 << j));
    if (cols.some((j) => !used[j])) continue;
    // Normal equations over the chosen columns, scaled so that columns of µs and of µs per byte condition alike.
    const scale = cols.map((j) => Math.sqrt(rows.reduce((s, r) => s + r[j] * r[j], 0)));
    const a = cols.map((_, p) =>
      cols.map((_, q) => rows.reduce((s, r) => s + (r[cols[p]] / scale[p]) * (r[cols[q]] / scale[q]), 0)),
    );
    const b = cols.map((j, p) => rows.reduce((s, r) => s + r[j] / scale[p], 0));
    const z = solve(a, b);
    if (!z || z.some((v) => v < 0 || !Number.isFinite(v))) continue;
    const coef = new Array<number>(k).fill(0);
    cols.forEach((j, p) => (coef[j] = z[p] / scale[p]));
    const err = rows.reduce((s, r) => s + (r.reduce((t, v, j) => t + v * coef[j], 0) - 1) ** 2, 0);
    if (err < bestErr) {
      bestErr = err;
      best = coef;
    }
  }
  // A coefficient that adds under a billionth of any row's time is rounding: no cost at all.
  return best.map((c, j) => (rows.some((r) => Math.abs(r[j] * c) > 1e-9) ? c : 0));
}

/**
 * The model that best explains `rows`, for a machine of `cores` cores. A path without rows takes
 * `fallback`'s costs (refused when there is none).
 */
export function fitModel(
  rows: readonly PerfRow[],
  cores: number,
  source?: Record<string, unknown>,
  fallback?: CostModel,
): CostModel {
  const fitPath = (path: Path) => {
    const mine = rows.filter((r) => r.path === path && r.timeUs > 0 && r.ranks > 1);
    if (!mine.length) return fallback?.[path] ?? fail('INVALID_ARGUMENT', `fit: no measurements on ${path}`, { path });
    return pathCosts(
      fitRelative(
        mine.map((r) => features(rowCounts(r), r.ranks, cores)),
        mine.map((r) => r.timeUs),
      ),
    );
  };
  return { version: 1, cores, shm: fitPath('shm'), tcp: fitPath('tcp'), ...(source && { source }) };
}
