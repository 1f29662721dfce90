// The ops of the overlap check, run alike by a page's workers (net-progress-rank.js) and Node
// ranks (test/browser/fixtures/net-overlap.mjs) of one job: collectives over 8 MiB (the job's
// progress threads run those: src/progress/net-route.ts), then a compute loop that never calls
// webccl; reports which ended meanwhile and whether every result is right.
export async function overlapCheck(comm, busyMs) {
  const { rank, size: n } = comm;
  const busy = () => {
    const until = performance.now() + busyMs;
    let x = 0;
    while (performance.now() < until) x += Math.sqrt(x + 1);
    return x;
  };
  // Each op just over RANK_RUNS_MAX_BYTES (8 MiB): every rank's network thread moves them over
  // WebSocket while 3 ranks spin on 2 cores, so the less the better.
  const x = comm.alloc('f32', (8 << 20) / 4 + 1024).fill(rank + 1); // from alloc(): in place
  const c = Math.ceil(((8 << 20) / 4 + 1024) / n);
  const part = new Int32Array(c).fill(rank); // a plain array: copied in and out
  const out = new Int32Array(n * c);
  await comm.barrier(); // every rank issues at about the same time: the compute outlasts the ops
  const works = [comm.allReduce(x), comm.allGather(out, part)];
  busy();
  const during = works.map((w) => w.isCompleted());
  await Promise.all(works);
  const right = x.every((v) => v === (n * (n + 1)) / 2) && out.every((v, i) => v === Math.floor(i / c));
  return { rank, during, right, threadOps: comm.stats().threadOps };
}
