// bf16 and f16 buffers: 16-bit storage in a Uint16Array, reduced in f32 and rounded to nearest
// even on store.
//   node bin/webccl.js run -n 4 examples/half-precision.mjs
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup();
// 1.5 in bf16 is 0x3fc0; in f16 it is 0x3e00.
const bf = { data: new Uint16Array(1024).fill(0x3fc0), dtype: 'bf16' };
const hf = { data: new Uint16Array(1024).fill(0x3e00), dtype: 'f16' };
await comm.allReduce(bf, { op: ccl.Sum });
await comm.allReduce(hf, { op: ccl.Avg });
const bf16ToNumber = (h) => new Float32Array(new Uint32Array([h << 16]).buffer)[0];
if (comm.rank === 0) {
  console.log(`bf16 sum of 1.5 over ${comm.size} ranks: 0x${bf.data[0].toString(16)} = ${bf16ToNumber(bf.data[0])}`);
  console.log(`f16 avg of 1.5: 0x${hf.data[0].toString(16)} (1.5 is 0x3e00)`);
}
