// One rank of progress.html: issues collectives, then computes without calling webccl, and
// reports whether they ended meanwhile (the node's progress thread ran them) and were right.
const busy = (ms) => {
  const until = performance.now() + ms;
  let x = 0;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  return x;
};
const failure = (e) => ({ code: e.code ?? e.name, message: e.message, details: e.details });

/**
 * Four times: a group of every rank, an allReduce, destroyed; the next group (its block where the
 * first's was, every rank having let go); abort() of the destroyed one, which must do nothing;
 * two allReduces on the next group, checked.
 */
async function abortDestroyed(comm) {
  const all = Array.from({ length: comm.size }, (_, r) => r);
  const want = (comm.size * (comm.size + 1)) / 2;
  let right = true;
  const sum = async (g) => {
    const x = new Float32Array(3000).fill(comm.rank + 1);
    await g.allReduce(x);
    right &&= x.every((v) => v === want);
  };
  for (let round = 0; round < 4; round++) {
    const first = await comm.createGroup(all);
    await sum(first);
    first.destroy();
    await comm.barrier();
    const next = await comm.createGroup(all);
    first.abort('too late');
    try {
      await sum(next);
      await sum(next);
    } catch (e) {
      return { right: false, error: failure(e) };
    }
    next.destroy();
  }
  return { right, error: null };
}

onmessage = async ({ data }) => {
  if (data.go) return; // handled by the waiter below
  const { lib, node, rank, mode, stop, busyMs } = data;
  const { initCommGroup } = await import(lib);
  let comm;
  try {
    comm = await initCommGroup({ node, rank, progress: mode });
  } catch (e) {
    postMessage({ rank, init: failure(e) });
    return;
  }
  const n = comm.size;
  if (data.abortDestroyed) {
    postMessage({ rank, ...(await abortDestroyed(comm)) });
    return;
  }
  if (stop) {
    if (rank === 1) await new Promise((res) => addEventListener('message', ({ data: d }) => d.go && res()));
    const x = comm.alloc('f32', 1000).fill(1);
    const w = comm.allReduce(x);
    if (rank === 0) postMessage({ posted: true });
    const outcome = await w.then(() => 'completed', failure);
    postMessage({ rank, outcome });
    return;
  }
  // auto: the small first op starts on the rank at issue (its data posted for the peers); the
  // second is held, and handed over by the third call; every later one goes at once.
  const lead = new Float64Array(8).fill(rank);
  const x = comm.alloc('f32', 1 << 20).fill(rank + 1); // 4 MiB: zero-copy from alloc()
  const plain = new Int32Array(100_003).fill(rank); // a plain array: copied in and out
  const out = new Int32Array(n * 100_003);
  // Rooted ops too, from every root: broadcast into alloc() buffers, reduce into plain arrays.
  const roots = Array.from({ length: n }, (_, root) => root);
  const bs = roots.map((root) => comm.alloc('f64', 10_000).fill(rank === root ? root + 7 : 0));
  const reds = roots.map(() => new Float32Array(20_000).fill(rank + 1));
  const works = [
    comm.allReduce(lead),
    comm.allReduce(x),
    comm.allGather(out, plain),
    ...roots.flatMap((root) => [comm.broadcast(bs[root], { root }), comm.reduce(reds[root], { root })]),
  ];
  busy(busyMs);
  const during = works.map((w) => w.isCompleted());
  await Promise.all(works);
  const want = (n * (n + 1)) / 2;
  postMessage({
    rank,
    during,
    right:
      lead.every((v) => v === (n * (n - 1)) / 2) &&
      x.every((v) => v === want) &&
      out.every((v, i) => v === Math.floor(i / 100_003)) &&
      roots.every(
        (root) => bs[root].every((v) => v === root + 7) && (rank !== root || reds[root].every((v) => v === want)),
      ),
    threadOps: comm.stats().threadOps,
  });
};
