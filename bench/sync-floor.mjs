#!/usr/bin/env node
// bench/sync-floor: what one barrier among N threads of one process costs on this machine, by
// the way a waiting thread waits, to read webccl's shared-memory figures against: every
// collective on one node synchronises its ranks at least once (a zero-copy allGather or allToAll
// twice), so with more ranks than cores no collective can be faster than this.
//
//   npm run build && node bench/sync-floor.mjs [--threads 2,4,8] [-n 5000] [--json FILE]
//
// Columns (µs per barrier, mean over n barriers):
//   webccl       comm.barrier().waitSync() on a node of N thread ranks (`webccl run -n N`)
//   js wait      N worker threads, a counter and a generation word: spin 1 µs, then
//                Atomics.wait on the generation, woken by the last arrival's Atomics.notify
//   js spin      the same, never sleeping
//   C futex      bench/floors/barrier.c: the same with the futex system call (spin 1 µs, then
//                FUTEX_WAIT; FUTEX_WAKE by the last arrival)
//   C yield      sched_yield() between looks, never sleeping (what Open MPI's progress loop does
//                when ranks outnumber cores); JavaScript has no way to yield the core
//   C spin       never sleeping
// The C columns need a C compiler (cc); without one they stay empty.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { benchOptions, eachOption, waitQuiet } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const USAGE = 'usage: node bench/sync-floor.mjs [--threads 2,4,8] [-n 5000] [--json FILE]';

if (!isMainThread) jsThread();
else await main();

/** One JS thread of the floor: passes `n` barriers (mode 'wait' or 'spin'); thread 0 posts µs per barrier. */
function jsThread() {
  const { sab, index, threads, n, mode } = workerData;
  const a = new Int32Array(sab);
  const ARRIVED = 0,
    GENERATION = 16; // words 64 bytes apart
  const barrier = () => {
    const g = Atomics.load(a, GENERATION);
    if (Atomics.add(a, ARRIVED, 1) === threads - 1) {
      Atomics.store(a, ARRIVED, 0);
      Atomics.add(a, GENERATION, 1);
      if (mode === 'wait') Atomics.notify(a, GENERATION);
      return;
    }
    const until = performance.now() + 0.001;
    while (Atomics.load(a, GENERATION) === g) {
      if (mode === 'wait' && performance.now() > until) Atomics.wait(a, GENERATION, g, 50);
    }
  };
  // Warm-up, as long as webccl's rank script has: the threads start milliseconds apart, and the
  // first barriers would count that wait (and the engine's compiling).
  for (let b = 0; b < 20_000; b++) barrier();
  const t0 = performance.now();
  for (let b = 0; b < n; b++) barrier();
  if (index === 0) parentPort.postMessage(((performance.now() - t0) * 1000) / n);
}

function parseArgs(argv) {
  const o = { threads: [2, 4, 8], n: 5000, json: undefined };
  eachOption(argv, USAGE, (a, v) => {
    if (a === '--threads') o.threads = v().split(',').map(Number);
    else if (a === '-n') o.n = Number(v());
    else if (a === '--json') o.json = v();
    else return false;
    return true;
  });
  if (!o.threads.every((t) => Number.isInteger(t) && t >= 2 && t <= 64) || !(Number.isInteger(o.n) && o.n >= 1))
    throw new Error(`bad option\n${USAGE}`);
  return o;
}

function jsFloor(threads, n, mode) {
  const sab = new SharedArrayBuffer(256);
  return new Promise((resolve, reject) => {
    const ws = Array.from(
      { length: threads },
      (_, index) => new Worker(fileURLToPath(import.meta.url), { workerData: { sab, index, threads, n, mode } }),
    );
    ws[0].once('message', resolve);
    for (const w of ws) w.once('error', reject);
  });
}

/** The C floor's binary, built once (and again when the source is newer). */
function cFloor() {
  const src = join(root, 'bench', 'floors', 'barrier.c');
  const exe = join(root, 'bench', 'results', 'build', 'barrier');
  if (!existsSync(exe) || statSync(exe).mtimeMs < statSync(src).mtimeMs) {
    mkdirSync(dirname(exe), { recursive: true });
    const c = spawnSync('cc', ['-O2', '-pthread', '-o', exe, src], { encoding: 'utf8' });
    if (c.status !== 0) return undefined;
  }
  return exe;
}

function cRun(exe, threads, n, mode) {
  const r = spawnSync(exe, [String(threads), String(n), mode], { encoding: 'utf8', timeout: 300_000 });
  return r.status === 0 ? JSON.parse(r.stdout).us : undefined;
}

function webcclBarrier(threads, n) {
  const script = join(root, 'bench', 'sync-floor-rank.mjs');
  const r = spawnSync(
    process.execPath,
    [join(root, 'bin', 'webccl.js'), 'run', '-n', String(threads), script, String(n)],
    { encoding: 'utf8', timeout: 300_000 },
  );
  if (r.status !== 0) throw new Error(`webccl run failed:\n${r.stderr}`);
  return JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{'))).us;
}

async function main() {
  const opts = benchOptions('sync-floor', parseArgs, root);
  const exe = cFloor();
  const cores = availableParallelism();
  console.log(
    `# bench/sync-floor on ${cpus()[0]?.model ?? 'unknown CPU'}, ${cores} cores, Node ${process.version}; µs per barrier, mean of ${opts.n}`,
  );
  if (!exe) console.log('# no C compiler (cc): the C columns stay empty');
  console.log('# threads   webccl   js wait   js spin   C futex   C yield    C spin');
  const rows = [];
  // Two decimals below 1 µs: C's spinning barrier of two threads takes a few hundredths.
  const fmt = (x) => (x === undefined ? '-' : x.toFixed(x < 1 ? 2 : 1)).padStart(9);
  for (const t of opts.threads) {
    const busy = waitQuiet(30);
    // Spinning threads beyond the cores take whole time slices: fewer barriers keep it short.
    const n = t > cores ? Math.max(50, Math.floor(opts.n / 20)) : opts.n;
    const row = {
      threads: t,
      busyBefore: busy,
      webccl: webcclBarrier(t, opts.n),
      jsWait: await jsFloor(t, opts.n, 'wait'),
      jsSpin: await jsFloor(t, n, 'spin'),
      cFutex: exe && cRun(exe, t, opts.n, 'futex'),
      cYield: exe && cRun(exe, t, opts.n, 'yield'),
      cSpin: exe && cRun(exe, t, n, 'spin'),
    };
    rows.push(row);
    console.log(
      `${String(t).padStart(9)}${fmt(row.webccl)} ${fmt(row.jsWait)} ${fmt(row.jsSpin)} ${fmt(row.cFutex)} ${fmt(row.cYield)} ${fmt(row.cSpin)}`,
    );
  }
  if (opts.json)
    writeFileSync(
      opts.json,
      JSON.stringify({ machine: cpus()[0]?.model, cores, node: process.version, n: opts.n, rows }, null, 2),
    );
}
