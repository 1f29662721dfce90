#!/usr/bin/env node
// allToAll, gather and scatter across processes over TCP loopback: webccl against Open MPI
// (bench/mpi/coll_bench.c, btl self,tcp) on this machine in one sitting, one busbw table per
// (collective, rank count) with the ratio webccl / Open MPI per size. Same sizes, timing method
// and busbw factors ((n-1)/n, nccl-tests) on both sides; float32, out of place, root 0.
//
//   npm run build && node bench/net/ops.mjs [--ops alltoall,gather,scatter] [--ranks 2,4]
//       [-b 8] [-e 64M] [-f 4] [--time 0.2]
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const o = { ops: ['alltoall', 'gather', 'scatter'], ranks: [2, 4], b: 8, e: 64 << 20, f: 4, time: 0.2 };
const size = (t) => Number.parseFloat(t) * ({ K: 1 << 10, M: 1 << 20, G: 1 << 30 }[t.slice(-1).toUpperCase()] ?? 1);
for (let k = 2; k < process.argv.length; k += 2) {
  const [flag, v] = [process.argv[k], process.argv[k + 1]];
  if (flag === '--ops') o.ops = v.split(',');
  else if (flag === '--ranks') o.ranks = v.split(',').map(Number);
  else if (flag === '-b') o.b = size(v);
  else if (flag === '-e') o.e = size(v);
  else if (flag === '-f') o.f = Number(v);
  else if (flag === '--time') o.time = Number(v);
  else throw new Error(`bench/net/ops: unknown option ${flag}`);
}

const run = (cmd, args) => spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, timeout: 1_800_000 });
const rows = (r, who) => {
  const lines = r.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
  if (!lines.length) console.error(`${who} failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' ')}`);
  return lines;
};

const exe = join(root, 'bench', 'results', 'build', 'coll_bench');
mkdirSync(dirname(exe), { recursive: true });
const mpi =
  run('mpicc', ['-O2', '-o', exe, join(root, 'bench', 'mpi', 'coll_bench.c'), '-lm']).status === 0 && existsSync(exe);
if (!mpi) console.log('# Open MPI not found (mpicc failed): apt-get install openmpi-bin libopenmpi-dev');

const fmt = (b) => (b >= 1 << 20 ? `${b / (1 << 20)}M` : b >= 1 << 10 ? `${b / (1 << 10)}K` : `${b}`);
const sweep = [String(o.b), String(o.e), String(o.f), String(o.time)];
for (const n of o.ranks) {
  for (const op of o.ops) {
    const w = rows(
      run(process.execPath, [
        join(root, 'bin', 'webccl.js'),
        'run',
        '--procs',
        '-n',
        String(n),
        join(root, 'bench', 'net', 'ops-rank.mjs'),
        op,
        ...sweep,
      ]),
      `webccl ${op} ${n}`,
    );
    const m = mpi
      ? rows(
          run('mpirun', [
            '--allow-run-as-root',
            '--oversubscribe',
            '-np',
            String(n),
            '--mca',
            'pml',
            'ob1',
            '--mca',
            'btl',
            'self,tcp',
            '--mca',
            'btl_tcp_if_include',
            'lo',
            exe,
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
          ]),
          `Open MPI ${op} ${n}`,
        )
      : [];
    console.log(`\n${op}, ${n} processes over TCP loopback (busbw GB/s; time µs)`);
    console.log('      size   webccl µs  webccl busbw   MPI µs   MPI busbw   ratio  wrong');
    for (const x of w) {
      const y = m.find((r) => r.size === x.size);
      const ratio = y ? (x.busbw / y.busbw).toFixed(2) : '-';
      console.log(
        `${fmt(x.size).padStart(10)} ${x.time_us.toFixed(1).padStart(11)} ${x.busbw.toFixed(3).padStart(13)} ${(y?.time_us.toFixed(1) ?? '-').padStart(8)} ${(y?.busbw.toFixed(3) ?? '-').padStart(11)} ${ratio.padStart(7)}  ${x.wrong}/${y?.wrong ?? '-'}`,
      );
    }
  }
}
