// Bundles the library: ESM + CJS for Node (with the launcher and CLI), ESM for browsers (no
// Node module reachable), and .d.ts files. The wasm is embedded as base64 in the bundles;
// the raw .wasm files are shipped beside them for users who prefer to fetch them.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
// Node 20 lacks Uint8Array.fromBase64: give esbuild an explicit target.
const common = { bundle: true, sourcemap: true, logLevel: 'warning', absWorkingDir: root };
const node = { ...common, platform: 'node', target: 'node20' };
await Promise.all([
  build({ ...node, format: 'esm', entryPoints: ['src/node.ts'], outfile: 'dist/node/index.js' }),
  // The CJS bundle finds its worker entry through __dirname; import.meta is unused there.
  build({ ...node, format: 'cjs', entryPoints: ['src/node.ts'], outfile: 'dist/node/index.cjs', logOverride: { 'empty-import-meta': 'silent' } }),
  build({ ...node, format: 'esm', entryPoints: ['src/launch/worker-entry.ts'], outfile: 'dist/node/worker-entry.js' }),
  // A node's progress thread (src/progress/): runs ops while their ranks compute.
  build({ ...node, format: 'esm', entryPoints: ['src/launch/progress-worker.ts'], outfile: 'dist/node/progress-worker.js' }),
  // Loaded first by every rank process of `webccl run --procs`: ends it when its launcher ends.
  build({ ...node, format: 'esm', entryPoints: ['src/launch/rank-guard.ts'], outfile: 'dist/node/rank-guard.js' }),
  build({ ...node, format: 'esm', entryPoints: ['src/launch/cli-main.ts'], outfile: 'dist/node/cli.js' }),
  // webccl perf: the rank-side timing loop, and its helpers for bench/ scripts.
  build({ ...node, format: 'esm', entryPoints: ['src/launch/perf/rank.ts'], outfile: 'dist/node/perf-rank.js' }),
  build({ ...node, format: 'esm', entryPoints: ['src/launch/perf/index.ts'], outfile: 'dist/node/perf.js' }),
  // The network simulator (browser-safe; bundled for Node for bench/sim-speed.mjs and scripts).
  build({ ...node, format: 'esm', entryPoints: ['src/sim/index.ts'], outfile: 'dist/node/sim.js' }),
  // The tuner's cost model (bench/model-error.mjs).
  build({ ...node, format: 'esm', entryPoints: ['src/tuner/index.ts'], outfile: 'dist/node/tuner.js' }),
  build({ ...common, platform: 'browser', format: 'esm', target: 'es2022', entryPoints: ['src/index.ts'], outfile: 'dist/browser/index.js' }),
]);
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--emitDeclarationOnly'], { cwd: root, stdio: 'inherit' });
mkdirSync(join(dist, 'wasm'), { recursive: true });
for (const t of ['simd', 'scalar']) cpSync(join(root, 'build', `webccl.${t}.wasm`), join(dist, 'wasm', `webccl.${t}.wasm`));
