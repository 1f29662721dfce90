// The rank script of bench/training-scaling.mjs. argv: JSON { models, batch, steps, warmup, lr,
// modes, bucketBytes, anchor, anchorReps, clkTck }. For each model it trains data-parallel on a fixed
// global batch of `batch` samples per step, split evenly over the ranks (strong scaling), in
// each mode:
//   plain     after backward, one awaited comm.allReduce(grad, { op: 'avg' }) per parameter tensor
//   overlap   createDataParallel; gradients handed in by dp.gradientReady as backward makes them,
//             then dp.synchronize()
//   after     createDataParallel; all gradients handed in after backward (dp.reduceGradients)
// then SGD. Every mode starts from the same parameters and runs the same batches. Per step it
// times, on this rank: fwd+bwd (forward and backward, the gradient hand-ins of `overlap`
// included), reduce (from the end of backward to the averaged gradients in hand: the awaited
// allReduces, or reduceGradients / synchronize), sgd, and the whole step. After `warmup` steps it
// keeps `steps` timed steps (no barrier between them: the allReduces pace the ranks, as in
// training) and reads the counters of dp.stats() and comm.stats() over them, and the share of a
// core the rank's thread had during its fwd+bwd (its CPU time over the wall time, from
// /proc/thread-self/stat in ticks of 1/clkTck s: below 1 when it waited for a core), and over the
// timed steps the CPU time of this rank's thread and of the whole process (rank 0's reading: the
// ranks, the node's progress thread, the launcher, V8's helper threads). Then it counts the
// parameters that differ (bitwise) from rank 0's. With `anchor`, first, for each model: one
// awaited allReduce (op avg) of the model's whole gradient, as a plain Float32Array and as a
// comm.alloc() buffer, with a barrier before each. Rank 0 prints one JSON line per measurement,
// with every rank's figures.
import { readFileSync } from 'node:fs';
import * as ccl from 'webccl';
import { batchOf, forwardBackward, initParams, MODELS, paramCount, sgd, workspace } from './training-mlp.mjs';

const o = JSON.parse(process.argv[2]);
const comm = await ccl.initCommGroup();
const { rank, size } = comm;

/** CPU time of this thread so far, ms (utime + stime of /proc/thread-self; NaN where there is none). */
function threadCpuMs() {
  try {
    const s = readFileSync('/proc/thread-self/stat', 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / o.clkTck;
  } catch {
    return Number.NaN;
  }
}

/** CPU time of the whole process so far (every thread), ms. */
const processCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Every rank's `row` (numbers, the same length on each), gathered to every rank. */
async function gather(row) {
  const all = new Float64Array(size * row.length);
  await comm.allGather(all, Float64Array.from(row));
  return Array.from({ length: size }, (_, r) => Array.from(all.subarray(r * row.length, (r + 1) * row.length)));
}

/** One awaited allReduce of `buf`, barrier before each, `reps` times after two: this rank's medians. */
async function anchorOf(buf) {
  for (let k = 0; k < 2; k++) await comm.allReduce(buf, { op: 'avg' });
  const times = [];
  const waits = [];
  const moves = [];
  for (let k = 0; k < o.anchorReps; k++) {
    await comm.barrier();
    const t0 = performance.now();
    const w = comm.allReduce(buf, { op: 'avg' });
    await w;
    times.push(performance.now() - t0);
    waits.push(w.waitMs);
    moves.push(w.moveMs);
  }
  return [median(times), median(waits), median(moves)];
}

/** Parameters that differ bitwise from rank 0's, summed over the ranks. */
async function wrongParams(params) {
  let wrong = 0;
  for (const p of params) {
    const ref = p.slice();
    await comm.broadcast(ref, { root: 0 });
    const a = new Uint32Array(p.buffer, p.byteOffset, p.length);
    const b = new Uint32Array(ref.buffer, ref.byteOffset, ref.length);
    for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) wrong++;
  }
  const total = Float64Array.of(wrong);
  await comm.allReduce(total);
  return total[0];
}

async function train(name, widths, mode) {
  const per = o.batch / size;
  const params = initParams(widths);
  const ws = workspace(widths, per);
  const total = o.warmup + o.steps;
  const batches = Array.from({ length: total }, (_, s) => batchOf(widths, s, rank * per, per));
  const dp =
    mode === 'plain'
      ? undefined
      : ccl.createDataParallel(comm, params, o.bucketBytes ? { bucketBytes: o.bucketBytes } : undefined);
  if (dp) await dp.broadcastParameters();
  const ready = mode === 'overlap' ? (i, g) => dp.gradientReady(i, g) : undefined;
  const step = [];
  const fwdBwd = [];
  const reduce = [];
  const update = [];
  let loss = 0;
  let cpuMs = 0;
  let wallMs = 0;
  let dp0;
  let c0;
  let thread0 = 0;
  let process0 = 0;
  await comm.barrier();
  for (let s = 0; s < total; s++) {
    if (s === o.warmup) {
      dp0 = dp?.stats();
      c0 = comm.stats();
      thread0 = threadCpuMs();
      process0 = processCpuMs();
    }
    const cpu0 = threadCpuMs();
    const t0 = performance.now();
    loss = forwardBackward(params, ws, batches[s], ready);
    const t1 = performance.now();
    if (s >= o.warmup) {
      cpuMs += threadCpuMs() - cpu0;
      wallMs += t1 - t0;
    }
    if (mode === 'plain') for (const g of ws.grads) await comm.allReduce(g, { op: 'avg' });
    else if (mode === 'overlap') await dp.synchronize();
    else await dp.reduceGradients(ws.grads);
    const t2 = performance.now();
    sgd(params, ws.grads, o.lr);
    const t3 = performance.now();
    if (s >= o.warmup) {
      step.push(t3 - t0);
      fwdBwd.push(t1 - t0);
      reduce.push(t2 - t1);
      update.push(t3 - t2);
    }
  }
  const threadMs = threadCpuMs() - thread0;
  const processMs = processCpuMs() - process0;
  const dp1 = dp?.stats();
  const c1 = comm.stats();
  const n = o.steps;
  const syncWait = dp ? (dp1.waitMs - dp0.waitMs) / n : Number.NaN;
  const span = dp ? (dp1.commMs - dp0.commMs) / n : Number.NaN;
  const buckets = dp ? dp1.buckets : params.length;
  const row = [
    median(step),
    median(fwdBwd),
    median(reduce),
    median(update),
    syncWait,
    span,
    (c1.waitMs - c0.waitMs) / n,
    (c1.moveMs - c0.moveMs) / n,
    (c1.ops - c0.ops) / n,
    loss,
    buckets,
    cpuMs / wallMs,
    threadMs,
    processMs,
  ];
  const wrong = await wrongParams(params);
  const lossAll = Float64Array.of(loss / size);
  await comm.allReduce(lossAll);
  const all = await gather(row);
  dp?.destroy();
  if (rank === 0) {
    const keys = ['stepMs', 'fwdBwdMs', 'reduceMs', 'sgdMs', 'syncWaitMs', 'spanMs', 'peersMs', 'movingMs', 'ops'];
    const ranks = all.map((r, k) =>
      Object.fromEntries([
        ['rank', k],
        ...keys.map((key, j) => [key, r[j]]),
        ['cpuShare', r[11]],
        ['threadCpuMs', r[12]],
        ['processCpuMs', r[13]],
      ]),
    );
    console.log(
      JSON.stringify({
        kind: 'train',
        model: name,
        params: paramCount(widths),
        mode,
        size,
        perRank: per,
        buckets,
        loss: lossAll[0],
        wrong,
        ranks,
      }),
    );
  }
}

if (rank === 0) console.log(JSON.stringify({ kind: 'start', size, progress: comm.progressMode ?? null }));
for (const name of o.models) {
  const widths = MODELS[name];
  if (o.anchor) {
    const count = paramCount(widths);
    const plain = new Float32Array(count).fill(rank + 1);
    const a = await anchorOf(plain);
    const shared = comm.alloc('f32', count);
    shared.fill(rank + 1);
    const b = await anchorOf(shared);
    comm.free(shared);
    const all = await gather([...a, ...b]);
    if (rank === 0)
      console.log(
        JSON.stringify({
          kind: 'anchor',
          model: name,
          bytes: count * 4,
          size,
          ranks: all.map((r, k) => ({
            rank: k,
            plainMs: r[0],
            plainPeersMs: r[1],
            plainMovingMs: r[2],
            allocMs: r[3],
            allocPeersMs: r[4],
            allocMovingMs: r[5],
          })),
        }),
      );
  }
  for (const mode of o.modes) await train(name, widths, mode);
}
await comm.barrier();
