// npm run demo — 4 ranks (worker threads sharing memory) run every collective on real data,
// check the results, and rank 0 prints a small nccl-tests-style table.
//   started by: webccl run -n 4 examples/demo.mjs
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup();
const { rank, size } = comm;
const ITERS = 20;

// nccl-tests bus-bandwidth factors (doc/PERFORMANCE.md): what each rank's links must carry.
const busFactor = { allReduce: (2 * (size - 1)) / size, allGather: (size - 1) / size, reduceScatter: (size - 1) / size, broadcast: 1, reduce: 1 };

/** Runs `issue` ITERS times, returns the slowest rank's mean time (us) and this rank's #wrong. */
async function measure(name, bytes, issue, check) {
  await issue(); // warm-up
  await comm.barrier();
  const t0 = performance.now();
  for (let i = 0; i < ITERS; i++) await issue();
  const us = new Float64Array([((performance.now() - t0) * 1000) / ITERS]);
  const wrong = new Int32Array([await check()]);
  await comm.allReduce(us, { op: ccl.Max });
  await comm.allReduce(wrong, { op: ccl.Sum });
  const algbw = bytes / us[0] / 1e3;
  return { name, bytes, us: us[0], algbw, busbw: algbw * busFactor[name], wrong: wrong[0] };
}

const rows = [];
for (const bytes of [8, 64 << 10, 1 << 20, 16 << 20]) {
  const n = bytes / 4;
  const x = new Float32Array(n);
  rows.push(await measure('allReduce', bytes,
    () => { x.fill(rank + 1); return ccl.allReduce(x, { op: ccl.Sum }); },
    () => x.filter((v) => v !== (size * (size + 1)) / 2).length));
}
{
  const per = (1 << 20) / 4 / size;
  const part = new Float32Array(per).map((_, i) => rank * per + i);
  const out = new Float32Array(per * size);
  rows.push(await measure('allGather', out.byteLength, () => ccl.allGather(out, part), () => out.filter((v, i) => v !== i).length));
  const input = new Float32Array(per * size).map((_, i) => i);
  const mine = new Float32Array(per);
  rows.push(await measure('reduceScatter', input.byteLength, () => ccl.reduceScatter(mine, input, { op: ccl.Sum }),
    () => mine.filter((v, i) => v !== size * (rank * per + i)).length));
}
{
  const b = new Float64Array((1 << 20) / 8);
  rows.push(await measure('broadcast', b.byteLength, () => { if (rank === 1) b.fill(42); return ccl.broadcast(b, { root: 1 }); },
    () => b.filter((v) => v !== 42).length));
  const r = new Int32Array((1 << 20) / 4);
  rows.push(await measure('reduce', r.byteLength, () => { r.fill(rank); return ccl.reduce(r, { op: ccl.Max, root: 0 }); },
    () => (rank === 0 ? r.filter((v) => v !== size - 1).length : 0)));
}
// An async handle: issue, do other work, then wait.
const h = ccl.allReduceAsync(new Float32Array(1024).fill(1));
await ccl.wait(h);

if (rank === 0) {
  const pad = (s, w) => String(s).padStart(w);
  console.log(`# webccl demo: ${size} ranks as worker threads sharing one WebAssembly.Memory`);
  console.log(`#${pad('collective', 14)}${pad('size(B)', 11)}${pad('type', 6)}${pad('time(us)', 11)}${pad('algbw', 9)}${pad('busbw', 9)}${pad('#wrong', 8)}`);
  for (const r of rows) {
    console.log(` ${pad(r.name, 14)}${pad(r.bytes, 11)}${pad(r.name === 'broadcast' ? 'f64' : r.name === 'reduce' ? 'i32' : 'f32', 6)}${pad(r.us.toFixed(2), 11)}${pad(r.algbw.toFixed(2), 9)}${pad(r.busbw.toFixed(2), 9)}${pad(r.wrong, 8)}`);
  }
  const bad = rows.reduce((a, r) => a + r.wrong, 0);
  console.log(`# algbw, busbw in GB/s (1e9 B/s); ${bad === 0 ? 'every result checked: all correct' : `${bad} WRONG elements`}`);
  if (bad) process.exitCode = 1;
}
