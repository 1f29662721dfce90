#!/usr/bin/env node
// bench/wake-floor: what this machine charges for the two things a progress thread cannot do
// without, in plain JavaScript with no webccl code — the floor under the default's figures that
// a thread costs (bench/op-parts.mjs, bench/progress-modes.mjs).
//
//   node bench/wake-floor.mjs [--part handoff,watchdog] [-n 2000] [--reps 3] [--bytes 64K]
//                             [--every 0.25,1] [--json FILE]
//
// handoff   A hand-off and back between the calling thread (blocked in Atomics.wait, as a rank
//           waiting for its thread's op) and a worker that sleeps until it is told: in
//           Atomics.wait (a thread with nothing else to do: the node's progress thread) or in
//           Atomics.waitAsync on its event loop (a thread that owns sockets: the network
//           progress thread). µs one way (half the round trip): p10, median, p90 of n trips,
//           each after a 100 µs pause, so the worker is asleep when told.
// watchdog  Two worker threads (two ranks) exchange --bytes each op and wait for each other as
//           webccl's ranks do (spin up to 20 µs, then Atomics.wait, woken by a peer that sees
//           its sleeping flag), beside a third that wakes every --every ms and reads a word (what
//           a progress thread does to find an op its rank left alone). µs per op, the median of
//           --reps blocks of n ops per period, the periods' blocks interleaved in one run
//           ("none": the third thread sleeps unwoken).
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { isMainThread, Worker, workerData } from 'node:worker_threads';
import { bytesOf, eachOption, knownList } from './machine.mjs';

const PARTS = ['handoff', 'watchdog'];
const USAGE =
  'usage: node bench/wake-floor.mjs [--part handoff,watchdog] [-n 2000] [--reps 3] [--bytes 64K] [--every 0.25,1] [--json FILE]';
const SPIN_MS = 0.02; // a rank's spin before it sleeps (WEBCCL_SPIN_US's default)
const PAUSE_MS = 0.1; // between hand-offs: the worker is asleep again when told
const GUARD_MS = 10_000; // no wait of a correct run comes near this
// Words of the shared block, each on a 64-byte line of its own.
const W = { TO: 0, BACK: 16, SEQ0: 32, SEQ1: 48, SLEEP0: 64, SLEEP1: 80, MODE: 96, LOOKS: 112, DATA: 128 };

if (!isMainThread) await workerMain(workerData);
else await main();

function parse(argv) {
  const o = { part: PARTS, n: 2000, reps: 3, bytes: 64 * 1024, every: [0.25, 1], json: '' };
  eachOption(argv, USAGE, (a, v) => {
    if (a === '--part') o.part = knownList(v(), PARTS, 'part');
    else if (a === '-n') o.n = Number(v());
    else if (a === '--reps') o.reps = Number(v());
    else if (a === '--bytes') o.bytes = bytesOf(v(), 'bytes');
    else if (a === '--every') o.every = v().split(',').map(Number);
    else if (a === '--json') o.json = v();
    else return false;
    return true;
  });
  if (!(o.n >= 1) || !(o.reps >= 1) || o.every.some((e) => !(e > 0))) throw new Error(USAGE);
  return o;
}

async function main() {
  const o = parse(process.argv.slice(2));
  console.log(
    `# bench/wake-floor on ${cpus()[0]?.model.trim()}, ${availableParallelism()} cores, Node ${process.version}`,
  );
  const out = { machine: { cores: availableParallelism(), node: process.version }, handoff: [], watchdog: [] };
  if (o.part.includes('handoff')) {
    console.log('#\n# handoff: µs one way, rank blocked in Atomics.wait; n', o.n);
    console.log('#  thread sleeps in          p10   median      p90');
    for (const how of ['wait', 'waitAsync']) {
      const us = await handoff(how, o.n);
      const [p10, med, p90] = [0.1, 0.5, 0.9].map((q) => us[Math.floor(q * (us.length - 1))]);
      console.log(
        `   ${how.padEnd(20)} ${p10.toFixed(1).padStart(8)} ${med.toFixed(1).padStart(8)} ${p90.toFixed(1).padStart(8)}`,
      );
      out.handoff.push({ how, p10, median: med, p90 });
    }
  }
  if (o.part.includes('watchdog')) {
    const periods = [0, ...o.every];
    console.log(
      `#\n# watchdog: 2 ranks exchange ${o.bytes} B an op; µs per op, median of ${o.reps} blocks of ${o.n} each`,
    );
    console.log('#  third thread wakes      µs/op   looks/s   ×none');
    const rows = await watchdog(o, periods);
    for (const r of rows) {
      const label = r.every ? `every ${r.every} ms` : 'none';
      console.log(
        `   ${label.padEnd(20)} ${r.us.toFixed(2).padStart(8)} ${String(r.looks).padStart(9)} ${(r.us / rows[0].us).toFixed(2).padStart(7)}`,
      );
      out.watchdog.push({ every: r.every, us: r.us, looksPerSec: r.looks, overNone: r.us / rows[0].us });
    }
  }
  if (o.json) writeFileSync(o.json, `${JSON.stringify(out, null, 2)}\n`);
}

function spawn(data) {
  return new Worker(fileURLToPath(import.meta.url), { workerData: data });
}

/** The worker's one message (its result), or its error. */
function ended(w) {
  return new Promise((res, rej) => {
    w.on('message', res);
    w.on('error', rej);
  });
}

/** n hand-offs to a worker sleeping `how`, and back; µs one way, sorted. */
async function handoff(how, n) {
  const sab = new SharedArrayBuffer(W.DATA * 4);
  const i32 = new Int32Array(sab);
  const w = spawn({ role: 'handoff', sab, how });
  const done = ended(w);
  const us = [];
  for (let k = 1; k <= n + 100; k++) {
    const until = performance.now() + PAUSE_MS;
    while (performance.now() < until);
    const t = performance.now();
    Atomics.store(i32, W.TO, k);
    Atomics.notify(i32, W.TO);
    while (Atomics.load(i32, W.BACK) !== k) {
      if (Atomics.wait(i32, W.BACK, k - 1, GUARD_MS) === 'timed-out') throw new Error('handoff: no answer');
    }
    if (k > 100) us.push(((performance.now() - t) * 1000) / 2);
  }
  Atomics.store(i32, W.TO, -1);
  Atomics.notify(i32, W.TO);
  await done;
  return us.sort((a, b) => a - b);
}

/**
 * Two ranks exchanging beside a watcher, the same three threads throughout: block k of each
 * rank runs with the watcher's period periods[k % periods.length] (0: it sleeps unwoken), so
 * every period sees the same placement of threads on cores. Per period: µs per op (the slower
 * rank's median block), and the watcher's looks per second in those blocks.
 */
async function watchdog(o, periods) {
  const sab = new SharedArrayBuffer((W.DATA + 4 * (o.bytes >> 2)) * 4);
  const i32 = new Int32Array(sab);
  const blocks = o.reps * periods.length;
  const watcher = spawn({ role: 'watch', sab, periods });
  const watched = ended(watcher);
  const ranks = [0, 1].map((me) => ended(spawn({ role: 'rank', sab, me, bytes: o.bytes, n: o.n, blocks, periods })));
  const [r0, r1] = await Promise.all(ranks);
  Atomics.store(i32, W.MODE, -1);
  Atomics.notify(i32, W.MODE);
  await watched;
  if (r0.error || r1.error) throw new Error(r0.error ?? r1.error);
  const median = (v) => v.sort((a, b) => a - b)[v.length >> 1];
  return periods.map((every, p) => {
    const mine = (r) => r.us.filter((_, k) => k % periods.length === p);
    const ms = r0.ms.filter((_, k) => k % periods.length === p).reduce((a, b) => a + b, 0);
    const looks = r0.looks.filter((_, k) => k % periods.length === p).reduce((a, b) => a + b, 0);
    return { every, us: Math.max(median(mine(r0)), median(mine(r1))), looks: Math.round((looks * 1000) / ms) };
  });
}

async function workerMain(d) {
  const { parentPort } = await import('node:worker_threads');
  const i32 = new Int32Array(d.sab);
  if (d.role === 'handoff') {
    // A pending waitAsync does not keep a worker alive (the network thread's sockets do): a timer that never fires.
    const alive = setInterval(() => {}, 1 << 30);
    for (let seen = 0; ; ) {
      if (d.how === 'wait') Atomics.wait(i32, W.TO, seen);
      else {
        const r = Atomics.waitAsync(i32, W.TO, seen);
        if (r.async) await r.value;
      }
      const k = Atomics.load(i32, W.TO);
      if (k < 0) break;
      if (k === seen) continue;
      seen = k;
      Atomics.store(i32, W.BACK, k);
      Atomics.notify(i32, W.BACK);
    }
    clearInterval(alive);
  } else if (d.role === 'watch') {
    // Wakes every period ms and reads a word, as a progress thread looks at its postboxes; with
    // period 0 it sleeps until the mode changes (-1: stop).
    for (let m = Atomics.load(i32, W.MODE); m >= 0; m = Atomics.load(i32, W.MODE)) {
      const every = d.periods[m];
      if (Atomics.wait(i32, W.MODE, m, every || Infinity) === 'timed-out') Atomics.add(i32, W.LOOKS, 1);
    }
  } else {
    try {
      parentPort.postMessage(rankLoop(i32, d));
    } catch (e) {
      parentPort.postMessage({ error: String(e) });
    }
    return;
  }
  parentPort.postMessage({});
}

/**
 * One rank: each op stamps one of its two blocks of --bytes (the one its peer read two ops ago:
 * a peer posts op k only after it read op k-1), posts its number, waits for the peer's (spin,
 * then sleep) and copies the peer's block out, as an allGather of alloc() buffers does. Per
 * block: µs per op, its ms, and the watcher's looks meanwhile.
 */
function rankLoop(i32, d) {
  const { me, bytes, n, blocks, periods } = d;
  const peer = 1 - me;
  const f32 = new Float32Array(i32.buffer);
  const q = bytes >> 2;
  const block = (r, k) => f32.subarray(W.DATA + (2 * r + (k & 1)) * q, W.DATA + (2 * r + (k & 1) + 1) * q);
  const out = new Float32Array(q);
  const seqAt = [W.SEQ0, W.SEQ1];
  const sleepAt = [W.SLEEP0, W.SLEEP1];
  let seq = 0;
  const op = () => {
    seq++;
    block(me, seq)[0] = seq; // (the rest of the block stays: a rank's data lies in place, as in an alloc() buffer)
    Atomics.store(i32, seqAt[me], seq);
    if (Atomics.load(i32, sleepAt[peer]) === seq) Atomics.notify(i32, seqAt[me]);
    if (Atomics.load(i32, seqAt[peer]) < seq) {
      const until = performance.now() + SPIN_MS;
      while (Atomics.load(i32, seqAt[peer]) < seq && performance.now() < until);
      if (Atomics.load(i32, seqAt[peer]) < seq) Atomics.store(i32, sleepAt[me], seq);
      for (let v = Atomics.load(i32, seqAt[peer]); v < seq; v = Atomics.load(i32, seqAt[peer]))
        if (Atomics.wait(i32, seqAt[peer], v, GUARD_MS) === 'timed-out') throw new Error('rank: no peer');
    }
    out.set(block(peer, seq));
    if (out[0] !== seq) throw new Error(`rank ${me}: op ${seq} read block of op ${out[0]}`);
  };
  for (let k = 0; k < 2000; k++) op();
  const us = [];
  const ms = [];
  const looks = [];
  for (let b = 0; b < blocks; b++) {
    if (me === 0) {
      Atomics.store(i32, W.MODE, b % periods.length);
      Atomics.notify(i32, W.MODE);
    }
    const l0 = Atomics.load(i32, W.LOOKS);
    const t = performance.now();
    for (let k = 0; k < n; k++) op();
    ms.push(performance.now() - t);
    us.push((ms[b] * 1000) / n);
    looks.push(Atomics.load(i32, W.LOOKS) - l0);
  }
  return { us, ms, looks };
}
