// Reports of `webccl perf` made by hand, for the tests of its table, JSON and charts: rows of an
// allreduce (or of a collective with no in-place form) with the bandwidths of their times, and a
// report of 4 ranks on a 2-core machine around them.
import {
  averageBusBw,
  type PerfReport,
  placeResult,
  type ResultRow,
  wrongTotal,
} from '../../src/launch/perf/format.js';

/** An allreduce row of f32 with these out-of-place and in-place times. */
export function row(size: number, oopUs: number, ipUs: number, wrong: number | null, n = 4): ResultRow {
  return {
    size,
    count: size / 4,
    type: 'float',
    dtype: 'f32',
    redop: 'sum',
    root: -1,
    oop: placeResult('allreduce', n, size, oopUs, wrong, 100),
    ip: placeResult('allreduce', n, size, ipUs, wrong, 100),
  };
}

/** A row of a collective with no in-place form (alltoall, sendrecv, pingpong). */
export function oopRow(size: number, oopUs: number, wrong: number | null, n = 4): ResultRow {
  return {
    size,
    count: size / 4 / n,
    type: 'float',
    dtype: 'f32',
    redop: 'none',
    root: -1,
    oop: placeResult('alltoall', n, size, oopUs, wrong, 100),
    ip: null,
  };
}

/** A report of these rows, of 4 ranks on a 2-core machine. */
export function report(rows: ResultRow[], interrupted = false): PerfReport {
  return {
    tool: 'webccl perf',
    version: '0.0.0',
    collective: 'allreduce',
    nranks: 4,
    group: null,
    transport: 'shm',
    nodes: 1,
    ranksPerNode: 4,
    buffers: 'shm',
    algo: 'auto',
    warmup: 5,
    iters: 'auto',
    timeSec: 0.2,
    reps: 1,
    check: true,
    date: '2026-01-01T00:00:00.000Z',
    host: { node: 'v20', cpus: 2, platform: 'linux-x64' },
    rows,
    avgBusBw: averageBusBw(rows),
    wrongTotal: wrongTotal(rows),
    interrupted,
  };
}
