#!/usr/bin/env node
// bench/call-cost: what webccl's own machinery costs a call, with no peer to wait for: a world
// of one rank in this process runs each collective back to back, so a call's time is all the
// library's own — the argument checks, the records of buffers in flight and of the flight
// recorder, the clock reads, the copies in and out of shared memory, the wasm step loop and the
// handle. Two ranks add their waits for each other and the machine's noise (a core shared with
// other guests moves a small op's time by a third between runs); this figure moves by a few
// percent, so it shows what a change to the call path saves. Read it beside `webccl perf`'s
// small rows and bench/small-floor.mjs (the least a JS library can take between two threads).
//
//   node bench/call-cost.mjs [--ops allreduce,broadcast,...] [--sizes 8,64,1K] [-n 200000]
//                            [--reps 5] [--how sync,await] [--dist DIR] [--json FILE]
//
// --how: sync completes each call with waitSync(), await with `await`. --dist: the built
// package to measure (default this checkout's dist/; another checkout's, to compare two builds
// in one sitting). Columns: µs per call, the least and the median of --reps blocks of n calls
// (after 20,000 calls of warm-up); #wrong: result elements wrong after the last block (a world
// of one rank leaves every result equal to its input).
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchOptions, bytesOf, eachOption, knownList } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const OPS = 'allreduce allgather reducescatter broadcast reduce alltoall gather scatter barrier'.split(' ');
const HOWS = ['sync', 'await'];
const WARMUP = 20_000;
const USAGE =
  'usage: node bench/call-cost.mjs [--ops allreduce,...] [--sizes 8,64,1K] [-n 200000] [--reps 5] [--how sync,await] [--dist DIR] [--json FILE]';

function parse(argv) {
  const o = { ops: OPS, sizes: [8, 64, 1024], n: 200_000, reps: 5, how: HOWS, dist: join(root, 'dist'), json: '' };
  eachOption(argv, USAGE, (a, v) => {
    if (a === '--ops') o.ops = knownList(v(), OPS, 'collective');
    else if (a === '--sizes')
      o.sizes = v()
        .split(',')
        .map((s) => bytesOf(s));
    else if (a === '-n') o.n = Number(v());
    else if (a === '--reps') o.reps = Number(v());
    else if (a === '--how') o.how = knownList(v(), HOWS, 'way to wait');
    else if (a === '--dist') o.dist = resolve(v());
    else if (a === '--json') o.json = v();
    else return false;
    return true;
  });
  if (!(o.n >= 1) || !(o.reps >= 1)) throw new Error(`-n and --reps are at least 1\n${USAGE}`);
  return o;
}

/** The call of `op` on `comm` over f32 arrays of `bytes` (at least one element), and its check. */
function callOf(comm, op, bytes) {
  const n = Math.max(1, bytes >> 2);
  const x = new Float32Array(n).map((_, i) => i + 1);
  const out = new Float32Array(n);
  const copy = () => out.set(x);
  const calls = {
    allreduce: [() => comm.allReduce(x), () => x],
    allgather: [() => comm.allGather(out, x), () => out],
    reducescatter: [() => comm.reduceScatter(out, x), () => out],
    broadcast: [() => comm.broadcast(x, { root: 0 }), () => x],
    reduce: [() => comm.reduce(x, { root: 0 }), () => x],
    alltoall: [() => comm.allToAll(out, x), () => out],
    gather: [() => comm.gather(out, x, { root: 0 }), () => out],
    scatter: [() => comm.scatter(out, x, { root: 0 }), () => out],
    barrier: [() => comm.barrier(), () => x],
  };
  const [call, result] = calls[op];
  copy();
  const wrong = () => {
    const r = result();
    let bad = 0;
    for (let i = 0; i < n; i++) if (r[i] !== i + 1) bad++;
    return bad;
  };
  return { call, wrong, bytes: n * 4 };
}

/** µs per call of n calls, completed the `how` way. */
async function block(call, n, how) {
  const t0 = performance.now();
  if (how === 'sync') for (let i = 0; i < n; i++) call().waitSync();
  else for (let i = 0; i < n; i++) await call();
  return ((performance.now() - t0) * 1000) / n;
}

const o = benchOptions('call-cost', parse, root);
const ccl = await import(pathToFileURL(join(o.dist, 'node', 'index.js')).href);
const comm = await ccl.initCommGroup();
if (comm.size !== 1) throw new Error('bench/call-cost runs as one rank: start it with node, not a launcher');
const rows = [];
console.log(`# bench/call-cost: one rank, no peer to wait for; ${o.dist}; n ${o.n}, min and median of ${o.reps}`);
console.log('#  collective     bytes    how   min us  median us  #wrong');
for (const op of o.ops) {
  for (const size of op === 'barrier' ? [0] : o.sizes) {
    for (const how of o.how) {
      const { call, wrong, bytes } = callOf(comm, op, size);
      await block(call, WARMUP, how);
      const us = [];
      for (let r = 0; r < o.reps; r++) us.push(await block(call, o.n, how));
      us.sort((a, b) => a - b);
      const row = {
        op,
        bytes: op === 'barrier' ? 0 : bytes,
        how,
        minUs: us[0],
        medianUs: us[us.length >> 1],
        wrong: wrong(),
      };
      rows.push(row);
      console.log(
        `${op.padStart(14)} ${String(row.bytes).padStart(9)} ${how.padStart(6)} ${row.minUs.toFixed(3).padStart(8)} ${row.medianUs.toFixed(3).padStart(10)} ${String(row.wrong).padStart(7)}`,
      );
    }
  }
}
await comm.destroy();
const wrongs = rows.reduce((a, r) => a + r.wrong, 0);
console.log(`# Wrong values: ${wrongs}${wrongs ? '' : ' OK'}`);
if (o.json)
  writeFileSync(
    o.json,
    `${JSON.stringify({ bench: 'call-cost', node: process.version, dist: o.dist, n: o.n, reps: o.reps, rows }, null, 2)}\n`,
  );
process.exitCode = wrongs ? 1 : 0;
