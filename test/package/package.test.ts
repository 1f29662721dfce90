// What ships: ESM and CJS entries for Node, types per condition, a browser ESM build that
// reaches no Node module and carries its wasm inside, and the webccl command. The packed and
// installed package is tested in package/tarball.test.ts.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}/package.json`, 'utf8'));

it('package.json points at files the build made, with types for each condition', () => {
  const e = pkg.exports['.'];
  expect(e).toEqual({
    browser: { types: './dist/types/index.d.ts', default: './dist/browser/index.js' },
    node: {
      import: { types: './dist/types/node.d.ts', default: './dist/node/index.js' },
      require: { types: './dist/types-cjs/node.d.ts', default: './dist/node/index.cjs' },
    },
    default: { types: './dist/types/index.d.ts', default: './dist/browser/index.js' },
  });
  const targets = (x: unknown): string[] => (typeof x === 'string' ? [x] : Object.values(x as object).flatMap(targets));
  for (const f of [...targets(e), pkg.main, pkg.module, pkg.types, pkg.browser, pkg.bin.webccl])
    expect(existsSync(`${root}/${f}`), f).toBe(true);
  // TypeScript reads the declarations under dist/types-cjs/ as CommonJS because of this file.
  expect(JSON.parse(readFileSync(`${root}/dist/types-cjs/package.json`, 'utf8'))).toEqual({ type: 'commonjs' });
});

it('the ESM and CJS builds run a one-rank collective', async () => {
  const esm = await import('webccl');
  const cjs = createRequire(import.meta.url)('webccl');
  for (const m of [esm, cjs]) {
    expect(typeof m.launch).toBe('function');
    const node = m.createNode({ nranks: 1 });
    const comm = new m.Communicator(m.joinNode(node, 0));
    const x = new Float64Array([1.5, -2]);
    await comm.allReduce(x, { op: m.Max });
    expect(Array.from(x)).toEqual([1.5, -2]);
  }
});

it('the browser build imports no Node module, embeds the wasm and runs', async () => {
  const src = readFileSync(`${root}/dist/browser/index.js`, 'utf8');
  expect(src).not.toMatch(/from\s*["']node:|require\(["'](node:)?(fs|os|path|worker_threads|child_process|net)["']\)/);
  expect(src).not.toMatch(/\.wasm["']/);
  const b = await import(`${root}/dist/browser/index.js`);
  expect(b.launch).toBeUndefined();
  const comm = new b.Communicator(b.joinNode(b.createNode({ nranks: 1 }), 0, { simd: false }));
  const x = new Int8Array([3, -4]);
  await comm.allReduce(x);
  expect(Array.from(x)).toEqual([3, -4]);
});

it('importing the Node build and running a one-rank job loads no ws; connectStore loads it on its first call', () => {
  // A resolve hook in the child tells it, through a port, each time "ws" is resolved.
  const hook = `data:text/javascript,${encodeURIComponent(`
    let port;
    export async function initialize(data) { port = data.port; }
    export async function resolve(spec, ctx, next) {
      if (spec === 'ws') port.postMessage('ws');
      return next(spec, ctx);
    }`)}`;
  const script = `
    import { register } from 'node:module';
    import { MessageChannel } from 'node:worker_threads';
    const { port1, port2 } = new MessageChannel();
    let seen = false;
    port1.on('message', () => { seen = true; });
    port1.unref();
    register(${JSON.stringify(hook)}, { data: { port: port2 }, transferList: [port2] });
    const settle = () => new Promise((r) => setTimeout(r, 200));
    const m = await import(${JSON.stringify(`${root}/dist/node/index.js`)});
    const comm = await m.initCommGroup();
    const x = new Float32Array([2]);
    await comm.allReduce(x);
    await settle();
    console.log('after a job: ws ' + seen);
    const e = await m.connectStore({ url: 'ws://127.0.0.1:1/store', token: 't', jobId: 'j', timeoutMs: 300 }).catch((err) => err);
    await settle();
    console.log('after connectStore (' + e.code + '): ws ' + seen);
    comm.destroy();
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  expect(r.stdout.trim().split('\n'), r.stderr).toEqual([
    'after a job: ws false',
    'after connectStore (CONNECT_FAILED): ws true',
  ]);
});
