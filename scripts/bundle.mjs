// Bundles the library: ESM + CJS for Node (with the launcher and CLI), ESM for browsers (no
// Node module reachable), and .d.ts files per entry. The wasm is embedded as base64 in the
// bundles, so no .wasm file ships and no bundler needs a plugin for it.
//
// No source maps by default: the bundles are not minified and esbuild marks each source file
// in them (`// src/api/communicator.ts`), so a stack trace already reads as the source; the
// maps (5.7 MB, most of it the embedded sources) would triple the package for no gain.
// `node scripts/bundle.mjs --sourcemap` makes them for debugging a checkout (they never ship:
// package.json "files" leaves out *.map).

import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { pruneDeclarations } from './prune-declarations.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The package's subpath entries (`webccl/embed`, ...): src/subpaths/NAME.ts, re-exports of the main entry. */
const SUBPATHS = ['embed', 'trace', 'layouts'];
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
// Node 20 lacks Uint8Array.fromBase64: give esbuild an explicit target.
const common = {
  bundle: true,
  sourcemap: process.argv.includes('--sourcemap'),
  logLevel: 'warning',
  absWorkingDir: root,
};
// `ws` is a runtime dependency of the package (the store over WebSocket): loaded, not bundled.
const node = { ...common, platform: 'node', target: 'node20', external: ['ws'] };
await Promise.all([
  build({ ...node, format: 'esm', entryPoints: ['src/node.ts'], outfile: 'dist/node/index.js' }),
  // The CJS bundle finds its worker entry through __dirname; import.meta is unused there.
  build({
    ...node,
    format: 'cjs',
    entryPoints: ['src/node.ts'],
    outfile: 'dist/node/index.cjs',
    logOverride: { 'empty-import-meta': 'silent' },
  }),
  build({ ...node, format: 'esm', entryPoints: ['src/launch/worker-entry.ts'], outfile: 'dist/node/worker-entry.js' }),
  // A node's progress thread (src/progress/): runs ops while their ranks compute.
  build({
    ...node,
    format: 'esm',
    entryPoints: ['src/launch/progress-worker.ts'],
    outfile: 'dist/node/progress-worker.js',
  }),
  // A node's network progress thread (one rank per node): runs its collectives across nodes while it computes.
  build({
    ...node,
    format: 'esm',
    entryPoints: ['src/launch/net-progress-worker.ts'],
    outfile: 'dist/node/net-progress-worker.js',
  }),
  // Loaded first by every rank process of `webccl run --procs`: ends it when its launcher ends.
  build({ ...node, format: 'esm', entryPoints: ['src/launch/rank-guard.ts'], outfile: 'dist/node/rank-guard.js' }),
  build({ ...node, format: 'esm', entryPoints: ['src/launch/cli-main.ts'], outfile: 'dist/node/cli.js' }),
  // webccl perf: the rank-side timing loop, and its helpers for bench/ scripts.
  build({ ...node, format: 'esm', entryPoints: ['src/launch/perf/rank.ts'], outfile: 'dist/node/perf-rank.js' }),
  build({ ...node, format: 'esm', entryPoints: ['src/launch/perf/index.ts'], outfile: 'dist/node/perf.js' }),
  // The network simulator (browser-safe; bundled for Node for bench/sim-speed.mjs and scripts).
  build({ ...node, format: 'esm', entryPoints: ['src/sim/index.ts'], outfile: 'dist/node/sim.js' }),
  // webccl simulate over several threads: one thread's share (beside cli.js, which starts it),
  // and the entry for bench/ scripts.
  build({
    ...node,
    format: 'esm',
    entryPoints: ['src/launch/simulate/sim-worker.ts'],
    outfile: 'dist/node/sim-worker.js',
  }),
  build({
    ...node,
    format: 'esm',
    entryPoints: ['src/launch/simulate/threads.ts'],
    outfile: 'dist/node/sim-threads.js',
  }),
  // The tuner's cost model (bench/model-error.mjs).
  build({ ...node, format: 'esm', entryPoints: ['src/tuner/index.ts'], outfile: 'dist/node/tuner.js' }),
  build({
    ...common,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    entryPoints: ['src/browser.ts'],
    outfile: 'dist/browser/index.js',
  }),
  // A page's progress thread: a module Web Worker index.js starts from this file beside it.
  build({
    ...common,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    entryPoints: ['src/hosts/page-worker.ts'],
    outfile: 'dist/browser/progress-worker.js',
  }),
  // A page rank's network progress thread (a job across nodes): a module Web Worker the rank starts from this file.
  build({
    ...common,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    entryPoints: ['src/hosts/page-net-worker.ts'],
    outfile: 'dist/browser/net-progress-worker.js',
  }),
]);
// --stripInternal: members marked @internal (the engines' side of Work, the Communicator's
// placement) are the library's own, not API: they do not ship in the declarations.
execFileSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--emitDeclarationOnly', '--stripInternal'],
  { cwd: root, stdio: 'inherit' },
);
// Types per condition (package.json "exports"): dist/types/node.d.ts for Node (launch and the
// rest of src/node.ts), dist/types/index.d.ts for browsers and bundlers (src/index.ts). Only
// the declaration files those two reach are kept.
const types = join(dist, 'types');
pruneDeclarations(types, ['index.d.ts', 'node.d.ts', ...SUBPATHS.map((s) => `subpaths/${s}.d.ts`)]);
writeSubpaths();
// CommonJS consumers (`require`, TypeScript's node16 resolution in a .cts or a package without
// "type": "module") need declarations TypeScript reads as CommonJS: the same files under a
// package.json that says so.
cpSync(types, join(dist, 'types-cjs'), { recursive: true });
writeFileSync(join(dist, 'types-cjs', 'package.json'), '{ "type": "commonjs" }\n');

/**
 * Each subpath's JavaScript, for every build: a re-export of that build's main bundle, never a
 * bundle of its own (a second copy of the library would hold a second state: trace tracks,
 * nodes, the world communicator).
 */
function writeSubpaths() {
  for (const name of SUBPATHS) {
    const source = readFileSync(join(root, 'src', 'subpaths', `${name}.ts`), 'utf8');
    const list = /export \{([^}]*)\} from '\.\.\/index\.js';/.exec(source);
    if (!list) throw new Error(`src/subpaths/${name}.ts: expected one export { ... } from '../index.js'`);
    const values = list[1]
      .split(',')
      .map((n) => n.trim())
      .filter((n) => n && !n.startsWith('type '));
    const esm = `export { ${values.join(', ')} } from './index.js';\n`;
    writeFileSync(join(dist, 'node', `${name}.js`), esm);
    writeFileSync(join(dist, 'browser', `${name}.js`), esm);
    const cjs = `const webccl = require('./index.cjs');\nmodule.exports = { ${values.map((v) => `${v}: webccl.${v}`).join(', ')} };\n`;
    writeFileSync(join(dist, 'node', `${name}.cjs`), cjs);
  }
}
