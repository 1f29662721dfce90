// Groups: 4 ranks as a 2 × 2 grid, as a job mixing tensor and data parallelism lays them out.
// Each row is a tensor-parallel group (its ranks hold shards of one model replica), each column
// a data-parallel group (the same shard in every replica). As torch.distributed's new_group: createGroup over
// 'rankN' names, then collectives with group=...
//   node bin/webccl.js run -n 4 examples/groups.mjs          (threads; --procs: processes)
//
//   rank:  0 1      row 0 = tp group [0, 1]     column 0 = dp group [0, 2]
//          2 3      row 1 = tp group [2, 3]     column 1 = dp group [1, 3]
import * as ccl from 'webccl';

const world = await ccl.initCommGroup();
const rank = ccl.getRank();
if (ccl.getWorldSize() !== 4) throw new Error('run this example on 4 ranks');
const row = Math.floor(rank / 2);
const col = rank % 2;

// Every rank calls createGroup for every group, in the same order; non-members get null.
const rows = [await ccl.createGroup(['rank0', 'rank1']), await ccl.createGroup(['rank2', 'rank3'])];
const tp = rows[row];
// The same grid with split: ranks with the same color form a group, ordered by key.
const dp = await world.split(col, rank);

// Tensor parallel: partial activations of this row's replica are summed across its shards.
const act = Float32Array.of(rank + 1, 10 * (rank + 1));
await ccl.allReduce(act, { op: ccl.Sum, group: tp });
// Data parallel: the gradient of this shard is averaged over the replicas (the column).
const grad = Float32Array.of(rank, 100 + rank);
await ccl.allReduce(grad, { op: ccl.Avg, group: dp });

// Check against closed forms: row r holds ranks 2r, 2r+1; column c holds ranks c, c+2.
const wantAct = [2 * row + 1 + (2 * row + 2), 10 * (2 * row + 1 + (2 * row + 2))];
const wantGrad = [col + 1, 100 + col + 1];
const ok = [...act].every((v, i) => v === wantAct[i]) && [...grad].every((v, i) => v === wantGrad[i]);
console.log(
  `rank ${rank}: tp group rank ${tp.rank}/${tp.size} (world ${tp.worldRank(0)},${tp.worldRank(1)}) activations ${[...act]}; dp group rank ${dp.rank}/${dp.size} (world ${dp.worldRank(0)},${dp.worldRank(1)}) gradients ${[...grad]}; ${ok ? 'correct' : 'WRONG'}`,
);
if (!ok) process.exitCode = 1;
for (const g of [...rows, dp]) g?.destroy();
