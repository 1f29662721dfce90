// The cost model against reality: for each path (shm: threads of one process; tcp: one process
// per rank over loopback), rank count and size, the measured allreduce time of each algorithm
// (webccl perf, out-of-place, comm.alloc() buffers, the median of --reps timed blocks) beside the model's prediction,
// and the tuner's choice beside the measured fastest and the fixed thresholds it replaced.
//
//   node bench/model-error.mjs [--ranks 2,3,4,5,6,7,8] [--paths shm,tcp] [-b 1K] [-e 64M] [-f 4]
//        [--time 0.2] [--reps 3] [--model FILE] [--from DIR] [--keep DIR] [--json FILE]
//
// --model: the model to test (default: the one the tuner uses: WEBCCL_MODEL, ~/.webccl/model.json
// or the built-in one). --from DIR: read perf JSON files (<path>-<ranks>-<algo>.json) instead of
// measuring; --keep DIR: keep the ones measured (and reuse those already there, to resume). The
// ring runs in fixed 512 KiB pieces (WEBCCL_PIECE_BYTES), the schedule the model is fitted on;
// the tuner's own piece sizes are measured apart (bench/ring-pieces.mjs). Build first: npm run build.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  activeModel,
  checkModel,
  crossoverBytes,
  flatPredictions,
  onPath,
  predictUs,
  rowCounts,
  shmPredictions,
} from '../dist/node/tuner.js';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i < 0 ? dflt : args[i + 1];
};
const ranksList = opt('--ranks', '2,3,4,5,6,7,8').split(',').map(Number);
const paths = opt('--paths', 'shm,tcp').split(',');
const sweep = [
  '-b',
  opt('-b', '1K'),
  '-e',
  opt('-e', '64M'),
  '-f',
  opt('-f', '4'),
  '--time',
  opt('--time', '0.2'),
  '--reps',
  opt('--reps', '3'),
];
const modelFile = opt('--model', undefined);
const from = opt('--from', undefined);
const keep = opt('--keep', undefined);
const json = opt('--json', undefined);
const model = modelFile ? checkModel(JSON.parse(readFileSync(modelFile, 'utf8')), modelFile) : activeModel().model;
const cores = model.cores;
const ALGOS = { shm: ['direct', 'twoshot'], tcp: ['ring', 'doubling'] };
/** The fixed thresholds the model replaced (src/tuner before it). */
const OLD = {
  shm: (n, b) => (b <= (n <= 2 ? 128 * 1024 : 256 * 1024) ? 'direct' : 'twoshot'),
  tcp: (n, b) => (b <= (n <= 2 ? 1 << 20 : 256 * 1024) ? 'doubling' : 'ring'),
};
const MODEL_CHOICE = {
  shm: (n, b) => (b <= crossoverBytes((x) => shmPredictions(model, n, x, cores), 'direct') ? 'direct' : 'twoshot'),
  tcp: (n, b) => (b <= crossoverBytes((x) => flatPredictions(model, n, x, cores), 'doubling') ? 'doubling' : 'ring'),
};

const dir = from ?? keep ?? mkdtempSync(join(tmpdir(), 'webccl-model-error-'));
if (keep) mkdirSync(keep, { recursive: true });
const cli = new URL('../bin/webccl.js', import.meta.url).pathname;

const measured = []; // { path, algo, ranks, bytes, timeUs }
for (const path of paths) {
  for (const ranks of ranksList) {
    for (const algo of ALGOS[path]) {
      const file = join(dir, `${path}-${ranks}-${algo}.json`);
      if (!existsSync(file)) {
        if (from) throw new Error(`--from ${from}: no ${file}`);
        process.stderr.write(`measuring ${path} ${algo} on ${ranks} ranks\n`);
        // The ring in the fixed pieces the model's counts assume (as webccl tune measures it).
        execFileSync(
          process.execPath,
          [
            cli,
            'perf',
            'allreduce',
            '--transport',
            path,
            '--ranks',
            String(ranks),
            '-a',
            algo,
            ...sweep,
            '-c',
            '0',
            '--json',
            file,
          ],
          { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, WEBCCL_PIECE_BYTES: '524288' } },
        );
      }
      const report = JSON.parse(readFileSync(file, 'utf8'));
      for (const r of report.rows) measured.push({ path, algo, ranks, bytes: r.size, timeUs: r.oop.time_us });
    }
  }
}

const rows = measured.map((r) => {
  const predictedUs = predictUs(model, onPath(r.path, rowCounts(r)), r.ranks, cores);
  return { ...r, predictedUs, error: (predictedUs - r.timeUs) / r.timeUs };
});

const choices = [];
for (const path of paths) {
  for (const ranks of ranksList) {
    const sizes = [...new Set(rows.filter((r) => r.path === path && r.ranks === ranks).map((r) => r.bytes))];
    for (const bytes of sizes) {
      const t = Object.fromEntries(
        rows.filter((r) => r.path === path && r.ranks === ranks && r.bytes === bytes).map((r) => [r.algo, r.timeUs]),
      );
      const best = Object.entries(t).reduce((a, b) => (b[1] < a[1] ? b : a))[0];
      const chosen = MODEL_CHOICE[path](ranks, bytes);
      const old = OLD[path](ranks, bytes);
      choices.push({
        path,
        ranks,
        bytes,
        measuredUs: t,
        best,
        model: chosen,
        old,
        modelSlowdown: t[chosen] / t[best],
        oldSlowdown: t[old] / t[best],
      });
    }
  }
}

const size = (b) => (b >= 1 << 20 ? `${b / (1 << 20)}M` : b >= 1024 ? `${b / 1024}K` : `${b}`);
const pct = (e) => `${e >= 0 ? '+' : ''}${(100 * e).toFixed(0)}%`;
const sizes = [...new Set(rows.map((r) => r.bytes))].sort((a, b) => a - b);
console.log(`# model error (predicted − measured) / measured; model: ${modelFile ?? activeModel().from}`);
console.log(['path', 'algo', 'ranks', ...sizes.map(size)].map((x) => String(x).padStart(8)).join(''));
for (const path of paths) {
  for (const algo of ALGOS[path]) {
    for (const ranks of ranksList) {
      const mine = rows.filter((r) => r.path === path && r.algo === algo && r.ranks === ranks);
      console.log(
        [
          path,
          algo,
          ranks,
          ...sizes.map((b) => {
            const r = mine.find((x) => x.bytes === b);
            return r ? pct(r.error) : '-';
          }),
        ]
          .map((x) => String(x).padStart(8))
          .join(''),
      );
    }
  }
}
const big = rows.filter((r) => r.bytes >= 64 * 1024);
const abs = big.map((r) => Math.abs(r.error)).sort((a, b) => a - b);
const summary = {
  rowsFrom64K: big.length,
  within20pct: big.filter((r) => Math.abs(r.error) <= 0.2).length,
  medianAbsError: abs[abs.length >> 1],
  p90AbsError: abs[Math.floor(abs.length * 0.9)],
};
console.log(
  `# from 64 KiB up: ${summary.within20pct} of ${summary.rowsFrom64K} rows within 20%, median |error| ${pct(summary.medianAbsError)}, 90th percentile ${pct(summary.p90AbsError)}`,
);
console.log('# choices that differ: model or old rule against the measured fastest (slowdown = chosen / fastest)');
for (const c of choices) {
  if (c.model === c.best && c.old === c.best) continue;
  console.log(
    `${c.path} ${c.ranks} ranks ${size(c.bytes).padStart(4)}: fastest ${c.best}; model ${c.model} (${c.modelSlowdown.toFixed(2)}x), old ${c.old} (${c.oldSlowdown.toFixed(2)}x)`,
  );
}
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
console.log(
  `# mean slowdown over every (path, ranks, size): model ${mean(choices.map((c) => c.modelSlowdown)).toFixed(3)}x, old thresholds ${mean(choices.map((c) => c.oldSlowdown)).toFixed(3)}x`,
);
if (json)
  writeFileSync(
    json,
    JSON.stringify({ tool: 'bench/model-error.mjs', node: process.version, model, rows, choices, summary }, null, 2) +
      '\n',
  );
