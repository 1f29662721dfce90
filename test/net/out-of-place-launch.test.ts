// Across nodes, under both launch forms that cross them (webccl run --procs, 3 processes, and
// --nnodes, 2 nodes × 1): an allReduce out of place on comm.alloc() buffers with the ring and with
// doubling, which read the input in place (bench/RESULTS.md, 2026-12-02 (early morning)). The
// rank script (test/net/fixtures/out-of-place.mjs) checks every result itself and prints "ok rank R of N".
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanEnv, type Env, type Run, run } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { freePort } from '../helpers/net.js';

const { root, bin, script, tmp } = launchFixture(new URL('fixtures/out-of-place.mjs', import.meta.url), 'oop');

const env = (): Env => cleanEnv({ HOME: join(tmp, 'home'), WEBCCL_TOKEN: 'out-of-place-test' });

async function launch(form: 'procs' | 'nnodes'): Promise<Run[]> {
  if (form === 'procs')
    return [await run(process.execPath, [bin, 'run', '--procs', '-n', '3', script], env(), 120_000, root)];
  const port = String(await freePort());
  return Promise.all(
    [0, 1].map((k) =>
      run(
        process.execPath,
        [
          bin,
          'run',
          '--nnodes',
          '2',
          '--node-rank',
          String(k),
          '--nproc-per-node',
          '1',
          '--master-addr',
          '127.0.0.1',
          '--master-port',
          port,
          script,
        ],
        env(),
        120_000,
        root,
      ),
    ),
  );
}

describe.each([
  ['procs', 3],
  ['nnodes', 2],
] as const)('webccl run --%s, %i ranks across nodes', (form, n) => {
  it('out-of-place allReduce on alloc() buffers, ring and doubling: the sum in the output, the input unchanged', async () => {
    const runs = await launch(form);
    for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
    const ok =
      runs
        .map((r) => r.stdout)
        .join('')
        .match(/^ok rank \d of \d$/gm) ?? [];
    expect(ok.sort()).toEqual(Array.from({ length: n }, (_, r) => `ok rank ${r} of ${n}`));
  });
});
