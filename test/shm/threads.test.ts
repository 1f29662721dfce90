// The same collectives on real worker threads started by the launcher: real concurrency,
// blocking waits, 2 to 8 ranks on 2 cores, both wasm builds; and failures across threads
// (mismatched calls, a missing rank, a dying rank) reported on every rank.
import { describe, expect, it } from 'vitest';
import { runScenario } from '../helpers/threads.js';

describe('collectives on worker threads', () => {
  for (const simd of [true, false]) {
    for (const n of [2, 3, 4, 8]) {
      it(`${n} ranks, ${simd ? 'simd' : 'scalar'} build`, async () => {
        const { result, reports } = await runScenario(
          n,
          'grid',
          { dtypes: ['f32', 'i8', 'bf16', 'f64', 'i64'], counts: [0, 1, 17, 1025, 3000] },
          { simd, slotBytes: 4096 },
        );
        expect(result.failure?.message).toBeUndefined();
        for (const [r, rep] of reports.entries())
          expect({ rank: r, ...rep[0] }).toEqual({ rank: r, ok: true, wrong: [] });
      });
    }
  }
  // The same grid run by the node's progress thread (every op handed over, none taken back).
  for (const [n, simd] of [
    [2, true],
    [3, false],
    [8, true],
  ] as const) {
    it(`${n} ranks, ${simd ? 'simd' : 'scalar'} build, WEBCCL_PROGRESS=thread`, async () => {
      const { result, reports } = await runScenario(
        n,
        'grid',
        { dtypes: ['f32', 'i8', 'bf16', 'f64', 'i64'], counts: [0, 1, 17, 1025, 3000] },
        { simd, slotBytes: 4096, env: { WEBCCL_PROGRESS: 'thread' } },
      );
      expect(result.failure?.message).toBeUndefined();
      for (const [r, rep] of reports.entries())
        expect({ rank: r, ...rep[0] }).toEqual({ rank: r, ok: true, wrong: [] });
    });
  }
});

describe('disagreements between ranks are reported on every rank', () => {
  const cases: [string, object, string, unknown[]][] = [
    ['count', { count: [10, 12] }, 'count', ['10', '12']],
    ['dtype', { count: 4, dtype: ['f32', 'f64'] }, 'dtype', ['f32', 'f64']],
    ['op', { count: 4, op: ['sum', 'max'] }, 'op', ['sum', 'max']],
    ['algorithm', { count: 4, algo: ['direct', 'twoshot'] }, 'algorithm', ['direct', 'twoshot']],
  ];
  for (const [what, params, field, values, env] of [
    ...cases.map((c) => [...c, {}] as const),
    [...cases[0], { WEBCCL_PROGRESS: 'thread' }] as const,
  ]) {
    it(`${what} differs${'WEBCCL_PROGRESS' in env ? ', ops on the progress thread (the error crosses back whole)' : ''}`, async () => {
      const { result, reports } = await runScenario(3, 'mismatch', params, { env });
      expect(result.exitCode).toBe(0);
      for (const rep of reports) {
        expect(rep[0].error.code).toBe('MISMATCH');
        expect(rep[0].error.details.field).toBe(field);
        expect(rep[0].error.details.values).toEqual(values);
        expect(rep[0].after).toEqual([3, 3, 3, 3, 3]);
      }
    });
  }
});

describe('a missing or dying rank never hangs the others', () => {
  it.each([{}, { WEBCCL_PROGRESS: 'thread' }])(
    'a rank that does not arrive: TIMEOUT naming it, then ABORTED for it (%o)',
    async (env) => {
      const { reports } = await runScenario(3, 'timeout', { late: 2, timeoutMs: 1500 }, { env });
      for (const r of [0, 1]) {
        const e = reports[r][0].error;
        expect(['TIMEOUT', 'ABORTED']).toContain(e.code);
        if (e.code === 'TIMEOUT') expect(e.details.missing).toEqual([2]);
        else expect(e.message).toMatch(/timed out waiting for rank 2/);
      }
      expect(reports.flat().some((m) => m.error?.code === 'TIMEOUT')).toBe(true);
      expect(reports[2][0].error.code).toBe('ABORTED');
    },
  );

  it('a rank that throws: the job fails naming it, every other rank gets ABORTED', async () => {
    const { result, reports } = await runScenario(4, 'death', { dies: 1 });
    expect(result.exitCode).not.toBe(0);
    expect(result.failure?.rank).toBe(1);
    expect(result.failure?.message).toMatch(/rank 1 fails on purpose/);
    for (const r of [0, 2, 3]) {
      expect(reports[r][0].error.code).toBe('ABORTED');
      expect(reports[r][0].error.message).toMatch(/rank 1 died/);
    }
  });
});
