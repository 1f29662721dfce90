#!/usr/bin/env node
// bench/alltoall-floor: the least time any one-copy allToAll over shared memory can take on this
// machine. N worker threads share one memory; each holds an input and an output of --size bytes
// (N blocks each) and copies block `me` of every thread's input (its own included) into its
// output, as webccl's zero-copy allToAll does — with no library around it: no descriptors, no
// handshake, one barrier at the end. Beside it, the same threads copying only their own input
// (a plain copy of --size bytes each, the same bytes read and written, every source private).
// Prints µs per round (median of --reps), both patterns, and writes nothing else.
//
//   node bench/alltoall-floor.mjs [--ranks 2] [--size 16M] [--reps 30]
import { Worker } from 'node:worker_threads';
import { bytesOf, flagOf } from './machine.mjs';

const USAGE = 'usage: node bench/alltoall-floor.mjs [--ranks 2] [--size 16M] [--reps 30]';
const args = process.argv.slice(2);
const unknown = args.filter((a, i) => i % 2 === 0 && !['--ranks', '--size', '--reps'].includes(a));
if (unknown.length || args.length % 2) throw new Error(`unknown arguments ${unknown.join(' ')}; ${USAGE}`);
const n = Number(flagOf(args, '--ranks', '2'));
const size = bytesOf(flagOf(args, '--size', '16M'), '--size');
const reps = Number(flagOf(args, '--reps', '30'));
if (!(n >= 2 && size % (n * 64) === 0)) throw new Error(`--size must be a multiple of 64 x --ranks`);

// Layout: a control page (barrier words), then per rank its input, then per rank its output.
const CTRL = 4096;
const sab = new SharedArrayBuffer(CTRL + 2 * n * size);
new Uint8Array(sab, CTRL).fill(1); // touched once: no page faults in the timed rounds

const worker = `
const { workerData: { sab, n, me, size, reps, CTRL }, parentPort } = require('node:worker_threads');
const ctl = new Int32Array(sab, 0, 64);
const u8 = new Uint8Array(sab);
const input = (r) => CTRL + r * size;
const output = (r) => CTRL + (n + r) * size;
const block = size / n;
let gen = 0;
// A sense-reversing barrier: spin a little, then sleep on the word.
function barrier() {
  const g = ++gen;
  if (Atomics.add(ctl, 0, 1) === n - 1) {
    Atomics.store(ctl, 0, 0);
    Atomics.store(ctl, 1, g);
    Atomics.notify(ctl, 1);
    return;
  }
  for (let k = 0; k < 2000 && Atomics.load(ctl, 1) !== g; k++);
  while (Atomics.load(ctl, 1) !== g) Atomics.wait(ctl, 1, g - 1, 50);
}
function time(round) {
  const t = [];
  for (let i = 0; i < reps + 3; i++) {
    barrier();
    const t0 = performance.now();
    round();
    barrier();
    if (i >= 3) t.push((performance.now() - t0) * 1000);
  }
  t.sort((a, b) => a - b);
  return t[t.length >> 1];
}
// Every thread's block me, into this thread's output block j (its own block first, as webccl's kernel goes j = 0..n-1).
const allToAll = () => { for (let j = 0; j < n; j++) u8.copyWithin(output(me) + j * block, input(j) + me * block, input(j) + (me + 1) * block); };
const ownCopy = () => u8.copyWithin(output(me), input(me), input(me) + size);
const a = time(allToAll);
const c = time(ownCopy);
parentPort.postMessage({ me, a, c });
`;

const results = await Promise.all(
  Array.from(
    { length: n },
    (_, me) =>
      new Promise((resolve, reject) => {
        const w = new Worker(worker, { eval: true, workerData: { sab, n, me, size, reps, CTRL } });
        w.on('message', resolve);
        w.on('error', reject);
      }),
  ),
);
const r0 = results.find((r) => r.me === 0);
const mib = size / (1 << 20);
console.log(
  `# bench/alltoall-floor: ${n} threads, ${mib} MiB in and out each, median of ${reps} rounds (µs per round, the slowest thread's, as a barrier ends it)`,
);
console.log(
  `allToAll pattern (every block read by one thread, from ${n} inputs): ${r0.a.toFixed(0)} µs, busbw ${(((size / (r0.a * 1e3)) * (n - 1)) / n).toFixed(2)} GB/s`,
);
console.log(`own copy (each thread its own input only):                  ${r0.c.toFixed(0)} µs`);
