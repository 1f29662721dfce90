// Two builds of the wasm kernels side by side, interleaved: each round measures every kernel
// once in each build, so a machine whose load changes during the run (shared, 2 cores) moves
// both columns alike; the medians over the rounds are printed. Kernels: the f32 / bf16 / f16
// sum in place (the halves' ratio to f32 is what matters) and the layout conversions of 1-, 2-
// and 4-byte elements beside copyBytes (one image of C = 64 channels, C0 = 16, 32 for 1-byte,
// as bench/kernels.mjs). GB/s of reads + writes. --filter keeps the kernels whose name matches
// (a regular expression; copyBytes and sum f32 are kept as the ratios' bases).
//   node bench/kernels-ab.mjs DIR_A DIR_B [--sizes 256K,16M] [--rounds 24] [--filter 'u8 NCHW']
// Each DIR holds a webccl.simd.wasm (e.g. a copy of build/ made at another commit).
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const option = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const sizes = option('--sizes', '256K,16M')
  .split(',')
  .map((s) => Number.parseInt(s, 10) * (s.toUpperCase().endsWith('M') ? 1 << 20 : 1024));
const rounds = Number(option('--rounds', '24'));
const filter = new RegExp(option('--filter', ''));
const dirs = args;
if (dirs.length !== 2)
  throw new Error('usage: node bench/kernels-ab.mjs DIR_A DIR_B [--sizes 256K,16M] [--rounds 24] [--filter REGEX]');

const max = Math.max(...sizes);
const A = 1 << 20;
const B = A + max + 4096;
const memory = new WebAssembly.Memory({ initial: Math.ceil((B + max + 4096) / 65536), maximum: 32768, shared: true });
const env = {
  memory,
  abort() {
    throw new Error('abort');
  },
};
const builds = dirs.map(
  (d) => new WebAssembly.Instance(new WebAssembly.Module(readFileSync(`${d}/webccl.simd.wasm`)), { env }).exports,
);
/** Values in [1, 2] for every float width (as bench/kernels.mjs): sums never reach Inf or NaN. */
function fill() {
  const w = new Uint32Array(memory.buffer, A, (2 * max + 4096) / 4);
  for (let i = 0; i < w.length; i++) w[i] = 0x3ff03f80 | ((Math.imul(i, 7) & 0xf) << 16) | (Math.imul(i, 13) & 0x7f);
}

const C = 64;
const LAYOUTS = [
  ['NCHW', 0],
  ['NHWC', 1],
  ['NC1HWC0', 2],
];
const PAIRS = [
  [0, 1],
  [1, 0],
  [0, 2],
  [2, 0],
  [1, 2],
  [2, 1],
];
const KERNELS = [
  ['sum f32', 3, (x, n) => x.reduceInto(0, 0, A, B, n / 4)],
  ['sum bf16', 3, (x, n) => x.reduceInto(7, 0, A, B, n / 2)],
  ['sum f16', 3, (x, n) => x.reduceInto(8, 0, A, B, n / 2)],
  ['copyBytes', 2, (x, n) => x.copyBytes(B, A, n)],
  ...[
    ['u8', 1, 32],
    ['f16', 2, 16],
    ['f32', 4, 16],
  ].flatMap(([dt, es, c0]) =>
    PAIRS.map(([f, t]) => [
      `${dt} ${LAYOUTS[f][0]}>${LAYOUTS[t][0]}`,
      2,
      (x, n) => x.convertLayout(es, f, t, B, A, 1, C, n / (C * es), c0),
    ]),
  ),
].filter(([name]) => name === 'copyBytes' || name === 'sum f32' || filter.test(name));

const res = new Map();
for (const size of sizes) {
  const sampleMs = size > 1 << 20 ? 20 : 5;
  // warm up (optimised code)
  for (const b of builds) for (const [, , f] of KERNELS) for (let i = 0; i < 200; i++) f(b, Math.min(size, 4096));
  for (let r = 0; r < rounds; r++) {
    builds.forEach((b, bi) => {
      for (const [name, traffic, f] of KERNELS) {
        if (name.startsWith('sum')) fill(); // an in-place sum must not run off to Inf
        const t0 = performance.now();
        let calls = 0;
        let t;
        do {
          f(b, size);
          calls++;
          t = performance.now() - t0;
        } while (t < sampleMs);
        const key = `${size} ${name} ${bi}`;
        if (!res.has(key)) res.set(key, []);
        res.get(key).push((traffic * size * calls) / (t * 1e6));
      }
    });
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`GB/s (reads + writes), median of ${rounds} interleaved rounds; A = ${dirs[0]}, B = ${dirs[1]}`);
console.log('| kernel | size | A | B | A ratio | B ratio |');
console.log('| --- | --- | ---: | ---: | ---: | ---: |');
for (const size of sizes) {
  for (const [name] of KERNELS) {
    const [a, b] = [0, 1].map((bi) => median(res.get(`${size} ${name} ${bi}`)));
    const base = name.startsWith('sum') ? 'sum f32' : 'copyBytes';
    const [ra, rb] = [0, 1].map(
      (bi) => median(res.get(`${size} ${name} ${bi}`)) / median(res.get(`${size} ${base} ${bi}`)),
    );
    const ratio = (v) => (name === base ? '' : `${v.toFixed(2)}× ${base === 'sum f32' ? 'f32 sum' : 'copy'}`);
    console.log(
      `| ${name} | ${size >= 1 << 20 ? `${size >> 20} MiB` : `${size >> 10} KiB`} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${ratio(ra)} | ${ratio(rb)} |`,
    );
  }
}
