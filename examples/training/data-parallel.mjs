// Data-parallel training of a small MLP written in plain JS, on every rank of the job:
//
//   node bin/webccl.js run -n 2 examples/training/data-parallel.mjs          (threads)
//   node bin/webccl.js run --procs -n 2 examples/training/data-parallel.mjs  (processes)
//
// Each step draws one global batch of 32 samples (the same on every rank, from a seeded
// generator); each rank computes the gradient of its share, hands the gradients in as a
// backward pass produces them (last layer first: each bucket's allReduce starts at once), and
// applies SGD to the averaged gradient. Rank 0 then runs the same steps alone on the whole batch
// and prints how far the two end apart: the data-parallel run is the single-process run.
import * as ccl from 'webccl';

const IN = 8;
const HID = 16;
const OUT = 4;
const BATCH = 32;
const STEPS = 10;
const LR = 0.1;

/** A seeded generator of floats in [0, 1) (mulberry32). */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The parameters, forward order: W1, b1, W2, b2. */
function initParams() {
  const r = rng(7);
  return [IN * HID, HID, HID * OUT, OUT].map((n) => Float32Array.from({ length: n }, () => (r() - 0.5) * 0.5));
}

/** Step `s`'s global batch: inputs x and targets t = a fixed nonlinear function of x. */
function batchOf(s) {
  const r = rng(1000 + s);
  return Array.from({ length: BATCH }, () => {
    const x = Float64Array.from({ length: IN }, () => r() * 2 - 1);
    const t = Float64Array.from({ length: OUT }, (_, k) => Math.sin(x[k] + x[k + OUT]) * 0.5);
    return { x, t };
  });
}

/** The mean squared-error loss over `samples` and its gradients (f32, one per parameter). */
function lossAndGrads([w1, b1, w2, b2], samples) {
  const g = [w1, b1, w2, b2].map((p) => new Float64Array(p.length));
  const h = new Float64Array(HID);
  let loss = 0;
  for (const { x, t } of samples) {
    for (let i = 0; i < HID; i++) {
      let z = b1[i];
      for (let j = 0; j < IN; j++) z += w1[i * IN + j] * x[j];
      h[i] = Math.tanh(z);
    }
    const dh = new Float64Array(HID);
    for (let k = 0; k < OUT; k++) {
      let y = b2[k];
      for (let i = 0; i < HID; i++) y += w2[k * HID + i] * h[i];
      const e = y - t[k];
      loss += (0.5 * e * e) / samples.length;
      g[3][k] += e;
      for (let i = 0; i < HID; i++) {
        g[2][k * HID + i] += e * h[i];
        dh[i] += e * w2[k * HID + i];
      }
    }
    for (let i = 0; i < HID; i++) {
      const dz = dh[i] * (1 - h[i] * h[i]);
      g[1][i] += dz;
      for (let j = 0; j < IN; j++) g[0][i * IN + j] += dz * x[j];
    }
  }
  return { loss, grads: g.map((x) => Float32Array.from(x, (v) => v / samples.length)) };
}

const sgd = (params, grads) => params.forEach((p, i) => p.forEach((_, j) => (p[j] -= LR * grads[i][j])));

const comm = await ccl.initCommGroup();
const params = initParams();
// Small buckets, so that even this model has two: b2, W2 and b1 in the first, W1 in the second.
const dp = ccl.createDataParallel(comm, params, { bucketBytes: 512 });
await dp.broadcastParameters();

const per = BATCH / comm.size;
for (let s = 0; s < STEPS; s++) {
  const mine = batchOf(s).slice(comm.rank * per, (comm.rank + 1) * per);
  const { loss, grads } = lossAndGrads(params, mine);
  for (let i = grads.length - 1; i >= 0; i--) dp.gradientReady(i, grads[i]); // as backward makes them
  await dp.synchronize(); // the mean over ranks, written back into grads
  sgd(params, grads);
  const total = Float64Array.of(loss);
  await comm.allReduce(total, { op: 'avg' });
  if (comm.rank === 0) console.log(`step ${s + 1} loss ${total[0].toFixed(6)}`);
}

if (comm.rank === 0) {
  const alone = initParams();
  for (let s = 0; s < STEPS; s++) sgd(alone, lossAndGrads(alone, batchOf(s)).grads);
  let d = 0;
  alone.forEach((p, i) => p.forEach((v, j) => (d = Math.max(d, Math.abs(v - params[i][j])))));
  const st = dp.stats();
  console.log(`${st.buckets} buckets, ${st.opsIssued} allReduces, ${st.bytesReduced} bytes reduced`);
  console.log(`max |Δ| vs single-process: ${d.toExponential(2)}`);
}
dp.destroy();
