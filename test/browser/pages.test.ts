// The browser build in a real browser: headless Chromium loads a page (served cross-origin
// isolated, as SharedArrayBuffer requires) whose Web Workers join one node and run collectives.
// Skipped, with a message, where Chromium is not installed (.ci/run installs it).
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, warnIfNoChromium, withTab } from '../helpers/chromium.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
warnIfNoChromium('browser tests');

const TYPES: Record<string, string> = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.map': 'application/json',
};

describe.skipIf(!haveChromium)('in headless Chromium', () => {
  let server: Server;
  let origin = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      const path = normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname));
      // /moved/index.js: the browser bundle alone, as a bundler that moved it without progress-worker.js serves it.
      const file = path === '/moved/index.js' ? join(root, 'dist/browser/index.js') : join(root, path);
      if (
        !file.startsWith(root) ||
        !/^\/(dist\/browser|test\/browser|moved\/index\.js$|test\/system\/fixtures\/random-ops\.mjs$)/.test(path) ||
        !existsSync(file)
      ) {
        res.writeHead(404).end();
        return;
      }
      // not-isolated.html is served as a page that forgot the headers shared memory needs.
      const isolate = !path.endsWith('/not-isolated.html');
      res.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        ...(isolate && { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' }),
      });
      res.end(readFileSync(file));
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const addr = server.address();
    origin = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  });
  afterAll(() => new Promise<void>((res) => server.close(() => res())));

  /**
   * Loads a page of test/browser/ and returns what it left in window.webcclResults (and `warnings`: the console's;
   * webccl's log lines go to console.error).
   */
  async function visit(page: string): Promise<any> {
    return withTab(async (tab, errors) => {
      const warnings: string[] = [];
      tab.on(
        'console',
        (m) =>
          ['warning', 'error'].includes(m.type()) &&
          !m.location().url.endsWith('/favicon.ico') &&
          warnings.push(m.text()),
      );
      await tab.goto(`${origin}/test/browser/${page}`);
      const got = await tab
        .waitForFunction(() => (window as any).webcclResults, null, { timeout: 90_000 })
        .then((h) => h.jsonValue());
      expect(errors).toEqual([]);
      return { ...got, warnings };
    });
  }

  it('three Web Workers share one node and every collective is right', async () => {
    const got = await visit('page.html?n=3');
    expect(got.isolated).toBe(true);
    for (const [rank, r] of got.results.entries()) {
      expect(r).toEqual({ rank, sum: true, max: true, gather: true, f16: 0x4200, bcast: true }); // 3.0 in f16
    }
  });

  describe("the page's progress thread (a module Web Worker createNode starts)", () => {
    for (const [n, mode, busyMs] of [
      [2, 'thread', 1500],
      [2, 'auto', 1500],
      [4, 'auto', 3000],
      [8, 'thread', 6000],
    ] as const) {
      it(`${n} ranks, progress ${mode}: collectives (rooted ones from every root) end while every rank computes without calling webccl, right`, async () => {
        const got = await visit(`progress.html?n=${n}&mode=${mode}&busyMs=${busyMs}`);
        expect(got.results).toHaveLength(n);
        for (const [rank, r] of got.results.entries()) {
          // allReduce ×2, allGather, then a broadcast and a reduce from every root.
          expect(r, JSON.stringify(r)).toMatchObject({ rank, during: Array(3 + 2 * n).fill(true), right: true });
          // thread: every op on the thread. auto: the first, 64-byte allReduce starts on its rank at
          // issue (the rank waited at once before), and an op issued while it still waits for a
          // late peer may queue behind it on the rank (with 4 ranks on 2 cores under a loaded
          // machine a peer can be that late): the thread runs some, and every op ends meanwhile.
          if (mode === 'thread') expect(r.threadOps).toBeGreaterThanOrEqual(3 + 2 * n);
          else expect(r.threadOps).toBeGreaterThan(0);
        }
        expect(got.warnings).toEqual([]);
      });
    }

    it('4 ranks, progress thread: abort() of a destroyed group does nothing (the next group, in its memory, runs right)', async () => {
      const got = await visit('progress.html?n=4&mode=thread&abortDestroyed=1');
      expect(got.results).toHaveLength(4);
      for (const [rank, r] of got.results.entries())
        expect(r, JSON.stringify(r)).toEqual({ rank, right: true, error: null });
    });

    it('stopped while it holds an op: ABORTED naming it on every rank, no hang', async () => {
      const got = await visit('progress.html?n=2&mode=thread&stop=1');
      for (const r of got.results) expect(r.outcome, JSON.stringify(r)).toMatchObject({ code: 'ABORTED' });
      expect(got.results[0].outcome.details).toMatchObject({ progressThread: true });
    });

    it('its script missing beside the bundle (moved by a bundler): a warning, the ranks run their ops themselves, right, and the failed worker is terminated', async () => {
      const got = await visit('progress.html?n=2&mode=auto&busyMs=200&lib=/moved/index.js');
      for (const [rank, r] of got.results.entries())
        expect(r, JSON.stringify(r)).toMatchObject({ rank, right: true, threadOps: 0 });
      expect(got.warnings.join('\n')).toMatch(
        /progress thread did not start \(its script .*\/moved\/progress-worker\.js could not be loaded\)/,
      );
      expect(got.terminated).toEqual([expect.stringMatching(/\/moved\/progress-worker\.js$/)]);
    });

    it("its script missing, progress 'thread': UNSUPPORTED naming the script, not a silent fallback", async () => {
      const got = await visit('progress.html?n=2&mode=thread&lib=/moved/index.js');
      for (const r of got.results)
        expect(r.init, JSON.stringify(r)).toMatchObject({
          code: 'UNSUPPORTED',
          message: expect.stringMatching(/progress-worker\.js/),
        });
    });
  });

  it("the page's main thread allocates while a worker holds the heap lock: TIMEOUT naming the holder, not a TypeError; then it works", async () => {
    const got = await visit('heap-lock.html');
    expect(got.whileHeld).toEqual({ name: 'WebcclError', code: 'TIMEOUT', holder: 1 });
    expect(got.after).toBe(16);
  });

  // The seeded random sequences of test/system/random-ops.test.ts, with refusals and waits in
  // random order, on a page's Web Workers in each progress mode (the same env variables set the
  // seeds and the number of ops).
  describe('seeded random ops in 4 Web Workers, every result checked', () => {
    const ops = Number(process.env.WEBCCL_RANDOM_OPS) || 40;
    const seeds = Array.from(
      { length: Number(process.env.WEBCCL_RANDOM_SEEDS) || 1 },
      (_, k) => (Number(process.env.WEBCCL_RANDOM_FIRST_SEED) || 11) + k,
    );
    for (const mode of ['auto', 'thread', 'caller'])
      for (const seed of seeds)
        it(`model: ${mode} progress, refusals, waits in random order, memory and groups anew (seed ${seed}, ${ops} ops)`, async () => {
          const args = encodeURIComponent(JSON.stringify({ seed, ops, model: true }));
          const got = await visit(`random-ops.html?n=4&mode=${mode}&args=${args}`);
          const rs: { lines: string[]; exit: number; error?: string }[] = got.results;
          const lines = rs.flatMap((r) => r.lines).join('\n');
          expect(
            rs.map((r) => r.error ?? r.exit),
            lines,
          ).toEqual([0, 0, 0, 0]);
          const ok = [...lines.matchAll(/^ok (\d+) \d+ refused \d+$/gm)].map((m) => Number(m[1]));
          expect(ok.sort(), lines).toEqual([0, 1, 2, 3]);
        }, 300_000);
  });

  it('a page that is not cross-origin isolated: createNode says UNSUPPORTED and names the COOP/COEP headers', async () => {
    const got = await visit('not-isolated.html');
    expect(got.isolated).toBe(false);
    expect(got.outcome).toMatchObject({ name: 'WebcclError', code: 'UNSUPPORTED' });
    expect(got.outcome.headers).toEqual({
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
    });
  });
});
