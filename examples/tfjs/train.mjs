// One rank of the data-parallel TF.js training (training.js has the model and the loop):
//
//   webccl run -n 2 train.mjs                     2 thread ranks, tf.train.adam
//   webccl run --procs -n 2 train.mjs             2 processes
//   node nodes.mjs                                2 nodes × 2 threads (two webccl run --nnodes 2)
//   webccl run -n 4 train.mjs                     4 thread ranks
//   webccl run -n 2 train.mjs --accumulate 4      4 micro-batches a step on each rank
//   webccl run -n 2 train.mjs --zero adam         ZeRO-1: createShardedOptimizer (adam or sgd)
//   webccl run -n 2 train.mjs --wire bf16         gradients in bf16 on the wire (or f16)
//
// Rank 0 prints the global batch's loss after each step, then trains the same model alone on
// the same global batches and prints how far the weights end apart.
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import * as ccl from 'webccl';
import { STEPS, train } from './training.js';

const { values: o } = parseArgs({
  options: {
    accumulate: { type: 'string', default: '1' },
    zero: { type: 'string' },
    wire: { type: 'string', default: 'f32' },
  },
});
const accumulate = Number(o.accumulate);
if (!Number.isInteger(accumulate) || accumulate < 1) throw new Error(`--accumulate needs a count, got ${o.accumulate}`);
if (o.zero !== undefined && !['adam', 'sgd'].includes(o.zero)) throw new Error(`--zero adam or sgd, got ${o.zero}`);
if (!['f32', 'bf16', 'f16'].includes(o.wire)) throw new Error(`--wire f32, bf16 or f16, got ${o.wire}`);

tf.enableProdMode(); // no advice to install tfjs-node from every rank
await tf.setBackend('cpu');
const comm = await ccl.initCommGroup();
const what = o.zero
  ? `ZeRO-1 (createShardedOptimizer, ${o.zero === 'adam' ? 'adam' : 'sgd with momentum'})`
  : `tfjsDataParallel, tf.train.adam${accumulate > 1 ? `, ${accumulate} micro-batches a step` : ''}${o.wire !== 'f32' ? `, ${o.wire} on the wire` : ''}`;
if (comm.rank === 0)
  console.log(
    `${comm.size} ranks, ${what}, TF.js ${tf.version.tfjs} on the ${tf.getBackend()} backend, ${STEPS} steps`,
  );

const r = await train({
  tf,
  ccl,
  comm,
  accumulate,
  zero: o.zero,
  wire: o.wire,
  onStep: (s, loss) => comm.rank === 0 && console.log(`step ${String(s).padStart(2)}  loss ${loss.toFixed(6)}`),
});
if (comm.rank === 0) {
  for (const line of r.lines) console.log(line);
  console.log(`ranks agree: max |Δ| between ranks' weights: ${r.spread}`);
  console.log(`max |Δ| vs single-process: ${r.delta.toExponential(2)}`);
}
