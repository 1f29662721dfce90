// One rank, in a module Web Worker: joins the node the page created and runs collectives.
import { initCommGroup } from '../../dist/browser/index.js';

onmessage = async ({ data: { node, rank } }) => {
  try {
    const comm = await initCommGroup({ node, rank });
    const x = new Float32Array(100_000).fill(rank + 1);
    const gathered = new Int32Array(comm.size);
    // Two ops in flight, then one wait: the node's progress thread (started by createNode) runs
    // them while this rank goes on; an op awaited at once runs on the rank itself, the faster way.
    await Promise.all([
      comm.allReduce(x), // sum: 1 + 2 + … + size on every rank
      comm.allGather(gathered, new Int32Array([rank])),
    ]);
    const b = new Uint8Array(16);
    if (rank === 0) b.fill(42);
    await comm.broadcast(b); // root 0 by default
    postMessage({
      rank,
      size: comm.size,
      sum: x[x.length - 1],
      gathered: Array.from(gathered),
      broadcast: b[15],
      threadOps: comm.stats().threadOps,
    });
  } catch (e) {
    postMessage({ rank, error: `${e.code ?? e.name}: ${e.message}` });
  }
};
