// The node's progress thread: ops go on while their ranks compute without calling webccl,
// in order per communicator, and every pending op fails with a coded error when the thread or
// a peer dies while the thread holds it.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startRanks, stopProgressThread } from '../../dist/node/index.js';
import { Communicator } from '../../src/api/communicator.js';
import type { WebcclError } from '../../src/core/errors.js';
import { N, NODE_BASE } from '../../src/core/shm-map.js';
import { joinNode } from '../../src/engine/context.js';
import { startNodeProgress } from '../../src/launch/progress-thread.js';
import { createNode } from '../../src/progress/create-node.js';
import { closePostbox, openPostbox } from '../../src/progress/postbox-life.js';
import {
  L,
  ownerAt,
  POSTBOX_CLOSING,
  POSTBOX_DETACHED,
  postboxAt,
  postboxTable,
  ringProgress,
  stillListed,
  turnAt,
} from '../../src/progress/postboxes.js';
import {
  registerProgressStarter,
  startProgressThread as startProgressThreadInSource,
  stopProgressThread as stopInSource,
} from '../../src/progress/start.js';
import { runScenario } from '../helpers/threads.js';

const SCRIPT = fileURLToPath(new URL('../ranks/scenario.mjs', import.meta.url));

/** progressOverlap's reports: no failure, every result right, every op (and its lead) ended during the compute. */
function expectEndedDuringCompute(
  result: { failure?: { message: string } },
  reports: { during: string[]; wrong: unknown[] }[][],
) {
  expect(result.failure?.message).toBeUndefined();
  for (const [r, [rep]] of reports.entries()) {
    expect(rep.wrong, `rank ${r}`).toEqual([]);
    expect(
      rep.during.filter((d: string) => !/: true( \(lead true\))?$/.test(d)),
      `rank ${r}`,
    ).toEqual([]);
  }
}

describe('ops progress while their ranks compute', () => {
  // auto: each op follows one not waited for (a burst), in turn a small one and a large one.
  // Retried in auto: a small op behind a small one its rank started at issue starts at issue only
  // when the ranks arrive within SETTLE_MS of each other (else it queues on its rank, documented);
  // under the whole suite on 2 cores one of 8 ranks may get its core later than that.
  for (const [n, mode] of [
    [2, 'auto'],
    [4, 'thread'],
    [8, 'auto'],
  ] as const) {
    it(`${n} thread ranks, WEBCCL_PROGRESS=${mode}: every collective ends during a compute loop that never calls webccl`, {
      retry: mode === 'auto' ? 2 : 0,
    }, async () => {
      const { result, reports } = await runScenario(
        n,
        'progressOverlap',
        { count: 40_000, busyMs: n > 4 ? 3000 : 800, lead: mode === 'auto' },
        { env: { WEBCCL_PROGRESS: mode } },
      );
      expectEndedDuringCompute(result, reports);
      // auto: the barriers start on their rank at issue, and end there (their peers post theirs)
      for (const [rep] of reports) expect(rep.threadOps).toBeGreaterThanOrEqual(mode === 'auto' ? 10 : 12);
    });
  }

  // Retried: the premise is that each rank arrives within SETTLE_MS of the last; under the whole
  // suite on 2 cores a rank may get its core later than that (the issue then rightly gives up
  // waiting). Without the wait per arrival it fails every attempt.
  it('auto, 4 thread ranks issuing 40 ms apart: an op behind one its rank started at issue still ends during the compute (the issue waits while peers keep arriving)', {
    retry: 2,
  }, async () => {
    const { result, reports } = await runScenario(
      4,
      'progressOverlap',
      { count: 40_000, busyMs: 800, lead: true, staggerMs: 40 },
      { env: { WEBCCL_PROGRESS: 'auto' } },
    );
    expectEndedDuringCompute(result, reports);
  });

  it('auto: an op held at issue (its rank waited for the last at once) and then left alone starts on the thread while its rank computes', async () => {
    // The issue-compute-wait pattern: waited ops, then one issued and left alone during a compute that never
    // calls webccl. The hold is bounded: the thread takes the op HOLD_MS after it first sees it.
    const busyMs = 200;
    const { result, reports } = await runScenario(
      2,
      'progressOverlap',
      { count: 20_000, busyMs },
      { env: { WEBCCL_PROGRESS: 'auto' } },
    );
    expect(result.failure?.message).toBeUndefined();
    for (const [r, [rep]] of reports.entries()) {
      expect(rep.wrong).toEqual([]);
      expect(
        rep.during.filter((d: string) => !d.endsWith(': true')),
        `rank ${r}`,
      ).toEqual([]);
      // Whether an op is held depends on the rank's previous wait coming within 0.5 ms of its
      // issue (a rank descheduled in between is judged to compute, and its op goes to the thread
      // at once); plain buffers this large are handed over with their copies. Every held op must
      // have started in the first half of the compute (how soon depends on the scheduler).
      expect(rep.startedAfterCall).toHaveLength(12);
      const held = rep.startedAfterCall.filter((d: string) => d.includes(' held: '));
      expect(held.length, `rank ${r}: ${rep.startedAfterCall}`).toBeGreaterThanOrEqual(3);
      const late = held.filter((d: string) => Number(d.split(': ')[1]) > -busyMs / 2);
      expect(late, `rank ${r}`).toEqual([]);
    }
  });

  it('auto: an op held and run on the rank, or handed to the thread and taken back, is in the flight record once', async () => {
    const { result, reports } = await runScenario(2, 'flightOnce', {}, { env: { WEBCCL_PROGRESS: 'auto' } });
    expect(result.failure?.message).toBeUndefined();
    for (const [r, [rep]] of reports.entries()) {
      // initCommGroup's barrier (seq 0), then 13 ops: every seq once, in order, all done.
      expect(rep.seqs, `rank ${r}`).toEqual(Array.from({ length: 14 }, (_, i) => i));
      expect(rep.states).toEqual(['done']);
      expect(rep.heldOps).toBeGreaterThanOrEqual(1);
      expect(rep.threadOps).toBeGreaterThanOrEqual(1);
    }
  });

  it('with WEBCCL_PROGRESS=caller nothing is handed to the thread (the rank runs its ops while it waits)', async () => {
    const { result, reports } = await runScenario(
      2,
      'progressOverlap',
      { count: 1000, busyMs: 1 },
      { env: { WEBCCL_PROGRESS: 'caller' } },
    );
    expect(result.failure?.message).toBeUndefined();
    for (const [rep] of reports) {
      expect(rep.wrong).toEqual([]);
      expect(rep.threadOps).toBe(0);
      expect(rep.heldOps).toBe(0);
    }
  });

  it('8 thread ranks, every op on the progress thread: abort() of a destroyed group does nothing (the next group, in its memory, runs right)', async () => {
    const { result, reports } = await runScenario(
      8,
      'abortDestroyed',
      { count: 3000, rounds: 4 },
      { env: { WEBCCL_PROGRESS: 'thread' } },
    );
    expect(result.failure?.message).toBeUndefined();
    for (const [r, [rep]] of reports.entries())
      expect(rep, `rank ${r}`).toEqual({ wrong: [], error: null, threadOps: 2 });
  });

  it('many ops in flight on the world and a group end in issue order per communicator, results right', async () => {
    const { result, reports } = await runScenario(
      4,
      'progressOrder',
      { ops: 20, count: 3000, busyMs: 300 },
      { env: { WEBCCL_PROGRESS: 'thread' } },
    );
    expect(result.failure?.message).toBeUndefined();
    for (const [rep] of reports) {
      expect(rep).toMatchObject({ wrong: [], inOrder: true });
      expect(rep.threadOps).toBeGreaterThanOrEqual(40); // and the ops that formed the group
    }
  });
});

/** Starts `nranks` ranks on `scenario`, returning the handle and each rank's reports. */
function start(nranks: number, scenario: string, params: object, extra: object = {}) {
  const reports: any[][] = Array.from({ length: nranks }, () => []);
  let onPosted: (() => void) | undefined;
  const posted = new Promise<void>((res) => (onPosted = res));
  const h = startRanks({
    nranks,
    script: SCRIPT,
    args: [scenario, JSON.stringify(params)],
    graceMs: 10_000,
    env: { ...process.env, WEBCCL_PROGRESS: 'thread' },
    onMessage: (rank, m: any) => {
      reports[rank].push(m);
      if (m.posted === 0) onPosted!();
    },
    ...extra,
  });
  return { h, reports, posted };
}

describe('the timeline (WEBCCL_TRACE)', () => {
  it("has a track for the progress thread with the ops it ran, beside each rank's own", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webccl-progress-trace-'));
    const file = join(dir, 'trace.json');
    try {
      const { result } = await runScenario(
        2,
        'progressOverlap',
        { count: 1000, busyMs: 50 },
        { env: { WEBCCL_PROGRESS: 'thread', WEBCCL_TRACE: file } },
      );
      expect(result.failure?.message).toBeUndefined();
      const { traceEvents } = JSON.parse(readFileSync(file, 'utf8')) as {
        traceEvents: { ph: string; name: string; pid: number; tid: number; args?: { name?: string; rank?: number } }[];
      };
      const track = (name: string) =>
        traceEvents.find((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === name);
      const progress = track('progress thread');
      expect(progress).toBeDefined();
      const ops = traceEvents.filter(
        (e) => e.ph === 'X' && e.pid === progress!.pid && e.tid === progress!.tid && /^allReduce #\d+$/.test(e.name),
      );
      expect(new Set(ops.map((e) => e.args?.rank))).toEqual(new Set([0, 1])); // both ranks' allReduces ran there
      for (const r of [0, 1]) {
        const t = track(`rank ${r}`)!;
        expect(
          traceEvents.some(
            (e) => e.ph === 'X' && e.tid === t.tid && e.pid === t.pid && /^allGather #\d+$/.test(e.name),
          ),
        ).toBe(true);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the heap under thread-run ops', () => {
  it('8 thread ranks: broadcast and reduce from every root, alloc() and plain buffers copied in and out, 5 times', async () => {
    const { result, reports } = await runScenario(
      8,
      'heapStress',
      { iters: 5, dtypes: ['f32'], counts: [0, 5, 1000] },
      { env: { WEBCCL_PROGRESS: 'thread', WEBCCL_TIMEOUT_MS: '30000' } },
    );
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    for (const [rep] of reports) expect(rep, JSON.stringify(rep)).toMatchObject({ ok: true, ops: 5 * 3 * 3 * 16 });
  }, 600_000);
});

describe('failures while the progress thread holds ops', () => {
  it('the progress thread ends: every pending op fails ABORTED naming it, no hang', async () => {
    const { h, reports, posted } = start(2, 'progressHeld', { count: 1000, lateMs: 3000 });
    await posted;
    await stopProgressThread(h.node);
    await h.done;
    for (const r of [0, 1]) {
      const out = reports[r].find((m) => 'error' in m);
      expect(out?.error?.code, JSON.stringify(reports[r])).toBe('ABORTED');
    }
    expect(reports[0].find((m) => 'error' in m).error.details).toMatchObject({ progressThread: true });
  });

  it("a peer dies while the thread holds this rank's op: ABORTED, no hang", async () => {
    const { h, reports } = start(2, 'progressHeld', { count: 1000, lateMs: 500, dies: 1 });
    const result = await h.done;
    expect(result.exitCode).toBe(1);
    expect(reports[0].find((m) => 'error' in m)?.error?.code, JSON.stringify(reports[0])).toBe('ABORTED');
  });

  it('under a fault-tolerant launch the dead peer is named: CONNECTION_CLOSED', async () => {
    const { h, reports } = start(2, 'progressHeld', { count: 1000, lateMs: 500, dies: 1 }, { faultTolerant: true });
    await h.done;
    const e = reports[0].find((m) => 'error' in m)?.error;
    expect(e?.code, JSON.stringify(reports[0])).toBe('CONNECTION_CLOSED');
    expect(e?.details).toMatchObject({ rank: 1, died: true });
  });
});

describe('the progress option', () => {
  const comm = (progress: unknown, node = createNode({ nranks: 2, progress: false })) =>
    new Communicator(joinNode(node, 0), { progress } as never);

  it('is checked: an unknown mode is INVALID_ARGUMENT naming the option', () => {
    let err: WebcclError | undefined;
    try {
      comm('sometimes');
    } catch (e) {
      err = e as WebcclError;
    }
    expect(err?.code).toBe('INVALID_ARGUMENT');
    expect(err?.details).toMatchObject({ option: 'progress', value: 'sometimes' });
  });

  it("'thread' on a node without a progress thread is UNSUPPORTED, not a silent fallback", () => {
    let err: WebcclError | undefined;
    try {
      comm('thread');
    } catch (e) {
      err = e as WebcclError;
    }
    expect(err?.code).toBe('UNSUPPORTED');
    expect(err?.details).toMatchObject({ option: 'progress' });
  });

  it('a postbox opened and closed before the progress thread looked at it is let go at once (no wait, no warning, its memory freed)', async () => {
    const node = createNode({ nranks: 2, slotBytes: 4096, progress: false });
    const ctx = joinNode(node, 0);
    const postbox = openPostbox(ctx);
    const i32 = new Int32Array(node.memory.buffer);
    // What closePostbox does first, before the thread has ever run: the thread then finds a closing postbox it never
    // hosted.
    Atomics.store(i32, (postbox + L.STATE) >> 2, POSTBOX_CLOSING);
    registerProgressStarter(startNodeProgress);
    startProgressThreadInSource(node);
    const warned: string[] = [];
    const warn = console.error;
    console.error = (line: string) => void warned.push(line);
    let closed: boolean;
    try {
      closed = closePostbox(ctx, postbox, 30_000);
    } finally {
      console.error = warn;
    }
    expect({ closed, warned }).toEqual({ closed: true, warned: [] });
    expect(Atomics.load(i32, (postbox + L.STATE) >> 2)).toBe(POSTBOX_DETACHED);
    await stopInSource(node);
  });

  it("a ring reaches a doorbell allocated past the caller's view (the memory grew meanwhile) instead of throwing", () => {
    const node = createNode({ nranks: 2, slotBytes: 4096, progress: false });
    const ctx = joinNode(node, 0);
    const stale = new Int32Array(node.memory.buffer); // made before the growth below
    const filler = ctx.heap.alloc(node.memory.buffer.byteLength); // grows the memory
    const doorbell = ctx.heap.alloc(64); // past the old end
    const fresh = new Int32Array(node.memory.buffer);
    expect(doorbell >> 2).toBeGreaterThanOrEqual(stale.length);
    // The progress thread sleeps on that communicator's doorbell.
    Atomics.store(fresh, (NODE_BASE + N.PROGRESS_SLEEP) >> 2, doorbell);
    const before = Atomics.load(fresh, doorbell >> 2);
    expect(() => ringProgress(node.memory, stale)).not.toThrow();
    expect(Atomics.load(fresh, doorbell >> 2)).toBe(before + 1);
    expect(Atomics.load(fresh, (NODE_BASE + N.PROGRESS_BELL) >> 2)).toBeGreaterThan(0);
    Atomics.store(fresh, (NODE_BASE + N.PROGRESS_SLEEP) >> 2, 0);
    ctx.heap.free(doorbell);
    ctx.heap.free(filler);
  });

  it('the postbox table tells a thread that read a postbox whether it was unlisted meanwhile (then freed, its memory reused: garbage read as a postbox), and whose postbox it lists', () => {
    const node = createNode({ nranks: 2, slotBytes: 4096, progress: false });
    const ctx = joinNode(node, 0);
    const i32 = new Int32Array(node.memory.buffer);
    const net = openPostbox(ctx, undefined, () => undefined, 3 + 1); // world rank 3's network thread's
    const shm = openPostbox(ctx);
    const table = postboxTable(i32);
    const entryAt = (k: number) => ({
      postbox: postboxAt(i32, table, k),
      turn: turnAt(i32, table, k),
      owner: ownerAt(i32, table, k),
    });
    const [a, b] = [0, 1].map(entryAt);
    expect([a.postbox, a.owner, b.postbox, b.owner]).toEqual([net, 4, shm, 0]);
    expect(stillListed(i32, table, 0, a.turn)).toBe(true);
    // Its thread is gone; its rank unlists it, frees it, and the memory is another postbox's at once.
    expect(closePostbox(ctx, net, 1000, () => true)).toBe(true);
    ctx.heap.free(net);
    const again = openPostbox(ctx);
    expect(again).toBe(net); // the same address, listed in the same entry: only the count tells
    const now = entryAt(0);
    expect([now.postbox, now.owner]).toEqual([net, 0]);
    expect(stillListed(i32, table, 0, a.turn)).toBe(false);
    expect(stillListed(i32, table, 1, b.turn)).toBe(true);
  });

  it("in one thread: two ranks' ops end while that thread computes, run by the node's progress thread", async () => {
    registerProgressStarter(startNodeProgress);
    const node = createNode({ nranks: 2, slotBytes: 4096 });
    const ranks = [0, 1].map(
      (r) => new Communicator(joinNode(node, r, { spinUs: 0 }), { progress: 'thread', timeoutMs: 60_000 }),
    );
    const xs = ranks.map((_, r) => new Float32Array(5000).fill(r + 1));
    const works = ranks.map((c, r) => c.allReduce(xs[r]));
    const end = performance.now() + 1500;
    while (performance.now() < end);
    expect(works.map((w) => w.isCompleted())).toEqual([true, true]);
    for (const x of xs) expect(x.every((v) => v === 3)).toBe(true);
    expect(ranks.map((c) => c.stats().threadOps)).toEqual([1, 1]);
    expect(ranks.map((c) => c.progressMode)).toEqual(['thread', 'thread']);
    expect(comm('caller').progressMode).toBe('caller');
    expect(comm(undefined).progressMode).toBe('caller'); // auto, on a node without progress thread
    for (const c of ranks) c.destroy();
    await stopInSource(node);
  });
});
