// Async handles: issue several collectives, compute meanwhile, wait; they complete in issue
// order. Work carries the op's timing.
//   node bin/webccl.js run -n 4 examples/async.mjs
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup();
const grads = [1 << 10, 1 << 16, 1 << 20].map((n) => new Float32Array(n).fill(comm.rank));

// Issue one allReduce per gradient bucket without waiting.
const handles = grads.map((g) => ccl.allReduceAsync(g, { op: ccl.Avg }));
let busy = 0;
for (let i = 0; i < 1e6; i++) busy += Math.sqrt(i); // "compute"
for (const h of handles) await ccl.wait(h);

// The same through the Communicator: Work is thenable.
const w = comm.allReduce(new Float64Array(4).fill(1));
await w;
if (comm.rank === 0) {
  handles.forEach((h, i) =>
    console.log(`bucket ${i}: ${grads[i].length} floats, avg ${grads[i][0]}, ${h.durationMs.toFixed(3)} ms`),
  );
  console.log(`then a thenable Work: completed=${w.isCompleted()} (${busy > 0 ? 'computed meanwhile' : ''})`);
}
