// npm run demo — 4 ranks (worker threads sharing memory) run every collective on real data,
// check the results, and rank 0 prints a small nccl-tests-style table.
//   started by: webccl run -n 4 examples/demo.mjs
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup();
const { rank, size } = comm;
/** Least time each measurement lasts, warm-up and timed loop alike (ms). */
const SPAN_MS = 200;
/** How long the job warms up before the first measurement (ms). */
const WARM_MS = 3000;

// nccl-tests bus-bandwidth factors (doc/PERFORMANCE.md): what each rank's links must carry.
const busFactor = {
  allReduce: (2 * (size - 1)) / size,
  allGather: (size - 1) / size,
  reduceScatter: (size - 1) / size,
  broadcast: 1,
  reduce: 1,
};

/** Calls `issue` `n` times, awaiting each; the time taken (ms). */
async function loop(issue, n) {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await issue();
  return performance.now() - t0;
}

/**
 * Times `issue` warm: a first call's time is mostly compiling (the JIT, the wasm tiers) and
 * memory first touched, hundreds of times a warm call's. Every rank runs the same number of
 * calls (the largest any rank asks for, so that a loop lasts about SPAN_MS on the slowest),
 * warms up with as many, then times them. Returns the slowest rank's mean time (us) and this
 * rank's #wrong.
 */
async function measure(name, bytes, issue, check) {
  const probe = await loop(issue, 3);
  const calls = new Float64Array([Math.min(100_000, Math.max(5, Math.ceil((SPAN_MS * 3) / Math.max(probe, 1e-3))))]);
  await comm.allReduce(calls, { op: ccl.Max });
  await loop(issue, calls[0]); // warm-up
  await comm.barrier();
  const us = new Float64Array([((await loop(issue, calls[0])) * 1000) / calls[0]]);
  const wrong = new Int32Array([await check()]);
  await comm.allReduce(us, { op: ccl.Max });
  await comm.allReduce(wrong, { op: ccl.Sum });
  const algbw = bytes / us[0] / 1e3;
  return { name, bytes, us: us[0], algbw, busbw: algbw * busFactor[name], wrong: wrong[0] };
}

// The job's first few thousand ops run slower (code still compiling, the ranks' threads not yet
// settled on the cores: several times the settled time for about the first 1-3 s on 2 cores):
// a warm-up of small ops before anything is timed, the same count on every rank.
{
  const w = new Float32Array(2);
  const until = new Float64Array([performance.now() + WARM_MS]);
  await comm.broadcast(until, { root: 0 }); // (rank 0's clock: every rank stops after the same op)
  const go = new Int32Array(1);
  do {
    for (let i = 0; i < 100; i++) await ccl.allReduce(w);
    go[0] = rank === 0 && performance.now() < until[0] ? 1 : 0;
    await comm.broadcast(go, { root: 0 });
  } while (go[0]);
}

const rows = [];
for (const bytes of [8, 64 << 10, 1 << 20, 16 << 20]) {
  const n = bytes / 4;
  // Out of place: the input stays as it is, so no refill is timed with the op.
  const x = new Float32Array(n).fill(rank + 1);
  const y = new Float32Array(n);
  rows.push(
    await measure(
      'allReduce',
      bytes,
      () => ccl.allReduce(x, { op: ccl.Sum, out: y }),
      () => y.filter((v) => v !== (size * (size + 1)) / 2).length,
    ),
  );
}
{
  const per = (1 << 20) / 4 / size;
  const part = new Float32Array(per).map((_, i) => rank * per + i);
  const out = new Float32Array(per * size);
  rows.push(
    await measure(
      'allGather',
      out.byteLength,
      () => ccl.allGather(out, part),
      () => out.filter((v, i) => v !== i).length,
    ),
  );
  const input = new Float32Array(per * size).map((_, i) => i);
  const mine = new Float32Array(per);
  rows.push(
    await measure(
      'reduceScatter',
      input.byteLength,
      () => ccl.reduceScatter(mine, input, { op: ccl.Sum }),
      () => mine.filter((v, i) => v !== size * (rank * per + i)).length,
    ),
  );
}
{
  const b = new Float64Array((1 << 20) / 8);
  if (rank === 1) b.fill(42);
  rows.push(
    await measure(
      'broadcast',
      b.byteLength,
      () => ccl.broadcast(b, { root: 1 }),
      () => b.filter((v) => v !== 42).length,
    ),
  );
  const r = new Int32Array((1 << 20) / 4).fill(rank);
  const rOut = new Int32Array(r.length);
  rows.push(
    await measure(
      'reduce',
      r.byteLength,
      () => ccl.reduce(r, { op: ccl.Max, root: 0, out: rOut }),
      () => (rank === 0 ? rOut.filter((v) => v !== size - 1).length : 0),
    ),
  );
}
// An async handle: issue, do other work, then wait.
const h = ccl.allReduceAsync(new Float32Array(1024).fill(1));
await ccl.wait(h);

if (rank === 0) {
  const pad = (s, w) => String(s).padStart(w);
  console.log(`# webccl demo: ${size} ranks as worker threads sharing one WebAssembly.Memory, plain TypedArrays.`);
  console.log(`# Each time: one call awaited as a program does (await ccl.allReduce(...)), the mean of a warm loop`);
  console.log(
    `# of at least ${SPAN_MS} ms after as many warm-up calls, the slowest rank's. webccl perf times waitSync()`,
  );
  console.log(`# loops on comm.alloc() buffers, the library's fastest path: compare with npm run bench.`);
  console.log(
    `#${pad('collective', 14)}${pad('size(B)', 11)}${pad('type', 6)}${pad('time(us)', 11)}${pad('algbw', 9)}${pad('busbw', 9)}${pad('#wrong', 8)}`,
  );
  for (const r of rows) {
    console.log(
      ` ${pad(r.name, 14)}${pad(r.bytes, 11)}${pad(r.name === 'broadcast' ? 'f64' : r.name === 'reduce' ? 'i32' : 'f32', 6)}${pad(r.us.toFixed(2), 11)}${pad(r.algbw.toFixed(2), 9)}${pad(r.busbw.toFixed(2), 9)}${pad(r.wrong, 8)}`,
    );
  }
  const bad = rows.reduce((a, r) => a + r.wrong, 0);
  console.log(
    `# algbw, busbw in GB/s (1e9 B/s); ${bad === 0 ? 'every result checked: all correct' : `${bad} WRONG elements`}`,
  );
  if (bad) process.exitCode = 1;
}
