// One rank in a Web Worker: joins the node the page created and checks every collective.
import { initCommGroup, Max } from '/dist/browser/index.js';

onmessage = async ({ data: { node, rank } }) => {
  try {
    const comm = await initCommGroup({ node, rank });
    const n = comm.size;
    const x = new Float32Array(3000).fill(rank + 1); // crosses 4 KiB chunks
    await comm.allReduce(x);
    const big = comm.alloc('f64', 100000); // zero-copy twoshot
    big.fill(rank);
    await comm.allReduce(big, { op: Max });
    const out = new Int32Array(n * 5);
    await comm.allGather(out, new Int32Array(5).fill(rank));
    const half = { data: new Uint16Array(64).fill(0x3c00), dtype: 'f16' }; // 1.0
    await comm.allReduce(half);
    const b = new Uint8Array(10);
    if (rank === 0) b.fill(7);
    await comm.broadcast(b);
    postMessage({
      rank,
      sum: x.every((v) => v === (n * (n + 1)) / 2),
      max: big.every((v) => v === n - 1),
      gather: out.every((v, i) => v === Math.floor(i / 5)),
      f16: half.data[0],
      bcast: b.every((v) => v === 7),
    });
  } catch (e) {
    postMessage({ rank, error: `${e.code ?? ''} ${e.message}` });
  }
};
