// Speed of the network simulator itself: a ring allreduce of 1 GiB in size-only mode at 1,024
// and 4,096 virtual ranks (8 per node, 5 us / 25 Gbit between nodes), wall time per run, beside
// the virtual time it predicts and the messages it moved. Targets: < 10 s at 1,024
// ranks, < 60 s at 4,096.
//
// --threads splits each run over worker threads (default auto: every core from 1,024 ranks);
// --threads 1,auto runs each rank count both ways, one after the other.
//
//   node bench/sim-speed.mjs [--ranks 1024,4096] [--size 1G] [--algo ring] [--threads auto] [--json FILE]
// Build first: npm run build (this loads dist/node/sim-threads.js).
import { writeFileSync } from 'node:fs';
import { simThreads, simulateOnThreads } from '../dist/node/sim-threads.js';
import { bytesOf, flagOf } from './machine.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => flagOf(args, name, dflt);
const ranksList = opt('--ranks', '1024,4096').split(',').map(Number);
const bytes = bytesOf(opt('--size', '1G'), '--size');
const algo = opt('--algo', 'ring');
const json = opt('--json', undefined);
const threadsList = opt('--threads', 'auto')
  .split(',')
  .map((t) => (t === 'auto' ? 'auto' : Number(t)));

const rows = [];
console.log(
  '#   ranks   nodes        size  algorithm  threads     virtual time (us)      messages   wall (s)    cpu (s)   us/message',
);
for (const ranks of ranksList)
  for (const want of threadsList) {
    const nodes = Math.max(1, ranks / 8);
    const net = {
      ranks,
      nodes,
      mode: 'size',
      inter: { latencyUs: 5, bytesPerUs: 3125 },
      intra: { latencyUs: 1, bytesPerUs: 50000 },
    };
    const threads = simThreads(net, want);
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const r = await simulateOnThreads(net, { collective: 'allreduce', algo, count: bytes / 4 }, threads);
    const wall = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(c0);
    // CPU time of this process (its threads' and garbage collection's included; a waiting thread
    // spins for a while): on a shared machine wall time also counts others' work.
    const cpu = (c.user + c.system) / 1e6;
    const row = {
      ranks,
      nodes,
      bytes,
      algorithm: algo,
      threads,
      timeUs: r.timeUs,
      messages: r.messages,
      wallSec: wall,
      cpuSec: cpu,
    };
    rows.push(row);
    console.log(
      [
        String(ranks).padStart(9),
        String(nodes).padStart(7),
        String(bytes).padStart(11),
        algo.padStart(10),
        String(threads).padStart(8),
        r.timeUs.toFixed(1).padStart(21),
        String(r.messages).padStart(13),
        wall.toFixed(2).padStart(10),
        cpu.toFixed(2).padStart(10),
        ((wall * 1e6) / r.messages).toFixed(2).padStart(12),
      ].join(' '),
    );
  }
if (json)
  writeFileSync(json, `${JSON.stringify({ tool: 'bench/sim-speed.mjs', node: process.version, rows }, null, 2)}\n`);
