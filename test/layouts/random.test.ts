// Seeded random collectives on tensors with layouts under every launch form
// (test/layouts/fixtures/random-layouts.mjs): each op draws a shape and, per rank, a layout
// (NCHW, NHWC, NC1HWC0 with a drawn or default c0; mostly different across ranks, sometimes all equal),
// puts garbage in the inputs' padding, and checks every element of the output in the rank's
// own layout, padding zero, against the layouts' index formulas written plainly in the script.
import { describe, expect, it } from 'vitest';
import { launchFixture } from '../helpers/launch-fixture.js';
import { expectExit, type Form, launchForm, stdoutOf } from '../helpers/launch-forms.js';

const f = launchFixture(new URL('fixtures/random-layouts.mjs', import.meta.url), 'random-layouts');
const OPS = Number(process.env.WEBCCL_RANDOM_OPS) || 60;

const launch = (form: Form, n: number, seed: number) =>
  launchForm(f, form, n, [JSON.stringify({ seed, ops: OPS })], {}, { guardMs: 240_000 });

describe('seeded random collectives on tensors with mixed layouts, every element checked', () => {
  it.each([
    ['threads', 5, 21],
    ['procs', 3, 22],
    ['nnodes', 4, 23],
  ] as const)(
    '%s, %i ranks (seed %i)',
    async (form, n, seed) => {
      const runs = await launch(form, n, seed);
      const out = stdoutOf(runs);
      expect(
        out.split('\n').filter((l) => /^(wrong|failed) /.test(l)),
        out,
      ).toEqual([]);
      expectExit(runs);
      expect([...out.matchAll(/^ok (\d+) \d+$/gm)].map((m) => Number(m[1])).sort((a, b) => a - b)).toEqual([
        ...Array(n).keys(),
      ]);
    },
    300_000,
  );
});
