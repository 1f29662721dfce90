// Kernel bandwidth: every wasm kernel (dtype × op × form, scale, copy, conversions) in the SIMD
// build and the scalar build, beside a plain-JS loop and TypedArray.prototype.set (memcpy), at
// an in-cache and an out-of-cache buffer size, in one run.
//
// GB/s is 1e9 logical bytes per second, reads plus writes, N = bytes per buffer:
//   in place (reduceInto) 3N, out of place (reduce2) 3N, k-way (reduceK) (k+1)N, scale 2N,
//   copy 2N, conversions: the f32 side plus the half side (N f32 bytes + N/2 half bytes),
//   layouts 2N (one image of C = 64 channels and N / (64 · element bytes) pixels, so NC1HWC0
//   has no padding; C0 = 16, or 32 for 1-byte elements), each beside a plain-JS loop.
// Each kernel warms up for >= 200 ms the first time it is measured (calling it on slices of at
// most 1 MiB, since V8 only swaps in optimised wasm code between calls; 20 ms at later sizes,
// once it is optimised), then the median of 7 samples of >= 20 ms each is taken (3 of >= 5 ms
// with --quick).
//
//   node bench/kernels.mjs [--quick] [--sizes 256K,64M] [--json FILE] [--filter REGEX]
// Defaults: sizes 256K,64M; --quick: sizes 256K,8M. --filter keeps the measurements whose
// "kernel/dtype/op/form/build" matches. Build first: node scripts/build-wasm.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const option = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = flag('--quick');
const jsonFile = option('--json');
const filter = new RegExp(option('--filter') ?? '');
const sizes = (option('--sizes') ?? (quick ? '256K,8M' : '256K,64M')).split(',').map(parseSize);
const WARM_MS = 200;
const SAMPLE_MS = quick ? 5 : 20;
const SAMPLES = quick ? 3 : 7;
const SLICE = 1 << 20;

function parseSize(s) {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)i?B?$/i.exec(s.trim());
  if (!m) throw new Error(`bad size ${s} (expected e.g. 256K, 64M)`);
  const mult = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[m[2].toUpperCase()];
  return Math.round((Number(m[1]) * mult) / 64) * 64;
}
const fmtSize = (b) => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : `${b / 1024} KiB`);

const DTYPES = {
  f32: [0, 4],
  f64: [1, 8],
  i32: [2, 4],
  u32: [3, 4],
  i8: [4, 1],
  u8: [5, 1],
  i64: [6, 8],
  bf16: [7, 2],
  f16: [8, 2],
};
const OPS = { sum: 0, prod: 1, max: 2, min: 3 };
const FLOATS = ['f32', 'f64', 'bf16', 'f16'];
const KS = [2, 4, 8];

// --- memory: 9 buffers (dst + up to 8 sources), a source table, both builds on one memory ---
const maxSize = Math.max(...sizes);
const PAD = 4096;
const base = 65536;
const bufAt = (j) => base + PAD + j * (maxSize + PAD);
const table = base;
const totalBytes = bufAt(9) + PAD;
const memory = new WebAssembly.Memory({ initial: Math.ceil(totalBytes / 65536), maximum: 32768, shared: true });
const env = {
  memory,
  abort() {
    throw new Error('abort');
  },
};
const builds = {};
for (const name of ['simd', 'scalar']) {
  const bytes = readFileSync(join(root, 'build', `webccl.${name}.wasm`));
  builds[name] = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env }).exports;
}
const heapEnd = builds.simd.heapBase();
if (heapEnd > base) throw new Error(`wasm static data ends at ${heapEnd}, above the bench's buffers`);
{
  const v = new DataView(memory.buffer);
  for (let j = 0; j < 8; j++) v.setUint32(table + j * 4, bufAt(j + 1), true);
}
/**
 * Values in [1, 2] whichever float dtype reads them (each u32 is 0x3ff?3f??: f32 ~1.9, f64
 * ~1.9 in the high word, and both 16-bit halves are f16 ~2 and bf16 ~1.9), so in-place
 * products run off to Inf, never through the subnormals that slow some CPUs down. Written
 * afresh before each dtype: what another dtype's in-place sums left would read as anything
 * (f32 sums seen as f16 hold Inf and NaN patterns, which the f16 sums take a slower path for).
 */
function fillBuffers() {
  const w = new Uint32Array(memory.buffer, bufAt(0), (bufAt(9) - bufAt(0)) / 4);
  for (let i = 0; i < w.length; i++) w[i] = 0x3ff03f80 | ((Math.imul(i, 7) & 0xf) << 16) | (Math.imul(i, 13) & 0x7f);
}

// --- timing -------------------------------------------------------------------------------
const now = () => performance.now();
/** run(bytes) processes `bytes` per buffer; returns median GB/s with `traffic` bytes per byte. */
function measure(run, size, traffic, warmMs) {
  const slice = Math.min(size, SLICE);
  // Short calls first: JS loops then reach the optimising compiler with complete type feedback
  // (a first call long enough for on-stack replacement otherwise deoptimises and lingers).
  for (let i = 0; i < 300; i++) run(Math.min(size, 4096));
  let t0 = now();
  while (now() - t0 < warmMs) run(slice);
  run(size);
  const samples = [];
  for (let s = 0; s < SAMPLES; s++) {
    let calls = 0;
    t0 = now();
    let t;
    do {
      run(size);
      calls++;
      t = now() - t0;
    } while (t < SAMPLE_MS);
    samples.push((traffic * size * calls) / (t * 1e6));
  }
  samples.sort((a, b) => a - b);
  return samples[samples.length >> 1];
}

// --- plain JS loops: in-place sum for each dtype -------------------------------------------
const ARRAYS = {
  f32: Float32Array,
  f64: Float64Array,
  i32: Int32Array,
  u32: Uint32Array,
  i8: Int8Array,
  u8: Uint8Array,
  i64: BigInt64Array,
};
const F16_TABLE = new Float32Array(65536);
for (let h = 0; h < 65536; h++) {
  const e = (h >> 10) & 31,
    m = h & 1023,
    s = h & 0x8000 ? -1 : 1;
  F16_TABLE[h] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1024 + m) * 2 ** (e - 25);
}
const f32b = new Float32Array(1);
const u32b = new Uint32Array(f32b.buffer);
function jsToF16(x) {
  f32b[0] = x;
  const b = u32b[0],
    a = b & 0x7fffffff,
    s = (b >>> 16) & 0x8000;
  if (a > 0x7f800000) return 0x7e00;
  if (a > 0x477fefff) return s | 0x7c00;
  if (a > 0x387fffff) return s | ((a - 0x38000000 + 0xfff + ((a >>> 13) & 1)) >>> 13);
  f32b[0] = Math.abs(x) + 0.5;
  return s | (u32b[0] - 0x3f000000);
}
function jsToBf16(x) {
  f32b[0] = x;
  const b = u32b[0];
  return (b & 0x7fffffff) > 0x7f800000 ? 0x7fc0 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
}
function jsSumInPlace(dt, size) {
  if (dt === 'f16' || dt === 'bf16') {
    const d = new Uint16Array(memory.buffer, bufAt(0), maxSize / 2);
    const s = new Uint16Array(memory.buffer, bufAt(1), maxSize / 2);
    if (dt === 'f16')
      return (bytes) => {
        for (let i = 0, n = bytes >> 1; i < n; i++) d[i] = jsToF16(F16_TABLE[d[i]] + F16_TABLE[s[i]]);
      };
    return (bytes) => {
      for (let i = 0, n = bytes >> 1; i < n; i++) {
        u32b[0] = d[i] << 16;
        const x = f32b[0];
        u32b[0] = s[i] << 16;
        d[i] = jsToBf16(x + f32b[0]);
      }
    };
  }
  const A = ARRAYS[dt];
  const d = new A(memory.buffer, bufAt(0), maxSize / A.BYTES_PER_ELEMENT);
  const s = new A(memory.buffer, bufAt(1), maxSize / A.BYTES_PER_ELEMENT);
  // A fresh function per dtype and size (the comment defeats V8's cache of compiled sources):
  // one shared closure would see every array type and go megamorphic, and code tuned at one
  // size was seen to run at a third of the speed at the next.
  const body = dt === 'i64' ? 'd[i] = BigInt.asIntN(64, d[i] + s[i]);' : 'd[i] += s[i];';
  const make = new Function(
    'd',
    's',
    `// ${dt} ${size}\nreturn (bytes) => { for (let i = 0, n = bytes >>> ${Math.log2(A.BYTES_PER_ELEMENT)}; i < n; i++) ${body} };`,
  );
  return make(d, s);
}

// --- plain JS layout conversions: index loops over one image of C channels ------------------
const LAYOUT_C = 64;
const LAYOUT_PAIRS = [
  ['NCHW>NHWC', 0, 1],
  ['NHWC>NCHW', 1, 0],
  ['NCHW>NC1HWC0', 0, 2],
  ['NC1HWC0>NCHW', 2, 0],
  ['NHWC>NC1HWC0', 1, 2],
  ['NC1HWC0>NHWC', 2, 1],
];
/** Offset of channel c of pixel p in each layout (C a multiple of C0 here). */
const LAYOUT_INDEX = ['c * hw + p', 'p * C + c', '((c / c0 | 0) * hw + p) * c0 + c % c0'];
function jsLayout(es, from, to, c0, size) {
  const A = { 1: Uint8Array, 2: Uint16Array, 4: Uint32Array }[es];
  const d = new A(memory.buffer, bufAt(0), maxSize / es);
  const s = new A(memory.buffer, bufAt(1), maxSize / es);
  const body = `for (let c = 0; c < C; c++) for (let p = 0; p < hw; p++) d[${LAYOUT_INDEX[to]}] = s[${LAYOUT_INDEX[from]}];`;
  const make = new Function(
    'd',
    's',
    'C',
    'c0',
    `// ${es} ${from} ${to} ${size}\nreturn (bytes) => { const hw = bytes / ${es * LAYOUT_C}; ${body} };`,
  );
  return make(d, s, LAYOUT_C, c0);
}

// --- the run ----------------------------------------------------------------------------------
const rows = [];
const warmed = new Set();
const started = now();
function record(kernel, dtype, op, form, build, size, traffic, run) {
  const key = `${kernel}/${dtype}/${op}/${form}/${build}`;
  if (!filter.test(key)) return;
  const warmKey = build === 'js' ? `${key}/${size}` : key; // JS loops are made afresh per size
  const warmMs = warmed.has(warmKey) ? 20 : WARM_MS; // wasm tier-up happened at the first size
  warmed.add(warmKey);
  const gbps = measure(run, size, traffic, warmMs);
  rows.push({ kernel, dtype, op, form, build, bytes: size, gbps: Math.round(gbps * 100) / 100 });
}

for (const size of sizes) {
  const d = bufAt(0),
    a = bufAt(1),
    b = bufAt(2);
  for (const [dt, [code, esz]] of Object.entries(DTYPES)) {
    fillBuffers();
    for (const [op, oc] of Object.entries(OPS)) {
      for (const [bn, x] of Object.entries(builds)) {
        record('reduceInto', dt, op, 'inplace', bn, size, 3, (n) => x.reduceInto(code, oc, d, a, n / esz));
        record('reduce2', dt, op, 'outofplace', bn, size, 3, (n) => x.reduce2(code, oc, d, a, b, n / esz));
        for (const k of KS)
          record('reduceK', dt, op, `k${k}`, bn, size, k + 1, (n) => x.reduceK(code, oc, d, table, k, n / esz));
      }
    }
    record('reduceInto', dt, 'sum', 'inplace', 'js', size, 3, jsSumInPlace(dt, size));
    if (FLOATS.includes(dt)) {
      for (const [bn, x] of Object.entries(builds))
        record('scale', dt, '-', 'outofplace', bn, size, 2, (n) => x.scale(code, d, a, n / esz, 0.25));
    }
  }
  for (const [bn, x] of Object.entries(builds)) {
    record('copyBytes', 'u8', '-', 'outofplace', bn, size, 2, (n) => x.copyBytes(d, a, n));
    for (const [conv, half] of [
      ['f32ToF16', 'f16'],
      ['f16ToF32', 'f16'],
      ['f32ToBf16', 'bf16'],
      ['bf16ToF32', 'bf16'],
    ]) {
      record(conv, half, '-', 'convert', bn, size, 1.5, (n) => x[conv](d, a, n / 4));
    }
  }
  fillBuffers();
  for (const [es, dt] of [
    [1, 'u8'],
    [2, 'f16'],
    [4, 'f32'],
  ]) {
    for (const [pair, from, to] of LAYOUT_PAIRS) {
      const c0 = es === 1 ? 32 : 16;
      for (const [bn, x] of Object.entries(builds)) {
        record('layout', dt, pair, 'convert', bn, size, 2, (n) =>
          x.convertLayout(es, from, to, d, a, 1, LAYOUT_C, n / (es * LAYOUT_C), c0),
        );
      }
      record('layout', dt, pair, 'convert', 'js', size, 2, jsLayout(es, from, to, c0, size));
    }
  }
  const dst8 = new Uint8Array(memory.buffer, d, maxSize);
  const src8 = new Uint8Array(memory.buffer, a, maxSize);
  const srcFull = src8.subarray(0, size);
  record('copyBytes', 'u8', '-', 'outofplace', 'memcpy', size, 2, (n) =>
    dst8.set(n === size ? srcFull : src8.subarray(0, n)),
  );
}

// --- report -----------------------------------------------------------------------------------
const BUILDS = ['simd', 'scalar', 'js', 'memcpy'];
const pad = (s, n) => String(s).padEnd(n);
const num = (x) => (x === undefined ? '' : x.toFixed(2)).padStart(9);
for (const size of sizes) {
  console.log(`\n== ${fmtSize(size)} per buffer (GB/s, reads + writes) ==`);
  console.log(
    `${pad('kernel', 11)}${pad('dtype', 6)}${pad('op', 13)}${pad('form', 11)}${BUILDS.map((b) => b.padStart(9)).join('')}  simd/scalar`,
  );
  const groups = new Map();
  for (const r of rows.filter((r) => r.bytes === size)) {
    const key = `${r.kernel}|${r.dtype}|${r.op}|${r.form}`;
    if (!groups.has(key)) groups.set(key, {});
    groups.get(key)[r.build] = r.gbps;
  }
  for (const [key, g] of groups) {
    const [kernel, dtype, op, form] = key.split('|');
    const ratio = g.simd && g.scalar ? `${(g.simd / g.scalar).toFixed(1)}x`.padStart(12) : '';
    console.log(
      `${pad(kernel, 11)}${pad(dtype, 6)}${pad(op, 13)}${pad(form, 11)}${BUILDS.map((b) => num(g[b])).join('')}${ratio}`,
    );
  }
  const pick = (kernel, dtype, op, build) =>
    rows.find((r) => r.bytes === size && r.kernel === kernel && r.dtype === dtype && r.op === op && r.build === build)
      ?.gbps;
  // Layouts against both copies (TypedArray.set and the wasm memory.copy) and the plain-JS loop.
  const copies = [pick('copyBytes', 'u8', '-', 'memcpy'), pick('copyBytes', 'u8', '-', 'simd')];
  const layouts = rows.filter((r) => r.bytes === size && r.kernel === 'layout' && r.build === 'simd');
  if (layouts.length && copies.every(Boolean)) {
    console.log(
      `layouts (simd) as × TypedArray.set ${copies[0]} GB/s / × memory.copy ${copies[1]} GB/s / × the plain-JS loop: ` +
        layouts
          .map(
            (r) =>
              `${r.dtype} ${r.op} ${(r.gbps / copies[0]).toFixed(2)} / ${(r.gbps / copies[1]).toFixed(2)} / ${(r.gbps / pick('layout', r.dtype, r.op, 'js')).toFixed(1)}`,
          )
          .join(', '),
    );
  }
  const ref = rows.find(
    (r) => r.bytes === size && r.kernel === 'reduceInto' && r.dtype === 'f32' && r.op === 'sum' && r.build === 'simd',
  );
  if (!ref) continue;
  console.log(
    `f32 sum in place: simd ${ref.gbps}, scalar ${pick('reduceInto', 'f32', 'sum', 'scalar')}, plain JS ${pick('reduceInto', 'f32', 'sum', 'js')}; copy: TypedArray.set ${pick('copyBytes', 'u8', '-', 'memcpy')}, memory.copy ${pick('copyBytes', 'u8', '-', 'simd')} GB/s`,
  );
  const rel = rows
    .filter((r) => r.bytes === size && r.kernel === 'reduceInto' && r.build === 'simd')
    .map((r) => ({ ...r, rel: r.gbps / ref.gbps }))
    .sort((x, y) => x.rel - y.rel);
  console.log(
    `lowest simd in-place dtype×op vs f32 sum (${ref.gbps} GB/s): ` +
      rel
        .slice(0, 5)
        .map((r) => `${r.dtype} ${r.op} ${r.rel.toFixed(2)}x`)
        .join(', '),
  );
  const halves = rel.filter((r) => r.op === 'sum' && (r.dtype === 'f16' || r.dtype === 'bf16'));
  if (halves.length)
    console.log(
      `halves' sum in place vs f32 sum (simd): ${halves.map((r) => `${r.dtype} ${r.rel.toFixed(2)}x`).join(', ')}`,
    );
}
console.log(`\n${rows.length} measurements in ${((now() - started) / 1000).toFixed(0)} s`);
if (jsonFile) {
  writeFileSync(jsonFile, JSON.stringify(rows, null, 1));
  console.log(`rows written to ${jsonFile}`);
}
