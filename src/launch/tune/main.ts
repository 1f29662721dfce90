// `webccl tune`: runs the perf sweeps the cost model needs (each a `webccl perf allreduce`
// child process, as a user would run it), fits the model on their rows and writes it.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PIECE_BYTES } from '../../algorithms/group.js';
import { DEFAULT_NCHANNELS } from '../../join/net-world.js';
import { type CostModel, predictUs } from '../../tuner/cost-model.js';
import { fitModel, type PerfRow, rowCounts } from '../../tuner/fit.js';
import { activeModel, defaultModelPath } from '../../tuner/model-source.js';
import { onPath } from '../../tuner/schedules.js';
import { parseTuneArgs, TUNE_USAGE, type TuneOptions, type TunePath, TuneUsageError } from './args.js';

const ALGOS: Record<TunePath, string[]> = { shm: ['direct', 'twoshot'], tcp: ['ring', 'doubling'] };

/** The CLI bundle this command runs in (perf is started from it as a child). */
const cliPath = (): string => fileURLToPath(new URL('./cli.js', import.meta.url));

/**
 * The ring runs in fixed PIECE_BYTES pieces while it is measured: the counts the model is fitted
 * on (rowCounts) are those of that schedule, whatever piece size the model in force would pick.
 */
const PERF_ENV = { ...process.env, WEBCCL_PIECE_BYTES: String(PIECE_BYTES) };

/**
 * The connections per pair the tcp sweeps run with, every op using them all, and a second ring
 * sweep on one connection at the smallest rank count: the pair tells the fit what a connection
 * costs (φ, ω). So that every op does use them all, perf's ranks tune with the model in force
 * stripped of its connection costs (its other choices are forced: -a, WEBCCL_PIECE_BYTES).
 */
const CHANNELS = Number(process.env.WEBCCL_NCHANNELS ?? DEFAULT_NCHANNELS);

function withoutConnectionCosts(m: CostModel): CostModel {
  return { ...m, tcp: { ...m.tcp, flowUsPerByte: 0, channelStepUs: 0 } };
}

function perfRun(args: string[], channels: number, modelFile: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const env = { ...PERF_ENV, WEBCCL_NCHANNELS: String(channels), WEBCCL_MODEL: modelFile };
    const child = spawn(process.execPath, [cliPath(), 'perf', 'allreduce', ...args], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env,
    });
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      code === 0
        ? resolve()
        : reject(new Error(`webccl perf ${args.join(' ')} failed (${signal ?? `exit code ${code}`})`)),
    );
  });
}

/** Runs every sweep of `o`, returning its rows (out-of-place times). */
export async function sweep(o: TuneOptions, say: (line: string) => void): Promise<PerfRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'webccl-tune-'));
  const rows: PerfRow[] = [];
  const modelFile = join(dir, 'sweep-model.json');
  writeFileSync(modelFile, JSON.stringify(withoutConnectionCosts(activeModel().model)));
  try {
    for (const path of o.paths) {
      for (const ranks of o.ranks) {
        const runs = ALGOS[path].map((algo) => ({ algo, channels: CHANNELS }));
        if (path === 'tcp' && ranks === Math.min(...o.ranks) && CHANNELS > 1) runs.push({ algo: 'ring', channels: 1 });
        for (const { algo, channels } of runs) {
          const json = join(dir, `${path}-${ranks}-${algo}-${channels}.json`);
          const t0 = performance.now();
          await perfRun(
            [
              '--ranks',
              String(ranks),
              '-a',
              algo,
              '--transport',
              path,
              '-b',
              String(o.minBytes),
              '-e',
              String(o.maxBytes),
              '-f',
              String(o.factor),
              '--time',
              String(o.timeSec),
              '-w',
              '2',
              '-c',
              '0',
              '--json',
              json,
            ],
            channels,
            modelFile,
          );
          const report = JSON.parse(readFileSync(json, 'utf8')) as {
            rows: { size: number; oop: { time_us: number } }[];
          };
          for (const r of report.rows)
            rows.push({ path, algo, ranks, bytes: r.size, timeUs: r.oop.time_us, ...(path === 'tcp' && { channels }) });
          const over = path === 'tcp' ? `, ${channels} connection${channels > 1 ? 's' : ''} per pair` : '';
          say(
            `tune: ${path} ${algo} on ${ranks} ranks${over}: ${report.rows.length} sizes in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
          );
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
  const e = rows
    .map((r) => Math.abs(predictUs(model, onPath(r.path, rowCounts(r)), r.ranks) - r.timeUs) / r.timeUs)
    .sort((a, b) => a - b);
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
    process.stdout.write(`${TUNE_USAGE}\n`);
    return 0;
  }
  const out = o.out ?? defaultModelPath();
  if (!out) {
    process.stderr.write('webccl tune: no home directory for the default model file: give --out FILE\n');
    return 2;
  }
  const rows = await sweep(o, (line) => process.stdout.write(`${line}\n`));
  const cores = cpus().length;
  // A path not swept keeps the costs of the model in force.
  const model = fitModel(
    rows,
    cores,
    {
      tool: 'webccl tune',
      date: new Date().toISOString(),
      node: process.version,
      host: `${process.platform}-${process.arch}`,
      rows,
    },
    activeModel().model,
  );
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(model, null, 2)}\n`);
  for (const p of o.paths) {
    const c = model[p];
    const rate = (x: number | null) => (x === null ? 'free' : `${(x / 1000).toFixed(2)} GB/s`);
    process.stdout.write(
      `tune: ${p}: α ${c.alphaUs.toFixed(2)} us, wake ${c.wakeUs.toFixed(2)} us per rank beyond ${cores} cores, o ${(c.messageUs ?? 0).toFixed(2)} us per message, β ${rate(c.betaBytesPerUs)}, γ ${rate(c.gammaBytesPerUs)}; per core's worth of ranks beyond: o' ${(c.crowdMessageUs ?? 0).toFixed(2)} us, ${(1000 * (c.crowdUsPerByte ?? 0)).toFixed(3)} ns per byte moved, ${(1000 * (c.crowdUsPerReducedByte ?? 0)).toFixed(3)} ns per byte reduced; ρ ${(c.roundUs ?? 0).toFixed(2)} us per turn beyond the first in a step${p === 'tcp' ? `; per connection: φ ${(1000 * (c.flowUsPerByte ?? 0)).toFixed(3)} ns per byte it carries, ω ${(c.channelStepUs ?? 0).toFixed(2)} us per step for each beyond the first` : ''}; median error ${(
        100 *
          medianError(
            model,
            rows.filter((r) => r.path === p),
          )
      ).toFixed(0)}%\n`,
    );
  }
  process.stdout.write(`tune: wrote ${out}\n`);
  return 0;
}
