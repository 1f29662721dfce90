// Mixed layouts without wireLayout under the launchers (the built bundle): worker threads of one
// node (the signature check finds the layouts differ and the op runs again in row-major) and
// one process per rank (across nodes: ranks not row-major always convert). Each rank checks
// every collective element by element itself (test/layouts/fixtures/layouts-mixed.mjs); WEBCCL_DEBUG=INFO
// logs every conversion with its cost.
import { afterAll, describe, expect, it } from 'vitest';
import { bin, cleanEnv, fixture, killAll, run } from '../helpers/procs.js';

afterAll(killAll);

const script = fixture('layouts-mixed.mjs', 'layouts');
const CASES = 2 * 6 * 5 * 7; // mixes × dtypes × shapes × collectives

describe('mixed layouts without wireLayout under webccl run', () => {
  for (const [form, args, env] of [
    ['threads', [], {}],
    ['threads, ops on the progress thread', [], { WEBCCL_PROGRESS: 'thread' }],
    ['processes', ['--procs'], {}],
  ] as const) {
    it(`${form}: 3 ranks, every collective checked on every rank; INFO logs each conversion with its cost`, async () => {
      const r = await run(
        process.execPath,
        [bin, 'run', ...args, '-n', '3', script],
        cleanEnv({ WEBCCL_DEBUG: 'INFO', ...env }),
        { guardMs: 240_000 },
      );
      expect(r.hung).toBe(false);
      const oks = r.stdout.split('\n').filter((l) => l.startsWith('ok rank ') || l.startsWith('wrong rank '));
      expect(
        oks.filter((l) => l.startsWith('wrong')),
        r.stderr.slice(-2000),
      ).toEqual([]);
      expect(oks.map((l) => l.split(' ').slice(0, 3).join(' ')).sort()).toEqual([
        'ok rank 0',
        'ok rank 1',
        'ok rank 2',
      ]);
      expect(oks.every((l) => l.includes(`cases ${CASES} `))).toBe(true);
      expect(r.code).toBe(0);
      // Every rank holds a layout other than NCHW in one of the two mixes, so each converted.
      const counts = oks.map((l) => Number(l.split(' conversions ')[1]));
      for (const c of counts) expect(c).toBeGreaterThan(0);
      const logged = r.stderr
        .split('\n')
        .filter((l) => / INFO rank \d+: \w+ converted its (input|output) .* B in [\d.]+ us \([\d.]+ GB\/s/.test(l));
      expect(logged.length).toBe(counts.reduce((a, b) => a + b, 0));
    }, 300_000);
  }
});
