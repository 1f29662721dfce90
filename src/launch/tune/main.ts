// `webccl tune`: runs the perf sweeps the cost model needs (each a `webccl perf allreduce`
// child process, as a user would run it), fits the model on their rows and writes it.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PIECE_BYTES } from '../../algorithms/group.js';
import { type CostModel, predictUs } from '../../tuner/cost-model.js';
import { type PerfRow, fitModel, rowCounts } from '../../tuner/fit.js';
import { activeModel, defaultModelPath } from '../../tuner/model-source.js';
import { onPath } from '../../tuner/schedules.js';
import { TUNE_USAGE, type TuneOptions, type TunePath, TuneUsageError, parseTuneArgs } from './args.js';

const ALGOS: Record<TunePath, string[]> = { shm: ['direct', 'twoshot'], tcp: ['ring', 'doubling'] };

/** The CLI bundle this command runs in (perf is started from it as a child). */
const cliPath = (): string => fileURLToPath(new URL('./cli.js', import.meta.url));

/**
 * The ring runs in fixed PIECE_BYTES pieces while it is measured: the counts the model is fitted
 * on (rowCounts) are those of that schedule, whatever piece size the model in force would pick.
 */
const PERF_ENV = { ...process.env, WEBCCL_PIECE_BYTES: String(PIECE_BYTES) };

function perfRun(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath(), 'perf', 'allreduce', ...args], { stdio: ['ignore', 'ignore', 'inherit'], env: PERF_ENV });
    child.on('error', reject);
    child.on('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`webccl perf ${args.join(' ')} failed (${signal ?? `exit code ${code}`})`))));
  });
}

/** Runs every sweep of `o`, returning its rows (out-of-place times). */
export async function sweep(o: TuneOptions, say: (line: string) => void): Promise<PerfRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'webccl-tune-'));
  const rows: PerfRow[] = [];
  try {
    for (const path of o.paths) {
      for (const ranks of o.ranks) {
        for (const algo of ALGOS[path]) {
          const json = join(dir, `${path}-${ranks}-${algo}.json`);
          const t0 = performance.now();
          await perfRun(['--ranks', String(ranks), '-a', algo, '--transport', path, '-b', String(o.minBytes), '-e', String(o.maxBytes),
            '-f', String(o.factor), '--time', String(o.timeSec), '-w', '2', '-c', '0', '--json', json]);
          const report = JSON.parse(readFileSync(json, 'utf8')) as { rows: { size: number; oop: { time_us: number } }[] };
          for (const r of report.rows) rows.push({ path, algo, ranks, bytes: r.size, timeUs: r.oop.time_us });
          say(`tune: ${path} ${algo} on ${ranks} ranks: ${report.rows.length} sizes in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** Median of |predicted − measured| / measured over `rows` of one path. */
function medianError(model: CostModel, rows: PerfRow[]): number {
  const e = rows.map((r) => Math.abs(predictUs(model, onPath(r.path, rowCounts(r)), r.ranks) - r.timeUs) / r.timeUs).sort((a, b) => a - b);
  return e.length ? e[Math.floor(e.length / 2)] : NaN;
}

export async function tuneMain(argv: string[]): Promise<number> {
  let o: TuneOptions | 'help';
  try {
    o = parseTuneArgs(argv);
  } catch (e) {
    if (!(e instanceof TuneUsageError)) throw e;
    process.stderr.write(`webccl tune: ${e.message}\n${TUNE_USAGE}\n`);
    return 2;
  }
  if (o === 'help') {
    process.stdout.write(TUNE_USAGE + '\n');
    return 0;
  }
  const out = o.out ?? defaultModelPath();
  if (!out) {
    process.stderr.write('webccl tune: no home directory for the default model file: give --out FILE\n');
    return 2;
  }
  const rows = await sweep(o, (line) => process.stdout.write(line + '\n'));
  const cores = cpus().length;
  // A path not swept keeps the costs of the model in force.
  const model = fitModel(rows, cores, { tool: 'webccl tune', date: new Date().toISOString(), node: process.version, host: `${process.platform}-${process.arch}`, rows }, activeModel().model);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(model, null, 2) + '\n');
  for (const p of o.paths) {
    const c = model[p];
    const rate = (x: number | null) => (x === null ? 'free' : `${(x / 1000).toFixed(2)} GB/s`);
    process.stdout.write(`tune: ${p}: α ${c.alphaUs.toFixed(2)} us, wake ${c.wakeUs.toFixed(2)} us per rank beyond ${cores} cores, o ${(c.messageUs ?? 0).toFixed(2)} us per message, β ${rate(c.betaBytesPerUs)}, γ ${rate(c.gammaBytesPerUs)}; per core's worth of ranks beyond: o' ${(c.crowdMessageUs ?? 0).toFixed(2)} us, ${(1000 * (c.crowdUsPerByte ?? 0)).toFixed(3)} ns per byte moved, ${(1000 * (c.crowdUsPerReducedByte ?? 0)).toFixed(3)} ns per byte reduced; ρ ${(c.roundUs ?? 0).toFixed(2)} us per turn beyond the first in a step; median error ${(100 * medianError(model, rows.filter((r) => r.path === p))).toFixed(0)}%\n`);
  }
  process.stdout.write(`tune: wrote ${out}\n`);
  return 0;
}
