// The model of bench/training-scaling.mjs: a multilayer perceptron in plain JS (Float32Array
// weights, row-major [out][in], matmul loops whose inner loops run over contiguous rows), ReLU
// between layers, a mean squared-error loss against synthetic targets, seeded data and SGD.
// No dependency: what a user training a small model of their own in Node.js writes.

/** The models the scaling benchmark knows, by name: layer widths, input first. */
export const MODELS = {
  '1M': [384, 1024, 512, 128],
  '10M': [1536, 2048, 2048, 1024, 256],
};

/** Parameters of a model of these widths: W and b per layer. */
export const paramCount = (widths) => widths.slice(1).reduce((s, out, l) => s + out * widths[l] + out, 0);

/** A seeded generator of floats in [0, 1) (mulberry32). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The parameters, forward order W0, b0, W1, b1, ...: uniform in ±sqrt(3 / fan-in) (variance 1 / fan-in). */
export function initParams(widths, seed = 7) {
  const r = rng(seed);
  const ps = [];
  for (let l = 0; l + 1 < widths.length; l++) {
    const fanIn = widths[l];
    const a = Math.sqrt(3 / fanIn);
    const w = new Float32Array(widths[l + 1] * fanIn);
    for (let k = 0; k < w.length; k++) w[k] = (r() * 2 - 1) * a;
    ps.push(w, new Float32Array(widths[l + 1]));
  }
  return ps;
}

/**
 * Samples [first, first + n) of step `step`'s global batch: inputs uniform in ±1 and targets
 * a fixed smooth function of them. Sample k of a step is the same whichever rank draws it.
 */
export function batchOf(widths, step, first, n) {
  const inW = widths[0];
  const outW = widths[widths.length - 1];
  const x = new Float32Array(n * inW);
  const t = new Float32Array(n * outW);
  for (let s = 0; s < n; s++) {
    const r = rng(0x9e3779b1 ^ (step * 65537 + first + s));
    const xs = x.subarray(s * inW, (s + 1) * inW);
    for (let i = 0; i < inW; i++) xs[i] = r() * 2 - 1;
    for (let k = 0; k < outW; k++) t[s * outW + k] = 0.5 * Math.sin(xs[k % inW] + 2 * xs[(3 * k + 1) % inW]);
  }
  return { x, t, n };
}

/** y[b][o] = bias[o] + Σ_i x[b][i] · w[o][i] (w is [out][in]); ReLU when `relu`. */
function forwardLayer(x, w, bias, y, n, inW, outW, relu) {
  for (let b = 0; b < n; b++) {
    const xo = b * inW;
    for (let o = 0; o < outW; o++) {
      const wo = o * inW;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let i = 0;
      for (; i + 3 < inW; i += 4) {
        s0 += x[xo + i] * w[wo + i];
        s1 += x[xo + i + 1] * w[wo + i + 1];
        s2 += x[xo + i + 2] * w[wo + i + 2];
        s3 += x[xo + i + 3] * w[wo + i + 3];
      }
      for (; i < inW; i++) s0 += x[xo + i] * w[wo + i];
      const v = bias[o] + s0 + s1 + s2 + s3;
      y[b * outW + o] = relu && v < 0 ? 0 : v;
    }
  }
}

/** gw[o][i] = Σ_b dy[b][o] · x[b][i], gb[o] = Σ_b dy[b][o] (overwritten). */
function weightGrads(dy, x, gw, gb, n, inW, outW) {
  gw.fill(0);
  gb.fill(0);
  for (let b = 0; b < n; b++) {
    const xo = b * inW;
    for (let o = 0; o < outW; o++) {
      const d = dy[b * outW + o];
      if (d === 0) continue;
      gb[o] += d;
      const wo = o * inW;
      for (let i = 0; i < inW; i++) gw[wo + i] += d * x[xo + i];
    }
  }
}

/** dx[b][i] = Σ_o dy[b][o] · w[o][i], then times ReLU' of the layer's input (x > 0). */
function inputGrads(dy, w, x, dx, n, inW, outW) {
  dx.fill(0);
  for (let b = 0; b < n; b++) {
    const xo = b * inW;
    for (let o = 0; o < outW; o++) {
      const d = dy[b * outW + o];
      if (d === 0) continue;
      const wo = o * inW;
      for (let i = 0; i < inW; i++) dx[xo + i] += d * w[wo + i];
    }
    for (let i = 0; i < inW; i++) if (x[xo + i] <= 0) dx[xo + i] = 0;
  }
}

/**
 * A model's working arrays for batches of `n` samples (activations, their gradients, the
 * parameter gradients), made once and reused every step.
 */
export function workspace(widths, n) {
  const acts = widths.map((w) => new Float32Array(n * w));
  const dacts = widths.map((w) => new Float32Array(n * w));
  const grads = [];
  for (let l = 0; l + 1 < widths.length; l++)
    grads.push(new Float32Array(widths[l + 1] * widths[l]), new Float32Array(widths[l + 1]));
  return { widths, n, acts, dacts, grads };
}

/**
 * Forward and backward over `batch` (its n samples): the gradients of the mean loss over the
 * samples into ws.grads; `ready(i, grad)` is called for each parameter as soon as its gradient
 * is complete, last layer first (b then W of each layer), as an autograd's hooks fire. Returns
 * the loss (mean over the samples).
 */
export function forwardBackward(params, ws, batch, ready) {
  const { widths, acts, dacts, grads } = ws;
  const n = batch.n;
  const L = widths.length - 1;
  acts[0].set(batch.x);
  for (let l = 0; l < L; l++)
    forwardLayer(acts[l], params[2 * l], params[2 * l + 1], acts[l + 1], n, widths[l], widths[l + 1], l + 1 < L);
  const outW = widths[L];
  const y = acts[L];
  const dy = dacts[L];
  let loss = 0;
  for (let k = 0; k < n * outW; k++) {
    const e = y[k] - batch.t[k];
    loss += 0.5 * e * e;
    dy[k] = e / n;
  }
  for (let l = L - 1; l >= 0; l--) {
    weightGrads(dacts[l + 1], acts[l], grads[2 * l], grads[2 * l + 1], n, widths[l], widths[l + 1]);
    ready?.(2 * l + 1, grads[2 * l + 1]);
    ready?.(2 * l, grads[2 * l]);
    if (l > 0) inputGrads(dacts[l + 1], params[2 * l], acts[l], dacts[l], n, widths[l], widths[l + 1]);
  }
  return loss / n;
}

/** params[i] -= lr · grads[i]. */
export function sgd(params, grads, lr) {
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    const g = grads[i];
    for (let k = 0; k < p.length; k++) p[k] -= lr * g[k];
  }
}
