#!/usr/bin/env node
// bench/pingpong: send/recv ping-pong latency between 2 ranks, webccl against Open MPI's
// MPI_Send/MPI_Recv on this machine, in one sitting: shared memory (webccl: 2 worker threads on
// one node; Open MPI: btl self,vader) and TCP loopback (webccl: 2 processes, --procs; Open MPI:
// btl self,tcp). time = one-way latency = round trip / 2, the median of --reps blocks. The TCP
// table also notes the floor of raw Node.js sockets (bench/tcp-floor.mjs) in the same sitting.
//
//   npm run build && node bench/pingpong.mjs [-b 8] [-e 1M] [-f 8] [-n 20000] [--reps 3]
//       [--sittings 1] [--only shm|tcp] [--alloc] [--quiet 30] [--json FILE]
//
// --sittings K runs webccl and Open MPI K times each, alternately, and reports each side's best
// (lowest) time per size: on a machine shared with other work, the least disturbed sitting.
// -n is the round trips per block at sizes up to 8 KiB (scaled down above, as the MPI side
// does; TCP runs use n/10). --alloc sends from comm.alloc() buffers (zero-copy on one node).
// Before each run it waits (up to 120 s) until the CPUs are less than --quiet % busy with other
// work, and notes how busy they were.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchOptions, waitQuiet } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'bin', 'webccl.js');
const rankScript = join(root, 'bench', 'pingpong-rank.mjs');

const USAGE =
  'usage: node bench/pingpong.mjs [-b 8] [-e 1M] [-f 8] [-n 20000] [--reps 3] [--sittings 1] [--only shm|tcp] [--alloc] [--quiet 30] [--json FILE]';

function size(s) {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)$/i.exec(s);
  if (!m) throw new Error(`bad size ${s}`);
  return Math.round(Number(m[1]) * { '': 1, K: 1024, M: 1 << 20, G: 1 << 30 }[m[2].toUpperCase()]);
}

function parseArgs(argv) {
  const o = {
    b: 8,
    e: 1 << 20,
    f: 8,
    n: 20000,
    reps: 3,
    sittings: 1,
    only: undefined,
    alloc: false,
    quiet: 30,
    json: undefined,
  };
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k];
    const v = () => {
      if (argv[k + 1] === undefined) throw new Error(`${a} needs a value`);
      return argv[++k];
    };
    switch (a) {
      case '-b':
        o.b = size(v());
        break;
      case '-e':
        o.e = size(v());
        break;
      case '-f':
        o.f = Number(v());
        break;
      case '-n':
        o.n = Number(v());
        break;
      case '--reps':
        o.reps = Number(v());
        break;
      case '--sittings':
        o.sittings = Number(v());
        break;
      case '--only':
        o.only = v();
        break;
      case '--alloc':
        o.alloc = true;
        break;
      case '--quiet':
        o.quiet = Number(v());
        break;
      case '--json':
        o.json = v();
        break;
      case '-h':
      case '--help':
        console.log(USAGE);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${a}\n${USAGE}`);
    }
  }
  if (!(o.b >= 1 && o.e >= o.b && o.f >= 2 && o.n >= 1 && o.reps >= 1 && o.sittings >= 1))
    throw new Error(`bad sweep\n${USAGE}`);
  if (o.only && o.only !== 'shm' && o.only !== 'tcp') throw new Error(`--only takes shm or tcp\n${USAGE}`);
  return o;
}

const opts = benchOptions('pingpong', parseArgs, root);

const run = (cmd, args, o = {}) =>
  spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, timeout: 900_000, ...o });
const parseLines = (text) =>
  (text ?? '')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));

function findOpenMpi() {
  const version = run('mpirun', ['--version']).stdout;
  if (!version || !/Open MPI|OpenRTE/i.test(version)) return undefined;
  const exe = join(root, 'bench', 'results', 'build', 'pingpong');
  const src = join(root, 'bench', 'mpi', 'pingpong.c');
  if (!existsSync(exe) || statSync(exe).mtimeMs < statSync(src).mtimeMs) {
    mkdirSync(dirname(exe), { recursive: true });
    const c = run('mpicc', ['-O2', '-o', exe, src]);
    if (c.status !== 0) {
      console.log(`# mpicc failed (apt-get install libopenmpi-dev): ${(c.stderr ?? '').split('\n')[0]}`);
      return undefined;
    }
  }
  return { exe, version: /\d+\.\d+(\.\d+)?/.exec(version)?.[0] ?? '?' };
}

function runWebccl(transport) {
  const n = transport === 'tcp' ? Math.max(20, Math.floor(opts.n / 10)) : opts.n;
  const params = {
    b: opts.b,
    e: opts.e,
    f: opts.f,
    n,
    w: Math.min(1000, n),
    reps: opts.reps,
    sync: transport === 'shm',
    alloc: opts.alloc,
  };
  const r = run(process.execPath, [
    cli,
    'run',
    ...(transport === 'tcp' ? ['--procs'] : []),
    '-n',
    '2',
    rankScript,
    JSON.stringify(params),
  ]);
  if (r.status !== 0) throw new Error(`webccl ${transport} run failed:\n${r.stderr}`);
  return parseLines(r.stdout);
}

function runMpi(mpi, transport) {
  const n = transport === 'tcp' ? Math.max(20, Math.floor(opts.n / 10)) : opts.n;
  const btl =
    transport === 'tcp'
      ? ['--mca', 'btl', 'self,tcp', '--mca', 'btl_tcp_if_include', 'lo']
      : ['--mca', 'btl', 'self,vader'];
  const r = run('mpirun', [
    '--allow-run-as-root',
    '--oversubscribe',
    '-np',
    '2',
    '--mca',
    'pml',
    'ob1',
    ...btl,
    mpi.exe,
    '-b',
    String(opts.b),
    '-e',
    String(opts.e),
    '-f',
    String(opts.f),
    '-n',
    String(n),
    '-w',
    String(Math.min(1000, n)),
    '-r',
    String(opts.reps),
  ]);
  if (r.status !== 0) throw new Error(`Open MPI ${transport} run failed:\n${r.stderr}`);
  return parseLines(r.stdout);
}

/** Raw Node.js sockets bouncing 8 bytes between 2 processes: the floor under any Node TCP ping-pong. */
function runTcpFloor() {
  const r = run(process.execPath, [
    join(root, 'bench', 'tcp-floor.mjs'),
    String(Math.max(500, Math.floor(opts.n / 4))),
  ]);
  return r.status === 0 ? parseLines(r.stdout)[0] : undefined;
}

const fmt = (x, w, d = 2) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(d)).padStart(w);
const mpi = findOpenMpi();
console.log(
  `# bench/pingpong on ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}${mpi ? `, Open MPI ${mpi.version}` : ''}`,
);
console.log(
  `# send/recv ping-pong between 2 ranks; time = one-way latency (round trip / 2), median of ${opts.reps} blocks; ${opts.alloc ? 'comm.alloc()' : 'plain'} buffers`,
);
if (!mpi)
  console.log('# Open MPI not found: apt-get install openmpi-bin libopenmpi-dev (the ratio column stays empty)');

const results = [];
for (const transport of ['shm', 'tcp'].filter((t) => !opts.only || t === opts.only)) {
  /** Each side's best time per size over the sittings, and how busy the CPUs were before each. */
  const best = (runs) =>
    runs
      .flat()
      .reduce((m, row) => (m.has(row.bytes) && m.get(row.bytes).us <= row.us ? m : m.set(row.bytes, row)), new Map());
  const oursAll = [],
    theirsAll = [],
    busy = { webccl: [], mpi: [] };
  for (let k = 0; k < opts.sittings; k++) {
    busy.webccl.push(waitQuiet(opts.quiet));
    oursAll.push(runWebccl(transport));
    if (!mpi) continue;
    busy.mpi.push(waitQuiet(opts.quiet));
    theirsAll.push(runMpi(mpi, transport));
  }
  const ours = [...best(oursAll).values()];
  const theirs = [...best(theirsAll).values()];
  const busyWebccl = busy.webccl.join('/'),
    busyMpi = busy.mpi.join('/') || undefined;
  const floor = transport === 'tcp' ? runTcpFloor() : undefined;
  const all = { webccl: oursAll, mpi: theirsAll };
  const where =
    transport === 'shm'
      ? 'shared memory (webccl: 2 threads of one node; Open MPI: vader)'
      : 'TCP loopback (webccl: 2 processes; Open MPI: btl tcp)';
  console.log(
    `#\n# ${where}; best of ${opts.sittings} sitting(s); CPUs busy before each: webccl ${busyWebccl || '?'}%, Open MPI ${busyMpi ?? '?'}%`,
  );
  if (floor)
    console.log(`# Node.js raw-socket floor (bench/tcp-floor.mjs, 8 B, no library): ${floor.us.toFixed(2)} us one-way`);
  console.log('#       size    count   type   iters   time(us)  algbw(GB/s)  mpi time(us)  ratio');
  for (const row of ours) {
    const m = theirs.find((t) => t.bytes === row.bytes);
    const ratio = m ? row.us / m.us : undefined;
    const algbw = row.bytes / (row.us * 1e3);
    console.log(
      `${String(row.bytes).padStart(12)} ${String(row.bytes).padStart(8)} ${'u8'.padStart(6)} ${String(row.iters).padStart(7)} ${fmt(row.us, 10)} ${fmt(algbw, 12)} ${fmt(m?.us, 13)} ${fmt(ratio, 6)}`,
    );
    results.push({
      transport,
      bytes: row.bytes,
      iters: row.iters,
      us: row.us,
      algbwGBs: algbw,
      mpiUs: m?.us,
      ratio,
      busyWebccl,
      busyMpi,
      nodeTcpFloorUs: floor?.us,
      sittings: {
        webccl: all.webccl.map((r) => r.find((x) => x.bytes === row.bytes)?.us),
        mpi: all.mpi.map((r) => r.find((x) => x.bytes === row.bytes)?.us),
      },
    });
  }
}
if (opts.json)
  writeFileSync(
    opts.json,
    JSON.stringify(
      {
        machine: cpus()[0]?.model,
        cores: availableParallelism(),
        node: process.version,
        mpi: mpi?.version,
        alloc: opts.alloc,
        results,
      },
      null,
      2,
    ),
  );
