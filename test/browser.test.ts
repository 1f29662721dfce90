// The browser build in a real browser: headless Chromium loads a page (served cross-origin
// isolated, as SharedArrayBuffer requires) whose Web Workers join one node and run collectives.
// Skipped, with a message, where Chromium is not installed (.ci/run installs it).
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`);

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.map': 'application/json' };

describe.skipIf(!haveChromium)('in headless Chromium', () => {
  let server: Server;
  let origin = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      const path = normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname));
      const file = join(root, path);
      if (!file.startsWith(root) || !/^\/(dist\/browser|test\/browser)\//.test(path) || !existsSync(file)) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        'cross-origin-opener-policy': 'same-origin',
        'cross-origin-embedder-policy': 'require-corp',
      });
      res.end(readFileSync(file));
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const addr = server.address();
    origin = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  });
  afterAll(() => new Promise<void>((res) => server.close(() => res())));

  it('three Web Workers share one node and every collective is right', async () => {
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(`${origin}/test/browser/page.html?n=3`);
      const got = await page.waitForFunction(() => (window as any).webcclResults, null, { timeout: 60_000 }).then((h) => h.jsonValue());
      expect(errors).toEqual([]);
      expect(got.isolated).toBe(true);
      for (const [rank, r] of got.results.entries()) {
        expect(r).toEqual({ rank, sum: true, max: true, gather: true, f16: 0x4200, bcast: true }); // 3.0 in f16
      }
    } finally {
      await browser.close();
    }
  });
});
