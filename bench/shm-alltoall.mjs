#!/usr/bin/env node
// allToAll and allGather on shared memory (worker-thread ranks), with comm.alloc() buffers
// (peers' blocks read in place, one copy per byte) and with plain TypedArrays (staged through
// the slots), optionally side by side with Open MPI's MPI_Alltoall / MPI_Allgather (btl
// self,vader; bench/mpi/coll_bench.c) in the same sitting.
//
//   npm run build && node bench/shm-alltoall.mjs [--ops alltoall,allgather] [--ranks 2,4]
//       [--modes zc,staged] [-b 64K] [-e 16M] [-f 4] [--time 0.2] [--mpi] [--rounds 1]
//       [--quiet 30] [--quiet-wait 60] [--json FILE]
//
// Other sessions share this machine: before each run the script waits (up to --quiet-wait s)
// until the CPUs are less than --quiet % busy, and notes how busy they were. With --rounds R
// the webccl and Open MPI runs alternate R times and each row keeps its best time (the least
// disturbed), for every system alike.
//
// nccl-tests conventions: size = bytes of the whole output (n blocks), float32; time = the
// slowest rank's mean µs per call over a block of about --time seconds after a barrier (the
// iteration count from a first rough measure, as `webccl perf`); algbw = size / time (GB/s,
// 1e9 B); busbw = algbw · (n−1)/n for both; #wrong counted after one more checked call.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort } from 'node:worker_threads';
import { waitQuiet } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const lib = await import(join(root, 'dist', 'node', 'index.js'));

const parseSize = (s) => {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)$/i.exec(s);
  if (!m) throw new Error(`bad size ${s}`);
  return Math.round(Number(m[1]) * { '': 1, K: 1024, M: 1 << 20, G: 1 << 30 }[m[2].toUpperCase()]);
};

// ---------------------------------------------------------------- one rank
async function rankMain(o) {
  const comm = await lib.initCommGroup();
  const { rank: r, size: n } = comm;
  const value = (who, i) => (who * 7 + i) % 1000;
  const rows = [];
  for (const op of o.ops)
    for (const mode of o.modes) {
      for (let size = o.b; size <= o.e; size *= o.f) {
        const per = Math.max(1, Math.floor(size / 4 / n));
        const inCount = op === 'alltoall' ? n * per : per;
        const mk = (k) => (mode === 'zc' ? comm.alloc('f32', k) : new Float32Array(k));
        const x = mk(inCount);
        const y = mk(n * per);
        const run = op === 'alltoall' ? () => comm.allToAll(y, x) : () => comm.allGather(y, x);
        const calls = (k) => {
          for (let i = 0; i < k; i++) run().waitSync();
        };
        const agreedMean = (k) => {
          const t0 = performance.now();
          calls(k);
          const m = new Float64Array([((performance.now() - t0) * 1000) / k]);
          comm.allReduce(m, { op: 'max' }).waitSync();
          return Math.max(m[0], 0.01);
        };
        calls(1);
        const rough = agreedMean(5);
        const better = agreedMean(Math.min(1000, Math.max(1, Math.round(20_000 / rough))));
        const iters = Math.min(20000, Math.max(5, Math.ceil((o.time * 1e6) / better)));
        comm.barrier().waitSync();
        const timeUs = agreedMean(iters);
        // checked call
        for (let i = 0; i < inCount; i++) x[i] = value(r, i);
        y.fill(-1);
        run().waitSync();
        let wrong = 0;
        for (let i = 0; i < n * per; i++) {
          const j = Math.floor(i / per);
          const want = op === 'alltoall' ? value(j, r * per + (i % per)) : value(j, i % per);
          if (y[i] !== want) wrong++;
        }
        const w = new Float64Array([wrong]);
        comm.allReduce(w).waitSync();
        if (mode === 'zc') {
          comm.free(x);
          comm.free(y);
        }
        const bytes = n * per * 4;
        const algbw = bytes / (timeUs * 1e3);
        rows.push({
          op,
          mode,
          nranks: n,
          size: bytes,
          count: per,
          time_us: timeUs,
          algbw,
          busbw: (algbw * (n - 1)) / n,
          wrong: w[0],
        });
      }
    }
  if (r === 0) parentPort.postMessage({ rows });
}

if (!isMainThread) {
  await rankMain(JSON.parse(process.argv[2]));
} else {
  // ---------------------------------------------------------------- launcher
  const args = process.argv.slice(2);
  const o = {
    ops: ['alltoall', 'allgather'],
    ranks: [2, 4],
    modes: ['zc', 'staged'],
    b: 64 << 10,
    e: 16 << 20,
    f: 4,
    time: 0.2,
    mpi: false,
    json: undefined,
    rounds: 1,
    quiet: 30,
    quietWait: 60,
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i],
      v = () => args[++i];
    if (a === '--ops') o.ops = v().split(',');
    else if (a === '--ranks') o.ranks = v().split(',').map(Number);
    else if (a === '--modes') o.modes = v().split(',');
    else if (a === '-b') o.b = parseSize(v());
    else if (a === '-e') o.e = parseSize(v());
    else if (a === '-f') o.f = Number(v());
    else if (a === '--time') o.time = Number(v());
    else if (a === '--mpi') o.mpi = true;
    else if (a === '--json') o.json = v();
    else if (a === '--rounds') o.rounds = Number(v());
    else if (a === '--quiet') o.quiet = Number(v());
    else if (a === '--quiet-wait') o.quietWait = Number(v());
    else {
      console.error(
        'usage: node bench/shm-alltoall.mjs [--ops alltoall,allgather] [--ranks 2,4] [--modes zc,staged] [-b 64K] [-e 16M] [-f 4] [--time 0.2] [--mpi] [--rounds 1] [--quiet 30] [--quiet-wait 60] [--json FILE]',
      );
      process.exit(2);
    }
  }
  let mpiExe;
  if (o.mpi) {
    mpiExe = join(mkdtempSync(join(tmpdir(), 'shm-alltoall-')), 'coll_bench');
    const c = spawnSync('mpicc', ['-O2', '-o', mpiExe, join(root, 'bench', 'mpi', 'coll_bench.c'), '-lm'], {
      encoding: 'utf8',
    });
    if (c.status !== 0) throw new Error(`mpicc failed: ${c.stderr}`);
  }
  const waitQuietHere = () => waitQuiet(o.quiet, o.quietWait) ?? 0;
  /** Keeps the fastest time of each (op, mode, size). */
  const keepBest = (best, r) => {
    const k = `${r.op}/${r.mode}/${r.size}`;
    if (!best.has(k) || best.get(k).time_us > r.time_us || r.wrong)
      best.set(k, r.wrong ? r : best.get(k)?.wrong ? best.get(k) : r);
  };
  const all = [];
  for (const n of o.ranks) {
    const best = new Map();
    const busy = [];
    for (let round = 0; round < o.rounds; round++) {
      busy.push(waitQuietHere());
      let got = [];
      const res = await lib.launch({
        nranks: n,
        script: fileURLToPath(import.meta.url),
        args: [JSON.stringify(o)],
        onMessage: (_r, m) => (got = m.rows),
      });
      if (res.failure) throw new Error(`ranks failed: ${res.failure.message}`);
      for (const r of got) keepBest(best, r);
      if (!mpiExe) continue;
      for (const op of o.ops) {
        busy.push(waitQuietHere());
        const p = spawnSync(
          'mpirun',
          [
            '--allow-run-as-root',
            '--oversubscribe',
            '-np',
            String(n),
            '--mca',
            'pml',
            'ob1',
            '--mca',
            'btl',
            'self,vader',
            mpiExe,
            '-o',
            op,
            '-b',
            String(o.b),
            '-e',
            String(o.e),
            '-f',
            String(o.f),
            '-t',
            String(o.time),
            '-c',
            '1',
          ],
          { encoding: 'utf8', timeout: 600_000 },
        );
        for (const line of p.stdout.split('\n'))
          if (line.startsWith('{')) {
            const m = JSON.parse(line);
            keepBest(best, {
              op,
              mode: 'mpi',
              nranks: n,
              size: m.size,
              count: m.count,
              time_us: m.time_us,
              algbw: m.algbw,
              busbw: m.busbw,
              wrong: m.wrong,
            });
          }
      }
    }
    const rows = [...best.values()];
    console.log(
      `\n# ${n} ranks: best of ${o.rounds} round(s); CPUs busy with other work before each run: ${busy.join(', ')} %`,
    );
    all.push(...rows);
    for (const op of o.ops) {
      console.log(
        `\n# ${op}, ${n} thread ranks, float32, out of place${mpiExe ? '; ×MPI = busbw / Open MPI vader busbw' : ''}`,
      );
      console.log(
        `#${'size'.padStart(11)} ${'count'.padStart(9)} ${'mode'.padStart(7)} ${'time(us)'.padStart(10)} ${'algbw'.padStart(7)} ${'busbw'.padStart(7)} ${'#wrong'.padStart(6)}${mpiExe ? '    ×MPI' : ''}`,
      );
      for (const row of rows
        .filter((x) => x.op === op)
        .sort((a, b) => a.size - b.size || a.mode.localeCompare(b.mode))) {
        const ref = rows.find((x) => x.op === op && x.mode === 'mpi' && x.size === row.size);
        const ratio = mpiExe && row.mode !== 'mpi' && ref ? (row.busbw / ref.busbw).toFixed(2).padStart(8) : '';
        console.log(
          `${String(row.size).padStart(12)} ${String(row.count).padStart(9)} ${row.mode.padStart(7)} ${row.time_us.toFixed(1).padStart(10)} ${row.algbw.toFixed(2).padStart(7)} ${row.busbw.toFixed(2).padStart(7)} ${String(row.wrong).padStart(6)}${ratio}`,
        );
      }
    }
  }
  if (o.json) writeFileSync(o.json, JSON.stringify({ options: o, rows: all }, null, 1));
}
