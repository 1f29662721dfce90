#!/usr/bin/env node
// bench/small-floor: the least time each small collective takes between N worker threads of one
// process in plain JavaScript on this machine: the floor under any JS library's small-message
// figures (webccl's `webccl perf`, bench/compare.mjs), to read them and Open MPI's
// (bench/mpi/coll_bench.c) against.
//
//   node bench/small-floor.mjs [--threads 2] [--sizes 8,64] [--ops allreduce,...] [-n 20000]
//                              [--reps 3] [--slots 8] [--json FILE]
//
// Each collective is written over one SharedArrayBuffer with coll_bench's semantics (float32,
// sum, out-of-place, root 0, its sizes and block shapes) and its loop: each thread calls the op
// back to back, and a rank returns as soon as its own result is complete (a broadcast's root once
// it has posted, a reduce's non-root once it has posted), so ops pipeline as far as that allows.
// Every rank writes into its own ring of slots (a sequence word, then the data, on lines of their
// own); per reader a "consumed up to" word lets the writer reuse a slot only once every reader of
// its ring has read it. Every result is checked against values that differ by rank, block and
// iteration (a stale slot, a wrong block or a lost element counts): #wrong, the elements wrong
// over every op of both columns; a hang guard ends a run that waits more than GUARD_MS.
//
// Columns (µs per op: the median of --reps blocks, each the mean of n ops after a barrier, after
// 20,000 ops of warm-up; rank 0's, and the slowest rank's in parentheses; pingpong: half a round
// trip, as coll_bench and pingpong.c report it):
//   js spin        a waiting rank spins on Atomics.load (as Open MPI's vader polls)
//   js spin+wait   spins ~1 µs, then Atomics.wait; a writer calls Atomics.notify only when the
//                  rank it serves has raised its sleeping flag
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { benchOptions, bytesOf, eachOption, knownList, waitQuiet } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const OPS = 'allreduce allgather reducescatter broadcast reduce alltoall gather scatter sendrecv pingpong'.split(' ');
const USAGE =
  'usage: node bench/small-floor.mjs [--threads 2] [--sizes 8,64] [--ops allreduce,...] [-n 20000] [--reps 3] [--slots 8] [--json FILE]';
const WARMUP = 20_000;
const GUARD_MS = 5000; // no wait of a correct run comes near this, even 4 spinning threads on 2 cores
const LINE = 16; // words per 64-byte cache line

/** coll_bench's shape_of: elements per rank block (count), send and receive lengths, bytes; msg: a post's length. */
function shapeOf(op, size, t) {
  const elems = Math.max(1, Math.floor(size / 4));
  const per = Math.max(1, Math.floor(elems / t));
  const s = (count, send, recv, msg) => ({ bytes: per * t * 4, count, send, recv, msg });
  if (op === 'allgather' || op === 'gather') return s(per, per, per * t, per);
  if (op === 'reducescatter' || op === 'scatter') return s(per, per * t, per, per * t);
  if (op === 'alltoall') return s(per, per * t, per * t, per * t);
  return { bytes: elems * 4, count: elems, send: elems, recv: elems, msg: elems };
}

if (!isMainThread) rankThread();
else await main();

/** One rank: the warm-up, then `reps` blocks of n timed ops after a barrier each; posts {us, wrong} or {error}. */
function rankThread() {
  const { sab, me, t, op, size, n, warmup, reps, slots, sleepy } = workerData;
  const i32 = new Int32Array(sab);
  const f32 = new Float32Array(sab);
  const { count: c, send, recv, msg } = shapeOf(op, size, t);
  // Layout, in words: barrier counter and generation, abort, a sleeping flag per rank, a consumed
  // word per (writer, reader), then a ring per writer; each word on its own line.
  const [ARRIVED, GENERATION, ABORT, SLEEP] = [0, LINE, 2 * LINE, 3 * LINE];
  const CONSUMED = SLEEP + t * LINE;
  const SW = Math.ceil((1 + msg) / LINE) * LINE; // a slot: its sequence word, then its data
  const RING = CONSUMED + t * t * LINE;
  const MASK = slots - 1;
  const ringOf = (w) => RING + w * slots * SW;
  const consumedOf = (w, r) => CONSUMED + (w * t + r) * LINE;
  let it = 0;

  // Who reads each writer's ring: the writer may reuse a slot once all of these have consumed it.
  const all = Array.from({ length: t }, (_, r) => r);
  const others = (w) => all.filter((r) => r !== w);
  const readersOf = (w) => {
    if (op === 'broadcast' || op === 'scatter') return w === 0 ? others(0) : [];
    if (op === 'reduce' || op === 'gather') return w === 0 ? [] : [0];
    if (op === 'sendrecv' || op === 'pingpong') return [(w + 1) % t];
    return others(w);
  };
  const readers = readersOf(me);
  const peers = others(me);

  const fail = (what) => {
    Atomics.store(i32, ABORT, 1);
    throw new Error(`rank ${me} gave up waiting for ${what} at op ${it}`);
  };
  const mask = sleepy ? 15 : 1023; // how many looks between two clock reads
  /** Waits until word `idx` >= target: spinning, or spinning ~1 µs then sleeping; gives up after GUARD_MS. */
  const waitFor = (idx, target, what) => {
    let t0 = 0; // read the clock only once the first looks failed: a read costs ~70 ns
    for (let k = 1; Atomics.load(i32, idx) < target; k++) {
      if ((k & mask) !== 0) continue;
      const now = performance.now();
      if (t0 === 0) t0 = now;
      if (now - t0 > GUARD_MS || Atomics.load(i32, ABORT) !== 0) fail(what);
      if (sleepy && now - t0 > 0.001) {
        // The flag goes up before the last look, so a writer that stores after it sees the flag.
        Atomics.store(i32, SLEEP + me * LINE, 1);
        const v = Atomics.load(i32, idx);
        if (v < target) Atomics.wait(i32, idx, v, 100);
        Atomics.store(i32, SLEEP + me * LINE, 0);
      }
    }
  };
  const wake = (idx, r) => {
    if (Atomics.load(i32, SLEEP + r * LINE) !== 0) Atomics.notify(i32, idx);
  };

  let free = 0; // every reader of my ring has consumed up to this message (a lower bound)
  /** Posts x[off, off+len) as message m of my ring, once its slot's message m - slots is read. */
  const post = (x, off, len, m) => {
    if (m - slots > free) {
      let least = m;
      for (let j = 0; j < readers.length; j++) {
        const idx = consumedOf(me, readers[j]);
        if (Atomics.load(i32, idx) < m - slots) waitFor(idx, m - slots, `a free slot (reader ${readers[j]})`);
        least = Math.min(least, Atomics.load(i32, idx));
      }
      free = least;
    }
    const s = ringOf(me) + ((m - 1) & MASK) * SW;
    for (let k = 0; k < len; k++) f32[s + 1 + k] = x[off + k];
    Atomics.store(i32, s, m);
    if (sleepy) for (let j = 0; j < readers.length; j++) wake(s, readers[j]);
  };
  /** Where message m of w's ring has its data, once it is there. */
  const take = (w, m) => {
    const s = ringOf(w) + ((m - 1) & MASK) * SW;
    // >= and not ===: a slot overwritten too early shows as wrong data, not as a hang.
    if (Atomics.load(i32, s) < m) waitFor(s, m, `message ${m} of rank ${w}`);
    return s + 1;
  };
  /** Tells w that its message m is read (its slot may be reused). */
  const done = (w, m) => {
    const idx = consumedOf(w, me);
    Atomics.store(i32, idx, m);
    if (sleepy) wake(idx, w);
  };

  const out = new Float32Array(recv);
  const OPS_JS = {
    allreduce(x, m) {
      post(x, 0, c, m);
      for (let k = 0; k < c; k++) out[k] = x[k];
      for (let j = 0; j < peers.length; j++) {
        const s = take(peers[j], m);
        for (let k = 0; k < c; k++) out[k] += f32[s + k];
        done(peers[j], m);
      }
    },
    allgather(x, m) {
      post(x, 0, c, m);
      for (let k = 0; k < c; k++) out[me * c + k] = x[k];
      for (let j = 0; j < peers.length; j++) {
        const s = take(peers[j], m);
        for (let k = 0; k < c; k++) out[peers[j] * c + k] = f32[s + k];
        done(peers[j], m);
      }
    },
    reducescatter(x, m) {
      post(x, 0, c * t, m);
      for (let k = 0; k < c; k++) out[k] = x[me * c + k];
      for (let j = 0; j < peers.length; j++) {
        const s = take(peers[j], m) + me * c;
        for (let k = 0; k < c; k++) out[k] += f32[s + k];
        done(peers[j], m);
      }
    },
    broadcast(x, m) {
      if (me === 0) {
        post(x, 0, c, m);
        for (let k = 0; k < c; k++) out[k] = x[k];
        return;
      }
      const s = take(0, m);
      for (let k = 0; k < c; k++) out[k] = f32[s + k];
      done(0, m);
    },
    reduce(x, m) {
      if (me !== 0) return post(x, 0, c, m);
      for (let k = 0; k < c; k++) out[k] = x[k];
      for (let w = 1; w < t; w++) {
        const s = take(w, m);
        for (let k = 0; k < c; k++) out[k] += f32[s + k];
        done(w, m);
      }
    },
    alltoall(x, m) {
      post(x, 0, c * t, m);
      for (let k = 0; k < c; k++) out[me * c + k] = x[me * c + k];
      for (let j = 0; j < peers.length; j++) {
        const s = take(peers[j], m) + me * c;
        for (let k = 0; k < c; k++) out[peers[j] * c + k] = f32[s + k];
        done(peers[j], m);
      }
    },
    gather(x, m) {
      if (me !== 0) return post(x, 0, c, m);
      for (let k = 0; k < c; k++) out[k] = x[k];
      for (let w = 1; w < t; w++) {
        const s = take(w, m);
        for (let k = 0; k < c; k++) out[w * c + k] = f32[s + k];
        done(w, m);
      }
    },
    scatter(x, m) {
      if (me === 0) {
        post(x, 0, c * t, m);
        for (let k = 0; k < c; k++) out[k] = x[k];
        return;
      }
      const s = take(0, m) + me * c;
      for (let k = 0; k < c; k++) out[k] = f32[s + k];
      done(0, m);
    },
    sendrecv(x, m) {
      post(x, 0, c, m);
      const from = (me + t - 1) % t;
      const s = take(from, m);
      for (let k = 0; k < c; k++) out[k] = f32[s + k];
      done(from, m);
    },
    pingpong(x, m) {
      if (me === 0) post(x, 0, c, m);
      const s = take(1 - me, m);
      for (let k = 0; k < c; k++) out[k] = f32[s + k];
      done(1 - me, m);
      if (me === 1) post(x, 0, c, m);
    },
  };
  const run = OPS_JS[op];

  // Inputs and expected results of 32 iterations in turn, made before: no op pays for them.
  // Element k of the block from src to dst at iteration i; every sum of up to 8 is below 2^24,
  // so exact in float32. A slot at most `slots` (< 32) ops stale differs.
  const val = (src, dst, i, k) => ((((i & 31) * 8 + src) * 8 + dst) << 10) + k;
  // A block op's send buffer holds blocks of c for given ranks; another op's, one vector.
  const dstOf = (src, j) => ({ alltoall: j, scatter: j, gather: 0, sendrecv: (src + 1) % t, pingpong: 1 - src })[op];
  const input = (src, i, e) => {
    const dst = dstOf(src, Math.floor(e / c));
    return dst === undefined ? val(src, 0, i, e) : val(src, dst, i, e % c);
  };
  const sum = (i, e) => all.reduce((a, r) => a + input(r, i, e), 0);
  const want = (i, e) => {
    const j = Math.floor(e / c);
    if (op === 'allreduce' || op === 'reduce') return sum(i, e);
    if (op === 'reducescatter') return sum(i, me * c + e);
    if (op === 'broadcast') return input(0, i, e);
    if (op === 'allgather' || op === 'gather') return input(j, i, e % c);
    if (op === 'alltoall') return input(j, i, me * c + (e % c));
    if (op === 'scatter') return input(0, i, me * c + e);
    if (op === 'sendrecv') return input((me + t - 1) % t, i, e);
    return input(1 - me, i, e);
  };
  const table = (len, f) => Array.from({ length: 32 }, (_, i) => Float32Array.from({ length: len }, (_, e) => f(i, e)));
  const inputs = table(send, (i, e) => input(me, i, e));
  const hasResult = !((op === 'reduce' || op === 'gather') && me !== 0);
  const wants = table(hasResult ? recv : 0, want);

  let wrong = 0;
  // The check is timed with the op, as a caller that reads its result would be: a few ns.
  const ops = (from, to) => {
    for (it = from; it < to; it++) {
      run(inputs[it & 31], it + 1);
      const w = wants[it & 31];
      for (let k = 0; k < w.length; k++) if (out[k] !== w[k]) wrong++;
    }
  };
  const barrier = () => {
    const g = Atomics.load(i32, GENERATION);
    if (Atomics.add(i32, ARRIVED, 1) === t - 1) {
      Atomics.store(i32, ARRIVED, 0);
      Atomics.add(i32, GENERATION, 1);
      Atomics.notify(i32, GENERATION);
    } else waitFor(GENERATION, g + 1, 'the barrier');
  };
  try {
    // In calls of 500 ops: the timed call then enters compiled code; after one long warm-up loop
    // (compiled on the stack only) the first timed ops ran slow for milliseconds.
    for (let b = 0; b < warmup; b += 500) ops(b, Math.min(warmup, b + 500));
    const blocks = [];
    for (let r = 0, from = warmup; r < reps; r++, from += n) {
      // No rank starts its clock with the others' warm-up or last block left to wait for.
      barrier();
      const t0 = performance.now();
      ops(from, from + n);
      blocks.push(((performance.now() - t0) * 1000) / n / (op === 'pingpong' ? 2 : 1));
    }
    parentPort.postMessage({ us: blocks.sort((a, b) => a - b)[reps >> 1], wrong });
  } catch (e) {
    parentPort.postMessage({ error: e.message, wrong });
  }
}

/** Runs one op among t threads: rank 0's µs, the slowest rank's, #wrong; error when a guard fired. */
function floor(op, size, t, run) {
  const words = (3 + t + t * t) * LINE + t * run.slots * Math.ceil((1 + shapeOf(op, size, t).msg) / LINE) * LINE;
  const sab = new SharedArrayBuffer(words * 4);
  return new Promise((resolve) => {
    const got = [];
    const workers = [];
    const finish = (res) => {
      clearTimeout(timer);
      for (const w of workers) w.terminate();
      resolve(res);
    };
    // Past the ranks' own guards: what no wait bounds (a loop of the bench's own) ends here.
    const timer = setTimeout(() => finish({ error: 'no answer in 10 min', wrong: 0 }), 600_000);
    for (let me = 0; me < t; me++) {
      const w = new Worker(fileURLToPath(import.meta.url), { workerData: { sab, me, t, op, size, ...run } });
      workers.push(w);
      w.on('error', (e) => finish({ error: e.message, wrong: 0 }));
      w.on('message', (r) => {
        got[me] = r;
        if (got.filter(Boolean).length < t) return;
        const error = got.find((g) => g.error)?.error;
        const wrong = got.reduce((a, g) => a + g.wrong, 0);
        finish(error ? { error, wrong } : { us: got[0].us, usMax: Math.max(...got.map((g) => g.us)), wrong, n: run.n });
      });
    }
  });
}

function parseArgs(argv) {
  const o = { threads: [2], sizes: [8, 64], ops: OPS, n: 20_000, reps: 3, slots: 8, json: undefined };
  eachOption(argv, USAGE, (a, v) => {
    if (a === '--threads') o.threads = v().split(',').map(Number);
    else if (a === '--sizes')
      o.sizes = v()
        .split(',')
        .map((s) => bytesOf(s));
    else if (a === '--ops') o.ops = knownList(v(), OPS, 'collective');
    else if (a === '-n') o.n = Number(v());
    else if (a === '--slots') o.slots = Number(v());
    else if (a === '--reps') o.reps = Number(v());
    else if (a === '--json') o.json = v();
    else return false;
    return true;
  });
  // Up to 8 threads and 4 KiB keep every value and sum exact in float32 (see `val`).
  if (!o.threads.every((t) => Number.isInteger(t) && t >= 2 && t <= 8)) throw new Error(`threads: 2 to 8\n${USAGE}`);
  if (!o.sizes.every((s) => s >= 1 && s <= 4096)) throw new Error(`sizes: 1 to 4096 bytes\n${USAGE}`);
  if (![2, 4, 8, 16].includes(o.slots)) throw new Error(`slots: 2, 4, 8 or 16\n${USAGE}`);
  if (!(Number.isInteger(o.n) && o.n >= 1 && Number.isInteger(o.reps) && o.reps >= 1))
    throw new Error(`bad -n or --reps\n${USAGE}`);
  return o;
}

async function main() {
  const o = benchOptions('small-floor', parseArgs, root);
  const cores = availableParallelism();
  console.log(
    `# bench/small-floor on ${cpus()[0]?.model ?? 'unknown CPU'}, ${cores} cores, Node ${process.version}; µs per op, the median of ${o.reps} means of ${o.n} after ${WARMUP} warm-up ops, ${o.slots} slots a ring`,
  );
  const rows = [];
  const f = (x) => x.toFixed(x < 10 ? 2 : x < 100 ? 1 : 0);
  const us = (r) => (r.error ? 'hang' : `${f(r.us)} (${f(r.usMax)})`).padStart(15);
  const { n, reps, slots } = o;
  for (const t of o.threads) {
    // Spinning threads beyond the cores wait whole time slices (ms): far fewer ops keep it short.
    const over = t > cores;
    const spinRun = { n: over ? Math.max(50, Math.floor(n / 100)) : n, warmup: over ? 100 : WARMUP, reps, slots };
    const note = over ? `; more threads than cores: js spin ${spinRun.n} ops after 100, js spin+wait after 2000` : '';
    console.log(`# ${t} threads; µs: rank 0's (the slowest rank's)${note}`);
    console.log('# collective    bytes      js spin µs  js spin+wait µs  #wrong  %busy');
    for (const op of o.ops) {
      if (op === 'pingpong' && t !== 2) continue; // coll_bench's pingpong is 2 ranks only
      for (const size of o.sizes) {
        // A spinner that shares its core with another process waits a time slice per op.
        const busy = waitQuiet(30);
        const spin = await floor(op, size, t, spinRun);
        const wait = await floor(op, size, t, { n, warmup: over ? 2000 : WARMUP, reps, slots, sleepy: true });
        const { bytes, count } = shapeOf(op, size, t);
        rows.push({ threads: t, op, bytes, count, busyBefore: busy, spin, wait });
        for (const r of [spin, wait]) if (r.error) console.log(`# ${op} ${bytes} B: ${r.error}`);
        const wrong = String(spin.wrong + wait.wrong).padStart(7);
        console.log(
          `  ${op.padEnd(13)} ${String(bytes).padStart(5)} ${us(spin)}  ${us(wait)} ${wrong} ${String(busy ?? '?').padStart(6)}`,
        );
      }
    }
  }
  const machine = cpus()[0]?.model;
  if (o.json)
    writeFileSync(o.json, JSON.stringify({ machine, cores, node: process.version, n, reps, slots, rows }, null, 2));
}
