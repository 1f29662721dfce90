// The rank script of bench/overlap.mjs. argv: JSON { sizes, reps, warmup, regime }. For each
// size S it measures, with a barrier before every timed block:
//   T_comm        allReduceAsync(S) then wait, nothing else;
//   T_comp        the compute alone, a fixed amount of work calibrated to last about T_comm;
//   T_serial      the compute, then the op;
//   T_overlapped  allReduceAsync, the compute (no webccl call), then wait.
//   T_wait_long   the wait alone, after an op issued right after a waited one (a barrier) and a
//                 long compute (p.longMs, at least 10× T_comm): near 0 when the op went on
//                 during the compute without any call from its rank, about T_comm when it
//                 waited for the rank's next call.
//   T_wait_floor  the least such a wait can take here, no library: the same op and compute, then
//                 one look at a word another thread wrote and one settled promise awaited (the
//                 op is waited for after it, untimed).
// Each figure is this rank's median over `reps` blocks; the launcher takes the slowest rank.
// regime 'busy': one tight arithmetic loop (the CPU is saturated for the whole compute).
// regime 'idle': rounds of 1 ms of that loop, then 1 ms awaiting a timer (the CPU is free half
// the time, as when a step waits on a GPU kernel or on data loading).
// Prints one JSON line per size from rank 0 (with every rank's figures) and a first line naming
// the progress mode that ran.
import { Worker } from 'node:worker_threads';
import * as ccl from 'webccl';

const o = JSON.parse(process.argv[2]);
const comm = await ccl.initCommGroup();
const rank = comm.rank;

/**
 * The mode that moved the ops: the communicator's own account if it gives one, else 'caller' (no progress thread in
 * this build).
 */
const ran = typeof comm.progressMode === 'string' ? comm.progressMode : 'caller';

// One unit of compute: a few hundred dependent floating-point operations on a small array that
// stays in cache, so that the compute takes the CPU and not the memory bus the op needs.
const scratch = new Float64Array(256);
let sink = 0;
function work(units) {
  let acc = sink;
  for (let u = 0; u < units; u++) {
    for (let i = 0; i < scratch.length; i++) {
      acc = acc * 0.999999 + scratch[i];
      scratch[i] = acc * 1e-9;
    }
  }
  sink = acc;
}

/** Units of work per ms, measured alone on this rank (the longest of a few 20 ms probes is discarded). */
function calibrate() {
  work(2000); // let the loop tier up
  const rates = [];
  for (let k = 0; k < 5; k++) {
    let units = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 20) {
      work(50);
      units += 50;
    }
    rates.push(units / (performance.now() - t0));
  }
  rates.sort((a, b) => a - b);
  return rates[2];
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A word set by another thread (the wait floor's look), and a promise already settled. */
const doneWord = new Int32Array(new SharedArrayBuffer(4));
const settled = Promise.resolve();
await new Promise((resolve, reject) => {
  const setter = new Worker('Atomics.store(new Int32Array(require("worker_threads").workerData), 0, 1)', {
    eval: true,
    workerData: doneWord.buffer,
  });
  setter.on('exit', resolve).on('error', reject);
});

/** One round of the idle regime: 1 ms of work, then a 1 ms timer (which fires a little later). */
async function round(perMs) {
  work(Math.max(1, Math.round(perMs)));
  await sleep(1);
}

/** How long a round takes here, alone (the median of 21). */
async function calibrateRound(perMs) {
  const times = [];
  for (let k = 0; k < 21; k++) {
    const t0 = performance.now();
    await round(perMs);
    times.push(performance.now() - t0);
  }
  return median(times);
}

/** A fixed amount of compute: `amount` work units (busy) or rounds (idle). */
async function compute(amount, perMs) {
  if (o.regime === 'busy') return work(amount);
  for (let r = 0; r < amount; r++) await round(perMs);
}

/**
 * The amount of compute that lasts about `ms` here, alone: a first guess from the calibration,
 * then corrected twice by timing it (the loop's speed drifts with the JIT and with the load).
 * Fixed from then on, so that contention with the op shows as a longer compute.
 */
async function amountFor(ms, perMs) {
  let amount = o.regime === 'busy' ? Math.max(1, Math.round(ms * perMs)) : Math.max(1, Math.round(ms / roundMs));
  for (let k = 0; k < 2; k++) {
    const t0 = performance.now();
    await compute(amount, perMs);
    const took = performance.now() - t0;
    amount = Math.max(1, Math.round((amount * ms) / took));
  }
  return amount;
}

async function timed(fn) {
  const times = [];
  for (let k = 0; k < o.reps; k++) {
    await comm.barrier();
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  return median(times);
}

const perMs = calibrate();
const roundMs = o.regime === 'idle' ? await calibrateRound(perMs) : NaN;
if (rank === 0)
  console.log(
    JSON.stringify({
      kind: 'mode',
      progress: ran,
      requested: process.env.WEBCCL_PROGRESS ?? '(unset: auto)',
      regime: o.regime,
      size: comm.size,
      acrossNodes: comm.acrossNodes,
    }),
  );

for (const bytes of o.sizes) {
  const count = bytes / 4;
  const x = comm.alloc('f32', count);
  const op = () => ccl.allReduceAsync(x);
  for (let k = 0; k < o.warmup; k++) await op().wait();
  const tComm = await timed(() => op().wait());
  // The compute is sized to the slowest rank's T_comm (every rank computes as long); fixed work from here on.
  const agreed = new Float64Array([tComm]);
  await ccl.allReduce(agreed, { op: 'max' });
  const amount = await amountFor(agreed[0], perMs);
  const tComp = await timed(() => compute(amount, perMs));
  const tSerial = await timed(async () => {
    await compute(amount, perMs);
    await op().wait();
  });
  let wrong = 0;
  const tOverlapped = await timed(async () => {
    const w = op();
    await compute(amount, perMs);
    await w.wait();
  });
  const longAmount = await amountFor(Math.max(o.longMs ?? 200, 10 * agreed[0]), perMs);
  const waits = [];
  for (let k = 0; k < o.reps; k++) {
    await comm.barrier(); // waited at once: the op after it is the first of a change of pattern
    const w = op();
    await compute(longAmount, perMs);
    const t0 = performance.now();
    await w.wait();
    waits.push(performance.now() - t0);
  }
  const tWaitLong = median(waits);
  // The least such a wait can cost on this machine, no library: after the same compute, one look
  // at a word another thread wrote and one settled promise awaited. The code and data a wait
  // touches leave the caches during a long compute (even one that touches no memory), so the
  // first JavaScript after it runs at a fraction of its usual speed.
  const floors = [];
  for (let k = 0; k < o.reps; k++) {
    await comm.barrier();
    const w = op();
    await compute(longAmount, perMs);
    const t0 = performance.now();
    if (Atomics.load(doneWord, 0) === 1) await settled;
    floors.push(performance.now() - t0);
    await w.wait();
  }
  const tWaitFloor = median(floors);
  // Check the overlapped op's result on closed-form data (every rank adds rank + 1).
  x.fill(rank + 1);
  const w = op();
  await compute(1, perMs);
  await w.wait();
  const expect = (comm.size * (comm.size + 1)) / 2;
  for (let i = 0; i < count; i += 997) if (x[i] !== expect) wrong++;
  if (x[count - 1] !== expect) wrong++;
  comm.free(x);
  // Rank 0 prints every rank's row, gathered over the communicator itself (after the timing).
  const all = new Float64Array(comm.size * 8);
  const row = new Float64Array([tComm, tComp, tSerial, tOverlapped, wrong, rank, tWaitLong, tWaitFloor]);
  await ccl.allGather(all, row);
  if (rank === 0) {
    const ranks = Array.from({ length: comm.size }, (_, r) => {
      const [c, p, s, v, bad, , wl, wf] = all.subarray(r * 8, r * 8 + 8);
      return { rank: r, tComm: c, tComp: p, tSerial: s, tOverlapped: v, wrong: bad, tWaitLong: wl, tWaitFloor: wf };
    });
    console.log(JSON.stringify({ kind: 'row', bytes, ranks }));
  }
}
await comm.barrier();
