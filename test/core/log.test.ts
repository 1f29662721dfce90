// WEBCCL_DEBUG lines as a user reads them: each names the world rank (not the node rank, which
// every process of `webccl run --procs` shares), an op's TRACE line carries only the fields that
// mean something for it, and stats() counts the caller's ops, not initCommGroup's barrier.
// Loads dist/ (npm run build first).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { opLine } from '../../src/engine/op-line.js';

const bin = fileURLToPath(new URL('../../bin/webccl.js', import.meta.url));
const fixture = fileURLToPath(new URL('fixtures/log-ops.mjs', import.meta.url));

function job(env: Record<string, string>, ...runArgs: string[]) {
  const r = spawnSync(process.execPath, [bin, 'run', ...runArgs, fixture], {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, WEBCCL_DEBUG: 'TRACE', ...env },
  });
  expect(r.status, r.stderr).toBe(0);
  const stats = (rank: number, when: string) => {
    const line = r.stdout.split('\n').find((l) => l.startsWith(`stats ${rank} ${when} `));
    return JSON.parse(line!.slice(`stats ${rank} ${when} `.length)) as {
      ops: number;
      bytes: number;
      busyMs: number;
      waitMs: number;
      moveMs: number;
      failed: number;
      threadOps: number;
    };
  };
  return { lines: r.stderr.split('\n'), stats };
}

describe.each([
  ['threads', [], {}],
  ['threads, ops run by the progress thread', [], { WEBCCL_PROGRESS: 'thread' }],
  ['--procs', ['--procs'], {}],
])('WEBCCL_DEBUG with ranks as %s', (_, extra, env) => {
  const { lines, stats } = job(env, '-n', '2', ...extra);

  it('the INFO line of each rank names its world rank', () => {
    const info = lines
      .filter((l) => /^webccl INFO rank .*wasm, \d+ cores/.test(l))
      .map((l) => /^webccl INFO (rank \d+\/\d+)/.exec(l)![1])
      .sort();
    expect(info).toEqual(['rank 0/2', 'rank 1/2']);
    if (extra.length)
      expect(lines.filter((l) => l.includes('wasm, ')).every((l) => l.includes('(node rank 0/1)'))).toBe(true);
  });

  it("lines that name no rank of their own (the tuner's) are prefixed with this rank's", () => {
    const tuner = lines.filter((l) => l.includes('tuner: allReduce'));
    expect(tuner.length).toBeGreaterThan(0);
    const who = new Set(
      tuner.map(
        (l) => /^webccl INFO (rank \d+|progress thread|rank \d+'s network progress thread): tuner: /.exec(l)?.[1],
      ),
    );
    if (env.WEBCCL_PROGRESS) {
      expect(who).toEqual(new Set(['rank 0', 'rank 1', 'progress thread']));
    } else {
      // Without WEBCCL_PROGRESS the tuner may also hand an op to the node's progress thread
      // (a busy machine makes that likelier), whose lines name it: every line names someone.
      // Ranks as processes run their collectives on their network progress threads, which say whose.
      expect(who.has(undefined)).toBe(false);
      for (const w of who)
        expect([
          'rank 0',
          'rank 1',
          'progress thread',
          "rank 0's network progress thread",
          "rank 1's network progress thread",
        ]).toContain(w);
    }
  });

  it("stats() counts no op after initCommGroup, then the caller's own", () => {
    for (const rank of [0, 1]) {
      expect(stats(rank, 'init')).toMatchObject({
        ops: 0,
        bytes: 0,
        busyMs: 0,
        waitMs: 0,
        moveMs: 0,
        failed: 0,
        threadOps: 0,
      });
      expect(stats(rank, 'ops').ops).toBe(5);
    }
  });

  it('TRACE lines carry the fields of their op only, the barrier none', () => {
    const trace = lines.filter((l) => l.startsWith('webccl TRACE rank '));
    for (const rank of [0, 1]) {
      const mine = trace
        .filter((l) => l.startsWith(`webccl TRACE rank ${rank}: `))
        .map((l) => l.slice(`webccl TRACE rank ${rank}: `.length).replace(/ done in [\d.]+ us$/, ''));
      const shape = mine.map((l) => l.replace(/#\d+ \S+/, '#N ALGO'));
      // The setup barrier is traced like any op, then the caller's five. A line of an op the
      // progress thread ran reaches the rank's log later than the caller's own, so the order
      // of the lines is not the order of the ops: compare them as a set.
      expect([...shape].sort()).toEqual(
        [
          'barrier #N ALGO',
          'allReduce #N ALGO f32 sum count 16',
          'broadcast #N ALGO f32 count 16 root 1',
          'allGather #N ALGO f32 count 16',
          'barrier #N ALGO',
          'allReduce #N ALGO i32 max count 4',
        ].sort(),
      );
      expect(mine.filter((l) => l.startsWith('barrier')).every((l) => /^barrier #\d+ \S+$/.test(l))).toBe(true);
    }
  });
});

describe('opLine', () => {
  const base = { seq: 7, algo: 'ring', dtype: 'f32', op: 'sum', count: 64, root: 0 } as const;
  it.each([
    ['allReduce', {}, 'allReduce #7 ring f32 sum count 64'],
    ['reduceScatter', { op: 'max' }, 'reduceScatter #7 ring f32 max count 64'],
    ['reduce', { root: 2 }, 'reduce #7 ring f32 sum count 64 root 2'],
    ['broadcast', { root: 1 }, 'broadcast #7 ring f32 count 64 root 1'],
    ['gather', {}, 'gather #7 ring f32 count 64 root 0'],
    ['scatter', { root: 3 }, 'scatter #7 ring f32 count 64 root 3'],
    ['allGather', {}, 'allGather #7 ring f32 count 64'],
    ['allToAll', {}, 'allToAll #7 ring f32 count 64'],
    ['send', { peer: 1 }, 'send #7 ring f32 count 64 peer 1'],
    ['recv', { peer: 0 }, 'recv #7 ring f32 count 64 peer 0'],
    ['barrier', { dtype: 'u8', count: 0 }, 'barrier #7 ring'],
  ])('%s', (name, extra, want) => {
    expect(opLine({ ...base, name, ...extra } as Parameters<typeof opLine>[0])).toBe(want);
  });
});
