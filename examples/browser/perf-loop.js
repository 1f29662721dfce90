// The allReduce sweep of the live benchmark, on any communicator (browser-safe; a page's workers
// and Node ranks of the same job run it, so every rank makes the same calls): for each size,
// warm-up calls (a second at the first size, a third of `seconds` at each), then enough timed
// calls to fill `seconds` (every rank agrees on the largest count), the slowest rank's mean time
// agreed with an allReduce (max), as nccl-tests reports, and every result checked (each rank
// adds rank + 1). Rank 0 gets each row through `onRow`. Ranks that may block complete each call
// with waitSync() and others await it: `block`.
//   await allReduceSweep(comm, { sizes: [1024, 4096], seconds: 0.1 }, (row) => ...)

/** Sizes from `min` (default 8 B, so the latency end shows) to `max` bytes, ×4 each, and `max` itself. */
export function sweepSizes(max, min = 8) {
  const sizes = [];
  for (let s = min; s <= max; s *= 4) sizes.push(s);
  if (sizes.at(-1) !== max && max > min) sizes.push(max);
  return sizes;
}

/**
 * How long the first size is warmed up (ms): V8 compiles the path every size shares by use, and
 * in a page that takes thousands of calls (the first rows ran 2–5× slower after 2,000).
 */
const FIRST_WARMUP_MS = 1000;

/**
 * `block`: complete each call with waitSync() (a worker or Node thread of a communicator on one
 * node may block: what `webccl perf` does there), else await it. Timed calls are out of place
 * (x into y): the inputs stay as filled, so no refill sits in the timed loop, and each result is
 * checked at both ends, which the call must have written (they are cleared before it).
 */
export async function allReduceSweep(comm, { sizes, seconds, block = false }, onRow) {
  const n = comm.size;
  const rank = comm.rank;
  const now = () => performance.now();
  for (const bytes of sizes) {
    const x = comm.alloc('f32', bytes / 4); // zero-copy: the collective reads and writes them in place
    const y = comm.alloc('f32', bytes / 4);
    x.fill(rank + 1);
    const want = (n * (n + 1)) / 2;
    const last = y.length - 1;
    let wrong = 0;
    const check = () => {
      if (y[0] !== want || y[last] !== want) wrong++;
      y[0] = y[last] = 0;
    };
    const calls = block
      ? (k) => {
          for (let i = 0; i < k; i++) {
            comm.allReduce(x, { out: y }).waitSync();
            check();
          }
        }
      : async (k) => {
          for (let i = 0; i < k; i++) {
            await comm.allReduce(x, { out: y });
            check();
          }
        };
    // Warm-up: at the first size FIRST_WARMUP_MS, then at each 3 calls and as many as fill a
    // third of `seconds` (the code a size takes is compiled by use: the first rows would time the
    // compiler), which also gives the rate. Every rank makes as many calls as the slowest asks
    // for (agreed with allReduce max).
    const agreed = async (k) => {
      const v = Int32Array.of(k);
      await comm.allReduce(v, { op: 'max' });
      return v[0];
    };
    if (bytes === sizes[0]) {
      // Batches of calls until every rank has run for FIRST_WARMUP_MS (rank agreement per batch).
      const t = now();
      for (let go = 1; go; ) {
        await calls(50);
        go = await agreed(now() - t < FIRST_WARMUP_MS ? 1 : 0);
      }
    }
    let w0 = now();
    await calls(3);
    const more = await agreed(Math.ceil((seconds * 1000) / Math.max(now() - w0, 1e-3)));
    w0 = now();
    await calls(more);
    const count = await agreed(Math.max(5, Math.ceil((seconds * 1000 * more) / Math.max(now() - w0, 1e-3))));
    await comm.barrier();
    const t0 = now();
    await calls(count);
    const mean = new Float64Array([((now() - t0) * 1000) / count]);
    await comm.allReduce(mean, { op: 'max' });
    const bad = new Int32Array([wrong]);
    await comm.allReduce(bad);
    comm.free(x);
    comm.free(y);
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
 * `series` naming the node (its kind and world ranks). Every rank of `comm` calls it; `block` as
 * for allReduceSweep, for the node's own sweep.
 */
export async function nodeSweeps(comm, { sizes, seconds, kind, block = false }, onRow) {
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
    if (firstOf(comm.rank) === first) await allReduceSweep(local, { sizes, seconds, block }, (row) => rows.push(row));
    const series = `${all[2 * first + 1] ? 'Node' : 'page'} ranks ${members.join(', ')} alone`;
    for (const [k, size] of sizes.entries()) {
      const r = new Float64Array(4);
      if (comm.rank === first) r.set([rows[k].timeUs, rows[k].algbw, rows[k].busbw, rows[k].wrong]);
      await comm.broadcast(r, { root: first, timeoutMs });
      if (comm.rank === 0)
        onRow({ size, timeUs: r[0], algbw: r[1], busbw: r[2], wrong: r[3], ranks: members.length, series });
    }
  }
  local.destroy();
}
