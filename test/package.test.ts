// What ships: ESM and CJS entries for Node, types per condition, a browser ESM build that
// reaches no Node module and carries its wasm inside, and the webccl command. The packed and
// installed package is tested in package-tarball.test.ts.
import { readFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
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
  for (const f of [...targets(e), pkg.main, pkg.module, pkg.types, pkg.browser, pkg.bin.webccl]) expect(existsSync(`${root}/${f}`), f).toBe(true);
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
