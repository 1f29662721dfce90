// One script, any launcher: ranks in separate processes (or on separate machines) find each
// other through rank 0's rendezvous store and talk over TCP. Each rank says who started it,
// then the ranks average a "gradient", gather every rank's process id and check both.
//
// One machine, one process per rank:
//   node bin/webccl.js run --procs -n 2 examples/multi-process.mjs
// Two nodes of two thread ranks each (here both on this machine; on two machines give the
// first one's address to --master-addr and the same WEBCCL_TOKEN to both):
//   node bin/webccl.js run --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-port 29500 examples/multi-process.mjs &
//   node bin/webccl.js run --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-port 29500 examples/multi-process.mjs
// torchrun's variables, set by hand (or by torchrun, Slurm scripts, Kubernetes operators...):
//   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 node examples/multi-process.mjs &
//   RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 node examples/multi-process.mjs
// Open MPI's mpirun (it only starts the processes; webccl does not use MPI):
//   mpirun -np 2 node examples/multi-process.mjs
import { hostname } from 'node:os';
import { isMainThread } from 'node:worker_threads';
import * as ccl from 'webccl';

const e = process.env;
const startedBy = !isMainThread
  ? 'webccl run (a worker thread of a node)'
  : e.OMPI_COMM_WORLD_RANK !== undefined
    ? 'mpirun (OMPI_COMM_WORLD_RANK)'
    : e.RANK !== undefined
      ? `torchrun's variables (RANK=${e.RANK}; webccl run --procs sets them too)`
      : 'nothing: a world of one rank';

const comm = await ccl.initCommGroup();
const { rank, size } = comm;
console.log(`rank ${rank} of ${size}: pid ${process.pid} on ${hostname()}, started by ${startedBy}`);

// Every rank holds its own gradient; after an avg allReduce all hold the mean.
const grad = new Float32Array(1 << 18).map((_, i) => rank + (i % 4));
await ccl.allReduce(grad, { op: ccl.Avg });
const mean = (size - 1) / 2;
const gradOk = grad.every((v, i) => v === mean + (i % 4));

// Every rank learns every rank's process id (ranks that are threads of one node share one).
const pids = new Int32Array(size);
await ccl.allGather(pids, new Int32Array([process.pid]));
const pidsOk = pids[rank] === process.pid;

await ccl.barrier();
if (!gradOk || !pidsOk)
  throw new Error(`rank ${rank}: wrong result (gradient ${gradOk ? 'ok' : 'wrong'}, pids ${pidsOk ? 'ok' : 'wrong'})`);
if (rank === 0) {
  const algos = Object.entries(comm.stats().allReduceAlgorithms ?? {})
    .filter(([, n]) => n)
    .map(([a]) => a);
  console.log(
    `avg of ${grad.length} floats over ${size} ranks: element 0 is ${grad[0]}${algos.length ? ` (algorithm: ${algos.join(', ')})` : ''}`,
  );
  console.log(`${new Set(pids).size} process(es), pids ${Array.from(pids).join(', ')}: every result checked`);
}
