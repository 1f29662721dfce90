// The TF.js example's page (examples/tfjs/browser/) in headless Chromium, served as `npm run
// browser` serves it (examples/tfjs/serve.mjs, which runs `webccl serve`): its Web Workers load
// TF.js from the example's node_modules, train one model data-parallel and compare it with one
// process. Skipped, with a message, where Chromium is missing or the example's dependencies are
// not installed (cd examples/tfjs && npm ci). No timing asserts.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, warnIfNoChromium, withTab } from '../helpers/chromium.js';
import { cleanEnv, type Job, killAllJobs, type Run, signalGroup, startJob } from '../helpers/jobs.js';
import { root } from '../helpers/procs.js';

const example = join(root, 'examples', 'tfjs');
const haveTfjs = existsSync(join(example, 'node_modules', '@tensorflow', 'tfjs', 'dist', 'tf.fesm.min.js'));
warnIfNoChromium("the TF.js example's browser test");
if (!haveTfjs)
  console.warn(
    `the TF.js example's browser test skipped: no TF.js in ${join(example, 'node_modules')} (cd examples/tfjs && npm ci)`,
  );
afterAll(killAllJobs);

interface PageResult {
  state: string;
  ranks: number;
  losses: number[][];
  spread: number;
  delta: number;
  error?: string;
}

describe.skipIf(!haveChromium || !haveTfjs)('the TF.js example in headless Chromium', () => {
  let server: Job;
  let page = '';
  beforeAll(async () => {
    let found: (url: string) => void = () => {};
    const url = new Promise<string>((res) => (found = res));
    server = startJob(process.execPath, [join(example, 'serve.mjs'), '--port', '0'], cleanEnv(), {
      cwd: example,
      guardMs: 600_000,
      onLine: (line) => {
        const m = /^the training page: (\S+)/.exec(line);
        if (m) found(m[1]);
      },
    });
    page = await Promise.race([
      url,
      server.done.then((r: Run) => {
        throw new Error(`serve.mjs ended (code ${r.code}): ${r.stdout}${r.stderr}`);
      }),
    ]);
  });
  afterAll(async () => {
    if (!server) return;
    signalGroup(server, 'SIGTERM');
    const r = await server.done;
    expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
  });

  for (const n of [2, 4]) {
    it(`${n} workers train one model: every rank sees the same loss each step, it decreases, the weights agree and match one process`, async () => {
      const { got, log, errors } = await withTab(async (tab, errors) => {
        await tab.goto(`${page}?ranks=${n}`);
        await tab.waitForFunction(() => (window as any).tfjsResult, null, { timeout: 180_000 });
        return {
          got: (await tab.evaluate(() => (window as any).tfjsResult)) as PageResult,
          log: (await tab.textContent('#log')) ?? '',
          errors,
        };
      });
      expect(errors).toEqual([]);
      expect(got.state, log).toBe('done');
      expect(got.ranks).toBe(n);
      expect(got.losses).toHaveLength(n);
      const [l0] = got.losses;
      expect(l0).toHaveLength(20);
      for (const l of got.losses) expect(l).toEqual(l0);
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      expect(l0[19]).toBeLessThan(l0[0]);
      expect(mean(l0.slice(-5))).toBeLessThan(0.75 * mean(l0.slice(0, 5)));
      expect(got.spread).toBe(0);
      expect(got.delta).toBeLessThan(1e-5);
      expect(log).toMatch(/^step 20 {2}loss \d\.\d{6}$/m);
      expect(log).toMatch(/^max \|Δ\| vs single-process: \d\.\d\de-\d+$/m);
    });
  }
});
