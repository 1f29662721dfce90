// The browser ranks in Firefox (Debian's firefox-esr, driven over WebDriver BiDi): the example
// page's worker ranks and the live benchmark, as the Chromium tests check them. Skipped, with a
// message, where Firefox is not installed (apt-get install firefox-esr), or where it is older
// than playwright-core drives (it refuses a command the driver sends at launch).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { FIREFOX, firefoxLacks, haveFirefox, withTab } from '../helpers/chromium.js';
import { expectLiveBenchmark } from '../helpers/live-benchmark.js';
import { outputMatch } from '../helpers/output-match.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'bin', 'webccl.js');
const tmp = mkdtempSync(join(tmpdir(), 'webccl-firefox-'));
const servers: ReturnType<typeof spawn>[] = [];
afterAll(() => {
  for (const s of servers) s.kill('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
});
if (!haveFirefox) console.warn(`the Firefox tests skipped: no Firefox at ${FIREFOX} (apt-get install firefox-esr)`);
const lacks = await firefoxLacks();
if (lacks)
  console.warn(
    `the Firefox tests skipped: the Firefox at ${FIREFOX} does not know the WebDriver BiDi command ${lacks}, which playwright-core sends at launch (a newer Firefox drives)`,
  );

/** `webccl serve ...args --port 0`; resolves to the first address it prints that matches `address`. */
async function serve(args: string[], address: RegExp): Promise<string> {
  const child = spawn(process.execPath, [bin, 'serve', ...args, '--port', '0'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  servers.push(child);
  return (await outputMatch(child.stdout, address))[1];
}

describe.skipIf(!haveFirefox || lacks !== undefined)('Firefox', () => {
  it('the example page: 3 worker ranks, cross-origin isolated, every result right, two ops run by the progress thread', async () => {
    const url = await serve(['.'], /(http:\/\/\S+\/)/);
    await withTab(async (tab, errors) => {
      await tab.goto(`${url}examples/browser/?ranks=3`);
      await tab.waitForSelector('#status:not([data-state="running"])', { timeout: 90_000 });
      const log = (await tab.textContent('#log')) ?? '';
      expect(await tab.getAttribute('#status', 'data-state'), log).toBe('done');
      expect(log).toContain('cross-origin isolated: true');
      for (const rank of [0, 1, 2])
        expect(log).toMatch(
          new RegExp(
            `rank ${rank}/3: allReduce sum 6, allGather 0,1,2, broadcast from rank 0: 42; ops run by the progress thread: [1-9]`,
          ),
        );
      expect(errors).toEqual([]);
    }, 'firefox');
  }, 120_000);

  it('the live benchmark (webccl serve --demo): every row right, both charts and the floor drawn, a screenshot', async () => {
    const url = await serve(['--demo'], /live benchmark at (http:\/\/\S+perf\.html)/);
    await withTab(
      (tab, errors) => expectLiveBenchmark(tab, errors, url, join(tmp, 'perf-page-firefox.png')),
      'firefox',
    );
  }, 120_000);
});
