// `webccl perf <collective>`: starts the ranks (worker threads of this process, or with
// --transport tcp or ws node processes of worker threads), gathers what each posts, prints nccl-tests'
// table as rows finish (a progress line on a terminal), and writes --json / --plot at the end.
// A row's time is the slowest rank's mean; its #wrong is the sum over ranks.
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type LaunchResult, startRanks } from '../threads.js';
import { packageVersion } from '../version.js';
import { PERF_USAGE, type PerfOptions, PerfUsageError, parsePerfArgs } from './args.js';
import { chartTitle, reportSeries } from './chart.js';
import { HAS_OP } from './collectives.js';
import {
  averageBusBw,
  formatRow,
  NCCL_TYPE,
  type PerfReport,
  type PlaceResult,
  placeResult,
  type ResultRow,
  tableFooter,
  tableHeader,
  wrongTotal,
} from './format.js';
import { startNodes } from './nodes.js';
import { type Placement, type PlannedRow, placementsOf, planRows, type RankSpec, rankSpec } from './plan.js';
import { type ChartModules, loadChartModules, PlotUnavailableError, renderBusBwChart } from './plot.js';
import type { RankMessage } from './rank.js';

export { reportSeries } from './chart.js';

export interface PerfIO {
  stdout: { write(s: string): unknown; isTTY?: boolean };
  stderr: { write(s: string): unknown; isTTY?: boolean };
}

export interface PerfRunOptions {
  /** The rank script (default: perf-rank.js beside this bundle). */
  rankScript?: string;
  /** With --transport tcp or ws, the webccl CLI each node process runs (default: cli.js beside this bundle). */
  cliScript?: string;
  io?: PerfIO;
  /** The packages --plot draws with (default vega and vega-lite; tests name missing ones). */
  chartPackages?: readonly [string, string];
}

/**
 * The ranks as this process's threads (shm) or as node processes (tcp, ws); only the latter hear a rank's own failure
 * post.
 */
interface PerfJob {
  done: Promise<LaunchResult>;
  terminate(reason?: string): void;
  fail?(rank: number, message: string): void;
}

function defaultRankScript(): string {
  return fileURLToPath(new URL('./perf-rank.js', import.meta.url));
}

function defaultCliScript(): string {
  return fileURLToPath(new URL('./cli.js', import.meta.url));
}

/**
 * "2 ranks (worker threads)", or across nodes "4 ranks (2 processes × 2 threads)"; with --group
 * "…, group of 2 (world ranks 0..1; 2..3 idle)".
 */
export function describeRanks(o: Pick<PerfOptions, 'ranks' | 'nodes' | 'transport' | 'group'>): string {
  const ranks = `${o.ranks} rank${o.ranks === 1 ? '' : 's'}`;
  const per = o.ranks / o.nodes;
  const layout =
    o.transport === 'shm'
      ? `${ranks} (worker threads)`
      : `${ranks} (${o.nodes} processes × ${per} thread${per === 1 ? '' : 's'})`;
  if (o.group === undefined) return layout;
  const span = (a: number, b: number) => (a === b ? `${a}` : `${a}..${b}`);
  const idle = o.group < o.ranks ? `; ${span(o.group, o.ranks - 1)} idle` : '';
  return `${layout}, group of ${o.group} (world rank${o.group === 1 ? '' : 's'} ${span(0, o.group - 1)}${idle})`;
}

/** Ranks that run the collective and post results: the group's, or the world's. */
const participants = (o: Pick<PerfOptions, 'ranks' | 'group'>) => o.group ?? o.ranks;

/** The options line that opens the table, as nccl-tests' first line. */
export function describeRun(o: PerfOptions): string {
  const iters =
    (o.iters === undefined ? `auto (${o.timeSec} s blocks)` : String(o.iters)) +
    (o.reps > 1 ? `, median of ${o.reps} blocks` : '');
  const step = o.factor > 1 ? `${o.factor}(factor)` : `${o.stepBytes}(bytes)`;
  return `# webccl perf ${o.collective}: ${describeRanks(o)}, transport ${o.transport}, buffers ${o.buffers}, algo ${o.algo ?? 'auto'}\n# minBytes ${o.minBytes} maxBytes ${o.maxBytes} step: ${step} warmup iters: ${o.warmup} iters: ${iters} validation: ${o.check ? 1 : 0}`;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

/** Collects the ranks' posts into rows: a row is complete when every participating rank posted every placement. */
class RowCollector {
  private readonly got = new Map<
    number,
    Record<Placement, { ranks: number; maxUs: number[]; wrong: number | null; iters: number }>
  >();
  private readonly places: readonly Placement[];
  constructor(
    private readonly o: PerfOptions,
    private readonly planned: PlannedRow[],
  ) {
    this.places = placementsOf(o.collective);
  }

  /** The finished row, when this post completed one. */
  add(m: Extract<RankMessage, { perf: 'result' }>): ResultRow | undefined {
    const fresh = () => ({ ranks: 0, maxUs: [] as number[], wrong: this.o.check ? 0 : null, iters: 0 });
    const entry = this.got.get(m.idx) ?? { oop: fresh(), ip: fresh() };
    this.got.set(m.idx, entry);
    const p = entry[m.place];
    p.ranks++;
    m.meanUs.forEach((us, rep) => (p.maxUs[rep] = Math.max(p.maxUs[rep] ?? 0, us)));
    p.iters = m.iters;
    if (m.wrong !== null && p.wrong !== null) p.wrong += m.wrong;
    const n = participants(this.o);
    if (this.places.some((place) => entry[place].ranks < n)) return undefined;
    this.got.delete(m.idx);
    const row = this.planned[m.idx];
    const res = (q: typeof p): PlaceResult =>
      placeResult(this.o.collective, n, row.shape.bytes, median(q.maxUs), q.wrong, q.iters);
    return {
      size: row.shape.bytes,
      count: row.shape.count,
      type: NCCL_TYPE[row.dtype],
      dtype: row.dtype,
      redop: HAS_OP[this.o.collective] ? row.op : 'none',
      root: row.root,
      oop: res(entry.oop),
      ip: this.places.includes('ip') ? res(entry.ip) : null,
    };
  }
}

/** The report of a sweep (the --json file): its options, this machine, and the rows it finished. */
function perfReport(o: PerfOptions, rows: ResultRow[], interrupted: boolean): PerfReport {
  return {
    tool: 'webccl perf',
    version: packageVersion(),
    collective: o.collective,
    nranks: participants(o),
    group:
      o.group === undefined ? null : { worldSize: o.ranks, worldRanks: Array.from({ length: o.group }, (_, r) => r) },
    transport: o.transport,
    nodes: o.nodes,
    ranksPerNode: o.ranks / o.nodes,
    buffers: o.buffers,
    algo: o.algo ?? 'auto',
    warmup: o.warmup,
    iters: o.iters ?? 'auto',
    timeSec: o.timeSec,
    reps: o.reps,
    check: o.check,
    date: new Date().toISOString(),
    host: { node: process.version, cpus: availableParallelism(), platform: `${process.platform}-${process.arch}` },
    rows,
    avgBusBw: averageBusBw(rows),
    wrongTotal: wrongTotal(rows),
    interrupted,
  };
}

export async function runPerf(
  o: PerfOptions,
  run: PerfRunOptions = {},
): Promise<{ exitCode: number; report: PerfReport }> {
  const io = run.io ?? { stdout: process.stdout, stderr: process.stderr };
  const spec: RankSpec = rankSpec(o);
  const planned = planRows(spec, participants(o));
  const rows: ResultRow[] = [];
  const collector = new RowCollector(o, planned);
  const tty = !!io.stderr.isTTY;
  let progress = '';
  let progressIdx = -1;
  const clearProgress = () => {
    if (progress) io.stderr.write('\r\x1b[K');
    progress = '';
  };

  // A chart that cannot be drawn is said before the sweep, not after minutes of it.
  let chart: ChartModules | undefined;
  if (o.plot) {
    try {
      chart = await loadChartModules(run.chartPackages);
    } catch (e) {
      if (!(e instanceof PlotUnavailableError)) throw e;
      io.stderr.write(`webccl perf: --plot: ${e.message}\n`);
      return { exitCode: 1, report: perfReport(o, [], false) };
    }
  }

  let interrupted = false;
  io.stdout.write(`${describeRun(o)}\n#\n${tableHeader().join('\n')}\n`);
  const onMessage = (rank: number, raw: unknown) => {
    const m = raw as RankMessage;
    if (m.perf === 'failed') {
      job.fail?.(rank, m.message);
    } else if (m.perf === 'start' && tty) {
      const r = planned[m.idx];
      clearProgress();
      progressIdx = m.idx;
      progress = `  [${m.idx + 1}/${planned.length}] ${o.collective} ${r.shape.bytes} B ${r.dtype}${HAS_OP[o.collective] ? ` ${r.op}` : ''} ${m.place === 'oop' ? 'out-of-place' : 'in-place'} ...`;
      io.stderr.write(progress);
    } else if (m.perf === 'result') {
      const row = collector.add(m);
      if (row) {
        const showing = progress;
        clearProgress();
        rows.push(row);
        io.stdout.write(`${formatRow(row)}\n`);
        // A rank may already be on the next row: keep its progress line in view.
        if (showing && progressIdx > m.idx) io.stderr.write((progress = showing));
      }
    }
  };
  // What the node processes say (a failing rank's error, their launcher's report) goes through
  // here, clear of the progress line; once perf itself ends the job, their "interrupted" is noise.
  const onStderr = (text: string) => {
    if (interrupted) return;
    clearProgress();
    io.stderr.write(text);
  };
  const script = run.rankScript ?? defaultRankScript();
  const args = [JSON.stringify(spec)];
  // tcp and ws: the same node processes, their mesh carried by WEBCCL_TRANSPORT.
  const job: PerfJob =
    o.transport !== 'shm'
      ? startNodes({
          nodes: o.nodes,
          perNode: o.ranks / o.nodes,
          cliScript: run.cliScript ?? defaultCliScript(),
          rankScript: script,
          args,
          onMessage,
          onStderr,
          env: { ...process.env, WEBCCL_TRANSPORT: o.transport },
        })
      : startRanks({ nranks: o.ranks, script, args, onMessage });

  // `webccl perf … | head`: a closed stdout ends the sweep quietly.
  const onPipeError = (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE' && e.code !== 'ERR_STREAM_DESTROYED') throw e;
    if (!interrupted) job.terminate('stdout closed');
    interrupted = true;
  };
  if (io.stdout === process.stdout) process.stdout.on('error', onPipeError);
  const onSignal = () => {
    interrupted = true;
    clearProgress();
    io.stderr.write('\nwebccl perf: interrupted; ending all ranks\n');
    job.terminate('interrupted');
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const result = await job.done;
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  clearProgress();

  const report = perfReport(o, rows, interrupted || rows.length < planned.length);
  io.stdout.write(`${tableFooter(report).join('\n')}\n`);

  let exitCode = 0;
  if (result.failure && !interrupted) {
    const f = result.failure;
    io.stderr.write(`webccl perf: ${f.rank >= 0 ? `rank ${f.rank}` : 'the job'} failed: ${f.message}\n`);
    const others = [
      ...new Set(
        result.failures
          .slice(1)
          .filter((x) => x.rank >= 0 && x.rank !== f.rank)
          .map((x) => x.rank),
      ),
    ].sort((a, b) => a - b);
    if (others.length)
      io.stderr.write(`webccl perf: rank${others.length > 1 ? 's' : ''} ${others.join(', ')} then failed too\n`);
    exitCode = 1;
  }
  if (o.json) {
    writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
    io.stdout.write(`# wrote ${o.json}: the results as JSON\n`);
  }
  if (o.plot && chart && rows.length) {
    const who = o.transport !== 'shm' || o.group !== undefined ? describeRanks(o) : `${o.ranks} ranks`;
    const series = reportSeries(report);
    writeFileSync(
      o.plot,
      await renderBusBwChart(series, chartTitle(report, who, o.ranks), { yScale: o.plotY, modules: chart }),
    );
    io.stdout.write(
      `# wrote ${o.plot}: busbw against size, ${series.length} line${series.length === 1 ? '' : 's'}${o.plotY === 'log' ? ', log busbw axis' : ''}\n`,
    );
  }
  if (interrupted) return { exitCode: 130, report };
  if (report.wrongTotal) exitCode ||= 1;
  return { exitCode, report };
}

/** The `perf` command: exit code 0, 1 (a rank failed or #wrong > 0), 2 (bad usage), 130 (interrupted). */
export async function perfMain(argv: string[], run: PerfRunOptions = {}): Promise<number> {
  const io = run.io ?? { stdout: process.stdout, stderr: process.stderr };
  let o: PerfOptions | 'help';
  try {
    o = parsePerfArgs(argv);
  } catch (e) {
    if (!(e instanceof PerfUsageError)) throw e;
    io.stderr.write(`webccl perf: ${e.message}\n\n${PERF_USAGE}\n`);
    return 2;
  }
  if (o === 'help') {
    io.stdout.write(`${PERF_USAGE}\n`);
    return 0;
  }
  return (await runPerf(o, run)).exitCode;
}
