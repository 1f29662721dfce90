// One rank of the live benchmark (perf.html): for each size, a few warm-up calls, a barrier,
// then the timed allReduce calls; the slowest rank's mean time is agreed with an allReduce (max),
// and rank 0 reports the row. Every result is checked (each rank adds rank + 1).
import { initCommGroup } from '../../dist/browser/index.js';

onmessage = async ({ data: { node, rank, sizes, seconds } }) => {
  try {
    const comm = await initCommGroup({ node, rank });
    const n = comm.size;
    for (const bytes of sizes) {
      const x = comm.alloc('f32', bytes / 4); // zero-copy: the collective uses it in place
      const want = (n * (n + 1)) / 2;
      let wrong = 0;
      const once = async () => {
        x.fill(rank + 1);
        await comm.allReduce(x);
        if (x[0] !== want || x[x.length - 1] !== want) wrong++;
      };
      // Warm-up, timed to choose how many calls fill `seconds`; every rank must make the same
      // number of calls, so they agree on the largest count.
      const w0 = performance.now();
      for (let i = 0; i < 3; i++) await once();
      const count = new Int32Array([Math.max(5, Math.ceil((seconds * 1000 * 3) / Math.max(performance.now() - w0, 1e-3)))]);
      await comm.allReduce(count, { op: 'max' });
      await comm.barrier();
      const t0 = performance.now();
      for (let i = 0; i < count[0]; i++) await once();
      const mean = new Float64Array([(performance.now() - t0) * 1000 / count[0]]);
      await comm.allReduce(mean, { op: 'max' }); // the slowest rank's time, as nccl-tests reports
      const bad = new Int32Array([wrong]);
      await comm.allReduce(bad);
      comm.free(x);
      if (rank === 0) {
        const algbw = bytes / (mean[0] * 1e3); // GB/s: bytes per microsecond / 1000
        postMessage({ row: { size: bytes, timeUs: mean[0], algbw, busbw: algbw * (2 * (n - 1)) / n, wrong: bad[0] } });
      }
    }
    postMessage({ done: rank });
  } catch (e) {
    postMessage({ error: `rank ${rank}: ${e.code ?? e.name}: ${e.message}` });
  }
};
