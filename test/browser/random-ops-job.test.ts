// The seeded random sequences of test/system/random-ops.test.ts in a job of pages and Node
// processes: 2 `webccl run --nnodes 3` launchers of 2 ranks (WEBCCL_TRANSPORT=ws, the store
// hosted by `webccl serve` in this process) and a page whose 2 Web Workers are the third node.
// Every rank checks every result and refusal itself (test/system/fixtures/random-ops.mjs).
import { afterAll, describe, expect, it } from 'vitest';
import { haveChromium, warnIfNoChromium, withTab } from '../helpers/chromium.js';
import { bin, killAll, run } from '../helpers/procs.js';
import { JOB_TOKEN, servedJob } from '../helpers/served-job.js';

warnIfNoChromium('the random-ops job test');
afterAll(killAll);
const fixture = new URL('../system/fixtures/random-ops.mjs', import.meta.url).pathname;
const OPS = Number(process.env.WEBCCL_RANDOM_OPS) || 40;
const SEEDS = Array.from(
  { length: Number(process.env.WEBCCL_RANDOM_SEEDS) || 1 },
  (_, k) => (Number(process.env.WEBCCL_RANDOM_FIRST_SEED) || 11) + k,
);

describe.skipIf(!haveChromium)('seeded random ops, 2 Node launchers and a page', () => {
  for (const mode of ['auto', 'caller'])
    for (const seed of SEEDS)
      it(`model: ${mode} progress, 2 + 2 Node ranks and 2 workers of a page (seed ${seed}, ${OPS} ops)`, async () => {
        const job = await servedJob(`random-ops-${mode}-${seed}`);
        try {
          const args = JSON.stringify({ seed, ops: OPS, model: true });
          const env = job.nodeEnv(0, 0, { WEBCCL_PROGRESS: mode });
          const procs = Promise.all(
            [0, 1].map((k) =>
              run(
                process.execPath,
                [bin, 'run', '--nnodes', '3', '--node-rank', String(k), '--nproc-per-node', '2'].concat([
                  '--master-addr',
                  '127.0.0.1',
                  '--master-port',
                  String(job.served.store!.port),
                  fixture,
                  args,
                ]),
                env,
              ),
            ),
          );
          const q = new URLSearchParams({
            n: '2',
            mode,
            args,
            master: job.master,
            size: '6',
            first: '4',
            token: JOB_TOKEN,
            job: job.jobId,
          });
          const page = await withTab(async (tab) => {
            await tab.goto(`${job.served.http.url}/test/browser/random-ops.html?${q}`);
            const h = await tab.waitForFunction(() => (window as any).webcclResults, null, { timeout: 240_000 });
            return h.jsonValue();
          });
          const rs = await procs;
          const lines = [
            ...rs.map((r) => r.stdout + r.stderr),
            ...page.results.flatMap((r: { lines: string[] }) => r.lines),
          ].join('\n');
          for (const r of rs) expect({ code: r.code, hung: r.hung }, lines).toEqual({ code: 0, hung: false });
          expect(
            page.results.map((r: { exit: number; error?: string }) => r.error ?? r.exit),
            lines,
          ).toEqual([0, 0]);
          const ok = [...lines.matchAll(/^ok (\d+) \d+ refused \d+$/gm)].map((m) => Number(m[1]));
          expect(ok.sort(), lines).toEqual([0, 1, 2, 3, 4, 5]);
        } finally {
          await job.close();
        }
      }, 300_000);
});
