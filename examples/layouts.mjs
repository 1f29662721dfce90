// Tensors in device layouts: even ranks hold NC1HWC0 tensors (Ascend's channel blocks of C0,
// zero-padded), odd ranks NHWC. The allGather's signature check finds the layouts differ, so
// the data crosses row-major and each rank converts at its end, gathering along N into its own
// layout; stats() counts the conversions (WEBCCL_DEBUG=INFO logs each with its cost).
//   node bin/webccl.js run -n 2 examples/layouts.mjs
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup();
const [N, C, H, W] = [1, 3, 2, 2];
// Rank r's tensor holds, at (n, c, h, w), the value 100·r + 10·c + 2·h + w (built row-major).
const rowMajor = { data: new Float32Array(N * C * H * W), shape: [N, C, H, W], layout: 'NCHW' };
for (let c = 0; c < C; c++)
  for (let h = 0; h < H; h++)
    for (let w = 0; w < W; w++) rowMajor.data[(c * H + h) * W + w] = 100 * comm.rank + 10 * c + 2 * h + w;
const mine = comm.rank % 2 === 0 ? 'NC1HWC0' : 'NHWC';
const input = ccl.convertLayout(rowMajor, mine, mine === 'NC1HWC0' ? { c0: 4 } : undefined);
const output = ccl.convertLayout(
  { data: new Float32Array(comm.size * N * C * H * W), shape: [comm.size * N, C, H, W], layout: 'NCHW' },
  mine,
  mine === 'NC1HWC0' ? { c0: 4 } : undefined,
);
await comm.allGather(output, input);

// Read the result back row-major, whatever this rank's layout, and check it.
const back = ccl.convertLayout(output, 'NCHW').data;
let wrong = 0;
for (let r = 0; r < comm.size; r++)
  for (let i = 0; i < N * C * H * W; i++) {
    const c = Math.floor(i / (H * W)),
      h = Math.floor(i / W) % H,
      w = i % W;
    if (back[r * N * C * H * W + i] !== 100 * r + 10 * c + 2 * h + w) wrong++;
  }
const s = comm.stats();
for (let r = 0; r < comm.size; r++) {
  if (r === comm.rank)
    console.log(
      `rank ${r}: ${mine}${mine === 'NC1HWC0' ? ` (c0 4: ${output.data.length} elements for ${comm.size * N * C * H * W} values)` : ''}, gathered ${wrong === 0 ? 'correctly' : `${wrong} wrong`}; conversions ${s.conversions}, ${s.conversionBytes} bytes`,
    );
  await comm.barrier();
}
