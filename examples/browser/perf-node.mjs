// A Node rank of the live benchmark across a job (examples/browser/perf.html?size=N&...): the
// same allReduce sweep the pages' ranks run, so Node ranks and browser ranks meet in one job,
// then each node's own sweep (a page's workers, a Node process's threads: perf-loop.js). Rank 0
// prints each row as a JSON line (a node's rows name it in `series`). Start it as any Node rank
// of a job whose store `webccl serve --token T` hosts (its store port is printed by serve):
//   RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=8081 WEBCCL_TOKEN=T \
//   WEBCCL_TRANSPORT=ws WEBCCL_STORE_SERVED=1 node examples/browser/perf-node.mjs [maxBytes] [seconds] [minBytes]
// Pages then open http://127.0.0.1:8080/examples/browser/perf.html?size=3&first=1&ranks=2&token=T
// As a Node node of several ranks (its threads then sweep on their own too, a series of theirs):
//   WEBCCL_TOKEN=T WEBCCL_TRANSPORT=ws WEBCCL_STORE_SERVED=1 npx webccl run --nnodes 2 --node-rank 1 \
//     --nproc-per-node 2 --master-addr 127.0.0.1 --master-port 8081 examples/browser/perf-node.mjs
import { initCommGroup } from 'webccl';
import { allReduceSweep, nodeSweeps, sweepSizes } from './perf-loop.js';

const comm = await initCommGroup();
// The same sizes as the pages' (their ?max= and ?min=, defaults 16 MiB and 8 B).
const sizes = sweepSizes(Number(process.argv[2] ?? 16 * 1024 * 1024), Number(process.argv[4] ?? 8));
const seconds = Number(process.argv[3] ?? 0.1);
await allReduceSweep(comm, { sizes, seconds, block: !comm.acrossNodes }, (row) => console.log(JSON.stringify(row)));
await nodeSweeps(comm, { sizes, seconds, kind: 'Node', block: true }, (row) => console.log(JSON.stringify(row)));
