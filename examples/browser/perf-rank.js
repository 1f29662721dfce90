// One rank of the live benchmark (perf.html): joins (the page's node, or the job the page names)
// and runs the allReduce sweep (perf-loop.js); rank 0 reports each row to the page.
import { initCommGroup } from '../../dist/browser/index.js';
import { allReduceSweep } from './perf-loop.js';

onmessage = async ({ data: { join, sizes, seconds } }) => {
  try {
    const comm = await initCommGroup(join);
    await allReduceSweep(comm, { sizes, seconds }, (row) => postMessage({ row }));
    postMessage({ done: comm.rank });
  } catch (e) {
    postMessage({ error: `${join.node && !join.node.job ? 'node rank' : 'rank'} ${join.rank}: ${e.code ?? e.name}: ${e.message}` });
  }
};
