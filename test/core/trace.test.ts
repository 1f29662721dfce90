// WEBCCL_TRACE: webccl's launchers leave one Chrome-trace file at the path named, with one track
// per rank (op issue instants, op slices with their args, a 'wait for peers' slice inside each,
// the op's steps, user spans), slices that nest, and nothing else behind; unset, no file at all.
// The wait for peers is split from the op's duration: a rank whose peer comes 300 ms late spends
// most of its op waiting (Work.waitMs, stats().waitMs), on threads and across processes.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { launch, launchProcesses, traceFlush, traceSpan, traceTrack } from '../../dist/node/index.js';
import { WebcclError } from '../../src/core/errors.js';
import { OpTrace, type TraceTrack } from '../../src/core/trace.js';
import { killAllJobs, run as runJob } from '../helpers/jobs.js';
import { freePort } from '../helpers/net.js';
import { bin, cleanEnv, fixture } from '../helpers/procs.js';

afterAll(killAllJobs);

const JOB = fixture('trace-job.mjs', 'core');
const LATE_MS = 300;

interface Ev {
  name: string;
  ph: string;
  pid: number;
  tid: number;
  ts: number;
  dur?: number;
  args?: Record<string, any>;
}

interface Report {
  rank: number;
  seq: number;
  durationMs: number;
  waitMs: number;
  moveMs: number;
  stats: { waitMs: number; moveMs: number; busyMs: number };
}

const tmp = () => mkdtempSync(join(tmpdir(), 'webccl-trace-'));

function webccl(args: string[], env: Record<string, string | undefined>, cwd?: string) {
  return spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env, cwd, timeout: 90_000 });
}

function reports(stdout: string): Report[] {
  return stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Report)
    .sort((a, b) => a.rank - b.rank);
}

/** The track (pid, tid) each rank's thread_name names. */
function rankTracks(events: Ev[]): Map<string, string> {
  const tracks = new Map<string, string>();
  for (const e of events) if (e.ph === 'M' && e.name === 'thread_name') tracks.set(`${e.pid}/${e.tid}`, e.args!.name);
  return tracks;
}

/** Slices of one track nest: each starts and ends inside the one it starts in. */
function expectNested(slices: Ev[]): void {
  const sorted = [...slices].sort((a, b) => a.ts - b.ts || b.dur! - a.dur!);
  const open: Ev[] = [];
  for (const s of sorted) {
    while (open.length && open[open.length - 1].ts + open[open.length - 1].dur! <= s.ts) open.pop();
    const parent = open[open.length - 1];
    if (parent)
      expect(s.ts + s.dur!, `${s.name} at ${s.ts} ends after ${parent.name}`).toBeLessThanOrEqual(
        parent.ts + parent.dur!,
      );
    open.push(s);
  }
}

/** Checks a trace of trace-job.mjs (`rs`: every rank's report); returns its events. */
function checkTrace(path: string, rs: Report[]): Ev[] {
  expect(existsSync(path)).toBe(true);
  const dir = join(path, '..');
  expect(readdirSync(dir).filter((f) => f.endsWith('.part') || f.endsWith('.lock') || f.endsWith('.tmp'))).toEqual([]);
  const json = JSON.parse(readFileSync(path, 'utf8')) as { traceEvents: Ev[] };
  const events = json.traceEvents;
  expect(Array.isArray(events)).toBe(true);
  for (const e of events) {
    expect(['X', 'B', 'E', 'i', 'M']).toContain(e.ph);
    expect(typeof e.name).toBe('string');
    expect(Number.isInteger(e.pid) && Number.isInteger(e.tid)).toBe(true);
    expect(Number.isFinite(e.ts)).toBe(true);
    if (e.ph === 'X') expect(e.dur).toBeGreaterThanOrEqual(0);
  }
  expect(events.some((e) => e.ph === 'M' && e.name === 'process_name')).toBe(true);
  const tracks = rankTracks(events);
  const trackOf = (rank: number) => {
    const t = [...tracks].filter(([, name]) => name === `rank ${rank}`).map(([k]) => k);
    expect(t, `one track for rank ${rank}`).toHaveLength(1);
    return t[0];
  };
  const on = (rank: number) => events.filter((e) => `${e.pid}/${e.tid}` === trackOf(rank) && e.ph !== 'M');
  for (const r of rs) {
    const mine = on(r.rank);
    const op = `allReduce #${r.seq}`;
    expect(mine.filter((e) => e.ph === 'i' && e.name === `issue ${op}`)).toHaveLength(1);
    const slices = mine.filter((e) => e.ph === 'X');
    const [opSlice] = slices.filter((e) => e.name === op);
    expect(opSlice.args).toMatchObject({
      seq: r.seq,
      collective: 'allReduce',
      bytes: 4 * (9 << 18),
      dtype: 'f32',
      communicator: 'w',
      ranks: rs.length,
    });
    expect(typeof opSlice.args!.algorithm).toBe('string');
    expect(slices.filter((e) => e.name === 'warm-up')).toHaveLength(1);
    expect(slices.filter((e) => e.name === 'check')).toHaveLength(1);
    expectNested(slices);
    // The group's op: on the rank's group track, named by the group's id.
    const groupTracks = [...tracks].filter(([, name]) => name.startsWith(`rank ${r.rank} group `)).map(([k]) => k);
    expect(groupTracks).toHaveLength(1);
    const groupOps = events.filter(
      (e) => `${e.pid}/${e.tid}` === groupTracks[0] && e.ph === 'X' && e.name.startsWith('allReduce #'),
    );
    expect(groupOps).toHaveLength(1);
    expect(groupOps[0].args!.communicator).not.toBe('w');
    if (r.rank === 0 && rs.length > 1) {
      // The early rank: a wait slice inside its op, most of it.
      const wait = slices.find(
        (e) => e.name === 'wait for peers' && e.ts >= opSlice.ts && e.ts + e.dur! <= opSlice.ts + opSlice.dur!,
      );
      expect(wait).toBeDefined();
      expect(wait!.dur!).toBeGreaterThanOrEqual(0.5 * opSlice.dur!);
    }
  }
  return events;
}

function checkTimings(rs: Report[]): void {
  expect(rs.map((r) => r.rank)).toEqual(rs.map((_, i) => i));
  const early = rs[0];
  // Rank 1 came LATE_MS late: rank 0's op was mostly waiting for it.
  expect(early.waitMs).toBeGreaterThanOrEqual(0.5 * early.durationMs);
  expect(early.waitMs).toBeGreaterThan(LATE_MS / 3);
  for (const r of rs) {
    expect(r.moveMs).toBeGreaterThanOrEqual(0);
    expect(r.waitMs).toBeGreaterThanOrEqual(0);
    expect(r.waitMs + r.moveMs).toBeCloseTo(r.durationMs, 6);
    expect(r.stats.waitMs).toBeGreaterThanOrEqual(r.waitMs - 1e-6);
    expect(r.stats.moveMs).toBeGreaterThanOrEqual(0);
    expect(r.stats.waitMs + r.stats.moveMs).toBeCloseTo(r.stats.busyMs, 6);
  }
}

describe('WEBCCL_TRACE', () => {
  it('webccl run (threads): one file, one track per rank, op slices with args, wait slices, user spans', () => {
    const path = join(tmp(), 'job.json');
    // A file of an earlier run is replaced, not added to.
    writeFileSync(
      path,
      JSON.stringify({
        otherData: { job: 'earlier' },
        traceEvents: [{ name: 'stale', ph: 'i', pid: 1, tid: 1, ts: 1 }],
      }),
    );
    const r = webccl(['run', '-n', '2', JOB, String(LATE_MS)], cleanEnv({ WEBCCL_TRACE: path }));
    expect(r.status, r.stderr).toBe(0);
    const rs = reports(r.stdout);
    checkTimings(rs);
    const events = checkTrace(path, rs);
    expect(events.some((e) => e.name === 'stale')).toBe(false);
  });

  it('webccl run --procs: one file from two processes, on one clock', () => {
    const path = join(tmp(), 'procs.json');
    const r = webccl(['run', '--procs', '-n', '2', JOB, String(LATE_MS)], cleanEnv({ WEBCCL_TRACE: path }));
    expect(r.status, r.stderr).toBe(0);
    const rs = reports(r.stdout);
    checkTimings(rs);
    const events = checkTrace(path, rs);
    // Two processes, each with its rank's track; the late rank's op starts ~LATE_MS after the early one's.
    // (on the ranks' own tracks: each process's network progress thread has a slice of it too)
    const tracks = rankTracks(events);
    const ops = events.filter(
      (e) =>
        e.ph === 'X' &&
        e.name === `allReduce #${rs[0].seq}` &&
        /^rank \d+$/.test(tracks.get(`${e.pid}/${e.tid}`) ?? ''),
    );
    expect(new Set(ops.map((e) => e.pid)).size).toBe(2);
    const [a, b] = ops.sort((x, y) => x.ts - y.ts);
    expect(b.ts - a.ts).toBeGreaterThan((LATE_MS / 3) * 1000);
    expect(b.ts).toBeLessThan(a.ts + a.dur!); // both end together: the clocks agree
  });

  it('webccl run --nnodes 2 (2 ranks each, on this machine): both nodes merge into one file; node-phase ops on their rank tracks', async () => {
    const path = join(tmp(), 'nodes.json');
    const port = await freePort();
    const runs = await Promise.all(
      [0, 1].map((k) =>
        runJob(
          process.execPath,
          [
            bin,
            'run',
            '--nnodes',
            '2',
            '--node-rank',
            String(k),
            '--nproc-per-node',
            '2',
            '--master-port',
            String(port),
            JOB,
            String(LATE_MS),
          ],
          cleanEnv({ WEBCCL_TRACE: path }),
          90_000,
        ),
      ),
    );
    for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
    const rs = reports(runs.map((r) => r.stdout).join('\n'));
    checkTimings(rs);
    const events = checkTrace(path, rs);
    expect([...rankTracks(events).values()].filter((t) => /^rank \d+$/.test(t)).sort()).toEqual([
      'rank 0',
      'rank 1',
      'rank 2',
      'rank 3',
    ]);
    // The hierarchical schedule's node phase: shared-memory ops of the node communicator inside the op.
    expect(events.some((e) => e.ph === 'X' && e.args?.communicator === 'node')).toBe(true);
  }, 120_000);

  it('launchProcesses: the same file from the API', async () => {
    const path = join(tmp(), 'api.json');
    const result = await launchProcesses({
      nranks: 2,
      script: JOB,
      args: ['0'],
      env: cleanEnv({ WEBCCL_TRACE: path }),
    });
    expect(result.exitCode).toBe(0);
    const events = JSON.parse(readFileSync(path, 'utf8')).traceEvents as Ev[];
    expect([...rankTracks(events).values()].filter((t) => /^rank \d+$/.test(t)).sort()).toEqual(['rank 0', 'rank 1']);
  });

  it('a plain node process (no launcher) writes the file itself at its exit', () => {
    const path = join(tmp(), 'plain.json');
    const r = spawnSync(process.execPath, [JOB], {
      encoding: 'utf8',
      env: cleanEnv({ WEBCCL_TRACE: path }),
      timeout: 60_000,
    });
    expect(r.status, r.stderr).toBe(0);
    checkTrace(path, reports(r.stdout));
  });

  it("ranks of another launcher (torchrun variables) leave their parts (the rank's and its network progress thread's); webccl trace merge makes the file", async () => {
    const dir = tmp();
    const path = join(dir, 'torch.json');
    const port = await freePort();
    const runs = await Promise.all(
      [0, 1].map((rank) =>
        runJob(
          process.execPath,
          [JOB, String(LATE_MS)],
          cleanEnv({
            WEBCCL_TRACE: path,
            RANK: String(rank),
            WORLD_SIZE: '2',
            LOCAL_RANK: String(rank),
            LOCAL_WORLD_SIZE: '2',
            MASTER_ADDR: '127.0.0.1',
            MASTER_PORT: String(port),
          }),
          60_000,
        ),
      ),
    );
    for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
    expect(existsSync(path)).toBe(false);
    const parts = readdirSync(dir)
      .filter((f) => f.endsWith('.part'))
      .map((f) => join(dir, f));
    // Each process: its rank's thread and its network progress thread (which ran the collectives).
    expect(parts).toHaveLength(4);
    expect(new Set(parts.map((f) => /\.(\d+)-\d+\.part$/.exec(f)?.[1])).size).toBe(2);
    expect(webccl(['trace', 'merge', path, ...parts], cleanEnv()).status).toBe(0);
    const rs = reports(runs.map((r) => r.stdout).join('\n'));
    checkTimings(rs);
    const events = JSON.parse(readFileSync(path, 'utf8')).traceEvents as Ev[];
    expect([...rankTracks(events).values()].filter((t) => /^rank \d+$/.test(t)).sort()).toEqual(['rank 0', 'rank 1']);
  }, 90_000);

  it('unset: no file is written, and the wait/move split is still reported', () => {
    const dir = tmp();
    const r = webccl(['run', '-n', '2', JOB, String(LATE_MS)], cleanEnv(), dir);
    expect(r.status, r.stderr).toBe(0);
    checkTimings(reports(r.stdout));
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a path no file can be written at is refused before any rank starts', async () => {
    const dir = tmp();
    mkdirSync(join(dir, 'folder'));
    for (const bad of [join(dir, 'missing', 'x.json'), join(dir, 'folder')]) {
      const e = await launch({ nranks: 2, script: JOB, env: cleanEnv({ WEBCCL_TRACE: bad }) }).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(WebcclError.is(e)).toBe(true);
      expect((e as WebcclError).code).toBe('INVALID_ARGUMENT');
      expect((e as WebcclError).details).toMatchObject({ variable: 'WEBCCL_TRACE', path: bad });
    }
    const r = webccl(['run', '-n', '2', JOB], cleanEnv({ WEBCCL_TRACE: join(dir, 'missing', 'x.json') }));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/WEBCCL_TRACE/); // the message names the variable
    expect(r.stdout).toBe(''); // no rank ran
    // A process no launcher started warns once at startup and runs untraced.
    const plain = spawnSync(process.execPath, [JOB], {
      encoding: 'utf8',
      env: cleanEnv({ WEBCCL_TRACE: join(dir, 'missing', 'x.json') }),
      timeout: 60_000,
    });
    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.stderr.match(/WEBCCL_TRACE/g)).toHaveLength(1);
    expect(readdirSync(dir)).toEqual(['folder']);
  });

  it('webccl trace merge: parts left by another launcher become one file', () => {
    const dir = tmp();
    const part = (pid: number, rank: number) => {
      const f = join(dir, `t.json.${pid}-0.part`);
      writeFileSync(
        f,
        JSON.stringify({
          traceEvents: [
            { name: 'thread_name', ph: 'M', pid, tid: 1, ts: 0, args: { name: `rank ${rank}` } },
            { name: 'allReduce #0', ph: 'X', pid, tid: 1, ts: 2000 - rank, dur: 5 },
          ],
        }),
      );
      return f;
    };
    const parts = [part(11, 0), part(12, 1)];
    const out = join(dir, 't.json');
    const r = webccl(['trace', 'merge', out, ...parts], cleanEnv());
    expect(r.status, r.stderr).toBe(0);
    const events = JSON.parse(readFileSync(out, 'utf8')).traceEvents as Ev[];
    expect(events.map((e) => e.ph)).toEqual(['M', 'M', 'X', 'X']); // metadata first, then by time
    expect(events[2].pid).toBe(12);
    for (const bad of [
      ['trace'],
      ['trace', 'split', out],
      ['trace', 'merge'],
      ['trace', 'merge', out],
      ['trace', 'merge', out, out],
    ]) {
      expect(webccl(bad, cleanEnv()).status, bad.join(' ')).toBe(2);
    }
    const missing = webccl(['trace', 'merge', out, join(dir, 'nope.part')], cleanEnv());
    expect(missing.status).toBe(1);
  });

  it('traceFlush: a worker that is then terminated (no exit handler runs) leaves its part; a track of its own is named in it', async () => {
    const dir = tmp();
    const path = join(dir, 'w.json');
    const lib = new URL('../../dist/node/index.js', import.meta.url).href;
    const code = `
      const { traceTrack, traceFlush } = await import(${JSON.stringify(lib)});
      const { parentPort } = await import('node:worker_threads');
      const t = traceTrack('progress node 0');
      t.instant('doorbell', { ops: 1 });
      t.span('sweep', () => 1);
      traceFlush();
      parentPort.postMessage('flushed');
      setInterval(() => {}, 1000);`;
    const w = new Worker(code, { eval: true, env: cleanEnv({ WEBCCL_TRACE: path }) });
    await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await w.terminate();
    const parts = readdirSync(dir).filter((f) => f.endsWith('.part'));
    expect(parts).toHaveLength(1);
    const events = JSON.parse(readFileSync(join(dir, parts[0]), 'utf8')).traceEvents as Ev[];
    expect([...rankTracks(events).values()]).toEqual(['progress node 0']);
    expect(events.filter((e) => e.ph !== 'M').map((e) => [e.ph, e.name])).toEqual([
      ['i', 'doorbell'],
      ['X', 'sweep'],
    ]);
  });

  it('without WEBCCL_TRACE, traceSpan returns what fn returns (sync or async) and traceTrack records nothing', async () => {
    expect(traceSpan('x', () => 42)).toBe(42);
    await expect(traceSpan('y', async () => 'done')).resolves.toBe('done');
    expect(() =>
      traceSpan('z', () => {
        throw new RangeError('inner');
      }),
    ).toThrow(RangeError);
    const t = traceTrack('progress node 0');
    expect(t.span('s', () => 7)).toBe(7);
    t.instant('i');
    t.complete('c', 0, 1);
    traceFlush(); // nothing to write
    for (const call of [() => traceSpan('x', 3 as never), () => traceTrack('')]) {
      let e: unknown;
      try {
        call();
      } catch (x) {
        e = x;
      }
      expect((e as WebcclError).code).toBe('INVALID_ARGUMENT');
    }
  });

  it("an op's slices nest: steps crossing the end of its wait are cut there, steps outside it clipped, and at most 2048 drawn", () => {
    const got: [string, number, number, Record<string, unknown>?][] = [];
    const fake: TraceTrack = {
      name: 'fake',
      instant: (n) => got.push([n, NaN, NaN]),
      complete: (n, t0, t1, a) => got.push([n, t0, t1, a]),
      span: (_n, fn) => fn(),
    };
    const work = { name: 'allReduce', seq: 3, timing: { issuedAt: 5, startedAt: 10, joinedAt: 20, completedAt: 30 } };
    const t = new OpTrace(fake, { collective: 'allReduce', bytes: 8 }).issue(work, 'ring');
    t.step('sleep', 12, 25);
    t.step('copy out', 26, 29);
    t.step('stray', 5, 40);
    t.end(work);
    expect(got).toEqual([
      ['issue allReduce #3', NaN, NaN],
      ['allReduce #3', 10, 30, { collective: 'allReduce', bytes: 8, seq: 3, algorithm: 'ring' }],
      ['wait for peers', 10, 20, undefined],
      ['sleep', 12, 20, undefined],
      ['sleep', 20, 25, undefined],
      ['copy out', 26, 29, undefined],
      ['stray', 10, 20, undefined],
      ['stray', 20, 30, undefined],
    ]);
    // A huge op: the first 2048 steps are drawn, the rest counted; a failed op names its error.
    got.length = 0;
    const big = new OpTrace(fake, {}).issue(work, 'ring');
    for (let i = 0; i < 2050; i++) big.step('copy in', 21, 22);
    big.end(work, { code: 'TIMEOUT' });
    expect(got.filter(([n]) => n === 'copy in')).toHaveLength(2048);
    expect(got[1][3]).toMatchObject({ stepsNotDrawn: 2, error: 'TIMEOUT' });
    // An op that never started draws nothing but its issue; one that joined at once has no wait slice.
    got.length = 0;
    new OpTrace(fake, {})
      .issue({ ...work, timing: { ...work.timing, startedAt: NaN } }, 'ring')
      .end({ ...work, timing: { ...work.timing, startedAt: NaN } });
    new OpTrace(fake, {}).end({ ...work, timing: { ...work.timing, joinedAt: NaN } });
    expect(got.map(([n]) => n)).toEqual(['issue allReduce #3', 'allReduce #3']);
  });
});
