#!/usr/bin/env node
// bench/write-streams: what bounds the layout conversions that write far-apart rows (NHWC ->
// NCHW, NC1HWC0 -> NCHW). Copies of --size bytes (default 16 MiB, past L2) by memory.copy, by a
// plain 16-byte wasm loop, and by the same loop writing k far-apart dst rows in runs of r bytes
// each in turn (bench/floors/write-streams.ts), interleaved over --rounds rounds; GB/s of reads +
// writes (median) and the ratio to memory.copy.
//   node bench/write-streams.mjs [--size 16M] [--rounds 11] [--streams 4,16,64] [--runs 512,2048,8192,32768]
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const option = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const bytes = (s) => Number.parseInt(s, 10) * ({ K: 1024, M: 1 << 20 }[s.slice(-1).toUpperCase()] ?? 1);
const size = bytes(option('--size', '16M'));
const rounds = Number(option('--rounds', '11'));
const streams = option('--streams', '4,16,64').split(',').map(Number);
const runs = option('--runs', '512,2048,8192,32768').split(',').map(bytes);
if (args.length) throw new Error(`unknown arguments ${args.join(' ')}`);

const out = join(root, 'bench', 'results', 'build', 'write-streams.wasm');
mkdirSync(dirname(out), { recursive: true });
execFileSync(process.execPath, [
  join(root, 'node_modules', 'assemblyscript', 'bin', 'asc.js'),
  join(root, 'bench', 'floors', 'write-streams.ts'),
  '-O3',
  '--enable',
  'simd',
  '--runtime',
  'stub',
  '--noAssert',
  '--importMemory',
  '--use',
  'abort=',
  '-o',
  out,
]);
const src = 1 << 16,
  dst = src + size + 4096;
const memory = new WebAssembly.Memory({ initial: Math.ceil((dst + size + 4096) / 65536) });
const k = new WebAssembly.Instance(new WebAssembly.Module(readFileSync(out)), { env: { memory } }).exports;
new Uint8Array(memory.buffer).fill(7, src, src + size);

const cases = [
  ['memory.copy', () => k.copyAll(dst, src, size)],
  ['16-byte loop', () => k.copyLoop(dst, src, size)],
];
for (const s of streams)
  for (const r of runs)
    if (size % (s * r) === 0) cases.push([`${s} rows, runs of ${r} B`, () => k.copyStreams(dst, src, size, r, s)]);
const times = cases.map(() => []);
for (let round = 0; round < rounds; round++) {
  cases.forEach(([, f], i) => {
    const t0 = performance.now();
    f();
    times[i].push(performance.now() - t0);
  });
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const base = median(times[0]);
console.log(`# ${size >> 20} MiB copies, median of ${rounds} interleaved rounds; GB/s of reads + writes`);
console.log('| copy | GB/s | × memory.copy |\n| --- | ---: | ---: |');
cases.forEach(([name], i) =>
  console.log(
    `| ${name} | ${((2 * size) / median(times[i]) / 1e6).toFixed(1)} | ${(base / median(times[i])).toFixed(2)} |`,
  ),
);
