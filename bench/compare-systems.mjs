// How bench/compare finds and runs each system on one sweep: webccl (this tree, at its default
// settings), Open MPI (bench/mpi/coll_bench.c, built here with mpicc) and torch.distributed's
// Gloo (bench/gloo/bench_gloo.py); each run returns its rows, or why it has none.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The WEBCCL_ variables webccl's runs keep (a launcher's job credentials); the others are dropped. */
const DEFAULT_KEEPS = new Set(['WEBCCL_TOKEN', 'WEBCCL_JOB_ID']);
/** The WEBCCL_ variables of this environment that webccl's runs do not see. */
export const droppedWebcclVars = () =>
  Object.keys(process.env).filter((k) => k.startsWith('WEBCCL_') && !DEFAULT_KEEPS.has(k));
/** What bench_gloo.py measures (torch 1.13's Gloo has no all_to_all; gather, scatter and p2p are not in it yet). */
export const GLOO_OPS = ['allreduce', 'allgather', 'reducescatter', 'broadcast', 'reduce'];

const run = (cmd, args, extra = {}) => spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...extra });
const ok = (cmd, args) => {
  const r = run(cmd, args, { timeout: 60_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
};

// ------------------------------------------------------------------ which anchors are here

export function findOpenMpi() {
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

export function findGloo() {
  // Debian's python3-torch lives under /usr/bin/python3, which a pyenv or venv python3 may hide.
  for (const py of [process.env.PYTHON, 'python3', '/usr/bin/python3'].filter(Boolean)) {
    const v = ok(py, ['-c', 'import torch, torch.distributed as d; print(torch.__version__, d.is_gloo_available())']);
    if (v?.endsWith('True')) return { python: py, version: v.split(' ')[0] };
  }
  return undefined;
}

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
/** webccl perf on `n` ranks over `transport` (`group`: on a group of the first `group` ranks). */
export function runWebccl(opts, op, n, transport, group) {
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

/** coll_bench under mpirun, over shared memory (vader) or TCP loopback. */
export function runMpi(opts, mpi, op, n, transport) {
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

/** bench_gloo.py; `unsupported` when it does not measure `op`. */
export function runGloo(opts, gloo, op, n) {
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

/** The collectives Node's own sockets have a floor for here (compare --tcp, 2 ranks). */
export const FLOOR_OPS = ['allreduce', 'allgather', 'broadcast'];

/**
 * What Node's own sockets move between 2 processes with no library (bench/tcp-floor.mjs), as a
 * 2-rank `op` of each size of the sweep would need: allReduce sends and receives S on each side
 * at once, allGather S/2, broadcast S one way. Each size over 1 and 2 connections (webccl opens
 * 2 a pair), the faster kept; time is the median of 20 transfers; busbw as nccl-tests for 2 ranks.
 */
export function runNodeFloor(opts, op) {
  const rows = [];
  for (let size = opts.b; size <= opts.e; size *= opts.f) {
    const stream = op === 'allgather' ? Math.max(1, size >> 1) : size;
    let best;
    for (const sockets of [1, 2]) {
      const r = run(
        process.execPath,
        [
          join(root, 'bench', 'tcp-floor.mjs'),
          '--stream',
          String(stream),
          '--reps',
          '20',
          '--sockets',
          String(sockets),
          ...(op === 'broadcast' ? ['--oneway'] : []),
        ],
        { timeout: 300_000 },
      );
      const line = parseLines(r.stdout)[0];
      if (!line) return { error: (r.stderr || 'no output').trim().split('\n').slice(-3).join(' ') };
      if (!best || line.ms < best.ms) best = { ...line, sockets };
    }
    const time_us = best.ms * 1000;
    const algbw = size / time_us / 1000;
    rows.push({ size, time_us, busbw: op === 'allgather' ? algbw / 2 : algbw, wrong: 0, sockets: best.sockets });
  }
  return { rows };
}
