// Browser pages as ranks of real jobs with Node processes, in Debian's Chromium: the store and
// the relay are `webccl serve`'s (in this process), Node ranks join with WEBCCL_STORE_SERVED=1,
// pages open examples/browser/job.html (or perf.html) from the package's own files. Every rank
// checks every result itself; a page closed mid-op, a page with the wrong token and a page that
// is not cross-origin isolated each end the way docs/browsers.md says. No timing asserts.

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, haveChromium, warnIfNoChromium } from '../helpers/chromium.js';
import { cleanEnv } from '../helpers/jobs.js';
import { bin, fixture, killAll, type Run, root, run } from '../helpers/procs.js';
import { JOB_TOKEN, type ServedJob, servedJob } from '../helpers/served-job.js';

warnIfNoChromium('the browser job tests');
afterAll(killAll);
const node = process.execPath;

let browser: Browser;
beforeAll(async () => {
  if (!haveChromium) return;
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
    ],
  });
});
afterAll(async () => browser?.close());

interface PageResult {
  ok: boolean;
  ranks?: number[];
  code?: string;
  message?: string;
}

/** A tab of job.html with `query`; `until` says when to stop waiting (default: a result). */
async function openJobPage(
  url: string,
  until = '(window.jobResult !== undefined)',
): Promise<{ tab: Page; result: () => Promise<PageResult>; log: () => Promise<string> }> {
  const tab = await (await browser.newContext()).newPage();
  await tab.goto(url);
  return {
    tab,
    result: async () => {
      await tab.waitForFunction(until, undefined, { timeout: 120_000 });
      return tab.evaluate('window.jobResult') as Promise<PageResult>;
    },
    log: async () => (await tab.textContent('#log')) ?? '',
  };
}
const jobUrl = (job: ServedJob, q: Record<string, string | number>) =>
  `${job.served.http.url}/examples/browser/job.html?${new URLSearchParams({ token: JOB_TOKEN, job: job.jobId, ...Object.fromEntries(Object.entries(q).map(([k, v]) => [k, String(v)])) })}`;

const okRanks = (rs: Run[]) =>
  [
    ...rs
      .map((r) => r.stdout)
      .join('')
      .matchAll(/^ok rank (\d+) of (\d+)[ :]/gm),
  ].map((m) => Number(m[1]));

describe.skipIf(!haveChromium)('pages in jobs with Node processes', () => {
  it('2 Node processes of 2 ranks + 2 pages of 2 workers: every collective, send/recv and a split check out on all 8 ranks, hierarchical allReduce', async () => {
    const job = await servedJob('mixed-8');
    try {
      // The Node processes are `webccl run --nnodes 4` launchers (nodes 0 and 1; the pages are 2 and
      // 3) running the shipped examples/browser/job-node.mjs, as docs/browsers.md says: world ranks 0..3.
      const procs = Promise.all(
        [0, 1].map((k) =>
          run(
            node,
            [
              bin,
              'run',
              '--nnodes',
              '4',
              '--node-rank',
              String(k),
              '--nproc-per-node',
              '2',
              '--master-addr',
              '127.0.0.1',
              '--master-port',
              String(job.served.store!.port),
              join(root, 'examples', 'browser', 'job-node.mjs'),
            ],
            job.nodeEnv(0, 0),
          ),
        ),
      );
      const pages = await Promise.all([4, 6].map((first) => openJobPage(jobUrl(job, { size: 8, first, ranks: 2 }))));
      const results = await Promise.all(pages.map((p) => p.result()));
      const rs = await procs;
      for (const r of rs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      expect(okRanks(rs).sort()).toEqual([0, 1, 2, 3]);
      expect(rs[0].stdout).toMatch(
        /^ok rank 0 of 8: every op checked; allReduce algorithms \{[^}]*"hierarchical":[1-9]/m,
      );
      expect(results, await pages[0].log()).toEqual([
        { ok: true, ranks: [4, 5] },
        { ok: true, ranks: [6, 7] },
      ]);
      const log = await pages[0].log();
      expect(log).toMatch(/rank 4\/8: every op checked; allReduce algorithms \{[^}]*"hierarchical":[1-9]/);
      // The two pages' links passed the relay; the pages reached the Node ranks directly.
      expect(job.served.store!.relay.stats().bytesForwarded).toBeGreaterThan(0);
      await Promise.all(pages.map((p) => p.tab.close()));
    } finally {
      await job.close();
    }
  }, 240_000);

  it("2 Node ranks given only MASTER_ADDR, MASTER_PORT (serve's own port), RANK, WORLD_SIZE and WEBCCL_TOKEN, and a page of 2 workers: every op checks out", async () => {
    const job = await servedJob('plain-vars');
    try {
      // No WEBCCL_STORE_SERVED, WEBCCL_TRANSPORT or WEBCCL_JOB_ID, and serve's HTTP port, not its
      // store's: the ranks find the store, the job id and the carrier from serve itself.
      const plain = (rank: number) =>
        cleanEnv({
          MASTER_ADDR: '127.0.0.1',
          MASTER_PORT: String(job.served.http.port),
          RANK: String(rank),
          WORLD_SIZE: '4',
          WEBCCL_TOKEN: JOB_TOKEN,
          HOME: tmpdir(),
        });
      const procs = Promise.all(
        [0, 1].map((r) => run(node, [join(root, 'examples', 'browser', 'job-node.mjs')], plain(r))),
      );
      const page = await openJobPage(jobUrl(job, { size: 4, first: 2, ranks: 2 }));
      const result = await page.result();
      const rs = await procs;
      for (const r of rs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      expect(okRanks(rs).sort()).toEqual([0, 1]);
      expect(result, await page.log()).toEqual({ ok: true, ranks: [2, 3] });
      await page.tab.close();
    } finally {
      await job.close();
    }
  }, 240_000);

  it("a page of 2 workers and a Node rank: the ops over 8 MiB end while every rank computes without calling webccl, on the ranks' network progress threads (the page's are Web Workers), right", async () => {
    const job = await servedJob('net-progress');
    try {
      const proc = run(node, [fixture('net-overlap.mjs', 'browser'), '8000'], job.nodeEnv(0, 3));
      const tab = await (await browser.newContext()).newPage();
      const q = new URLSearchParams({
        master: job.master,
        token: JOB_TOKEN,
        job: job.jobId,
        size: '3',
        first: '1',
        ranks: '2',
        busyMs: '8000',
      });
      await tab.goto(`${job.served.http.url}/test/browser/net-progress.html?${q}`);
      const pages = await tab
        .waitForFunction('window.webcclResults', undefined, { timeout: 120_000 })
        .then((h) => h.jsonValue());
      const r = await proc;
      expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      const reports = [JSON.parse(r.stdout.trim()), ...pages];
      for (const [rank, rep] of reports.entries()) {
        expect(rep, JSON.stringify(rep)).toMatchObject({ rank, during: [true, true], right: true });
        expect(rep.threadOps).toBeGreaterThanOrEqual(2);
      }
      await tab.close();
    } finally {
      await job.close();
    }
  }, 180_000);

  it('a page closed mid-op: every Node rank fails with a coded error naming one of its ranks, none hangs', async () => {
    const job = await servedJob('page-closed');
    try {
      const procs = Promise.all([0, 1].map((k) => run(node, [fixture('net-fail.mjs'), 'loop'], job.nodeEnv(k, 4))));
      const page = await openJobPage(jobUrl(job, { size: 4, first: 2, ranks: 2, loop: 1 }), 'window.jobLooping === 2');
      await page.tab.waitForFunction('window.jobLooping === 2', undefined, { timeout: 120_000 });
      await page.tab.close();
      const rs = await procs;
      for (const r of rs) {
        expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
        expect(r.stdout, r.stderr).toMatch(
          /^failed rank [01] code (CONNECTION_CLOSED|ABORTED): .*rank [23] closed its connections/m,
        );
      }
    } finally {
      await job.close();
    }
  }, 180_000);

  it("a page with the wrong token: it fails AUTH_FAILED (token mismatch); the store refuses it; the Node ranks fail promptly naming the page's rank", async () => {
    const refusals: { kind: string; reason: string }[] = [];
    const job = await servedJob('wrong-token', { onReject: (r) => refusals.push(r) });
    try {
      const procs = Promise.all([0, 1].map((k) => run(node, [fixture('net-fail.mjs'), 'join'], job.nodeEnv(k, 3))));
      const page = await openJobPage(jobUrl(job, { size: 3, first: 2, ranks: 1, token: 'not-the-token' }));
      const result = await page.result();
      expect(result).toMatchObject({
        ok: false,
        code: 'AUTH_FAILED',
        message: expect.stringMatching(/token mismatch/),
      });
      expect(refusals.some((r) => r.kind === 'auth' && /^token mismatch/.test(r.reason))).toBe(true);
      const rs = await procs;
      for (const r of rs) {
        expect({ code: r.code, hung: r.hung, quick: r.ms < 45_000 }, r.stderr).toEqual({
          code: 1,
          hung: false,
          quick: true,
        });
        // The page's rank 2 is named; the other Node rank too when it had not joined yet (they start together).
        expect(r.stderr).toMatch(
          /token mismatch.*ranks? (?:\d+, )*2(?:, \d+)* of 3 ha(?:s|ve) not joined.*\[AUTH_FAILED\]/,
        );
      }
      await page.tab.close();
    } finally {
      await job.close();
    }
  }, 120_000);

  it('a page that is not cross-origin isolated is one rank, a node of one without SharedArrayBuffer; its several workers as one node are refused naming the headers', async () => {
    const job = await servedJob('not-isolated');
    // The page's files from a plain server (no COOP/COEP); the store and relay stay webccl serve's.
    const plain = createServer((req, res) => {
      try {
        const path = join(root, decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname));
        if (!path.startsWith(join(root, 'examples')) && !path.startsWith(join(root, 'dist')))
          throw new Error('outside');
        res
          .writeHead(200, { 'content-type': path.endsWith('.html') ? 'text/html' : 'text/javascript' })
          .end(readFileSync(path));
      } catch {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', () => r()));
    try {
      const at = `http://127.0.0.1:${(plain.address() as AddressInfo).port}/examples/browser/job.html`;
      const q = (extra: Record<string, string | number>) =>
        new URLSearchParams({
          token: JOB_TOKEN,
          job: job.jobId,
          master: job.master,
          ...Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, String(v)])),
        });
      const procs = Promise.all([0, 1].map((k) => run(node, [fixture('net-check.mjs')], job.nodeEnv(k, 3))));
      const page = await openJobPage(`${at}?${q({ size: 3, first: 2, ranks: 1 })}`);
      expect(await page.result(), await page.log()).toEqual({ ok: true, ranks: [2] });
      expect(await page.log()).toMatch(/cross-origin isolated: false/);
      const rs = await procs;
      expect(okRanks(rs).sort()).toEqual([0, 1]);
      const two = await openJobPage(`${at}?${q({ size: 4, first: 2, ranks: 2 })}`);
      expect(await two.result()).toMatchObject({
        ok: false,
        code: 'UNSUPPORTED',
        message: expect.stringMatching(
          /Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp/,
        ),
      });
      await Promise.all([page.tab.close(), two.tab.close()]);
    } finally {
      plain.close();
      await job.close();
    }
  }, 180_000);

  it('perf.html across a job: a page of 2 workers and a Node process of 2 threads (examples/browser/perf-node.mjs) run the live sweep, then each node alone as a second and third series; every row right, the chart screenshot', async () => {
    const job = await servedJob('perf-job');
    try {
      // The Node ranks are a `webccl run` launcher's 2 threads: node 1 of the job (world ranks 2, 3); the page is node
      // 0.
      const nodeRanks = run(
        node,
        [
          bin,
          'run',
          '--nnodes',
          '2',
          '--node-rank',
          '1',
          '--nproc-per-node',
          '2',
          '--master-addr',
          '127.0.0.1',
          '--master-port',
          String(job.served.store!.port),
          join(root, 'examples', 'browser', 'perf-node.mjs'),
          '65536',
          '0.02',
        ],
        job.nodeEnv(0, 0),
      );
      const tab = await (await browser.newContext()).newPage();
      await tab.goto(
        `${job.served.http.url}/examples/browser/perf.html?${new URLSearchParams({ size: '4', first: '0', ranks: '2', token: JOB_TOKEN, job: job.jobId, max: '65536', seconds: '0.02' })}`,
      );
      await tab.waitForFunction('document.getElementById("status").dataset.state !== "running"', undefined, {
        timeout: 150_000,
      });
      const status = await tab.textContent('#status');
      const sizes = [8, 32, 128, 512, 2048, 8192, 32768, 65536];
      const rows = (await tab.evaluate('window.perfRows')) as { size: number; wrong: number; ranks: number }[];
      expect(status).toMatch(/^4 ranks, 8 sizes: every result right/);
      expect(rows.map((r) => [r.size, r.wrong, r.ranks])).toEqual(sizes.map((s) => [s, 0, 4]));
      // Each node alone: the page's workers, then the Node process's threads, every row right.
      const alone = (await tab.evaluate('window.perfNodeRows')) as {
        size: number;
        wrong: number;
        ranks: number;
        series: string;
        busbw: number;
      }[];
      const series = ['page ranks 0, 1 alone', 'Node ranks 2, 3 alone'];
      expect(alone.map((r) => [r.series, r.size, r.wrong, r.ranks])).toEqual(
        series.flatMap((name) => sizes.map((s) => [name, s, 0, 2])),
      );
      expect(alone.every((r) => r.busbw > 0)).toBe(true);
      const tableRows = await tab.$$eval('#node-rows tr', (trs) =>
        trs.slice(1).map((tr) => tr.children[0].textContent),
      );
      expect(tableRows).toEqual(series.flatMap((name) => sizes.map(() => name)));
      // The chart: 3 series of 8 points, each series named in the legend and in its points' tooltips.
      const chart = await tab.$eval('#chart', (svg) => ({
        points: [...svg.querySelectorAll('circle')].map((c) => c.querySelector('title')?.textContent ?? ''),
        legend: [...svg.querySelectorAll('.legend')].map((t) => t.textContent),
        lines: svg.querySelectorAll('polyline.series, polyline.extra').length,
      }));
      expect(chart.points).toHaveLength(24);
      expect(chart.legend).toEqual(['allReduce, 4 ranks', "this page's floor", ...series]);
      expect(chart.lines).toBe(3);
      for (const name of series) expect(chart.points.filter((t) => t.startsWith(`${name}, `))).toHaveLength(8);
      await tab.locator('.result').screenshot({ path: join(tmpdir(), 'webccl-perf-job.png') });
      const r = await nodeRanks;
      // the Node ranks print no rows: rank 0 (the page) does
      expect({ code: r.code, out: r.stdout }, r.stderr).toEqual({ code: 0, out: '' });
      await tab.close();
    } finally {
      await job.close();
    }
  }, 180_000);
});
