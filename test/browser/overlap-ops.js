// The ops of the overlap check, run alike by a page's workers (net-progress-rank.js) and Node
// ranks (test/browser/fixtures/net-overlap.mjs) of one job: collectives over 4 MiB (the job's
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
  const c = 560_000; // over RANK_RUNS_MAX_BYTES (4 MiB) for each op
  const x = comm.alloc('f32', 2 * c).fill(rank + 1); // 4.3 MiB, from alloc(): in place
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
