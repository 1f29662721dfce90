// Auto mode's choice of runner for ops waited at once (progress/auto-choice.ts RunnerChoice):
// blocks timed on each runner, the faster kept by median, the other tried again now and then.
import { describe, expect, it } from 'vitest';
import type { OpSpec } from '../../src/engine/engine.js';
import { Work } from '../../src/engine/work.js';
import { type Runner, RunnerChoice } from '../../src/progress/auto-choice.js';

const bytes = new Uint8Array(256 * 1024);
const spec = { name: 'allReduce', input: { bytes }, output: { bytes } } as unknown as OpSpec;
const driver = { progress() {}, progressAsync: async () => {} };

/** Runs `ops` ops through `c`, each lasting `ms(runner)` (set back in its issue time); the runners chosen. */
function drive(c: RunnerChoice, ops: number, ms: (r: Runner, i: number) => number, atOnce = () => true): Runner[] {
  const chosen: Runner[] = [];
  for (let i = 0; i < ops; i++) {
    const w = new Work('allReduce', i, driver, true);
    const r = c.choose(spec, w);
    chosen.push(r);
    w.timing.issuedAt = performance.now() - ms(r, i);
    if (atOnce()) c.ended(w);
    else c.forget(w);
  }
  return chosen;
}

describe('which runner auto mode keeps for ops waited at once', () => {
  it('tries both runners in blocks before choosing (the first ops on the rank)', () => {
    const chosen = drive(new RunnerChoice(), 26, () => 1);
    expect(chosen.slice(0, 6)).toEqual(['rank', 'rank', 'rank', 'rank', 'rank', 'rank']);
    expect(chosen.slice(6, 10)).toEqual(['thread', 'thread', 'thread', 'thread']);
    expect(chosen.filter((r) => r === 'thread')).toHaveLength(12);
  });

  it('keeps the thread where it is clearly faster, the rank where it is faster or they tie', () => {
    const faster = new RunnerChoice();
    expect(drive(faster, 100, (r) => (r === 'thread' ? 1 : 2)).slice(26)).toEqual(Array(74).fill('thread'));
    const slower = new RunnerChoice();
    expect(drive(slower, 100, (r) => (r === 'thread' ? 2 : 1)).slice(26)).toEqual(Array(74).fill('rank'));
    const tie = new RunnerChoice();
    expect(drive(tie, 100, (r) => (r === 'thread' ? 0.98 : 1)).slice(26)).toEqual(Array(74).fill('rank'));
  });

  it('tries the other runner again, and follows the machine when it changes', () => {
    const c = new RunnerChoice();
    // The thread wins at first; from op 60 on the rank does.
    const chosen = drive(c, 700, (r, i) => (r === 'thread' ? (i < 60 ? 1 : 3) : 2));
    expect(chosen[40]).toBe('thread');
    expect(chosen.slice(-100)).toEqual(Array(100).fill('rank'));
    expect(c.learnt(spec)?.chosen).toBe('rank');
  });

  it('retries less often while the choice stands', () => {
    const chosen = drive(new RunnerChoice(), 3000, (r) => (r === 'thread' ? 2 : 1));
    const threadOps = (from: number, to: number) => chosen.slice(from, to).filter((r) => r === 'thread').length;
    expect(threadOps(26, 3000)).toBeGreaterThan(0);
    // 128, 256, 512, 1024, ... ops apart: a handful of retry blocks in 3,000 ops, not one per 128.
    expect(threadOps(26, 3000)).toBeLessThanOrEqual(6 * 4);
  });

  it('counts no op that was not waited at once (its time includes the compute)', () => {
    const c = new RunnerChoice();
    // Thread-run ops look slow only when the rank computed before waiting: ignored.
    drive(
      c,
      60,
      (r) => (r === 'thread' ? 50 : 2),
      () => false,
    );
    expect(c.learnt(spec)?.thread).toEqual([]);
    expect(c.learnt(spec)?.rank).toEqual([]);
  });
});
