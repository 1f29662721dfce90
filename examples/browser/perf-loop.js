// The allReduce sweep of the live benchmark, on any communicator (browser-safe; a page's workers
// and Node ranks of the same job run it, so every rank makes the same calls): for each size, a
// few warm-up calls, then enough timed calls to fill `seconds` (every rank agrees on the largest
// count), the slowest rank's mean time agreed with an allReduce (max), as nccl-tests reports,
// and every result checked (each rank adds rank + 1). Rank 0 gets each row through `onRow`.
//   await allReduceSweep(comm, { sizes: [1024, 4096], seconds: 0.1 }, (row) => ...)

/** Sizes from `min` (default 8 B, so the latency end shows) to `max` bytes, ×4 each, and `max` itself. */
export function sweepSizes(max, min = 8) {
  const sizes = [];
  for (let s = min; s <= max; s *= 4) sizes.push(s);
  if (sizes.at(-1) !== max && max > min) sizes.push(max);
  return sizes;
}

export async function allReduceSweep(comm, { sizes, seconds }, onRow) {
  const n = comm.size;
  const rank = comm.rank;
  const now = () => performance.now();
  for (const bytes of sizes) {
    const x = comm.alloc('f32', bytes / 4); // zero-copy: the collective uses it in place
    const want = (n * (n + 1)) / 2;
    let wrong = 0;
    const once = async () => {
      x.fill(rank + 1);
      await comm.allReduce(x);
      if (x[0] !== want || x[x.length - 1] !== want) wrong++;
    };
    const w0 = now();
    for (let i = 0; i < 3; i++) await once();
    const count = new Int32Array([Math.max(5, Math.ceil((seconds * 1000 * 3) / Math.max(now() - w0, 1e-3)))]);
    await comm.allReduce(count, { op: 'max' });
    await comm.barrier();
    const t0 = now();
    for (let i = 0; i < count[0]; i++) await once();
    const mean = new Float64Array([((now() - t0) * 1000) / count[0]]);
    await comm.allReduce(mean, { op: 'max' });
    const bad = new Int32Array([wrong]);
    await comm.allReduce(bad);
    comm.free(x);
    if (rank === 0) {
      const algbw = bytes / (mean[0] * 1e3); // GB/s: bytes per microsecond / 1000
      onRow({ size: bytes, timeUs: mean[0], algbw, busbw: (algbw * (2 * (n - 1))) / n, wrong: bad[0], ranks: n });
    }
  }
}

/**
 * Each node of the job on its own: the ranks of every node of at least 2 (a page's workers, a
 * Node process's threads) run the same sweep among themselves over shared memory, one node at a
 * time so that none competes with another for the cores, while the others wait. `kind` names
 * this rank's side ('page' or 'Node'); rank 0 gets each node's rows through `onRow`, each with
 * `series` naming the node (its kind and world ranks). Every rank of `comm` calls it.
 */
export async function nodeSweeps(comm, { sizes, seconds, kind }, onRow) {
  const local = await comm.splitByNode();
  // Which node each rank is on (its node's first rank here) and of what kind.
  const mine = Int32Array.of(comm.groupRank(local.worldRank(0)), kind === 'Node' ? 1 : 0);
  const all = new Int32Array(2 * comm.size);
  await comm.allGather(all, mine);
  const firstOf = (r) => all[2 * r];
  const nodes = [...new Set(Array.from({ length: comm.size }, (_, r) => firstOf(r)))].sort((a, b) => a - b);
  // A node's sweep can outlast the default deadline of the ranks that wait for it.
  const timeoutMs = Math.max(60_000, sizes.length * seconds * 1000 * 20);
  for (const first of nodes) {
    const members = Array.from({ length: comm.size }, (_, r) => r).filter((r) => firstOf(r) === first);
    if (members.length < 2) continue;
    const rows = [];
    if (firstOf(comm.rank) === first) await allReduceSweep(local, { sizes, seconds }, (row) => rows.push(row));
    const series = `${all[2 * first + 1] ? 'Node' : 'page'} ranks ${members.join(', ')} alone`;
    for (const [k, size] of sizes.entries()) {
      const r = new Float64Array(4);
      if (comm.rank === first) r.set([rows[k].timeUs, rows[k].algbw, rows[k].busbw, rows[k].wrong]);
      await comm.broadcast(r, { root: first, timeoutMs });
      if (comm.rank === 0) onRow({ size, timeUs: r[0], algbw: r[1], busbw: r[2], wrong: r[3], ranks: members.length, series });
    }
  }
  local.destroy();
}
