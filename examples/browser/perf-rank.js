// One rank of the live benchmark (perf.html): joins (the page's node, or the job the page names)
// and runs the allReduce sweep (perf-loop.js); in a job, then each node's own sweep. Rank 0
// reports each row to the page.
import { initCommGroup } from '../../dist/browser/index.js';
import { allReduceSweep, nodeSweeps } from './perf-loop.js';

onmessage = async ({ data: { join, sizes, seconds, inJob } }) => {
  try {
    const comm = await initCommGroup(join);
    // A worker may block: on one node each call completes with waitSync(), as `webccl perf` does.
    await allReduceSweep(comm, { sizes, seconds, block: !comm.acrossNodes }, (row) => postMessage({ row }));
    if (inJob) await nodeSweeps(comm, { sizes, seconds, kind: 'page', block: true }, (row) => postMessage({ row }));
    postMessage({ done: comm.rank });
  } catch (e) {
    postMessage({
      error: `${join.node && !join.node.job ? 'node rank' : 'rank'} ${join.rank}: ${e.code ?? e.name}: ${e.message}`,
    });
  }
};
