// Results of `webccl perf` as nccl-tests prints them, and as JSON. Both come from the same
// ResultRow objects: the table shows the JSON's numbers rounded (time to 0.01 µs, bandwidths
// to 0.01 GB/s), so one can always be checked against the other.
import type { Dtype } from '../../core/dtypes.js';
import { bandwidths, type Collective } from './collectives.js';

export interface PlaceResult {
  /** The slowest rank's mean time per call. */
  time_us: number;
  algbw: number;
  busbw: number;
  /** Wrong elements summed over ranks; null when not checked (-c 0). */
  wrong: number | null;
  iters: number;
}

export interface ResultRow {
  size: number;
  count: number;
  /** nccl-tests' type name (float, half, ...); dtype is webccl's. */
  type: string;
  dtype: Dtype;
  redop: string;
  root: number;
  oop: PlaceResult;
  /** null for a collective with no in-place form (alltoall, sendrecv, pingpong): the table prints N/A. */
  ip: PlaceResult | null;
}

export interface PerfReport {
  tool: 'webccl perf';
  version: string;
  collective: Collective;
  /** Ranks the collective ran on (the group's, with --group): busbw's n. */
  nranks: number;
  /** With --group: the world's size, and the world ranks of the group (the others idled). */
  group: { worldSize: number; worldRanks: number[] } | null;
  transport: string;
  /** Processes the ranks ran in (1 with shm), and the ranks (worker threads sharing memory) in each. */
  nodes: number;
  ranksPerNode: number;
  buffers: string;
  algo: string;
  warmup: number;
  iters: number | 'auto';
  timeSec: number;
  reps: number;
  check: boolean;
  date: string;
  host: { node: string; cpus: number; platform: string };
  rows: ResultRow[];
  /** Mean busbw over every row and placement, as nccl-tests' "Avg bus bandwidth". */
  avgBusBw: number;
  wrongTotal: number | null;
  interrupted: boolean;
}

export const NCCL_TYPE: Record<Dtype, string> = {
  f32: 'float',
  f64: 'double',
  i32: 'int32',
  u32: 'uint32',
  i8: 'int8',
  u8: 'uint8',
  i64: 'int64',
  bf16: 'bfloat16',
  f16: 'half',
};

export function placeResult(
  coll: Collective,
  nranks: number,
  bytes: number,
  timeUs: number,
  wrong: number | null,
  iters: number,
): PlaceResult {
  return { time_us: timeUs, ...bandwidths(coll, nranks, bytes, timeUs), wrong, iters };
}

const W = { size: 12, count: 12, type: 8, redop: 6, root: 6, time: 10, bw: 7, wrong: 6 };

const cols = (cells: string[], widths: number[]) => cells.map((c, k) => c.padStart(widths[k])).join('  ');
const WIDTHS = [W.size, W.count, W.type, W.redop, W.root, W.time, W.bw, W.bw, W.wrong, W.time, W.bw, W.bw, W.wrong];

export function tableHeader(): string[] {
  const names = cols(
    ['size', 'count', 'type', 'redop', 'root', 'time', 'algbw', 'busbw', '#wrong', 'time', 'algbw', 'busbw', '#wrong'],
    WIDTHS,
  );
  const units = cols(
    ['(B)', '(elements)', '', '', '', '(us)', '(GB/s)', '(GB/s)', '', '(us)', '(GB/s)', '(GB/s)', ''],
    WIDTHS,
  );
  const lead = W.size + W.count + W.type + W.redop + W.root + 5 * 2;
  const block = W.time + 2 * W.bw + W.wrong + 3 * 2;
  const title =
    ' '.repeat(lead) +
    '  out-of-place'.padStart((block + 12) / 2).padEnd(block) +
    '  in-place'.padStart((block + 8) / 2);
  return [`#${title.slice(1).trimEnd()}`, `#${names.slice(1)}`, `#${units.slice(1)}`.trimEnd()];
}

const place = (p: PlaceResult | null) =>
  p === null
    ? ['N/A', 'N/A', 'N/A', 'N/A']
    : [p.time_us.toFixed(2), p.algbw.toFixed(2), p.busbw.toFixed(2), p.wrong === null ? 'N/A' : String(p.wrong)];

/** The placements a row was measured in. */
const measured = (r: ResultRow): PlaceResult[] => (r.ip === null ? [r.oop] : [r.oop, r.ip]);

export function formatRow(r: ResultRow): string {
  return cols(
    [String(r.size), String(r.count), r.type, r.redop, String(r.root), ...place(r.oop), ...place(r.ip)],
    WIDTHS,
  );
}

/** Mean busbw over every measured placement of every row (nccl-tests' "Avg bus bandwidth"). */
export function averageBusBw(rows: ResultRow[]): number {
  const all = rows.flatMap(measured);
  return all.length ? all.reduce((s, p) => s + p.busbw, 0) / all.length : 0;
}

export function wrongTotal(rows: ResultRow[]): number | null {
  const all = rows.flatMap(measured);
  if (all.some((p) => p.wrong === null)) return null;
  return all.reduce((s, p) => s + (p.wrong ?? 0), 0);
}

export function tableFooter(report: Pick<PerfReport, 'rows' | 'avgBusBw' | 'wrongTotal' | 'interrupted'>): string[] {
  const lines: string[] = [];
  if (report.interrupted)
    lines.push(`# interrupted after ${report.rows.length} row${report.rows.length === 1 ? '' : 's'}`);
  if (report.wrongTotal !== null)
    lines.push(`# Wrong values         : ${report.wrongTotal} ${report.wrongTotal === 0 ? 'OK' : 'FAILED'}`);
  lines.push(`# Avg bus bandwidth    : ${report.avgBusBw.toFixed(4)}`);
  lines.push('#');
  return lines;
}

/** The whole table of a report (header, rows, footer), as `webccl perf` prints it. */
export function formatTable(report: PerfReport): string {
  return `${[...tableHeader(), ...report.rows.map(formatRow), ...tableFooter(report)].join('\n')}\n`;
}
