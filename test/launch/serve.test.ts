// `webccl serve`'s static server: every response carries the cross-origin isolation headers,
// /webccl.js is the browser build, only files under the directory are served, and a page it
// serves really is isolated in Chromium (its workers share one node and reduce).

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
import { ISOLATION_HEADERS, type StaticServer, startStaticServer } from '../../src/launch/serve/static-server.js';
import { haveChromium, warnIfNoChromium, withTab } from '../helpers/chromium.js';
import { expectLiveBenchmark } from '../helpers/live-benchmark.js';
import { outputMatch } from '../helpers/output-match.js';

async function rejected(p: Promise<unknown>): Promise<WebcclError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(WebcclError.is(e), String(e)).toBe(true);
  return e as WebcclError;
}

const root = fileURLToPath(new URL('../..', import.meta.url));
const browserBuild = join(root, 'dist', 'browser', 'index.js');
warnIfNoChromium('the Chromium test of webccl serve');

const tmp = mkdtempSync(join(tmpdir(), 'webccl-serve-'));
const dir = join(tmp, 'site');
mkdirSync(join(dir, 'sub'), { recursive: true });
writeFileSync(join(tmp, 'secret.txt'), 'SECRET-CONTENT');
writeFileSync(join(dir, 'index.html'), '<!doctype html><title>home</title>');
writeFileSync(join(dir, 'sub', 'index.html'), 'sub index');
writeFileSync(join(dir, 'app.mjs'), 'export const x = 1;');
symlinkSync(join(tmp, 'secret.txt'), join(dir, 'leak.txt'));
// A page whose two module workers join one node through /webccl.js and allReduce.
writeFileSync(
  join(dir, 'rank.js'),
  `import { initCommGroup } from '/webccl.js';
onmessage = async ({ data: { node, rank } }) => {
  try {
    const comm = await initCommGroup({ node, rank, progress: 'thread' }); // UNSUPPORTED if its progress thread did not start
    const x = new Float32Array(1000).fill(rank + 1);
    await comm.allReduce(x);
    postMessage({ rank, sum: x[0], ok: x.every((v) => v === 3), threadOps: comm.stats().threadOps });
  } catch (e) { postMessage({ rank, error: String(e.code) + ' ' + e.message }); }
};`,
);
writeFileSync(
  join(dir, 'two.html'),
  `<!doctype html><script type="module">
import { createNode } from '/webccl.js';
const node = createNode({ nranks: 2 });
const results = await Promise.all([0, 1].map((rank) => new Promise((resolve) => {
  const w = new Worker('/rank.js', { type: 'module' });
  w.onmessage = (e) => resolve(e.data);
  w.onerror = (e) => resolve({ rank, error: String(e.message) });
  w.postMessage({ node, rank });
})));
window.webcclResults = { isolated: crossOriginIsolated, results };
</script>`,
);

let server: StaticServer;
beforeAll(async () => {
  server = await startStaticServer({ dir, browserBuild });
});
afterAll(async () => {
  await server?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** A raw request (fetch would normalise `..` away before sending). */
function get(
  path: string,
  method = 'GET',
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const r = request({ host: '127.0.0.1', port: server.port, path, method }, (res) => {
      let body = '';
      res
        .setEncoding('utf8')
        .on('data', (d) => (body += d))
        .on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    r.on('error', reject).end();
  });
}

describe('webccl serve: the static server', () => {
  it('serves files with their type and the isolation headers; a directory gives its index.html', async () => {
    const page = await get('/');
    expect(page.status).toBe(200);
    expect(page.body).toContain('home');
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    for (const [k, v] of Object.entries(ISOLATION_HEADERS)) expect(page.headers[k], k).toBe(v);
    expect((await get('/sub/')).body).toBe('sub index');
    const bare = await get('/sub');
    expect({ status: bare.status, location: bare.headers.location }).toEqual({ status: 301, location: '/sub/' });
    const mod = await get('/app.mjs');
    expect(mod.headers['content-type']).toMatch(/^text\/javascript/);
    expect(mod.body).toBe('export const x = 1;');
  });

  it('/webccl.js is the browser build of this package, with its source map', async () => {
    const js = await get('/webccl.js');
    expect(js.status).toBe(200);
    expect(js.body).toBe(readFileSync(browserBuild, 'utf8'));
    expect(js.headers['cross-origin-embedder-policy']).toBe('require-corp');
    if (existsSync(`${browserBuild}.map`)) expect((await get('/webccl.js.map')).status).toBe(200);
  });

  it('/progress-worker.js and /net-progress-worker.js are the scripts beside the browser build (its progress threads, which it loads from its own directory)', async () => {
    for (const f of ['progress-worker.js', 'net-progress-worker.js']) {
      const r = await get(`/${f}`);
      expect(r.status, f).toBe(200);
      expect(r.body, f).toBe(readFileSync(join(dirname(browserBuild), f), 'utf8'));
      expect(r.headers['content-type'], f).toMatch(/javascript/);
    }
  });

  it('refuses what lies outside the directory: .., encoded .., a symlink leading out; 404 for a missing file; 405 for POST; HEAD has no body', async () => {
    // The URL parser resolves `..` (encoded or not) against the root, so these never leave it.
    for (const path of [
      '/../secret.txt',
      '/%2e%2e/secret.txt',
      '/sub/%2E%2E/%2E%2E/secret.txt',
      '/..%2fsecret.txt',
      '/sub/..%2f..%2fsecret.txt',
    ]) {
      const r = await get(path);
      expect([403, 404], path).toContain(r.status);
      expect(r.body, path).not.toContain('SECRET-CONTENT');
    }
    const leak = await get('/leak.txt');
    expect(leak.status).toBe(403);
    expect(leak.body).not.toContain('SECRET-CONTENT');
    expect((await get('/nope.html')).status).toBe(404);
    expect((await get('/%E0%A4%A')).status).toBe(400);
    const post = await get('/index.html', 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
    const head = await get('/index.html', 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(Number(head.headers['content-length'])).toBeGreaterThan(0);
  });

  it('a missing directory is INVALID_ARGUMENT; a port in use is ADDRESS_IN_USE', async () => {
    expect((await rejected(startStaticServer({ dir: join(tmp, 'none'), browserBuild }))).code).toBe('INVALID_ARGUMENT');
    expect((await rejected(startStaticServer({ dir: join(tmp, 'secret.txt'), browserBuild }))).code).toBe(
      'INVALID_ARGUMENT',
    );
    const e = await rejected(startStaticServer({ dir, browserBuild, port: server.port }));
    expect({ code: e.code, port: e.details.port }).toEqual({ code: 'ADDRESS_IN_USE', port: server.port });
  });

  it.skipIf(!haveChromium)(
    'a page it serves is cross-origin isolated in Chromium: two workers share a node through /webccl.js and allReduce on its progress thread (/progress-worker.js beside it)',
    async () => {
      await withTab(async (tab, errors) => {
        await tab.goto(`${server.url}/two.html`);
        const got = await tab
          .waitForFunction(() => (window as any).webcclResults, null, { timeout: 60_000 })
          .then((h) => h.jsonValue());
        expect(errors).toEqual([]);
        expect(got).toEqual({
          isolated: true,
          results: [
            { rank: 0, sum: 3, ok: true, threadOps: 1 },
            { rank: 1, sum: 3, ok: true, threadOps: 1 },
          ],
        });
      });
    },
    90_000,
  );
});

describe('webccl serve: the command', () => {
  const bin = join(root, 'bin', 'webccl.js');
  const env = { ...process.env, WEBCCL_TOKEN: undefined, WEBCCL_JOB_ID: undefined };
  const cli = (args: string[]) =>
    spawnSync(process.execPath, [bin, 'serve', ...args], { encoding: 'utf8', timeout: 30_000, env });

  it('serves DIR on the port asked for, prints its address, and ends with code 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [bin, 'serve', dir, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const [, url] = await outputMatch(child.stdout, /(http:\/\/127\.0\.0\.1:\d+)\//);
      const res = await fetch(`${url}/app.mjs`);
      expect(res.headers.get('cross-origin-opener-policy')).toBe('same-origin');
      expect(await res.text()).toBe('export const x = 1;');
      expect(await (await fetch(`${url}/webccl.js`)).text()).toBe(readFileSync(browserBuild, 'utf8'));
    } finally {
      child.kill('SIGTERM');
    }
    const code = await new Promise((r) => child.once('exit', (c) => r(c)));
    expect(code).toBe(0);
  }, 60_000);

  it('refuses a bad port, two directories, unknown options and store flags without a token with its usage (exit 2); a missing directory exits 1 naming it', () => {
    // --job-id and --store-port mean nothing without a token (no store is served).
    for (const args of [
      ['--port', 'x'],
      ['-p', '70000'],
      [dir, dir],
      ['--tokn', 't'],
      ['--port'],
      ['--job-id', 'j'],
      ['--store-port', '0'],
      ['--token', ''],
      ['--token', 't', '--store-port', 'x'],
      ['--token', 't', '-p', '65535'],
    ]) {
      const r = cli(args);
      expect({ args, status: r.status }).toEqual({ args, status: 2 });
      expect(r.stderr).toMatch(/^webccl serve: /);
      expect(r.stderr).toContain('usage: webccl serve');
    }
    const r = cli([join(tmp, 'none'), '--port', '0']);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(join(tmp, 'none'));
    const help = cli(['--help']);
    expect({ status: help.status, usage: help.stdout.startsWith('usage: webccl serve') }).toEqual({
      status: 0,
      usage: true,
    });
  });

  it.skipIf(!haveChromium)(
    '--demo serves the live benchmark: rows arrive for every size with #wrong 0, drawn as they come; with a directory it is a usage error',
    async () => {
      expect(cli(['--demo', dir]).status).toBe(2);
      const child = spawn(process.execPath, [bin, 'serve', '--demo', '--port', '0'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      try {
        const [, url] = await outputMatch(child.stdout, /live benchmark at (http:\/\/\S+perf\.html)/);
        await withTab((tab, errors) => expectLiveBenchmark(tab, errors, url, join(dir, 'perf-page.png')));
      } finally {
        child.kill('SIGTERM');
      }
    },
    120_000,
  );

  it.skipIf(!haveChromium)(
    "the live benchmark with rank 0 on the page's main thread (?main=1): it awaits every call, every row right, over that thread's own floor",
    async () => {
      const child = spawn(process.execPath, [bin, 'serve', '--demo', '--port', '0'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      try {
        const [, url] = await outputMatch(child.stdout, /live benchmark at (http:\/\/\S+perf\.html)/);
        await withTab(async (tab, errors) => {
          await tab.goto(`${url}?ranks=2&main=1&max=8192&seconds=0.02`);
          await tab.waitForSelector('#status:not([data-state="running"])', { timeout: 90_000 });
          expect({
            state: await tab.getAttribute('#status', 'data-state'),
            text: await tab.textContent('#status'),
          }).toEqual({ state: 'done', text: '2 ranks, 6 sizes: every result right' });
          expect(await tab.evaluate('window.perfOnMain')).toBe(true);
          const rows = (await tab.evaluate('window.perfRows')) as { size: number; wrong: number; timeUs: number }[];
          expect(rows.map((r) => [r.size, r.wrong])).toEqual([8, 32, 128, 512, 2048, 8192].map((s) => [s, 0]));
          const floor = (await tab.evaluate('window.perfFloor')) as {
            oneWayUs: number;
            workerOneWayUs: number;
            copyGBs: number;
          };
          expect(floor.oneWayUs > 0 && floor.workerOneWayUs > 0 && floor.copyGBs > 0).toBe(true);
          expect(await tab.textContent('#floor')).toContain(
            "this thread's Atomics.waitAsync and a worker's Atomics.wait",
          );
          expect(await tab.locator('#chart circle').count()).toBe(6);
          expect(errors).toEqual([]);
        });
      } finally {
        child.kill('SIGTERM');
      }
    },
    120_000,
  );
});
