// Buffers from comm.alloc() live in the node's shared memory: collectives read and write them
// in place (a large allReduce on them copies nothing).
//   node bin/webccl.js run -n 4 examples/zero-copy.mjs
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup();
const n = 1 << 22; // 16 MiB of f32
const x = comm.alloc('f32', n);
x.fill(comm.rank + 1);
const t0 = performance.now();
await comm.allReduce(x); // twoshot over the ranks' own buffers
const ms = performance.now() - t0;
const want = (comm.size * (comm.size + 1)) / 2;
if (x.some((v) => v !== want)) throw new Error('wrong result');
comm.free(x);
if (comm.rank === 0)
  console.log(
    `zero-copy allReduce of ${(n * 4) >> 20} MiB over ${comm.size} ranks: ${ms.toFixed(1)} ms, every element ${want}`,
  );
