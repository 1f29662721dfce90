// allGather of tensors whose layouts differ across ranks (even ranks NC1HWC0, odd ranks NHWC,
// wireLayout 'NCHW': each rank converts its input before and its output after) against the
// same logical bytes row-major on every rank (no conversion), and the conversions' share of
// the op time, from stats().conversionMs. Then the same without wireLayout: on one node the
// signature check finds the layouts differ and the op runs again in row-major (one more
// handshake step); across nodes it is the wireLayout case. Median of the timed iterations
// after a warm-up.
//   node bin/webccl.js run -n 2 bench/layout-allgather.mjs [--shape N,C,H,W] [--dtype f32] [--iters 20]
import * as ccl from 'webccl';

const args = process.argv.slice(2);
const option = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const [N, C, H, W] = option('--shape', '4,20,64,64').split(',').map(Number);
const dtype = option('--dtype', 'f32');
const iters = Number(option('--iters', '20'));
const Arr = {
  f32: Float32Array,
  u8: Uint8Array,
  f16: Uint16Array,
  bf16: Uint16Array,
  i32: Int32Array,
  f64: Float64Array,
}[dtype];

const comm = await ccl.initCommGroup();
const logical = N * C * H * W;
const mine = comm.rank % 2 === 0 ? 'NC1HWC0' : 'NHWC';
const tensor = (n, layout) =>
  ccl.convertLayout({ data: new Arr(n * C * H * W), dtype, shape: [n, C, H, W], layout: 'NCHW' }, layout);

async function time(issue) {
  const ms = [];
  for (let i = 0; i < iters + 3; i++) {
    await comm.barrier();
    const t0 = performance.now();
    await issue();
    if (i >= 3) ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return ms[ms.length >> 1];
}

const rmIn = tensor(N, 'NCHW');
const rmOut = tensor(N * comm.size, 'NCHW');
const rowMajorMs = await time(() => comm.allGather(rmOut, rmIn));
const lin = tensor(N, mine);
const lout = tensor(N * comm.size, mine);
const before = comm.stats();
const mixedMs = await time(() => comm.allGather(lout, lin, { wireLayout: 'NCHW' }));
const after = comm.stats();
const convMs = (after.conversionMs - before.conversionMs) / (iters + 3);
const autoMs = await time(() => comm.allGather(lout, lin));
const bytes = logical * Arr.BYTES_PER_ELEMENT;
for (let r = 0; r < comm.size; r++) {
  if (r === comm.rank) {
    console.log(
      `rank ${r} (${mine}): allGather of [${N}, ${C}, ${H}, ${W}] ${dtype} (${(bytes / 2 ** 20).toFixed(2)} MiB per rank): row-major ${rowMajorMs.toFixed(2)} ms, mixed layouts ${mixedMs.toFixed(2)} ms (without wireLayout ${autoMs.toFixed(2)} ms); conversions ${convMs.toFixed(2)} ms per op (${((100 * convMs) / mixedMs).toFixed(0)}% of the op, ${(after.conversions - before.conversions) / (iters + 3)} per op)`,
    );
  }
  await comm.barrier();
}
