#!/usr/bin/env node
// bench/p2p-steps: what each step of an 8-byte ping-pong costs in webccl's JavaScript, with both
// ranks of one node in this thread (no crossing between cores, no wait), in the order a
// ping-pong takes them: rank 0's send issued (rank 1's recv already posted), that send ending
// once rank 1 marked it taken, rank 0's recv issued with nothing there yet, rank 1's reply
// issued, and rank 0's recv waited for with the reply there. A message's way back starts only
// after both sides have gone through their steps, so these sum to most of the one-way latency
// bench/pingpong.mjs measures. ns per step, mean over -n rounds, less one pair of clock reads.
//
//   npm run build && node bench/p2p-steps.mjs [-n 200000]
import { Communicator, createNode, joinNode } from 'webccl';
import { flagOf } from './machine.mjs';

const args = process.argv.slice(2);
if (args.length % 2 || args.some((a, i) => i % 2 === 0 && a !== '-n'))
  throw new Error('usage: node bench/p2p-steps.mjs [-n 200000]');
const N = Number(flagOf(args, '-n', '200000'));
const node = createNode({ nranks: 2, slotBytes: 4096, progress: false });
const c = [0, 1].map((r) => new Communicator(joinNode(node, r, { cores: 2 }), { timeoutMs: 60_000 }));
const x = new Uint8Array(8),
  y = new Uint8Array(8);
const STEPS = [
  'send issued',
  'send ended (taken)',
  'recv issued (nothing yet)',
  'reply issued',
  'recv waited (reply there)',
];
const acc = new Float64Array(STEPS.length + 1);
const now = () => performance.now();

function round(record) {
  let t0 = now();
  const s = c[0].send(x, 1);
  let t1 = now();
  if (record) acc[0] += t1 - t0;
  c[1].recv(y, 0).waitSync(); // matched at issue
  t0 = now();
  s.waitSync();
  t1 = now();
  const r = c[0].recv(x, 1);
  let t2 = now();
  if (record) {
    acc[1] += t1 - t0;
    acc[2] += t2 - t1;
  }
  t0 = now();
  const reply = c[1].send(y, 0);
  t1 = now();
  r.waitSync();
  t2 = now();
  if (record) {
    acc[3] += t1 - t0;
    acc[4] += t2 - t1;
  }
  reply.waitSync();
  t0 = now();
  t1 = now();
  if (record) acc[5] += t1 - t0;
}

for (let i = 0; i < Math.min(N, 100000); i++) round(false); // warm-up: let the engine compile
for (let i = 0; i < N; i++) round(true);
console.log(`# bench/p2p-steps: ns per step of an 8-byte ping-pong, both ranks in one thread, mean of ${N} rounds`);
for (let k = 0; k < STEPS.length; k++)
  console.log(`${STEPS[k].padEnd(28)} ${(((acc[k] - acc[5]) / N) * 1e6).toFixed(0).padStart(6)}`);
console.log(`${'(one clock-read pair)'.padEnd(28)} ${((acc[5] / N) * 1e6).toFixed(0).padStart(6)}`);
c.forEach((k) => k.destroy());
