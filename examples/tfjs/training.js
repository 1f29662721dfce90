// The model, the data and the training loop, shared by the Node ranks (train.mjs) and the
// browser's workers (browser/rank.js): both hand in their TF.js namespace, webccl's and the
// communicator.
//
// A 2-layer dense network (8 → 32 tanh → 4) of tf.variables learns a fixed nonlinear function of
// its input from a deterministic synthetic dataset. Each step draws one global batch of 64
// samples (seeded by the step: the same on every rank); rank r takes rows [r·64/n, (r+1)·64/n),
// computes the mean squared error of its rows and its gradients with tf.variableGrads, and the
// gradients are averaged over the ranks: the mean over the global batch. Rank 0 then trains the
// same model alone, in this thread, on the whole global batch of every step from the same
// initial weights, and measures how far the two sets of weights end apart.

export const IN = 8;
export const HIDDEN = 32;
export const OUT = 4;
export const BATCH = 64;
export const STEPS = 20;
export const LR = 0.01;

const SHAPES = { w1: [IN, HIDDEN], b1: [HIDDEN], w2: [HIDDEN, OUT], b2: [OUT] };
const NAMES = Object.keys(SHAPES);
const size = (shape) => shape.reduce((a, b) => a * b, 1);

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

/** Initial weights from `seed`, in NAMES order (uniform, scaled by 1/sqrt(fan-in); biases 0). */
function initialValues(seed) {
  const r = rng(seed);
  return NAMES.map((name) => {
    const shape = SHAPES[name];
    if (shape.length === 1) return new Float32Array(shape[0]);
    const scale = 2 / Math.sqrt(shape[0]);
    return Float32Array.from({ length: size(shape) }, () => (r() - 0.5) * scale);
  });
}

/** The model's tf.variables, named `${prefix}/w1` ...: tfjsDataParallel matches gradients by name. */
function makeVariables(tf, values, prefix) {
  return NAMES.map((name, i) => tf.variable(tf.tensor(values[i].slice(), SHAPES[name]), true, `${prefix}/${name}`));
}

/** Step `s`'s global batch: x uniform in [-1, 1)^8, y = a fixed nonlinear function of x. */
function globalBatch(s) {
  const r = rng(1000 + s);
  const xs = new Float32Array(BATCH * IN);
  const ys = new Float32Array(BATCH * OUT);
  for (let b = 0; b < BATCH; b++) {
    const x = xs.subarray(b * IN, (b + 1) * IN);
    for (let j = 0; j < IN; j++) x[j] = r() * 2 - 1;
    for (let k = 0; k < OUT; k++) ys[b * OUT + k] = Math.sin(2 * x[k]) * 0.5 + x[k] * x[k + OUT];
  }
  return { xs, ys };
}

/** Rows [from, to) of a batch as tensors (copies: the CPU backend keeps the array it is given). */
const rows = (tf, { xs, ys }, from, to) => [
  tf.tensor2d(xs.slice(from * IN, to * IN), [to - from, IN]),
  tf.tensor2d(ys.slice(from * OUT, to * OUT), [to - from, OUT]),
];

/** The mean squared error of `vars` on (x, y), times `scale`. */
function loss(tf, [w1, b1, w2, b2], x, y, scale = 1) {
  const h = tf.tanh(tf.add(tf.matMul(x, w1), b1));
  const mse = tf.mean(tf.squaredDifference(tf.add(tf.matMul(h, w2), b2), y));
  return scale === 1 ? mse : tf.mul(mse, scale);
}

/** tf.variableGrads of the loss on rows [from, to) of `batch`, the tensors it made disposed. */
function gradsOn(tf, vars, batch, from, to, scale = 1) {
  const [x, y] = rows(tf, batch, from, to);
  const out = tf.variableGrads(() => loss(tf, vars, x, y, scale), vars);
  tf.dispose([x, y]);
  return out;
}

/** The gradients as Float32Arrays in variable order (copies of what dataSync() returns). */
const gradArrays = (vars, grads) => vars.map((v) => grads[v.name].dataSync().slice());

/** Sets each variable from an array (a fresh copy: assign keeps the tensor's storage). */
function assignAll(tf, vars, arrays) {
  vars.forEach((v, i) => {
    const t = tf.tensor(arrays[i].slice(), v.shape);
    v.assign(t);
    t.dispose();
  });
}

/** Bytes of the typed arrays an optimizer state holds. */
const stateBytes = (state) => Object.values(state).reduce((n, a) => n + (ArrayBuffer.isView(a) ? a.byteLength : 0), 0);

/**
 * Trains the model on every rank of `comm`; resolves on every rank to `{ losses, spread }` and,
 * on rank 0, also `delta` (max |Δ| of the weights against one process) and `lines` (what to print
 * after the losses). `options`: `accumulate` (micro-batches per step, default 1), `zero`
 * ('adam' or 'sgd': ZeRO-1 with createShardedOptimizer), `wire` ('f32', 'bf16' or 'f16').
 * `onStep(step, loss)` is called on rank 0 after each step with the global batch's loss.
 */
export async function train({ tf, ccl, comm, accumulate = 1, zero, wire = 'f32', onStep = () => {} }) {
  const per = BATCH / comm.size;
  if (!Number.isInteger(per) || !Number.isInteger(per / accumulate))
    throw new Error(`${BATCH} samples do not split into ${comm.size} ranks × ${accumulate} micro-batches`);
  if (accumulate > 1 && (zero || wire !== 'f32'))
    throw new Error('accumulation is shown with the f32 wire and the TF.js optimizer only');
  const micro = per / accumulate;
  const first = comm.rank * per;
  // Each rank starts from weights of its own seed: broadcasting rank 0's makes them one model.
  const vars = makeVariables(tf, initialValues(1 + comm.rank), 'dp');
  const losses = [];
  const lines = [];
  const globalLoss = async (mine) => {
    const l = Float64Array.of(mine);
    await comm.allReduce(l, { op: 'avg' }); // equal shares: the mean over the global batch
    return l[0];
  };

  let single; // rank 0's one-process run: returns its final weights
  if (zero) {
    // ZeRO-1: each rank keeps the optimizer state of its block of the flattened weights only.
    const update = () => (zero === 'adam' ? ccl.adam({ lr: LR }) : ccl.sgd({ lr: 0.1, momentum: 0.9 }));
    const params = vars.map((v) => v.dataSync().slice());
    const opt = ccl.createShardedOptimizer(comm, params, update());
    await opt.broadcastParameters();
    assignAll(tf, vars, params);
    for (let s = 0; s < STEPS; s++) {
      const { value, grads } = gradsOn(tf, vars, globalBatch(s), first, first + per);
      await opt.step(gradArrays(vars, grads)); // reduce-scatter, this block's update, allGather
      assignAll(tf, vars, params);
      losses.push(await globalLoss(value.dataSync()[0]));
      tf.dispose([value, ...Object.values(grads)]);
      onStep(s + 1, losses[s]);
    }
    const mem = opt.memoryPerRank();
    opt.destroy();
    single = () => {
      const fn = update();
      const states = NAMES.map(() => ({}));
      const p = initialValues(1);
      const v1 = makeVariables(tf, p, 'single');
      for (let s = 0; s < STEPS; s++) {
        const { value, grads } = gradsOn(tf, v1, globalBatch(s), 0, BATCH);
        gradArrays(v1, grads).forEach((g, i) => fn(p[i], g, states[i], s + 1));
        assignAll(tf, v1, p);
        tf.dispose([value, ...Object.values(grads)]);
      }
      tf.dispose(v1);
      const whole = states.reduce((n, st) => n + stateBytes(st), 0);
      lines.push(
        `ZeRO-1 with ${zero}: optimizer state ${mem.stateBytes} B on this rank (elements [${opt.shard.start}, ${opt.shard.end}) of ${mem.totalElements}), ${whole} B unsharded`,
      );
      return p;
    };
  } else {
    const ddp = ccl.tfjsDataParallel(tf, comm, vars, { wireDtype: wire });
    await ddp.broadcastVariables();
    const optimizer = tf.train.adam(LR);
    let worst = 0; // half wire: the largest |ĝ − ḡ| / mean |g_r| over every element and step
    let within = true;
    for (let s = 0; s < STEPS; s++) {
      const batch = globalBatch(s);
      let mine = 0;
      // k micro-batches: each loss scaled by 1/k, the first k − 1 only accumulated (no communication)
      for (let m = 0; m < accumulate - 1; m++) {
        const { value, grads } = gradsOn(tf, vars, batch, first + m * micro, first + (m + 1) * micro, 1 / accumulate);
        ddp.accumulate(grads);
        mine += value.dataSync()[0];
        tf.dispose([value, ...Object.values(grads)]);
      }
      const from = first + (accumulate - 1) * micro;
      const { value, grads } = gradsOn(tf, vars, batch, from, from + micro, 1 / accumulate);
      mine += value.dataSync()[0];
      if (wire === 'f32') {
        await ddp.applyGradients(optimizer, grads); // averaged over ranks, applied, disposed
      } else {
        const reduced = await ddp.reduceGrads(grads);
        const err = await halfWireError(comm, wire, gradArrays(vars, grads), gradArrays(vars, reduced));
        worst = Math.max(worst, err.worst);
        within &&= err.within;
        optimizer.applyGradients(reduced);
        tf.dispose(Object.values(reduced));
      }
      tf.dispose([value, ...Object.values(grads)]);
      losses.push(await globalLoss(mine));
      onStep(s + 1, losses[s]);
    }
    const st = ddp.stats();
    ddp.destroy();
    optimizer.dispose();
    if (wire !== 'f32') {
      const u = wire === 'bf16' ? 2 ** -8 : 2 ** -11;
      const bound = (1 + u) ** (comm.size + 1) - 1;
      lines.push(
        `${wire} on the wire: largest |ĝ − ḡ| / mean |g_r| ${worst.toExponential(1)}; bound (1 + u)^(n+1) − 1 = ${bound.toExponential(1)} (u = 2^${Math.log2(u)}, n = ${comm.size}); ${within ? 'every element within it' : 'SOME ELEMENT OUTSIDE IT'}`,
      );
    }
    lines.push(
      `${st.steps} synchronizations, ${st.opsIssued} allReduces (${st.buckets} bucket${st.buckets === 1 ? '' : 's'} and the agreement check a step), ${st.bytesReduced} bytes reduced`,
    );
    single = () => {
      const v1 = makeVariables(tf, initialValues(1), 'single');
      const opt1 = tf.train.adam(LR);
      for (let s = 0; s < STEPS; s++) {
        const { value, grads } = gradsOn(tf, v1, globalBatch(s), 0, BATCH);
        opt1.applyGradients(grads);
        tf.dispose([value, ...Object.values(grads)]);
      }
      opt1.dispose();
      const p = v1.map((v) => v.dataSync().slice());
      tf.dispose(v1);
      return p;
    };
  }

  // Every rank's weights against rank 0's: data parallelism keeps one model.
  const mine = new Float32Array(vars.reduce((n, v) => n + v.size, 0));
  let at = 0;
  for (const v of vars) {
    mine.set(v.dataSync(), at);
    at += v.size;
  }
  const ref = mine.slice();
  await comm.broadcast(ref, { root: 0 });
  const spread = Float64Array.of(mine.reduce((d, x, i) => Math.max(d, Math.abs(x - ref[i])), 0));
  await comm.allReduce(spread, { op: 'max' });

  const result = { losses, spread: spread[0] };
  if (comm.rank === 0) {
    const alone = single();
    result.delta = vars.reduce(
      (d, v, i) => v.dataSync().reduce((e, x, j) => Math.max(e, Math.abs(x - alone[i][j])), d),
      0,
    );
    result.lines = lines;
  }
  tf.dispose(vars);
  return result;
}

/**
 * How far the half-wire mean ĝ (`reduced`) is from the exact one ḡ: the f32 mean of the same
 * gradients, and the mean of their magnitudes, reduced here for the comparison alone.
 */
async function halfWireError(comm, wire, grads, reduced) {
  const flat = (arrays, f = (x) => x) => Float32Array.from(arrays.flatMap((a) => Array.from(a, f)));
  const exact = flat(grads);
  const magnitude = flat(grads, Math.abs);
  await comm.allReduce(exact, { op: 'avg' });
  await comm.allReduce(magnitude, { op: 'avg' });
  const got = flat(reduced);
  const u = wire === 'bf16' ? 2 ** -8 : 2 ** -11;
  const rel = (1 + u) ** (comm.size + 1) - 1;
  const abs = wire === 'f16' ? comm.size * 2 ** -25 : 0; // f16's subnormals
  let worst = 0;
  let within = true;
  got.forEach((g, i) => {
    const e = Math.abs(g - exact[i]);
    if (magnitude[i] > 0) worst = Math.max(worst, e / magnitude[i]);
    within &&= e <= (rel + 2 ** -21) * magnitude[i] + abs; // 2^-21: the f32 mean's own rounding
  });
  return { worst, within };
}
