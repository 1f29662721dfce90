#!/usr/bin/env node
// bench/p2p-floor: the least time an 8-byte send/recv ping-pong between two worker threads can
// take in JavaScript on this machine, at three depths, so that webccl's figure
// (bench/pingpong.mjs) reads against what the language itself costs:
//
//   word     the two threads bounce one shared word (no payload, no record): the crossing alone
//   records  a send publishes a record in a ring of 256 (number, tag, size, 8 inline bytes, then
//            its state), the receiver copies the bytes out and marks it taken, and the send ends
//            once its sender has read that: webccl's shared-memory protocol, without the library
//   handles  the same, each op also a handle object stamped with its issue and completion time
//            (two clock reads an op), each buffer looked up in a WeakMap: the least an op that
//            returns a Work with timing does
//
// Prints one-way µs (round trip / 2), the median of --reps blocks of -n round trips, per depth.
// Then the CPU an 8-byte message costs (its send and its recv, issued and completed) with both
// ranks in one thread, so that no crossing or wait is counted: webccl (two ranks of one node,
// built package), beside the `handles` depth's own send and recv.
//
//   node bench/p2p-floor.mjs [-n 200000] [--reps 5]
import { Worker } from 'node:worker_threads';
import { Communicator, createNode, joinNode } from 'webccl';
import { flagOf } from './machine.mjs';

const USAGE = 'usage: node bench/p2p-floor.mjs [-n 200000] [--reps 5]';
const args = process.argv.slice(2);
const unknown = args.filter((a, i) => i % 2 === 0 && !['-n', '--reps'].includes(a));
if (unknown.length || args.length % 2) throw new Error(`unknown arguments ${unknown.join(' ')}; ${USAGE}`);
const iters = Number(flagOf(args, '-n', '200000'));
const reps = Number(flagOf(args, '--reps', '5'));
if (!(iters >= 1000 && reps >= 1)) throw new Error(USAGE);

const worker = `
const { workerData: { sab, me, depth, iters, reps }, parentPort } = require('node:worker_threads');
const i32 = new Int32Array(sab), u8 = new Uint8Array(sab);
const peer = 1 - me;
const BARRIER = 0, WORD = 16;
const RING = 4096, SLOTS = 256, SLOT = 64; // per sender: a ring of 256 records of 64 bytes
const FREE = 0, POSTED = 1, TAKEN = 2;
const ringOf = (sender) => RING + sender * SLOTS * SLOT;
const buf = new Uint8Array(8);
const records = new WeakMap([[buf, { bytes: buf, count: 8 }]]);
const handles = depth === 'handles';
class Work {
  constructor(name, seq) {
    this.name = name;
    this.seq = seq;
    this.timing = { issuedAt: NaN, startedAt: NaN, completedAt: NaN };
    this.done = false;
    this.at = 0;
  }
}
let seq = 0, sent = 0, taken = 0;

function send(x) {
  const b = handles ? records.get(x) : undefined;
  const bytes = handles ? b.bytes : x;
  const num = sent++;
  const rec = ringOf(me) + (num % SLOTS) * SLOT;
  const w = rec >> 2;
  while (Atomics.load(i32, w) !== FREE); // the slot's last record was read back (never waits here)
  i32[w + 1] = num;
  i32[w + 2] = 0; // tag
  i32[w + 3] = 8; // size
  for (let i = 0; i < 8; i++) u8[rec + 32 + i] = bytes[i];
  Atomics.store(i32, w, POSTED);
  if (!handles) return w;
  const op = new Work('send', seq++);
  op.timing.issuedAt = op.timing.startedAt = performance.now();
  op.at = w;
  return op;
}

function waitSend(op) {
  const w = handles ? op.at : op;
  while (Atomics.load(i32, w) !== TAKEN);
  Atomics.store(i32, w, FREE);
  if (handles) {
    op.timing.completedAt = performance.now();
    op.done = true;
  }
}

function recv(x) {
  if (!handles) return x;
  const op = new Work('recv', seq++);
  op.timing.issuedAt = op.timing.startedAt = performance.now();
  op.buf = records.get(x);
  return op;
}

function waitRecv(op) {
  const bytes = handles ? op.buf.bytes : op;
  const num = taken;
  const rec = ringOf(peer) + (num % SLOTS) * SLOT;
  const w = rec >> 2;
  while (!(Atomics.load(i32, w) === POSTED && i32[w + 1] === num));
  for (let i = 0; i < 8; i++) bytes[i] = u8[rec + 32 + i];
  Atomics.store(i32, w, TAKEN);
  taken++;
  if (handles) {
    op.timing.completedAt = performance.now();
    op.done = true;
  }
}

function roundTrips(n) {
  if (depth === 'word') {
    for (let k = 0; k < n; k++) {
      const v = seq++;
      if (me === 0) {
        Atomics.store(i32, WORD, 2 * v + 1);
        while (Atomics.load(i32, WORD) !== 2 * v + 2);
      } else {
        while (Atomics.load(i32, WORD) !== 2 * v + 1);
        Atomics.store(i32, WORD, 2 * v + 2);
      }
    }
    return;
  }
  for (let k = 0; k < n; k++) {
    if (me === 0) {
      waitSend(send(buf));
      waitRecv(recv(buf));
    } else {
      waitRecv(recv(buf));
      waitSend(send(buf));
    }
  }
}

let gen = 0;
function barrier() {
  const g = ++gen;
  Atomics.add(i32, BARRIER, 1);
  while (Atomics.load(i32, BARRIER) < 2 * g);
}

roundTrips(Math.min(iters, 20000)); // warm-up: let the engine compile the loop
const us = [];
for (let r = 0; r < reps; r++) {
  barrier();
  const t0 = performance.now();
  roundTrips(iters);
  us.push(((performance.now() - t0) * 1000) / iters / 2);
}
parentPort.postMessage(us);
`;

async function sitting(depth) {
  const sab = new SharedArrayBuffer(4096 + 2 * 256 * 64);
  const ws = [0, 1].map((me) => new Worker(worker, { eval: true, workerData: { sab, me, depth, iters, reps } }));
  const [us] = await Promise.all(ws.map((w) => new Promise((ok, fail) => w.once('message', ok).once('error', fail))));
  const sorted = [...us].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

console.log(
  `# bench/p2p-floor: 8-byte ping-pong between 2 worker threads, no library; one-way us (round trip / 2), median of ${reps} x ${iters} round trips`,
);
console.log('# depth     one-way(us)');
for (const depth of ['word', 'records', 'handles'])
  console.log(`${depth.padEnd(10)} ${(await sitting(depth)).toFixed(3).padStart(11)}`);

/** µs of CPU per message: `step(i)` sends from rank i & 1 to the other and completes both ops. */
function cpuPerMessage(step) {
  for (let i = 0; i < 100000; i++) step(i);
  const us = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    for (let i = 0; i < iters; i++) step(i);
    us.push(((performance.now() - t0) * 1000) / iters);
  }
  return us.sort((a, b) => a - b)[Math.floor(reps / 2)];
}

function webcclStep() {
  const node = createNode({ nranks: 2, slotBytes: 4096, progress: false });
  const comms = [0, 1].map((r) => new Communicator(joinNode(node, r, { cores: 2 }), { timeoutMs: 60_000 }));
  const bufs = [new Uint8Array(8), new Uint8Array(8)];
  return (i) => {
    const a = i & 1,
      z = a ^ 1;
    const s = comms[a].send(bufs[a], z);
    const r = comms[z].recv(bufs[z], a);
    if (!r.isCompleted() || !s.isCompleted()) throw new Error('an op of a one-thread ping-pong did not complete');
  };
}

/**
 * The `handles` depth's send and recv, both ranks in this thread (a slot of each ring is free again once its record was
 * read back).
 */
function handlesStep() {
  const i32 = new Int32Array(new SharedArrayBuffer(2 * 256 * 64)),
    u8 = new Uint8Array(i32.buffer);
  const bufs = [new Uint8Array(8), new Uint8Array(8)];
  const records = new WeakMap(bufs.map((b) => [b, { bytes: b, count: 8 }]));
  const sent = [0, 0],
    taken = [0, 0];
  const timed = () => ({ issuedAt: performance.now(), completedAt: NaN });
  return (i) => {
    const a = i & 1,
      z = a ^ 1;
    const from = records.get(bufs[a]).bytes,
      into = records.get(bufs[z]).bytes;
    const send = timed(),
      num = sent[a]++,
      rec = (a * 256 + (num % 256)) * 64,
      w = rec >> 2;
    i32[w + 1] = num;
    for (let k = 0; k < 8; k++) u8[rec + 32 + k] = from[k];
    Atomics.store(i32, w, 1);
    const recv = timed();
    if (!(Atomics.load(i32, w) === 1 && i32[w + 1] === taken[z]++)) throw new Error('record');
    for (let k = 0; k < 8; k++) into[k] = u8[rec + 32 + k];
    Atomics.store(i32, w, 2);
    recv.completedAt = performance.now();
    if (Atomics.load(i32, w) !== 2) throw new Error('taken');
    Atomics.store(i32, w, 0);
    send.completedAt = performance.now();
  };
}

console.log('#\n# one thread, both ranks: CPU per 8-byte message (send and recv issued and completed), median us');
console.log(`webccl     ${cpuPerMessage(webcclStep()).toFixed(3).padStart(11)}`);
console.log(`handles    ${cpuPerMessage(handlesStep()).toFixed(3).padStart(11)}`);
