// The module-level API on the default world group: every collective and op.
//   node bin/webccl.js run -n 4 examples/allreduce.mjs
import * as ccl from 'webccl';

await ccl.initCommGroup();
const rank = ccl.getRank();
const size = ccl.getWorldSize();

const x = new Float32Array(8).fill(rank + 1);
await ccl.allReduce(x, { op: ccl.Sum }); // 1 + 2 + ... + size
const m = new Int32Array([rank * 10, -rank]);
await ccl.allReduce(m, { op: ccl.Max }); // [10·(size−1), 0]
const a = new Float64Array([rank]);
await ccl.allReduce(a, { op: ccl.Avg }); // (size − 1) / 2

const out = new Uint8Array(size * 2);
await ccl.allGather(out, new Uint8Array([rank, rank])); // [0,0,1,1,2,2,...]

const all = new Float32Array(size * 3).map((_, i) => i); // every rank holds 0..3·size−1
const mine = new Float32Array(3);
await ccl.reduceScatter(mine, all, { op: ccl.Sum }); // size · (3·rank + i)

const b = new BigInt64Array(2);
if (rank === 0) b.set([2n ** 40n, -7n]);
await ccl.broadcast(b, { root: 0 });

const r = new Float32Array([rank + 1]);
await ccl.reduce(r, { op: ccl.Prod, root: size - 1 }); // size! on the last rank
await ccl.barrier();

if (rank === size - 1) {
  console.log(`allReduce sum ${x[0]}, max ${Array.from(m)}, avg ${a[0]}`);
  console.log(`allGather ${Array.from(out)}; reduceScatter (rank ${rank}) ${Array.from(mine)}`);
  console.log(`broadcast ${b}; reduce prod on rank ${rank}: ${r[0]}`);
}
