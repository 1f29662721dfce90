// Every collective, point-to-point and a pair of groups on closed-form data, each result checked
// by the rank that got it. Runs unchanged in a page's worker (job-rank.js) and in a Node rank
// (the library is passed in), so that a job mixing both runs one sequence of ops on every rank.
// A wrong element throws, naming the op and the index; the return value says what ran.
//   await checkEveryCollective(ccl, comm, { sizes: [1, 1000, 300000] })

/**
 * @param ccl the webccl module (its module-level functions run on the world)
 * @param comm the world communicator initCommGroup returned
 * @param o sizes: f32 allReduce sizes; algo: run them again with this algorithm;
 *          expectDefault: the allReduce of the largest size must run this algorithm
 */
export async function checkEveryCollective(ccl, comm, o = {}) {
  const sizes = o.sizes ?? [1, 1000, 300000];
  const rank = comm.rank;
  const n = comm.size;
  const ranks = Array.from({ length: n }, (_, r) => r);
  // Rank r's element i: small integers, so every sum below is exact in f32.
  const f = (r, i) => ((r * 7 + i * 3) % 11) - 5;
  const g = (r, i) => ((r * 13 + i * 5) % 17) - 8;
  const expectEqual = (what, got, want) => {
    for (let i = 0; i < want.length; i++) {
      if (got[i] !== want[i])
        throw new Error(`rank ${rank} of ${n}: ${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
    }
    if (got.length !== want.length)
      throw new Error(`rank ${rank}: ${what}: length ${got.length}, expected ${want.length}`);
  };
  const algos = () => comm.stats().allReduceAlgorithms;
  const sums = async (size, algo) => {
    const x = Float32Array.from({ length: size }, (_, i) => f(rank, i));
    await ccl.allReduce(x, { op: ccl.Sum, ...(algo && { algo }) });
    expectEqual(
      `allReduce f32 sum of ${size}${algo ? ` (${algo})` : ''}`,
      x,
      Float32Array.from({ length: size }, (_, i) => ranks.reduce((s, r) => s + f(r, i), 0)),
    );
  };

  for (const size of sizes) {
    const before = algos();
    await sums(size);
    if (o.expectDefault && size === Math.max(...sizes)) {
      const after = algos();
      const ran = Object.keys(after).filter((a) => after[a] !== before[a]);
      if (ran.join() !== o.expectDefault)
        throw new Error(
          `rank ${rank}: the default allReduce of ${size} floats ran ${ran.join() || 'nothing'}, expected ${o.expectDefault}`,
        );
    }
  }
  if (o.algo) {
    const before = algos()[o.algo];
    for (const size of sizes) await sums(size, o.algo);
    if (algos()[o.algo] !== before + sizes.length)
      throw new Error(`rank ${rank}: algo '${o.algo}' was not used: ${JSON.stringify(algos())}`);
  }

  // i32 max
  const m = Int32Array.from({ length: 1000 }, (_, i) => g(rank, i));
  await ccl.allReduce(m, { op: ccl.Max });
  expectEqual(
    'allReduce i32 max',
    m,
    Int32Array.from({ length: 1000 }, (_, i) => Math.max(...ranks.map((r) => g(r, i)))),
  );

  // allGather: rank r contributes 1000·r + i
  const per = 777;
  const gathered = new Float64Array(n * per);
  await ccl.allGather(
    gathered,
    Float64Array.from({ length: per }, (_, i) => 1000 * rank + i),
  );
  expectEqual(
    'allGather',
    gathered,
    Float64Array.from({ length: n * per }, (_, j) => 1000 * Math.floor(j / per) + (j % per)),
  );

  // reduceScatter: every rank's input element j is f(r, j); this rank keeps the sum of its block
  const blk = 513;
  const mine = new Float32Array(blk);
  await ccl.reduceScatter(
    mine,
    Float32Array.from({ length: n * blk }, (_, j) => f(rank, j)),
    { op: ccl.Sum },
  );
  expectEqual(
    'reduceScatter',
    mine,
    Float32Array.from({ length: blk }, (_, i) => ranks.reduce((s, r) => s + f(r, rank * blk + i), 0)),
  );

  // broadcast from the last rank
  const root = n - 1;
  const b =
    rank === root ? Float64Array.from({ length: 5000 }, (_, i) => i * 0.5 - 7) : new Float64Array(5000).fill(NaN);
  await ccl.broadcast(b, { root });
  expectEqual(
    `broadcast from rank ${root}`,
    b,
    Float64Array.from({ length: 5000 }, (_, i) => i * 0.5 - 7),
  );

  // reduce (sum) to rank 0 and to rank 1: only the root's buffer changes
  for (const to of [0, Math.min(1, n - 1)]) {
    const r = Int32Array.from({ length: 3000 }, (_, i) => f(rank, i));
    await ccl.reduce(r, { op: ccl.Sum, root: to });
    expectEqual(
      `reduce to rank ${to}`,
      r,
      Int32Array.from({ length: 3000 }, (_, i) => (rank === to ? ranks.reduce((s, q) => s + f(q, i), 0) : f(rank, i))),
    );
  }

  // allToAll with equal blocks: rank r's block j is 1000·r + 10·j + i
  const bl = 301;
  const a2a = new Float32Array(n * bl);
  await comm
    .allToAll(
      a2a,
      Float32Array.from({ length: n * bl }, (_, k) => 1000 * rank + 10 * Math.floor(k / bl) + (k % bl)),
    )
    .wait();
  expectEqual(
    'allToAll',
    a2a,
    Float32Array.from({ length: n * bl }, (_, k) => 1000 * Math.floor(k / bl) + 10 * rank + (k % bl)),
  );

  // allToAll with per-peer counts: rank i sends rank j (i + 2j) % 3 · 200 elements (zeros among them)
  const cnt = (i, j) => ((i + 2 * j) % 3) * 200;
  const sendCounts = ranks.map((j) => cnt(rank, j));
  const recvCounts = ranks.map((i) => cnt(i, rank));
  const total = (c) => c.reduce((x, y) => x + y, 0);
  const uneven = new Int32Array(total(recvCounts));
  await comm
    .allToAll(
      uneven,
      Int32Array.from({ length: total(sendCounts) }, (_, k) => 100000 * rank + k),
      { sendCounts, recvCounts },
    )
    .wait();
  const offsetIn = (i, j) => ranks.slice(0, j).reduce((s, q) => s + cnt(i, q), 0);
  expectEqual(
    'allToAll with per-peer counts',
    uneven,
    Int32Array.from(
      ranks.flatMap((i) => Array.from({ length: cnt(i, rank) }, (_, k) => 100000 * i + offsetIn(i, rank) + k)),
    ),
  );

  // gather to and scatter from every root: rank r's block is 1000·r + i
  for (let to = 0; to < n; to++) {
    const per = 257;
    const all = to === rank ? new Float64Array(n * per) : null;
    await comm
      .gather(
        all,
        Float64Array.from({ length: per }, (_, i) => 1000 * rank + i),
        { root: to },
      )
      .wait();
    if (all)
      expectEqual(
        `gather to rank ${to}`,
        all,
        Float64Array.from({ length: n * per }, (_, k) => 1000 * Math.floor(k / per) + (k % per)),
      );
    const part = new Float64Array(per);
    const whole =
      to === rank ? Float64Array.from({ length: n * per }, (_, k) => 1000 * Math.floor(k / per) + (k % per)) : null;
    await comm.scatter(part, whole, { root: to }).wait();
    expectEqual(
      `scatter from rank ${to}`,
      part,
      Float64Array.from({ length: per }, (_, i) => 1000 * rank + i),
    );
  }

  // send/recv around the ring: rank r sends r + 1's way, and receives from r - 1
  if (n > 1) {
    const next = (rank + 1) % n;
    const prev = (rank + n - 1) % n;
    const got = new Int32Array(4);
    await Promise.all([
      comm.recv(got, prev, { tag: 7 }).wait(),
      comm.send(Int32Array.of(rank, 1, 2, 3), next, { tag: 7 }).wait(),
    ]);
    expectEqual('send/recv around the ring', got, [prev, 1, 2, 3]);
  }

  // Groups: the even and the odd world ranks (split), each summing its members' ranks
  const half = await comm.split(rank % 2, rank);
  const s = Int32Array.of(rank);
  await ccl.allReduce(s, { group: half });
  expectEqual(`allReduce in the group of ${rank % 2 ? 'odd' : 'even'} ranks`, s, [
    ranks.filter((r) => r % 2 === rank % 2).reduce((x, y) => x + y, 0),
  ]);
  half.destroy();

  await ccl.barrier();
  return { rank, size: n, algos: algos() };
}
