#!/usr/bin/env node
// bench/overlap: how much of an async allReduce hides behind compute that does not call webccl.
// Each rank issues allReduceAsync of S bytes, "computes" for T_comp ≈ T_comm(S) (T_comm measured
// alone first), then waits. Reported, per size, path and regime (the slowest rank's median):
//   T_comm        the op alone (issue, wait)
//   T_comp        the compute alone (fixed work, calibrated per rank to last about T_comm)
//   T_serial      the compute, then the op
//   T_overlapped  issue, the compute, wait
//   efficiency    (T_comp + T_comm − T_overlapped) / min(T_comp, T_comm): 1 when the shorter
//                 of the two hides entirely behind the longer, 0 when nothing overlaps
//   wait/T_comm   the issue-compute-wait pattern: an op issued right after a waited one, then a long compute
//                 (at least 10× T_comm, no webccl call), then the wait: that wait over T_comm
//                 (near 0 when the op went on by itself; about 1 when it waited for the wait)
//   T_wait_floor  the least that wait can take on this machine, no library: after the same op and
//                 compute, one look at a word another thread wrote and one settled promise
//                 awaited (the first JavaScript after a long compute runs with cold caches)
// Paths: --ranks worker threads of one node (shared memory, default 2), 2 processes over TCP
// loopback ('tcp'), and 2 launchers of 2 threads each joined over TCP loopback ('nodes').
// Regimes: 'busy' (a tight loop on every rank: the CPU is saturated) and 'idle' (rounds of 1 ms
// of that loop, then 1 ms awaiting a timer: the CPU is free half the time).
//
//   npm run build && node bench/overlap.mjs [--sizes 1M,16M,64M] [--paths threads,tcp,nodes]
//       [--ranks 2] [--regimes busy,idle] [--reps 5] [--warmup 2] [--long-ms 200]
//       [--progress thread|caller|auto] [--quiet 30] [--json FILE]
//
// WEBCCL_PROGRESS (or --progress, which sets it) is passed to the ranks; the first line of each
// table says which mode ran, so the same command measures before and after a change of mode.
// Before each run it waits (up to 120 s) until the CPUs are less than --quiet % busy with other
// work, and notes how busy they were. In the idle regime the compute is at least one round
// (about 2 ms), so at small sizes T_comp exceeds T_comm.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs as parseCliArgs } from 'node:util';
import { benchOptions, knownList as list, waitQuiet } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'bin', 'webccl.js');
const rankScript = join(root, 'bench', 'overlap-rank.mjs');
const USAGE =
  'usage: node bench/overlap.mjs [--sizes 1M,16M,64M] [--paths threads,tcp,nodes] [--ranks 2] [--regimes busy,idle] [--reps 5] [--warmup 2] [--long-ms 200] [--progress thread|caller|auto] [--quiet 30] [--json FILE]';
const PATHS = ['threads', 'tcp', 'nodes'];
const REGIMES = ['busy', 'idle'];
const MODES = ['thread', 'caller', 'auto'];

function size(s) {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)$/i.exec(s);
  if (!m) throw new Error(`bad size ${s}`);
  const b = Math.round(Number(m[1]) * { '': 1, K: 1024, M: 1 << 20, G: 1 << 30 }[m[2].toUpperCase()]);
  if (b < 4 || b % 4) throw new Error(`size ${s} is not a positive multiple of 4 bytes (f32 elements)`);
  return b;
}

function parseArgs(argv) {
  const { values: v } = parseCliArgs({
    args: argv,
    options: {
      sizes: { type: 'string' },
      paths: { type: 'string' },
      regimes: { type: 'string' },
      reps: { type: 'string' },
      warmup: { type: 'string' },
      ranks: { type: 'string' },
      'long-ms': { type: 'string' },
      progress: { type: 'string' },
      quiet: { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const o = {
    sizes: v.sizes ? v.sizes.split(',').map(size) : [1 << 20, 16 << 20, 64 << 20],
    paths: v.paths ? list(v.paths, PATHS, 'path') : PATHS,
    regimes: v.regimes ? list(v.regimes, REGIMES, 'regime') : REGIMES,
    reps: Number(v.reps ?? 5),
    warmup: Number(v.warmup ?? 2),
    ranks: Number(v.ranks ?? 2),
    longMs: Number(v['long-ms'] ?? 200),
    progress: v.progress ? list(v.progress, MODES, 'progress mode')[0] : undefined,
    quiet: Number(v.quiet ?? 30),
    json: v.json,
  };
  if (!(Number.isInteger(o.reps) && o.reps >= 1 && Number.isInteger(o.warmup) && o.warmup >= 0 && o.sizes.length))
    throw new Error(`bad --reps, --warmup or --sizes\n${USAGE}`);
  if (!(Number.isInteger(o.ranks) && o.ranks >= 2 && o.ranks <= 64 && o.longMs > 0))
    throw new Error(`bad --ranks or --long-ms\n${USAGE}`);
  return o;
}

const opts = benchOptions('overlap', parseArgs, root);

const env = { ...process.env };
if (opts.progress) env.WEBCCL_PROGRESS = opts.progress;

/** A port free on loopback now (for the 'nodes' path's rendezvous). */
async function freePort() {
  const s = createServer();
  await new Promise((res) => s.listen(0, '127.0.0.1', res));
  const { port } = s.address();
  await new Promise((res) => s.close(res));
  return port;
}

/** Runs one launcher; resolves with its exit code and output. */
function launch(args, extraEnv) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '',
      stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGTERM'), 1_800_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

async function runRanks(path, regime) {
  const params = JSON.stringify({
    sizes: opts.sizes,
    reps: opts.reps,
    warmup: opts.warmup,
    regime,
    longMs: opts.longMs,
  });
  let runs;
  if (path === 'nodes') {
    const port = String(await freePort());
    const token = `overlap-${process.pid}-${Date.now()}`;
    runs = await Promise.all(
      [0, 1].map((k) =>
        launch(
          [cli, 'run', '--nnodes', '2', '--node-rank', String(k), '--master-port', port, '-n', '2', rankScript, params],
          { WEBCCL_TOKEN: token },
        ),
      ),
    );
  } else {
    runs = [
      await launch(
        [cli, 'run', ...(path === 'tcp' ? ['--procs', '-n', '2'] : ['-n', String(opts.ranks)]), rankScript, params],
        {},
      ),
    ];
  }
  const bad = runs.find((r) => r.status !== 0);
  if (bad) throw new Error(`${path} ${regime} run failed (exit ${bad.status}):\n${bad.stderr}`);
  return runs
    .flatMap((r) => r.stdout.split('\n'))
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}

const f = (x, w, d = 2) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(d)).padStart(w);
console.log(
  `# bench/overlap on ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}`,
);
console.log(
  `# f32 sum allReduceAsync of comm.alloc() buffers; times in ms, the slowest rank's median of ${opts.reps} (after ${opts.warmup} warm-up ops)`,
);
console.log(
  '# efficiency = (T_comp + T_comm - T_overlapped) / min(T_comp, T_comm); ovl/serial = T_overlapped / T_serial',
);
const results = [];
let failed = false;
for (const path of opts.paths) {
  for (const regime of opts.regimes) {
    const busy = waitQuiet(opts.quiet);
    let lines;
    try {
      lines = await runRanks(path, regime);
    } catch (e) {
      console.log(`#\n# ${path}, ${regime}: FAILED\n# ${e.message.split('\n').join('\n# ')}`);
      failed = true;
      continue;
    }
    const mode = lines.find((l) => l.kind === 'mode');
    const where = {
      threads: `${opts.ranks} worker threads of one node (shared memory)`,
      tcp: '2 processes over TCP loopback',
      nodes: '2 launchers of 2 threads each, joined over TCP loopback',
    }[path];
    const what =
      regime === 'busy'
        ? 'busy: a tight loop on every rank'
        : 'idle: 1 ms of work, then 1 ms awaiting a timer, repeated';
    console.log(`#\n# ${where}; compute ${what}`);
    console.log(
      `# progress mode: ${mode?.progress ?? '?'} (WEBCCL_PROGRESS ${mode?.requested ?? '?'}); CPUs ${busy ?? '?'}% busy before the run`,
    );
    console.log(
      '#       size   T_comm   T_comp  T_serial  T_overlapped  efficiency  ovl/serial  T_wait_long  wait/T_comm  T_wait_floor  #wrong',
    );
    for (const row of lines.filter((l) => l.kind === 'row')) {
      const slowest = (k) => Math.max(...row.ranks.map((r) => r[k]));
      const tComm = slowest('tComm'),
        tComp = slowest('tComp'),
        tSerial = slowest('tSerial'),
        tOverlapped = slowest('tOverlapped'),
        tWaitLong = slowest('tWaitLong'),
        tWaitFloor = slowest('tWaitFloor');
      const wrong = row.ranks.reduce((s, r) => s + r.wrong, 0);
      const efficiency = (tComp + tComm - tOverlapped) / Math.min(tComp, tComm);
      const ratio = tOverlapped / tSerial;
      if (wrong) failed = true;
      console.log(
        `${String(row.bytes).padStart(12)} ${f(tComm, 8)} ${f(tComp, 8)} ${f(tSerial, 9)} ${f(tOverlapped, 13)} ${f(efficiency, 11)} ${f(ratio, 11)} ${f(tWaitLong, 12, 3)} ${f(tWaitLong / tComm, 12, 3)} ${f(tWaitFloor, 13, 3)} ${String(wrong).padStart(7)}`,
      );
      results.push({
        path,
        regime,
        progress: mode?.progress,
        requested: mode?.requested,
        nranks: path === 'threads' ? opts.ranks : path === 'nodes' ? 4 : 2,
        bytes: row.bytes,
        tCommMs: tComm,
        tCompMs: tComp,
        tSerialMs: tSerial,
        tOverlappedMs: tOverlapped,
        efficiency,
        overlappedOverSerial: ratio,
        tWaitLongMs: tWaitLong,
        waitOverComm: tWaitLong / tComm,
        tWaitFloorMs: tWaitFloor,
        wrong,
        cpuBusyBefore: busy,
        ranks: row.ranks,
      });
    }
  }
}
if (opts.json) {
  writeFileSync(
    opts.json,
    JSON.stringify(
      {
        machine: cpus()[0]?.model,
        cores: availableParallelism(),
        node: process.version,
        reps: opts.reps,
        warmup: opts.warmup,
        results,
      },
      null,
      2,
    ),
  );
}
process.exit(failed ? 1 : 0);
