#!/usr/bin/env node
// bench/small-latency: how the time of one small collective spreads between thread ranks at the
// defaults: each call of n back-to-back calls timed alone, then the 10th, 50th and 90th
// percentiles, the mean, and the share of the run spent in calls over 20 µs (a rank asleep or
// descheduled). `webccl perf` reports a mean, which on a shared machine is mostly its slow tail;
// the median is what a call costs when nothing gets in the way, and moves far less between runs.
//
//   node bench/small-latency.mjs [--ops allreduce,broadcast,...] [--bytes 64] [--ranks 2]
//                                [-n 200000] [--how sync,await] [--dist DIR] [--json FILE]
//
// The ranks are threads of one node (`webccl run -n R`), the buffers plain Float32Arrays; --how
// sync completes each call with waitSync(), await with `await`. --dist: the built package to
// measure (default this checkout's dist/; another checkout's, to compare two builds in one
// sitting). #wrong: result elements wrong after the run (each is checked against every rank's
// input).
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchOptions, bytesOf, eachOption, knownList } from './machine.mjs';

const here = fileURLToPath(import.meta.url);
const root = join(dirname(here), '..');
const OPS = ['allreduce', 'broadcast', 'allgather', 'reduce'];
const HOWS = ['sync', 'await'];
const WARMUP = 20_000;
const SLOW_MS = 0.02;
const USAGE =
  'usage: node bench/small-latency.mjs [--ops allreduce,...] [--bytes 64] [--ranks 2] [-n 200000] [--how sync,await] [--dist DIR] [--json FILE]';

if (process.env.SMALL_LATENCY_RANK) await rank(JSON.parse(process.env.SMALL_LATENCY_RANK));
else main();

function parse(argv) {
  const o = { ops: ['allreduce'], bytes: 64, ranks: 2, n: 200_000, how: HOWS, dist: join(root, 'dist'), json: '' };
  eachOption(argv, USAGE, (a, v) => {
    if (a === '--ops') o.ops = knownList(v(), OPS, 'collective');
    else if (a === '--bytes') o.bytes = bytesOf(v(), 'bytes');
    else if (a === '--ranks') o.ranks = Number(v());
    else if (a === '-n') o.n = Number(v());
    else if (a === '--how') o.how = knownList(v(), HOWS, 'way to wait');
    else if (a === '--dist') o.dist = resolve(v());
    else if (a === '--json') o.json = v();
    else return false;
    return true;
  });
  if (!(o.ranks >= 2) || !(o.n >= 100) || !(o.bytes >= 4))
    throw new Error(`--ranks ≥ 2, -n ≥ 100, --bytes ≥ 4\n${USAGE}`);
  return o;
}

function main() {
  const o = benchOptions('small-latency', parse, root);
  const rows = [];
  console.log(`# bench/small-latency: ${o.ranks} thread ranks, ${o.bytes} B, n ${o.n}, ${o.dist}`);
  console.log('#  collective    how   p10 us  median us  p90 us  mean us  >20us %time  #wrong');
  for (const op of o.ops) {
    for (const how of o.how) {
      const job = { op, how, bytes: o.bytes, n: o.n, dist: o.dist };
      const r = spawnSync(
        process.execPath,
        [join(o.dist, '..', 'bin', 'webccl.js'), 'run', '-n', String(o.ranks), here],
        {
          env: { ...process.env, SMALL_LATENCY_RANK: JSON.stringify(job) },
          encoding: 'utf8',
          timeout: 600_000,
        },
      );
      const lines = r.stdout.split('\n').filter((l) => l.startsWith('{'));
      if (r.status !== 0 || lines.length !== o.ranks) {
        console.error(`bench/small-latency: ${op} ${how} failed (exit ${r.status})\n${r.stderr}`);
        process.exit(1);
      }
      // Rank 0's spread; #wrong over every rank.
      const ranks = lines.map((l) => JSON.parse(l)).sort((a, b) => a.rank - b.rank);
      const row = {
        op,
        how,
        bytes: o.bytes,
        ranks: o.ranks,
        ...ranks[0],
        wrong: ranks.reduce((a, x) => a + x.wrong, 0),
      };
      delete row.rank;
      rows.push(row);
      const f = (x, w = 8) => x.toFixed(2).padStart(w);
      console.log(
        `${op.padStart(13)} ${how.padStart(6)} ${f(row.p10)} ${f(row.median, 10)} ${f(row.p90)} ${f(row.mean)} ${row.slowShare.toFixed(0).padStart(12)} ${String(row.wrong).padStart(7)}`,
      );
    }
  }
  const wrongs = rows.reduce((a, r) => a + r.wrong, 0);
  console.log(`# Wrong values: ${wrongs}${wrongs ? '' : ' OK'}`);
  if (o.json)
    writeFileSync(
      o.json,
      `${JSON.stringify({ bench: 'small-latency', node: process.version, dist: o.dist, rows }, null, 2)}\n`,
    );
  process.exitCode = wrongs ? 1 : 0;
}

/** One rank: the warm-up, then n calls each timed alone; prints its spread as one JSON line. */
async function rank({ op, how, bytes, n, dist }) {
  const ccl = await import(pathToFileURL(join(dist, 'node', 'index.js')).href);
  const comm = await ccl.initCommGroup();
  const size = comm.size;
  const count = Math.max(1, bytes >> 2);
  const x = new Float32Array(count);
  const out = new Float32Array(count * size);
  const fill = () => x.fill(comm.rank + 1);
  // Each call's result, and what it must be (every rank's input is rank + 1, refilled before each call).
  const calls = {
    allreduce: [() => comm.allReduce(x), () => x, (size * (size + 1)) / 2],
    broadcast: [() => comm.broadcast(x, { root: 0 }), () => x, 1],
    allgather: [() => comm.allGather(out, x), () => out, null],
    reduce: [() => comm.reduce(x, { root: 0 }), () => x, comm.rank === 0 ? (size * (size + 1)) / 2 : null],
  };
  const [call, result, expect] = calls[op];
  for (let i = 0; i < WARMUP; i++) {
    fill();
    call().waitSync();
  }
  comm.barrier().waitSync();
  const d = new Float64Array(n);
  let prev = performance.now();
  const t0 = prev;
  for (let i = 0; i < n; i++) {
    fill();
    if (how === 'sync') call().waitSync();
    else await call();
    const now = performance.now();
    d[i] = now - prev;
    prev = now;
  }
  const totalMs = performance.now() - t0;
  let wrong = 0;
  const r = result();
  for (let i = 0; i < r.length; i++) {
    const want = expect ?? (op === 'allgather' ? Math.floor(i / count) + 1 : r[i]);
    if (r[i] !== want) wrong++;
  }
  let slow = 0;
  for (const v of d) if (v > SLOW_MS) slow += v;
  d.sort();
  const us = (p) => d[Math.min(n - 1, Math.floor(p * n))] * 1000;
  console.log(
    JSON.stringify({
      rank: comm.rank,
      p10: us(0.1),
      median: us(0.5),
      p90: us(0.9),
      mean: (totalMs * 1000) / n,
      slowShare: (100 * slow) / totalMs,
      wrong,
    }),
  );
  await comm.destroy();
}
