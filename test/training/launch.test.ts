// The training toolkit under every launch form, with the built CLI: thread ranks (webccl run
// -n 2 and -n 4), processes (--procs -n 3) and 2 nodes × 2 threads (--nnodes). The rank script
// (test/training/fixtures/train-check.mjs) trains the test model data-parallel, accumulates
// micro-batches, runs ZeRO-1 with sgd and adam, disagrees on when to synchronise, and sends
// bf16 / f16 on the wire; this file checks the figures every rank prints. Then the example of
// docs/training.md, examples/training/data-parallel.mjs, on threads and on processes.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { launchFixture } from '../helpers/launch-fixture.js';
import { expectExit, type Form, launchForm, stdoutOf } from '../helpers/launch-forms.js';

const f = launchFixture(new URL('fixtures/train-check.mjs', import.meta.url), 'training');

/** Every match of `re` in `out` (one per rank), as its groups, ordered by rank (group 1). */
const linesOf = (out: string, re: RegExp) =>
  [...out.matchAll(re)].map((m) => m.slice(1)).sort((a, b) => Number(a[0]) - Number(b[0]));

const FORMS: [Form, number][] = [
  ['threads', 2],
  ['threads', 4],
  ['procs', 3],
  ['nnodes', 4],
];

describe.each(FORMS)('training with webccl run (%s, %i ranks)', (form, n) => {
  it('data-parallel, accumulation, ZeRO-1, the refusal and halves on the wire: every rank agrees with one process', async () => {
    const runs = await launchForm(f, form, n, [], {}, { guardMs: 200_000 });
    expectExit(runs);
    const out = stdoutOf(runs);
    const ranks = Array.from({ length: n }, (_, r) => String(r));
    expect(linesOf(out, /^ok rank (\d+) of (\d+)$/gm)).toEqual(ranks.map((r) => [r, String(n)]));
    const dp = linesOf(out, /^dp rank (\d+) buckets (\d+) maxdiff (\S+)$/gm);
    expect(dp.map(([r, b]) => [r, b])).toEqual(
      ranks.flatMap((r) => [
        [r, '1'],
        [r, '4'],
      ]),
    );
    for (const [, , d] of dp) expect(Number(d)).toBeLessThanOrEqual(1e-5);
    for (const [, d] of linesOf(out, /^accum rank (\d+) maxdiff (\S+)$/gm)) expect(Number(d)).toBeLessThanOrEqual(1e-5);
    const zero = linesOf(out, /^zero rank (\d+) sgd (\S+) adam (\S+)$/gm);
    expect(zero).toHaveLength(n);
    for (const [, sgd, adam] of zero) {
      expect(Number(sgd)).toBeLessThanOrEqual(1e-5);
      expect(Number(adam)).toBeLessThanOrEqual(1e-5);
    }
    expect(linesOf(out, /^mismatch rank (\d+) (.*)$/gm)).toEqual(
      ranks.map((r) => [r, 'code MISMATCH field microBatches next ok']),
    );
    const half = linesOf(out, /^half rank (\d+) (\w+) worst (\S+) bound (\S+) within (\w+)$/gm);
    expect(half).toHaveLength(2 * n);
    for (const [, , worst, bound, within] of half) {
      expect(within).toBe('true');
      expect(Number(worst)).toBeLessThanOrEqual(Number(bound));
    }
    console.log(
      `${form} ${n}: ${half
        .filter(([r]) => r === '0')
        .map(
          ([, w, worst, bound]) =>
            `${w} worst ${Number(worst).toExponential(2)} (bound ${Number(bound).toExponential(2)})`,
        )
        .join(', ')}`,
    );
  });
});

describe('examples/training/data-parallel.mjs', () => {
  for (const flags of [
    ['-n', '2'],
    ['--procs', '-n', '2'],
  ]) {
    it(`webccl run ${flags.join(' ')}: a loss per step, and the same parameters as one process`, async () => {
      const form: Form = flags[0] === '--procs' ? 'procs' : 'threads';
      const example = fileURLToPath(new URL('../../examples/training/data-parallel.mjs', import.meta.url));
      const runs = await launchForm(f, form, 2, [], {}, { guardMs: 200_000, script: example });
      expectExit(runs);
      const out = stdoutOf(runs);
      expect(out).toMatch(/^step 1 loss \d+\.\d+/m);
      const d = Number(/max \|Δ\| vs single-process: (\S+)/.exec(out)?.[1]);
      expect(d).toBeLessThanOrEqual(1e-5);
    });
  }
});
