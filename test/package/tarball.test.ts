// The package as a user meets it: `npm pack`, installed from the tarball into an empty project
// (--prefer-offline: its one runtime dependency, ws, comes from npm's cache when `npm ci` left
// its metadata there, and from the registry otherwise — a fresh machine's cache holds only
// the tarball the lockfile named, not the metadata a plain install resolves against), then typechecked against, run
// under Node in both module systems, and its shipped browser example served and run in Chromium.
// Everything here reads the installed copy, never the checkout.
import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reachedDeclarations } from '../../scripts/prune-declarations.mjs';
import { haveChromium, warnIfNoChromium, withTab } from '../helpers/chromium.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const TSC = join(root, 'node_modules/typescript/bin/tsc');
warnIfNoChromium('packed browser example test');

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}
/** Runs a command to its end (deadline 120 s) and returns what it printed, failing or not. */
function run(cmd: string, args: string[], cwd: string): Promise<Ran> {
  return new Promise((res) => {
    execFile(cmd, args, { cwd, timeout: 120_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      res({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

const write = (path: string, text: string) => {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
};

/** Every file under `dir`, relative to it. */
function listFiles(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? listFiles(join(dir, e.name), base) : [relative(base, join(dir, e.name))],
  );
}

/** Every path an exports map names (conditions nested). */
const targets = (e: unknown): string[] => (typeof e === 'string' ? [e] : Object.values(e as object).flatMap(targets));

let tmp = '';
let app = ''; // the empty project the tarball is installed into
let pkgDir = ''; // app/node_modules/webccl
let packed: string[] = [];

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'webccl-tarball-'));
  const pack = await run('npm', ['pack', '--json', '--pack-destination', tmp], root);
  expect(pack.code, pack.stderr).toBe(0);
  const [{ filename, files }] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
  packed = files.map((f) => f.path);
  app = join(tmp, 'app');
  write(join(app, 'package.json'), '{ "name": "app", "private": true }\n');
  const inst = await run(
    'npm',
    ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', join(tmp, filename)],
    app,
  );
  expect(inst.code, inst.stderr).toBe(0);
  pkgDir = join(app, 'node_modules', 'webccl');
}, 180_000);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('the tarball', () => {
  it('holds every file package.json names, the browser example, and only the bundles something loads', () => {
    const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
    for (const f of [...targets(pkg.exports), pkg.main, pkg.module, pkg.types, pkg.browser, pkg.bin.webccl])
      expect(existsSync(join(pkgDir, f)), f).toBe(true);
    for (const f of ['index.html', 'main.js', 'rank.js', 'README.md'])
      expect(packed, f).toContain(`examples/browser/${f}`);
    // The Node entries, the scripts they start as threads or processes, the CLI, the browser build.
    const js = packed.filter((f) => /^dist\/.*\.c?js$/.test(f)).sort();
    // (and the subpaths' few lines of re-exports: embed, layouts, trace)
    expect(js).toEqual([
      'dist/browser/embed.js',
      'dist/browser/index.js',
      'dist/browser/layouts.js',
      'dist/browser/net-progress-worker.js',
      'dist/browser/progress-worker.js',
      'dist/browser/trace.js',
      'dist/node/cli.js',
      'dist/node/embed.cjs',
      'dist/node/embed.js',
      'dist/node/index.cjs',
      'dist/node/index.js',
      'dist/node/layouts.cjs',
      'dist/node/layouts.js',
      'dist/node/net-progress-worker.js',
      'dist/node/perf-rank.js',
      'dist/node/progress-worker.js',
      'dist/node/rank-guard.js',
      'dist/node/sim-worker.js',
      'dist/node/trace.cjs',
      'dist/node/trace.js',
      'dist/node/worker-entry.js',
    ]);
    for (const f of js.filter((f) => /\/(embed|layouts|trace)\.c?js$/.test(f))) {
      expect(readFileSync(join(pkgDir, f), 'utf8').length, f).toBeLessThan(500); // re-exports, no second copy
    }
    expect(packed.filter((f) => /\.(map|wasm)$/.test(f))).toEqual([]); // the wasm is inside the bundles
    expect(listFiles(pkgDir).sort()).toEqual([...packed].sort());
  });

  it('ships no declaration file that no entry reaches, and none holding a base64 blob', () => {
    const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
    const entries = [...new Set([...targets(pkg.exports), pkg.types].filter((f) => f.endsWith('.d.ts')))];
    expect(entries.sort()).toEqual([
      './dist/types-cjs/node.d.ts',
      ...['embed', 'layouts', 'trace'].map((s) => `./dist/types-cjs/subpaths/${s}.d.ts`),
      './dist/types/index.d.ts',
      './dist/types/node.d.ts',
      ...['embed', 'layouts', 'trace'].map((s) => `./dist/types/subpaths/${s}.d.ts`),
    ]);
    const reached = new Set([...reachedDeclarations(pkgDir, entries)].map((f) => relative(pkgDir, f)));
    const declared = packed.filter((f) => f.endsWith('.d.ts'));
    expect(declared.filter((f) => !reached.has(f))).toEqual([]);
    expect(declared.length).toBe(reached.size);
    for (const f of declared) expect(readFileSync(join(pkgDir, f), 'utf8'), f).not.toMatch(/[A-Za-z0-9+/]{200}/);
  });
});

describe('TypeScript against the installed package', () => {
  // Each collective's options are its own type: a key another collective takes is refused by the
  // compiler as at run time (an unused @ts-expect-error fails the check). Wiring symbols and
  // @internal members are not in the declarations.
  const nodeUse = `import { launch, launchProcesses, type LaunchOptions, initCommGroup, allReduce, broadcast } from 'webccl';
import * as webccl from 'webccl';
import { createNode, joinNode, Communicator, type NodeHandle } from 'webccl/embed';
import { traceSpan, type FlightEntry } from 'webccl/trace';
import { convertLayout, LAYOUTS, type LayoutTensor } from 'webccl/layouts';
export const subpaths = [createNode, joinNode, Communicator, traceSpan, convertLayout, LAYOUTS];
export type SubpathTypes = [NodeHandle, FlightEntry, LayoutTensor];
export async function main(opts: LaunchOptions): Promise<number> {
  if (opts.nranks > 1) return (await launch(opts)).exitCode;
  void launchProcesses;
  const comm = await initCommGroup();
  const x = new Float32Array(4);
  await allReduce(x, { op: 'max' });
  await broadcast(x, { root: 0 });
  // @ts-expect-error op is not a broadcast option
  await broadcast(x, { op: 'max' });
  // @ts-expect-error root is not an allGather option
  comm.allGather(new Float32Array(4 * comm.size), x, { root: 0 });
  // @ts-expect-error algo is an allReduce option only
  comm.reduce(x, { algo: 'ring' });
  // @ts-expect-error the launchers' hand-off symbol is not exported
  void webccl.RANK_INIT;
  // @ts-expect-error a Work's settle() is the engines', not the API's
  comm.barrier().settle();
  return comm.rank;
}
`;
  // Compiles without @types/node: browser types must not lean on Node's.
  const browserUse = `import { initCommGroup, allReduce, createNode } from 'webccl';
import * as webccl from 'webccl';
import { joinNode } from 'webccl/embed';
import { traceTrack } from 'webccl/trace';
import { convertDtype } from 'webccl/layouts';
export const subpaths = [joinNode, traceTrack, convertDtype];
export async function main(): Promise<number> {
  const comm = await initCommGroup({ node: createNode({ nranks: 1 }), rank: 0 });
  await allReduce(new Float32Array(4));
  // @ts-expect-error the browser build has no launcher (an unused directive would fail the check)
  void webccl.launch;
  return comm.rank;
}
`;
  const nodeTypes = `"types": ["node"], "typeRoots": [${JSON.stringify(join(root, 'node_modules/@types'))}]`;
  const cases: [string, string, string, string][] = [
    // name, compiler options, source, the folder's package.json "type"
    ['node16, an ES module', `"module": "node16", "moduleResolution": "node16", ${nodeTypes}`, nodeUse, 'module'],
    [
      'node16, a CommonJS module',
      `"module": "node16", "moduleResolution": "node16", ${nodeTypes}`,
      nodeUse,
      'commonjs',
    ],
    [
      'bundler with the node condition',
      `"module": "esnext", "moduleResolution": "bundler", "customConditions": ["node"], ${nodeTypes}`,
      nodeUse,
      'module',
    ],
    [
      'bundler with the browser condition',
      `"module": "esnext", "moduleResolution": "bundler", "customConditions": ["browser"], "lib": ["es2022", "dom"], "types": []`,
      browserUse,
      'module',
    ],
    [
      'bundler without a condition (the default: the browser build)',
      `"module": "esnext", "moduleResolution": "bundler", "lib": ["es2022", "dom"], "types": []`,
      browserUse,
      'module',
    ],
  ];
  let results: Ran[] = [];
  beforeAll(async () => {
    // One project per case, all compiled at once (tsc takes seconds on a busy machine).
    results = await Promise.all(
      cases.map(([, options, source, type], i) => {
        const dir = join(app, `ts${i}`);
        write(join(dir, 'package.json'), `{ "type": "${type}" }\n`);
        write(join(dir, 'use.ts'), source);
        write(
          join(dir, 'tsconfig.json'),
          `{ "compilerOptions": { "target": "es2022", "strict": true, "noEmit": true, ${options} }, "files": ["use.ts"] }\n`,
        );
        return run(process.execPath, [TSC, '-p', dir], dir);
      }),
    );
  }, 180_000);
  cases.forEach(([name], i) => {
    it(`tsc --noEmit passes: ${name}`, () => {
      expect(results[i].stdout + results[i].stderr).toBe('');
      expect(results[i].code).toBe(0);
    });
  });
});

describe('Node runs the installed copy', () => {
  it('CommonJS: require, a one-rank allReduce', async () => {
    const script =
      "const w = require('webccl'); w.initCommGroup().then(async (c) => { const x = new Float64Array([1.5, -2]); await w.allReduce(x, { op: w.Max }); console.log(JSON.stringify({ size: c.size, x: [...x], from: require.resolve('webccl') })); });";
    const r = await run(process.execPath, ['-e', script], app);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ size: 1, x: [1.5, -2], from: join(pkgDir, 'dist/node/index.cjs') });
  });

  it("the subpaths (webccl/embed, webccl/trace, webccl/layouts) hand out the main entry's own functions, in both module systems", async () => {
    const names = { embed: 'createNode', trace: 'traceSpan', layouts: 'convertLayout' };
    const cjs = `const w = require('webccl'); console.log(JSON.stringify(${JSON.stringify(names)}, (k, v) => (k ? require('webccl/' + k)[v] === w[v] : v)));`;
    const esm = `import * as w from 'webccl'; const n = ${JSON.stringify(names)}; const out = {}; for (const [k, v] of Object.entries(n)) out[k] = (await import('webccl/' + k))[v] === w[v]; console.log(JSON.stringify(out));`;
    for (const [args, what] of [
      [['-e', cjs], 'require'],
      [['--input-type=module', '-e', esm], 'import'],
    ] as const) {
      const r = await run(process.execPath, [...args], app);
      expect(r.stderr, what).toBe('');
      expect(JSON.parse(r.stdout), what).toEqual({ embed: true, trace: true, layouts: true });
    }
  });

  it('ES module: a one-rank allReduce, then 2 ranks started with launch (the shipped worker scripts)', async () => {
    write(
      join(app, 'rank.mjs'),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the file written holds a template literal
      "import { initCommGroup, allReduce } from 'webccl';\nconst c = await initCommGroup();\nconst x = new Float32Array(1000).fill(c.rank + 1);\nawait allReduce(x);\nconsole.log(`rank ${c.rank}/${c.size} sum ${x[999]} from ${import.meta.resolve('webccl')}`);\n",
    );
    write(
      join(app, 'launch.mjs'),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the file written holds a template literal
      "import { launch } from 'webccl';\nconst r = await launch({ nranks: 2, script: new URL('./rank.mjs', import.meta.url).pathname });\nconsole.log(`exit ${r.exitCode}`);\n",
    );
    const from = new URL(`file://${join(pkgDir, 'dist/node/index.js')}`).href;
    const one = await run(process.execPath, ['rank.mjs'], app);
    expect(one.stderr).toBe('');
    expect(one.stdout.trim()).toBe(`rank 0/1 sum 1 from ${from}`);
    const two = await run(process.execPath, ['launch.mjs'], app);
    expect(two.stderr).toBe('');
    expect(two.stdout.split('\n').filter(Boolean).sort()).toEqual([
      'exit 0',
      `rank 0/2 sum 3 from ${from}`,
      `rank 1/2 sum 3 from ${from}`,
    ]);
  });
});

describe.skipIf(!haveChromium)('the shipped browser example in headless Chromium', () => {
  const stops: (() => void)[] = [];
  afterAll(() => stops.forEach((stop) => stop()));

  /** Opens the example at `url` with 3 ranks and checks what the page reports. */
  async function visit(url: string): Promise<void> {
    await withTab(async (tab, errors) => {
      tab.on('requestfailed', (r) => errors.push(`request failed: ${r.url()}`));
      tab.on('response', (r) => void (r.status() >= 400 && errors.push(`${r.status()} ${r.url()}`)));
      await tab.goto(`${url}?ranks=3`);
      await tab.waitForSelector('#status:not([data-state="running"])', { timeout: 60_000 });
      const log = await tab.textContent('#log');
      expect(await tab.getAttribute('#status', 'data-state'), log ?? '').toBe('done');
      expect(log).toContain('cross-origin isolated: true');
      // The node's progress thread (a Web Worker from progress-worker.js, which the bundler must carry) ran the two ops
      // in flight.
      for (const rank of [0, 1, 2])
        expect(log).toMatch(
          new RegExp(
            `rank ${rank}/3: allReduce sum 6, allGather 0,1,2, broadcast from rank 0: 42; ops run by the progress thread: [1-9]`,
          ),
        );
      expect(errors).toEqual([]);
    });
  }

  /** `webccl serve DIR --port 0` from the installed copy, as the READMEs say; resolves to the address it prints. */
  async function serveDir(dir: string): Promise<string> {
    const server = spawn(process.execPath, [join(pkgDir, 'bin/webccl.js'), 'serve', dir, '--port', '0'], {
      cwd: app,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    stops.push(() => server.kill());
    return new Promise<string>((res, rej) => {
      let out = '';
      const timer = setTimeout(() => rej(new Error(`webccl serve printed no address in 30 s: ${out}`)), 30_000);
      server.stdout.on('data', (d) => {
        out += d;
        const m = /http:\/\/\S+\//.exec(out);
        if (m) {
          clearTimeout(timer);
          res(m[0]);
        }
      });
    });
  }

  /** The example as a bundler's user copies it: its files in app/SUB/src, importing 'webccl'. */
  function copyExample(sub: string): string {
    const src = join(app, sub, 'src');
    for (const f of ['index.html', 'main.js', 'rank.js']) {
      const text = readFileSync(join(pkgDir, 'examples/browser', f), 'utf8');
      write(join(src, f), text.replaceAll("'../../dist/browser/index.js'", "'webccl'"));
    }
    expect(readFileSync(join(src, 'rank.js'), 'utf8')).toContain("from 'webccl'");
    return src;
  }

  it('webccl serve (the installed command) serves the example cross-origin isolated; 3 worker ranks get every result right', async () => {
    const url = await serveDir(pkgDir);
    await visit(`${url}examples/browser/`);
  });

  it("bundled by esbuild as the example's README says (two entry points, platform browser)", async () => {
    const src = copyExample('esbuild');
    const out = join(app, 'esbuild', 'out');
    const { build } = await import('esbuild');
    await build({
      entryPoints: [join(src, 'main.js'), join(src, 'rank.js')],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      outdir: out,
      absWorkingDir: app,
      logLevel: 'silent',
    });
    write(join(out, 'index.html'), readFileSync(join(src, 'index.html'), 'utf8'));
    // esbuild does not follow new Worker(new URL(...)): the progress threads' scripts are copied beside the bundles, as
    // the README says.
    for (const f of ['progress-worker.js', 'net-progress-worker.js'])
      cpSync(join(pkgDir, 'dist/browser', f), join(out, f));
    // the browser build was picked
    expect(readFileSync(join(out, 'rank.js'), 'utf8')).not.toMatch(/node:worker_threads/);
    await visit(await serveDir(out));
  });

  it("bundled by Vite as the example's README says (module workers)", async () => {
    const src = copyExample('vite');
    const out = join(app, 'vite', 'out');
    const { build } = await import('vite');
    await build({
      root: src,
      configFile: false,
      logLevel: 'silent',
      worker: { format: 'es' },
      build: { outDir: out, emptyOutDir: true },
    });
    await visit(await serveDir(out));
  });
});
