// A Node rank of a job with browser ranks (job.html): joins as any Node rank does, from the
// environment, and runs the same checked sequence of ops the pages' ranks run (job-check.js),
// then prints "ok rank R of N". Start it with the job's store served by webccl serve --token T:
//   MASTER_ADDR=127.0.0.1 MASTER_PORT=8081 WEBCCL_TOKEN=T WEBCCL_TRANSPORT=ws WEBCCL_STORE_SERVED=1 \
//   webccl run --nnodes 4 --node-rank 0 --nproc-per-node 2 node_modules/webccl/examples/browser/job-node.mjs
import * as ccl from 'webccl';
import { checkEveryCollective } from './job-check.js';

const comm = await ccl.initCommGroup();
const r = await checkEveryCollective(ccl, comm);
console.log(`ok rank ${r.rank} of ${r.size}: every op checked; allReduce algorithms ${JSON.stringify(r.algos)}`);
