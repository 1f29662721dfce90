// `webccl simulate <collective>`: for each size and algorithm, every rank runs the schedule over
// the simulated network in size-only mode; prints nccl-tests' table (predicted time, algbw,
// busbw) as rows finish, and writes --json at the end.
import { writeFileSync } from 'node:fs';
import { resolveSimAlgo, type SimOptions } from '../../sim/index.js';
import { SIM_DTYPE_SIZE } from '../../sim/memory.js';
import { bandwidths, type Collective, shapeOf, sweepSizes } from '../perf/collectives.js';
import { NCCL_TYPE } from '../perf/format.js';
import { parseSimulateArgs, SIMULATE_USAGE, SimUsageError, type SimulateOptions } from './args.js';
import { simulateOnThreads } from './threads.js';

export interface SimulateRow {
  size: number;
  count: number;
  algorithm: string;
  /** Predicted time of the op: when its last rank finishes. */
  timeUs: number;
  algbw: number;
  busbw: number;
  messages: number;
  /** How long the simulation of this row took, seconds of wall time. */
  wallSec: number;
}

export interface SimulateReport {
  tool: 'webccl simulate';
  collective: string;
  nranks: number;
  nodes: number;
  ranksPerNode: number;
  latencyUs: number;
  bandwidthGbit: number;
  intraLatencyUs: number;
  intraBandwidthGbit: number;
  overheadUs: number;
  dtype: string;
  jitter: number;
  seed: number;
  rows: SimulateRow[];
}

interface IO {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
}

const W = [12, 12, 8, 13, 12, 8, 8, 10, 8];
const cols = (cells: string[]) => cells.map((c, k) => c.padStart(W[k])).join('  ');
const gbit = (bytesPerUs: number) => +(bytesPerUs * 8e-3).toFixed(6);

export function simulateHeader(o: SimulateOptions): string[] {
  return [
    `# webccl simulate ${o.collective}: ${o.ranks} ranks on ${o.nodes} node(s) of ${o.ranks / o.nodes}; between nodes α ${o.latencyUs} us, β ${gbit(o.bytesPerUs)} Gbit/s; inside a node α ${o.intraLatencyUs} us, β ${gbit(o.intraBytesPerUs)} Gbit/s${o.overheadUs ? `; ${o.overheadUs} us per message at its sender` : ''}${o.jitter ? `; jitter ${o.jitter}, seed ${o.seed}` : ''}`,
    `#${cols(['size', 'count', 'type', 'algorithm', 'time', 'algbw', 'busbw', 'messages', 'wall']).slice(1)}`,
    `#${cols(['(B)', '(elements)', '', '', '(us)', '(GB/s)', '(GB/s)', '', '(s)']).slice(1)}`,
  ];
}

export function formatSimulateRow(o: SimulateOptions, r: SimulateRow): string {
  return cols([
    String(r.size),
    String(r.count),
    NCCL_TYPE[o.dtype],
    r.algorithm,
    r.timeUs.toFixed(2),
    r.algbw.toFixed(2),
    r.busbw.toFixed(2),
    String(r.messages),
    r.wallSec.toFixed(2),
  ]);
}

export function networkOf(o: SimulateOptions): SimOptions {
  return {
    ranks: o.ranks,
    nodes: o.nodes,
    mode: 'size',
    jitter: o.jitter,
    seed: o.seed,
    overheadUs: o.overheadUs,
    inter: { latencyUs: o.latencyUs, bytesPerUs: o.bytesPerUs },
    intra: { latencyUs: o.intraLatencyUs, bytesPerUs: o.intraBytesPerUs },
  };
}

/** Sizes as webccl perf rounds them; alltoall, gather and scatter like allgather (size: all n blocks). */
function shapeFor(o: SimulateOptions, requested: number): { bytes: number; count: number } {
  switch (o.collective) {
    case 'barrier':
      return { bytes: 0, count: 0 };
    case 'alltoall':
    case 'gather':
    case 'scatter': {
      const per = Math.max(1, Math.floor(requested / SIM_DTYPE_SIZE[o.dtype] / o.ranks));
      return { bytes: per * o.ranks * SIM_DTYPE_SIZE[o.dtype], count: per };
    }
    default:
      return shapeOf(o.collective, o.dtype, o.ranks, requested);
  }
}

/** nccl-tests' factors; alltoall, gather and scatter move (n−1)/n of their size across, as allgather. */
function bandwidthsOf(o: SimulateOptions, bytes: number, timeUs: number): { algbw: number; busbw: number } {
  if (o.collective === 'barrier') return { algbw: 0, busbw: 0 };
  const as: Collective =
    o.collective === 'alltoall' || o.collective === 'gather' || o.collective === 'scatter' ? 'allgather' : o.collective;
  return bandwidths(as, o.ranks, bytes, timeUs);
}

/** Every row of the sweep, each handed to `row` as it finishes. */
export async function runSimulation(
  o: SimulateOptions,
  row: (r: SimulateRow) => void = () => undefined,
): Promise<SimulateReport> {
  const net = networkOf(o);
  const rows: SimulateRow[] = [];
  const sizes = o.collective === 'barrier' ? [0] : sweepSizes(o.minBytes, o.maxBytes, o.factor, o.stepBytes);
  for (const requested of sizes) {
    const shape = shapeFor(o, requested);
    const call = { collective: o.collective, count: shape.count, dtype: o.dtype, root: o.root };
    const algos = o.algos.length ? o.algos : [resolveSimAlgo(net, call)];
    for (const algorithm of algos) {
      const t0 = performance.now();
      const res = await simulateOnThreads(net, { ...call, algo: algorithm }, o.threads);
      const bw = bandwidthsOf(o, shape.bytes, res.timeUs);
      const r = {
        size: shape.bytes,
        count: shape.count,
        algorithm,
        timeUs: res.timeUs,
        ...bw,
        messages: res.messages,
        wallSec: (performance.now() - t0) / 1000,
      };
      rows.push(r);
      row(r);
    }
  }
  return {
    tool: 'webccl simulate',
    collective: o.collective,
    nranks: o.ranks,
    nodes: o.nodes,
    ranksPerNode: o.ranks / o.nodes,
    latencyUs: o.latencyUs,
    bandwidthGbit: gbit(o.bytesPerUs),
    intraLatencyUs: o.intraLatencyUs,
    intraBandwidthGbit: gbit(o.intraBytesPerUs),
    overheadUs: o.overheadUs,
    dtype: o.dtype,
    jitter: o.jitter,
    seed: o.seed,
    rows,
  };
}

/** Exit code: 0, or 2 for a usage error. */
export async function simulateMain(argv: string[], io: IO = process): Promise<number> {
  let o: SimulateOptions | 'help';
  try {
    o = parseSimulateArgs(argv);
  } catch (e) {
    if (!(e instanceof SimUsageError)) throw e;
    io.stderr.write(`webccl simulate: ${e.message}\n${SIMULATE_USAGE}\n`);
    return 2;
  }
  if (o === 'help') {
    io.stdout.write(`${SIMULATE_USAGE}\n`);
    return 0;
  }
  const opts = o;
  io.stdout.write(`${simulateHeader(opts).join('\n')}\n`);
  const report = await runSimulation(opts, (r) => io.stdout.write(`${formatSimulateRow(opts, r)}\n`));
  if (opts.json) writeFileSync(opts.json, `${JSON.stringify(report, null, 2)}\n`);
  return 0;
}
