// Coalesced collectives: many arrays of one dtype reduced (or broadcast) as one call, the way a
// training step averages its gradients (torch's all_reduce_coalesced, Horovod's grouped
// allreduce). The arrays are packed into buckets of the node memory of at most
// COALESCED_BUCKET_BYTES, one op runs per bucket, and the results are copied back.
//   node bin/webccl.js run -n 2 examples/coalesced.mjs
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup();
const { rank, size } = comm;

// A model's gradients: arrays of many lengths (an empty one too), one dtype.
const grads = [1000, 1, 0, 2].map((n) => new Float32Array(n).fill(rank));
let ops = comm.stats().ops;
const w = comm.allReduceCoalesced(grads, { op: 'avg' }); // one Work for the whole list, issued now
// ... the rest of the backward pass would run here ...
await w;
const reduceOps = comm.stats().ops - ops;

// The parameters from rank 0 to every rank, as one call.
const params = [new Float64Array(16), new Float64Array(3)];
if (rank === 0) params.forEach((p, i) => p.fill(i + 0.25));
ops = comm.stats().ops;
await comm.broadcastCoalesced(params, { root: 0 });
const broadcastOps = comm.stats().ops - ops;

if (rank === size - 1) {
  const floats = grads.reduce((n, g) => n + g.length, 0);
  const values = grads.map((g) => (g.length ? g[0] : 'empty')).join(', ');
  console.log(`${grads.length} gradients (${floats} floats) averaged in ${reduceOps} allReduce: ${values}`);
  console.log(`parameters ${params.map((p) => p[0]).join(', ')}: broadcast from rank 0 in ${broadcastOps} op`);
  console.log(`(buckets of at most ${ccl.COALESCED_BUCKET_BYTES / 2 ** 20} MiB)`);
}
