#!/usr/bin/env node
// bench/training-scaling: data-parallel training of plain-JS MLPs (~1 M and ~10 M parameters,
// bench/training-mlp.mjs) on 1, 2 and 4 thread ranks, strong scaling: a fixed global batch per
// step, split evenly over the ranks, synthetic seeded data, SGD. Three ways of reducing the
// gradients, each from the same parameters on the same batches:
//   plain     after backward, one awaited allReduce (op avg) per parameter tensor, by hand
//   overlap   createDataParallel, each gradient handed in as backward makes it (buckets go out
//             while backward goes on), then synchronize()
//   after     createDataParallel, every gradient handed in after backward (reduceGradients)
// createDataParallel runs at its defaults (25 MiB buckets) unless --bucket-bytes says otherwise.
// Printed per model × ranks × mode (times in ms per step):
//   steps/s    1000 / step, step = the slowest rank's median over the timed steps
//   speedup    steps/s over the same model and mode on 1 rank
//   fwd+bwd    forward and backward (overlap: the gradient hand-ins included)
//   reduce     from the end of backward to the averaged gradients in hand
//   sgd        the update
//   syncWait   dp.stats().waitMs per step: time synchronize() spent waiting for the step's ops
//   span       dp.stats().commMs per step: from the step's first allReduce issued to its last completed
//   peers      comm.stats().waitMs per step: in the ops, waiting until every rank had joined
//   moving     comm.stats().moveMs per step: in the ops, moving and reducing data once all had
//   cpu        the share of a core each rank's thread had during fwd+bwd (its CPU time over wall time)
//   others     CPU ms per step of the process's threads other than the ranks' (the node's progress
//              thread, the launcher, V8's helpers): the process's CPU time less the ranks' threads'
//   #wrong     parameters that differ bitwise from rank 0's after the timed steps (expected 0)
// Every column but step and others is the mean over ranks of each rank's median (fwd+bwd, reduce,
// sgd) or per-step mean (the counters). As an anchor, on 2 ranks: one awaited allReduce of each model's
// whole gradient (plain Float32Array and comm.alloc() buffer; the slowest rank's median, barrier
// before each), beside the 1-rank step split into fwd+bwd, reduce and sgd.
//
//   npm run build && node bench/training-scaling.mjs [--models 1M,10M] [--ranks 1,2,4]
//       [--modes plain,overlap,after] [--batch 32] [--steps 7] [--warmup 2] [--lr 0.01]
//       [--bucket-bytes N] [--anchor-reps 9] [--quiet 30] [--quiet-wait 120] [--json FILE]
//
// Ranks are worker threads of one process (`webccl run -n N`), at default settings: the WEBCCL_
// variables of this environment are not passed on. Before each launch it waits (up to --quiet-wait s)
// until the CPUs are less than --quiet % busy, and notes how busy they were, and what share of
// the machine's CPU time went to other processes during the launch.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs as parseCliArgs } from 'node:util';
import { benchOptions, bytesOf, knownList as list, waitQuiet } from './machine.mjs';
import { MODELS, paramCount } from './training-mlp.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'bin', 'webccl.js');
const rankScript = join(root, 'bench', 'training-scaling-rank.mjs');
const MODES = ['plain', 'overlap', 'after'];
const USAGE = [
  'usage: node bench/training-scaling.mjs [--models 1M,10M] [--ranks 1,2,4] [--modes plain,overlap,after]',
  '    [--batch 32] [--steps 7] [--warmup 2] [--lr 0.01] [--bucket-bytes N] [--anchor-reps 9]',
  '    [--quiet 30] [--quiet-wait 120] [--json FILE]',
].join('\n');

function parseArgs(argv) {
  const { values: v } = parseCliArgs({
    args: argv,
    options: {
      models: { type: 'string' },
      ranks: { type: 'string' },
      modes: { type: 'string' },
      batch: { type: 'string' },
      steps: { type: 'string' },
      warmup: { type: 'string' },
      lr: { type: 'string' },
      'bucket-bytes': { type: 'string' },
      'anchor-reps': { type: 'string' },
      quiet: { type: 'string' },
      'quiet-wait': { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const o = {
    models: v.models ? list(v.models, Object.keys(MODELS), 'model') : Object.keys(MODELS),
    ranks: (v.ranks ?? '1,2,4').split(',').map(Number),
    modes: v.modes ? list(v.modes, MODES, 'mode') : MODES,
    batch: Number(v.batch ?? 32),
    steps: Number(v.steps ?? 7),
    warmup: Number(v.warmup ?? 2),
    lr: Number(v.lr ?? 0.01),
    bucketBytes: v['bucket-bytes'] ? bytesOf(v['bucket-bytes'], '--bucket-bytes') : undefined,
    anchorReps: Number(v['anchor-reps'] ?? 9),
    quiet: Number(v.quiet ?? 30),
    quietWait: Number(v['quiet-wait'] ?? 120),
    json: v.json,
  };
  if (!o.ranks.length || o.ranks.some((n) => !(Number.isInteger(n) && n >= 1 && n <= 64)))
    throw new Error(`bad --ranks\n${USAGE}`);
  if (o.ranks.some((n) => o.batch % n)) throw new Error(`--batch ${o.batch} must split evenly over every rank count`);
  if (!(Number.isInteger(o.steps) && o.steps >= 1 && Number.isInteger(o.warmup) && o.warmup >= 0))
    throw new Error(`bad --steps or --warmup\n${USAGE}`);
  if (!(o.lr > 0 && Number.isInteger(o.anchorReps) && o.anchorReps >= 1))
    throw new Error(`bad --lr or --anchor-reps\n${USAGE}`);
  return o;
}

const opts = benchOptions('training-scaling', parseArgs, root);
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('WEBCCL_')));
const dropped = Object.keys(process.env).filter((k) => k.startsWith('WEBCCL_'));

const clkTck = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/** Busy and total ticks of the machine (/proc/stat), and the ticks of this process's ended children. */
function ticks() {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = cpu.reduce((a, x) => a + x, 0);
    const self = readFileSync('/proc/self/stat', 'utf8');
    const f = self.slice(self.lastIndexOf(')') + 2).split(' ');
    return { busy: total - cpu[3] - (cpu[4] ?? 0), total, children: Number(f[13]) + Number(f[14]) };
  } catch {
    return undefined;
  }
}

/** Percent of the machine's CPU time that went to other work between two ticks() readings. */
function otherWork(a, b) {
  if (!a || !b || b.total <= a.total) return undefined;
  return Math.max(0, Math.round((100 * (b.busy - a.busy - (b.children - a.children))) / (b.total - a.total)));
}

/** One launch of `n` thread ranks; resolves with the JSON lines rank 0 printed. */
function launch(n, params) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, 'run', '-n', String(n), rankScript, JSON.stringify(params)], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGTERM'), 3_600_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      if (status !== 0) return reject(new Error(`${n} ranks: exit ${status}\n${stderr}`));
      resolve(
        stdout
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l)),
      );
    });
  });
}

const mean = (xs) => xs.reduce((s, x) => s + x, 0) / xs.length;
const f = (x, w, d = 1) => (x === undefined || x === null || Number.isNaN(x) ? '-' : x.toFixed(d)).padStart(w);
const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout?.trim();
const cores = availableParallelism();

const ignored = dropped.length ? `; ignored here: ${dropped.join(', ')}` : '';
const header = [
  `bench/training-scaling on ${cpus()[0]?.model ?? 'unknown CPU'}, ${cores} cores, Node ${process.version}`,
  `webccl at its default settings (no WEBCCL_ variable${ignored}); ranks: worker threads (webccl run -n N)`,
  `strong scaling: a global batch of ${opts.batch} samples per step, split over the ranks; SGD lr ${opts.lr}`,
  `${opts.warmup} warm-up steps, then ${opts.steps} timed; times in ms per step`,
  `createDataParallel buckets: ${opts.bucketBytes ? `${opts.bucketBytes} bytes` : 'the default (25 MiB)'}`,
];
if (opts.ranks.some((n) => n > cores)) header.push(`ranks above ${cores} share the ${cores} cores (oversubscribed)`);
for (const line of header) console.log(`# ${line}`);
for (const m of opts.models)
  console.log(`# model ${m}: widths ${MODELS[m].join('-')}, ${paramCount(MODELS[m])} parameters (f32)`);

const rows = [];
const anchors = [];
const runs = [];
let failed = false;
const anchorRanks = opts.ranks.includes(2) ? 2 : undefined;
const launches = [...opts.ranks];
if (!anchorRanks) launches.push(2);
for (const n of launches) {
  const anchorOnly = !opts.ranks.includes(n);
  const busy = waitQuiet(opts.quiet, opts.quietWait);
  let lines;
  const before = ticks();
  try {
    lines = await launch(n, {
      models: opts.models,
      batch: opts.batch,
      steps: opts.steps,
      warmup: opts.warmup,
      lr: opts.lr,
      modes: anchorOnly ? [] : opts.modes,
      bucketBytes: opts.bucketBytes,
      anchor: n === 2,
      anchorReps: opts.anchorReps,
      clkTck,
    });
  } catch (e) {
    console.log(`# FAILED: ${e.message.split('\n').join('\n# ')}`);
    failed = true;
    continue;
  }
  const other = otherWork(before, ticks());
  const start = lines.find((l) => l.kind === 'start');
  runs.push({ ranks: n, progress: start?.progress, cpuBusyBefore: busy, otherWorkDuring: other });
  for (const l of lines.filter((x) => x.kind === 'anchor')) {
    const slowest = (k) => Math.max(...l.ranks.map((r) => r[k]));
    const m = (k) => mean(l.ranks.map((r) => r[k]));
    anchors.push({
      model: l.model,
      bytes: l.bytes,
      ranks: l.size,
      plainMs: slowest('plainMs'),
      plainPeersMs: m('plainPeersMs'),
      plainMovingMs: m('plainMovingMs'),
      allocMs: slowest('allocMs'),
      allocPeersMs: m('allocPeersMs'),
      allocMovingMs: m('allocMovingMs'),
      perRank: l.ranks,
    });
  }
  for (const l of lines.filter((x) => x.kind === 'train')) {
    const m = (k) => mean(l.ranks.map((r) => r[k]));
    const stepMs = Math.max(...l.ranks.map((r) => r.stepMs));
    if (l.wrong) failed = true;
    rows.push({
      model: l.model,
      params: l.params,
      ranks: l.size,
      mode: l.mode,
      perRank: l.perRank,
      buckets: l.buckets,
      stepsPerSec: 1000 / stepMs,
      stepMs,
      fwdBwdMs: m('fwdBwdMs'),
      reduceMs: m('reduceMs'),
      sgdMs: m('sgdMs'),
      syncWaitMs: l.mode === 'plain' ? undefined : m('syncWaitMs'),
      spanMs: l.mode === 'plain' ? undefined : m('spanMs'),
      peersMs: m('peersMs'),
      movingMs: m('movingMs'),
      cpuShare: m('cpuShare'),
      otherThreadsMs: (l.ranks[0].processCpuMs - l.ranks.reduce((a, r) => a + r.threadCpuMs, 0)) / opts.steps,
      opsPerStep: m('ops'),
      loss: l.loss,
      wrong: l.wrong,
      cpuBusyBefore: busy,
      otherWorkDuring: other,
      progress: start?.progress,
      perRankFigures: l.ranks,
    });
  }
}
for (const r of rows) {
  const one = rows.find((x) => x.model === r.model && x.mode === r.mode && x.ranks === 1);
  r.speedup = one ? r.stepsPerSec / one.stepsPerSec : undefined;
}

const busyText = runs
  .map((r) => `${r.ranks} ranks ${r.cpuBusyBefore ?? '?'}% before, ${r.otherWorkDuring ?? '?'}% during`)
  .join('; ');
console.log(`# CPUs busy with other work: ${busyText}`);
console.log(`# progress mode: ${[...new Set(runs.map((r) => r.progress ?? '?'))].join(', ')}`);
/** Prints `items` as a table of columns [head, width, value of an item]. */
function table(cols, items) {
  console.log(`#${cols.map(([h, w], k) => (k ? h.padStart(w) : h.padStart(w - 1))).join(' ')}`);
  for (const it of items) console.log(cols.map(([, w, get]) => String(get(it)).padStart(w)).join(' '));
}

console.log('#');
const ordered = [];
for (const model of opts.models)
  for (const n of opts.ranks)
    for (const mode of opts.modes) {
      const r = rows.find((x) => x.model === model && x.ranks === n && x.mode === mode);
      if (r) ordered.push(r);
    }
table(
  [
    ['model', 6, (r) => r.model],
    ['ranks', 5, (r) => r.ranks],
    ['mode', 8, (r) => r.mode],
    ['buckets', 7, (r) => r.buckets],
    ['steps/s', 8, (r) => f(r.stepsPerSec, 0, 2)],
    ['speedup', 7, (r) => f(r.speedup, 0, 2)],
    ['step', 7, (r) => f(r.stepMs, 0)],
    ['fwd+bwd', 7, (r) => f(r.fwdBwdMs, 0)],
    ['reduce', 7, (r) => f(r.reduceMs, 0, 2)],
    ['sgd', 5, (r) => f(r.sgdMs, 0)],
    ['syncWait', 8, (r) => f(r.syncWaitMs, 0, 2)],
    ['span', 7, (r) => f(r.spanMs, 0, 2)],
    ['peers', 7, (r) => f(r.peersMs, 0, 2)],
    ['moving', 7, (r) => f(r.movingMs, 0, 2)],
    ['cpu', 5, (r) => f(r.cpuShare, 0, 2)],
    ['others', 6, (r) => f(r.otherThreadsMs, 0)],
    ['#wrong', 6, (r) => r.wrong],
  ],
  ordered,
);
console.log('#');
console.log('# anchor, 1 rank: the step (plain mode) split; 2 ranks: one awaited allReduce (op avg) of the whole');
console.log('# gradient, plain Float32Array and comm.alloc() buffer, ms (peers, moving); comm/compute: the alloc');
console.log("# allReduce over half the 1-rank fwd+bwd (a rank's compute on 2 ranks, if it halved)");
const anchorRows = opts.models.map((model) => ({
  model,
  one:
    rows.find((x) => x.model === model && x.ranks === 1 && x.mode === 'plain') ??
    rows.find((x) => x.model === model && x.ranks === 1),
  a: anchors.find((x) => x.model === model),
}));
const split = (ms, peers, moving) => `${f(ms, 0, 2)} (${f(peers, 0, 2)}, ${f(moving, 0, 2)})`;
table(
  [
    ['model', 6, (r) => r.model],
    ['bytes', 9, (r) => r.a?.bytes ?? '-'],
    ['1-rank step', 11, (r) => f(r.one?.stepMs, 0)],
    ['fwd+bwd', 7, (r) => f(r.one?.fwdBwdMs, 0)],
    ['reduce', 6, (r) => f(r.one?.reduceMs, 0, 2)],
    ['sgd', 5, (r) => f(r.one?.sgdMs, 0)],
    ['allReduce plain', 22, (r) => split(r.a?.plainMs, r.a?.plainPeersMs, r.a?.plainMovingMs)],
    ['allReduce alloc', 22, (r) => split(r.a?.allocMs, r.a?.allocPeersMs, r.a?.allocMovingMs)],
    ['comm/compute', 12, (r) => f(r.a?.allocMs / (r.one?.fwdBwdMs / 2), 0, 3)],
  ],
  anchorRows,
);
if (opts.json)
  writeFileSync(
    opts.json,
    JSON.stringify(
      {
        machine: cpus()[0]?.model,
        cores,
        node: process.version,
        commit,
        options: opts,
        droppedEnv: dropped,
        runs,
        rows,
        anchors,
      },
      null,
      2,
    ),
  );
process.exit(failed ? 1 : 0);
