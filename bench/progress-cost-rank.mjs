// One rank of bench/progress-cost: back-to-back allReduces, each awaited before the next (a
// synchronous-style loop), on comm.alloc() f32 buffers; per size, the median over rounds of the
// time and of this process's CPU (every thread of it: the rank's and its progress thread's) per op.
import * as ccl from 'webccl';

const p = JSON.parse(process.argv[2]);
const comm = await ccl.initCommGroup();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const bytes of p.sizes) {
  const x = comm.alloc('f32', Math.max(1, bytes / 4));
  const iters = Math.max(3, Math.min(300, Math.floor((64 << 20) / Math.max(bytes, 1 << 16))));
  for (let i = 0; i < 5; i++) await comm.allReduce(x);
  const us = [];
  const cpu = [];
  for (let round = 0; round < p.rounds; round++) {
    await comm.barrier();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < iters; i++) await comm.allReduce(x);
    const c = process.cpuUsage(c0);
    us.push(((performance.now() - t0) / iters) * 1000);
    cpu.push((c.user + c.system) / iters);
  }
  comm.free(x);
  console.log(
    JSON.stringify({
      rank: comm.rank,
      bytes,
      iters,
      us: median(us),
      cpuUs: median(cpu),
      mode: comm.progressMode,
      threadOps: comm.stats().threadOps,
    }),
  );
}
