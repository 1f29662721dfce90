// Seeded random collectives on tensors with layouts under every launch form
// (test/layouts/fixtures/random-layouts.mjs): each op draws a shape and, per rank, a layout (NCHW, NHWC,
// NC1HWC0 with a drawn or default c0; mostly different across ranks, sometimes all equal),
// puts garbage in the inputs' padding, and checks every element of the output in the rank's
// own layout, padding zero, against the layouts' index formulas written plainly in the script.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanEnv, type Env, type Run, run } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { freePort } from '../helpers/net.js';

const f = launchFixture(new URL('fixtures/random-layouts.mjs', import.meta.url), 'random-layouts');
const env = (extra: Env = {}): Env =>
  cleanEnv({ HOME: join(f.tmp, 'home'), WEBCCL_TOKEN: 'random-layouts-test', ...extra });
const OPS = Number(process.env.WEBCCL_RANDOM_OPS) || 60;

async function launch(form: 'threads' | 'procs' | 'nnodes', n: number, seed: number): Promise<Run[]> {
  const args = [f.script, JSON.stringify({ seed, ops: OPS })];
  if (form === 'nnodes') {
    const port = String(await freePort());
    return Promise.all(
      [0, 1].map((k) =>
        run(
          process.execPath,
          [
            f.bin,
            'run',
            '--nnodes',
            '2',
            '--node-rank',
            String(k),
            '--nproc-per-node',
            String(n / 2),
            '--master-addr',
            '127.0.0.1',
            '--master-port',
            port,
            ...args,
          ],
          env(),
          240_000,
          f.root,
        ),
      ),
    );
  }
  return [
    await run(
      process.execPath,
      [f.bin, 'run', ...(form === 'procs' ? ['--procs'] : []), '-n', String(n), ...args],
      env(),
      240_000,
      f.root,
    ),
  ];
}

describe('seeded random collectives on tensors with mixed layouts, every element checked', () => {
  it.each([
    ['threads', 5, 21],
    ['procs', 3, 22],
    ['nnodes', 4, 23],
  ] as const)(
    '%s, %i ranks (seed %i)',
    async (form, n, seed) => {
      const runs = await launch(form, n, seed);
      const out = runs.map((r) => r.stdout).join('');
      expect(
        out.split('\n').filter((l) => /^(wrong|failed) /.test(l)),
        out,
      ).toEqual([]);
      for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      expect([...out.matchAll(/^ok (\d+) \d+$/gm)].map((m) => Number(m[1])).sort((a, b) => a - b)).toEqual([
        ...Array(n).keys(),
      ]);
    },
    300_000,
  );
});
