#!/usr/bin/env node
// bench/compare: the same sweep with webccl, Open MPI and torch.distributed's Gloo, on this
// machine in one sitting, printed as one busbw table per (collective, rank count) with the
// ratio webccl / anchor per size. Anchors that are not installed are skipped, and the script
// says how to install them.
//
//   npm run build && node bench/compare.mjs [--ops allreduce|all|a,b] [--ranks 2,4]
// [-b 8] [-e 64M] [-f 4] [--time 0.2] [--reps 1] [--tcp] [--group G] [--quiet 30] [--json FILE] [--plot FILE.svg|DIR/]
//
// webccl runs at its default settings: the WEBCCL_ variables of this environment (but the
// token and job id) are not passed on. Every system uses the same timing method (see docs/benchmarks.md): time = the
// slowest rank's mean time per call over a block of about --time seconds, after a barrier (the
// median of --reps such blocks); busbw as nccl-tests. webccl and Open MPI run out of place; torch's
// collectives run in place. Open MPI runs over shared memory (btl self,vader). With --tcp, webccl
// runs a second time with --transport tcp (one process per rank, over TCP loopback) and Open MPI
// over TCP loopback (btl self,tcp), and each (collective, rank count) gets two tables: shared
// memory (webccl shm against Open MPI vader) and TCP (webccl tcp against Open MPI tcp and Gloo,
// which is TCP only).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitQuiet } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The WEBCCL_ variables webccl's runs keep (a launcher's job credentials); the others are dropped. */
const DEFAULT_KEEPS = new Set(['WEBCCL_TOKEN', 'WEBCCL_JOB_ID']);
const dropped = Object.keys(process.env).filter((k) => k.startsWith('WEBCCL_') && !DEFAULT_KEEPS.has(k));
const perfJs = join(root, 'dist', 'node', 'perf.js');
if (!existsSync(perfJs)) {
  console.error('bench/compare: dist/ is missing; run `npm run build` first');
  process.exit(2);
}
const perf = await import(perfJs);
const { compareTable, compareSeries } = await import('./compare-table.mjs');

const USAGE = `usage: node bench/compare.mjs [--ops allreduce|all|a,b] [--ranks 2,4] [-b 8] [-e 64M] [-f 4]
                                [--time 0.2] [--reps 1] [--tcp] [--group G] [--quiet 30] [--quiet-wait 120] [--json FILE] [--plot FILE.svg|DIR/]

--tcp also runs webccl with --transport tcp (one process per rank) and Open MPI over TCP
loopback, and prints them with Gloo in a second table per collective.

--group G sets webccl on a group of the first G ranks of each --ranks world (larger than G)
beside webccl on a world of G ranks (ratio = group / world), instead of the anchors.

Before each run it waits (up to --quiet-wait s) until the CPUs are less than --quiet % busy
with other work, and notes how busy they were.`;
const MPI_OPS = [
  'allreduce',
  'allgather',
  'reducescatter',
  'broadcast',
  'reduce',
  'alltoall',
  'gather',
  'scatter',
  'sendrecv',
  'pingpong',
];
/** What bench_gloo.py measures (torch 1.13's Gloo has no all_to_all; gather, scatter and p2p are not in it yet). */
const GLOO_OPS = ['allreduce', 'allgather', 'reducescatter', 'broadcast', 'reduce'];
/** Rank counts an op runs at: pingpong is one pair, sendrecv needs a peer. */
const fits = (op, n) => (op === 'pingpong' ? n === 2 : op === 'sendrecv' ? n >= 2 : true);

function parseArgs(argv) {
  const o = {
    ops: ['allreduce'],
    ranks: [2, 4],
    b: 8,
    e: 64 << 20,
    f: 4,
    time: 0.2,
    tcp: false,
    group: undefined,
    json: undefined,
    plot: undefined,
    quiet: 30,
    quietWait: 120,
    reps: 1,
  };
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k];
    const v = () => {
      if (argv[k + 1] === undefined) throw new Error(`${a} needs a value`);
      return argv[++k];
    };
    switch (a) {
      case '--ops': {
        const t = v();
        o.ops =
          t === 'all'
            ? MPI_OPS
            : t.split(',').map(
                (x) =>
                  perf.collectiveNamed(x) ??
                  (() => {
                    throw new Error(`unknown collective ${x}`);
                  })(),
              );
        break;
      }
      case '--ranks':
        o.ranks = v().split(',').map(Number);
        break;
      case '-b':
        o.b = perf.parseSize(v(), '-b');
        break;
      case '-e':
        o.e = perf.parseSize(v(), '-e');
        break;
      case '-f':
        o.f = Number(v());
        break;
      case '--time':
        o.time = Number(v());
        break;
      case '--tcp':
        o.tcp = true;
        break;
      case '--group':
        o.group = Number(v());
        break;
      case '--quiet':
        o.quiet = Number(v());
        break;
      case '--reps':
        o.reps = Number(v());
        break;
      case '--quiet-wait':
        o.quietWait = Number(v());
        break;
      case '--json':
        o.json = v();
        break;
      case '--plot':
        o.plot = v();
        break;
      case '-h':
      case '--help':
        console.log(USAGE);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${a}`);
    }
  }
  if (!o.ranks.every((n) => Number.isInteger(n) && n >= 1 && n <= 64))
    throw new Error('--ranks expects rank counts in 1..64');
  if (!(o.f >= 2 && Number.isInteger(o.f))) throw new Error('-f expects an integer >= 2');
  if (!(o.time > 0)) throw new Error('--time expects seconds > 0');
  if (!(Number.isInteger(o.reps) && o.reps >= 1 && o.reps <= 100))
    throw new Error('--reps expects an integer in 1..100');
  if (o.group !== undefined && !(Number.isInteger(o.group) && o.group >= 1 && o.ranks.some((n) => n > o.group))) {
    throw new Error('--group expects a rank count smaller than one of --ranks');
  }
  if (o.group !== undefined && o.tcp) throw new Error('--group compares shared-memory runs; leave out --tcp');
  return o;
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  console.error(`bench/compare: ${e.message}\n${USAGE}`);
  process.exit(2);
}

const run = (cmd, args, extra = {}) => spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...extra });
const ok = (cmd, args) => {
  const r = run(cmd, args, { timeout: 60_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
};

// ------------------------------------------------------------------ which anchors are here

function findOpenMpi() {
  const version = ok('mpirun', ['--version']);
  if (!version || !/Open MPI|OpenRTE/i.test(version) || !ok('mpicc', ['--showme:version'])) return undefined;
  const buildDir = join(root, 'bench', 'results', 'build');
  const exe = join(buildDir, 'coll_bench');
  const src = join(root, 'bench', 'mpi', 'coll_bench.c');
  if (!existsSync(exe) || statSync(exe).mtimeMs < statSync(src).mtimeMs) {
    mkdirSync(buildDir, { recursive: true });
    const c = run('mpicc', ['-O2', '-o', exe, src, '-lm']);
    if (c.status !== 0) {
      console.error(`bench/compare: mpicc failed:\n${c.stderr}`);
      return undefined;
    }
  }
  return { exe, version: /\d+\.\d+(\.\d+)?/.exec(version)?.[0] ?? version.split('\n')[0] };
}

function findGloo() {
  // Debian's python3-torch lives under /usr/bin/python3, which a pyenv or venv python3 may hide.
  for (const py of [process.env.PYTHON, 'python3', '/usr/bin/python3'].filter(Boolean)) {
    const v = ok(py, ['-c', 'import torch, torch.distributed as d; print(torch.__version__, d.is_gloo_available())']);
    if (v?.endsWith('True')) return { python: py, version: v.split(' ')[0] };
  }
  return undefined;
}

const mpi = findOpenMpi();
const gloo = findGloo();
console.log(
  `# bench/compare on ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}`,
);
console.log(
  `# anchors found: webccl (this tree)${mpi ? `, Open MPI ${mpi.version}` : ''}${gloo ? `, Gloo (torch ${gloo.version}, ${gloo.python})` : ''}`,
);
console.log(
  `# webccl at its default settings (no WEBCCL_ variable${dropped.length ? `; ignored here: ${dropped.join(', ')}` : ''})`,
);
if (!mpi)
  console.log('# Open MPI not found: apt-get install openmpi-bin libopenmpi-dev  (mpirun and mpicc are needed)');
if (!gloo) console.log('# Gloo not found: apt-get install python3-torch  (or set PYTHON to a python3 that has torch)');

// ------------------------------------------------------------------ running one system

const sweep = (o) => ['-b', String(o.b), '-e', String(o.e), '-f', String(o.f)];
const parseLines = (text) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));

/**
 * The environment webccl runs in: this one without any WEBCCL_ setting (but the token and job
 * id a launcher needs), so the tables show what a user who sets nothing gets.
 */
function defaultEnv() {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('WEBCCL_') && !DEFAULT_KEEPS.has(k)) delete env[k];
  return env;
}
function runWebccl(op, n, transport, group) {
  const json = join(tmpdir(), `webccl-compare-${process.pid}-${op}-${n}-${transport}${group ? `-g${group}` : ''}.json`);
  const r = run(
    process.execPath,
    [
      join(root, 'bin', 'webccl.js'),
      'perf',
      op,
      ...sweep(opts),
      '--ranks',
      String(n),
      ...(group ? ['--group', String(group)] : []),
      '--transport',
      transport,
      '--time',
      String(opts.time),
      '--reps',
      String(opts.reps),
      '-c',
      '1',
      '--json',
      json,
    ],
    { timeout: 1_800_000, env: defaultEnv() },
  );
  if (!existsSync(json)) return { error: (r.stderr || r.stdout || 'no output').trim().split('\n').slice(-3).join(' ') };
  const rep = JSON.parse(readFileSync(json, 'utf8'));
  return {
    rows: rep.rows.map((x) => ({
      size: x.size,
      time_us: x.oop.time_us,
      busbw: x.oop.busbw,
      wrong: x.oop.wrong,
      ip_busbw: x.ip?.busbw,
    })),
  };
}

function runMpi(op, n, transport) {
  const btl =
    transport === 'tcp'
      ? ['--mca', 'btl', 'self,tcp', '--mca', 'btl_tcp_if_include', 'lo']
      : ['--mca', 'btl', 'self,vader'];
  const r = run(
    'mpirun',
    [
      '--allow-run-as-root',
      '--oversubscribe',
      '-np',
      String(n),
      '--mca',
      'pml',
      'ob1',
      ...btl,
      mpi.exe,
      '-o',
      op,
      ...sweep(opts),
      '-t',
      String(opts.time),
      '-r',
      String(opts.reps),
      '-c',
      '1',
    ],
    { timeout: 1_800_000 },
  );
  const rows = parseLines(r.stdout);
  return rows.length ? { rows } : { error: (r.stderr || 'no output').trim().split('\n').slice(-3).join(' ') };
}

function runGloo(op, n) {
  const r = run(
    gloo.python,
    [
      join(root, 'bench', 'gloo', 'bench_gloo.py'),
      '--op',
      op,
      '--ranks',
      String(n),
      ...sweep(opts),
      '-t',
      String(opts.time),
      '-r',
      String(opts.reps),
      '-c',
      '1',
    ],
    { timeout: 1_800_000 },
  );
  const lines = parseLines(r.stdout);
  if (lines[0]?.unsupported) return { unsupported: lines[0].unsupported };
  return lines.length ? { rows: lines } : { error: (r.stderr || 'no output').trim().split('\n').slice(-3).join(' ') };
}

// ------------------------------------------------------------------ the sitting

const groups = [];
for (const n of opts.group === undefined ? [] : opts.ranks.filter((k) => k > opts.group)) {
  for (const op of opts.ops) {
    const g = opts.group;
    if (!fits(op, g)) continue;
    const plan = [
      {
        name: 'webccl-group',
        short: 'webccl',
        label: `webccl shm, group of ${g} in ${n} ranks`,
        go: () => runWebccl(op, n, 'shm', g),
      },
      { name: 'world', short: `world${g}`, label: `webccl shm, ${g}-rank world`, go: () => runWebccl(op, g, 'shm') },
    ];
    const systems = [];
    for (const p of plan) {
      process.stderr.write(`bench/compare: ${op}: ${p.label} ...\n`);
      const busyBefore = waitQuiet(opts.quiet, opts.quietWait);
      const t0 = performance.now();
      const res = p.go();
      systems.push({
        name: p.name,
        short: p.short,
        label: p.label,
        busyBefore,
        seconds: (performance.now() - t0) / 1000,
        ...res,
      });
    }
    const group = {
      op,
      n: g,
      title: `${op}, a group of ${g} ranks in a ${n}-rank world against a ${g}-rank world`,
      systems,
    };
    groups.push(group);
    console.log(compareTable(group, availableParallelism(), perf.formatSize));
  }
}
for (const n of opts.group === undefined ? opts.ranks : []) {
  for (const op of opts.ops) {
    if (!fits(op, n)) {
      process.stderr.write(`bench/compare: ${op} does not run on ${n} rank${n === 1 ? '' : 's'}; skipped\n`);
      continue;
    }
    // Each table: webccl first (the base of the ratios), then the anchors on the same transport.
    const shm = [{ name: 'webccl', short: 'webccl', label: 'webccl shm', go: () => runWebccl(op, n, 'shm') }];
    if (mpi) shm.push({ name: 'ompi-shm', short: 'MPI', label: 'Open MPI vader', go: () => runMpi(op, n, 'shm') });
    const tcp = [];
    if (opts.tcp && n >= 2)
      tcp.push({
        name: 'webccl-tcp',
        short: 'webccl-tcp',
        label: `webccl tcp (${n} processes)`,
        go: () => runWebccl(op, n, 'tcp'),
      });
    if (mpi && opts.tcp)
      tcp.push({ name: 'ompi-tcp', short: 'MPI-tcp', label: 'Open MPI tcp', go: () => runMpi(op, n, 'tcp') });
    if (gloo && GLOO_OPS.includes(op))
      (opts.tcp ? tcp : shm).push({ name: 'gloo', short: 'Gloo', label: 'Gloo tcp', go: () => runGloo(op, n) });
    const tables = opts.tcp
      ? [
          { transport: 'shm', plan: shm },
          { transport: 'tcp', plan: tcp },
        ]
      : [{ plan: shm }];
    for (const { transport, plan } of tables) {
      if (!plan.length) continue;
      const systems = [];
      for (const p of plan) {
        process.stderr.write(`bench/compare: ${op}, ${n} ranks: ${p.label} ...\n`);
        const busyBefore = waitQuiet(opts.quiet, opts.quietWait);
        const t0 = performance.now();
        const res = p.go();
        systems.push({
          name: p.name,
          short: p.short,
          label: p.label,
          busyBefore,
          seconds: (performance.now() - t0) / 1000,
          ...res,
        });
      }
      const group = { op, n, ...(transport && { transport }), systems };
      groups.push(group);
      console.log(compareTable(group, availableParallelism(), perf.formatSize));
    }
  }
}

if (opts.json) {
  writeFileSync(
    opts.json,
    `${JSON.stringify(
      {
        tool: 'bench/compare',
        date: new Date().toISOString(),
        node: process.version,
        cores: availableParallelism(),
        cpu: cpus()[0]?.model,
        anchors: { openmpi: mpi?.version ?? null, gloo: gloo?.version ?? null },
        sweep: { b: opts.b, e: opts.e, f: opts.f, time: opts.time, reps: opts.reps, tcp: opts.tcp },
        groups,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nwrote ${opts.json}`);
}
// --plot DIR/ writes DIR/<op>-<n>ranks.svg (and <op>-<n>ranks-tcp.svg with --tcp); --plot FILE.svg
// writes FILE-<op>-<n>ranks[-tcp].svg when there are several.
const plotDir = opts.plot && (opts.plot.endsWith('/') || (existsSync(opts.plot) && statSync(opts.plot).isDirectory()));
if (plotDir) mkdirSync(opts.plot, { recursive: true });
if (opts.plot) {
  for (const g of groups) {
    const tag = `${g.op}-${g.n}ranks${g.transport === 'tcp' ? '-tcp' : ''}`;
    const file = plotDir
      ? join(opts.plot, `${tag}.svg`)
      : groups.length === 1
        ? opts.plot
        : `${opts.plot.replace(/\.svg$/i, '')}-${tag}.svg`;
    const over = g.transport === 'tcp' ? ' over TCP loopback' : g.transport === 'shm' ? ', shared memory' : '';
    try {
      writeFileSync(
        file,
        await perf.renderBusBwChart(compareSeries(g), `${g.op}, ${g.n} ranks${over}, float32 sum: bus bandwidth`),
      );
      console.log(`wrote ${file}`);
    } catch (e) {
      console.error(`bench/compare: --plot: ${e.message}`);
      process.exitCode = 1;
      break;
    }
  }
}
