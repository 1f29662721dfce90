// Compute/communication overlap, shaped like a data-parallel training step: backward runs layer
// by layer (last first), each layer's gradient allReduce is issued as soon as that layer is
// done, and one wait at the end collects them all. The node's progress thread runs the
// allReduces while the rank computes the next layer, without the rank calling webccl.
// Run it twice to see the difference the progress thread makes:
//   node bin/webccl.js run -n 2 examples/overlap.mjs                          (progress thread)
//   WEBCCL_PROGRESS=caller node bin/webccl.js run -n 2 examples/overlap.mjs   (ops move only in the wait)
// and as processes over TCP, where each rank's network progress thread runs them:
//   node bin/webccl.js run --procs -n 2 examples/overlap.mjs
// With WEBCCL_TRACE=overlap.json the timeline of every rank and of the progress thread goes
// to overlap.json: open it in https://ui.perfetto.dev to see the allReduces under the compute.
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup();
// Eight layers' gradients, 10 MiB of f32 each, in zero-copy buffers (plain Float32Arrays work
// too: they are copied into shared memory when the op is issued and out when it completes).
// Across processes the network thread takes collectives over 8 MiB; smaller ones run on the
// rank's own connections, where a waited op is fastest, and move only while the rank awaits.
const layers = Array.from({ length: 8 }, () => comm.alloc('f32', 10 << 18));
const weights = new Float32Array(10 << 18).fill(0.5);

/**
 * One layer's backward, shaped like a step on an accelerator: the CPU prepares the gradient,
 * then waits for the "device" (a timer standing in for a GPU kernel or a data loader) — time
 * a CPU collective library must fill. No webccl call in here.
 */
async function backward(grad, layer) {
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < grad.length; i++) grad[i] = grad[i] * 0.5 + weights[i] * (comm.rank + layer + pass);
  }
  await new Promise((done) => setTimeout(done, 4));
}

async function step(overlapped) {
  const handles = [];
  const t0 = performance.now();
  for (let l = layers.length - 1; l >= 0; l--) {
    layers[l].fill(0);
    await ccl.traceSpan(`backward layer ${l}`, () => backward(layers[l], l));
    const h = comm.allReduce(layers[l], { op: ccl.Avg });
    if (overlapped) handles.push(h);
    else await h; // serial: each gradient's allReduce before the next layer's compute
  }
  await Promise.all(handles); // one wait at the end
  return performance.now() - t0;
}

await step(true); // warm-up: code compiled, memory touched
const serial = [];
const overlapped = [];
for (let i = 0; i < 3; i++) {
  serial.push(await step(false));
  overlapped.push(await step(true));
}
const best = (xs) => Math.min(...xs).toFixed(1);
if (comm.rank === 0) {
  console.log(
    `progress: ${process.env.WEBCCL_PROGRESS ?? 'auto'}; ops run by the progress thread on rank 0: ${comm.stats().threadOps}`,
  );
  console.log(`step with each allReduce awaited before the next layer: ${best(serial)} ms`);
  console.log(`step with allReduces issued as layers finish, one wait:  ${best(overlapped)} ms`);
  console.log(`average gradient element: ${layers[0][0].toFixed(3)} (all ranks agree)`);
}
for (const g of layers) comm.free(g);
