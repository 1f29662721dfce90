// A simulation split over worker threads gives the result of one thread, message for message
// (times, counts, trace hash, every rank's outcome), for every collective and schedule on
// contended interfaces with jitter and overhead; a failure on one thread reaches the ranks of
// the others; a thread that dies makes the others stop (no hang); what threads cannot run is
// refused. The threaded runs start dist/node/sim-worker.js: the built bundle.

import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { abandon, borderBuffer, simThreads, simulateOnThreads } from '../../dist/node/sim-threads.js';
import {
  SIM_ALGORITHMS,
  SIM_COLLECTIVES,
  type SimOptions,
  type SimResult,
  simulateCollective,
} from '../../src/sim/index.js';

const net = (ranks: number, nodes: number, extra: Partial<SimOptions> = {}): SimOptions => ({
  ranks,
  nodes,
  mode: 'size',
  inter: { latencyUs: 5, bytesPerUs: 3125 },
  intra: { latencyUs: 1, bytesPerUs: 50000 },
  ...extra,
});
const summary = (r: SimResult) => ({
  timeUs: r.timeUs,
  messages: r.messages,
  bytes: r.bytes,
  traceHash: r.traceHash,
  outcomes: r.outcomes.map((x) => `${x.rank}:${x.state}@${x.atUs}`),
});

describe('a simulation split over threads', () => {
  // 4 ranks per node: each interface carries several ranks' messages, so their order counts.
  const o = net(48, 12, { jitter: 0.4, seed: 5, overheadUs: 0.5 });
  for (const collective of SIM_COLLECTIVES) {
    for (const algo of SIM_ALGORITHMS[collective]) {
      it(`${collective} ${algo}: 2 and 3 threads give one thread's result`, async () => {
        const call = {
          collective,
          algo,
          count: collective === 'alltoall' || collective === 'gather' || collective === 'scatter' ? 300 : 70_001,
          root: 7,
        };
        const one = await simulateCollective(o, call);
        expect(one.messages).toBeGreaterThan(0);
        expect(one.outcomes.every((x) => x.state === 'done')).toBe(true);
        expect(summary(await simulateOnThreads(o, call, 2))).toEqual(summary(one));
        expect(summary(await simulateOnThreads(o, call, 3))).toEqual(summary(one));
      });
    }
  }

  it('no latency between nodes (windows of one instant) and pieces in flight (a 1 MiB ring of 4 lanes)', async () => {
    const call = { collective: 'allreduce' as const, algo: 'ring', count: 1 << 22 };
    for (const o2 of [
      net(16, 4, { inter: { latencyUs: 0, bytesPerUs: 3125 }, jitter: 0.2 }),
      net(16, 4, { jitter: 0.2 }),
    ]) {
      const one = await simulateCollective(o2, call);
      expect(summary(await simulateOnThreads(o2, call, 2))).toEqual(summary(one));
    }
  });

  it('a rank failing on one thread: the ranks of the other hear ABORTED naming it', async () => {
    const o2 = net(12, 3);
    const sab = borderBuffer(2, 1 << 12);
    const got = await Promise.all([0, 1].map((thread) => runFixture({ sab, thread, o: o2 })));
    const outcomes = got.flatMap((g) => g.outcomes!).sort((a, b) => a.rank - b.rank);
    expect(outcomes).toHaveLength(12);
    expect(outcomes[6]).toMatchObject({ state: 'failed', code: 'MISMATCH' });
    for (const x of outcomes.filter((y) => y.rank !== 6))
      expect(x, `rank ${x.rank}`).toMatchObject({ state: 'failed', code: 'ABORTED', by: 6 });
    // Ranks 4-7 (node 1) run on thread 1, ranks 0-3 and 8-11 (nodes 0 and 2) on thread 0.
    expect(got[0].outcomes!.map((x) => x.rank)).toEqual([0, 1, 2, 3, 8, 9, 10, 11]);
  });

  it('a thread that dies: the other stops with an error instead of waiting at the barrier (also when it arrives after the run was abandoned)', async () => {
    const sab = borderBuffer(2, 1 << 12);
    const runs = [0, 1].map((thread) => runFixture({ sab, thread, o: net(12, 3), dies: true }));
    // As simulateOnThreads does: a thread's failure abandons the run.
    void runs[1].then(() => abandon(sab));
    const [first, second] = await Promise.all(runs);
    expect(second.error).toMatch(/thread 1 died/);
    expect(first.error).toMatch(/another thread of the simulation failed/);
  });

  it('refuses what only one thread runs, and bad counts; auto uses every core from 1,024 ranks, never more threads than nodes', async () => {
    const call = { collective: 'allreduce' as const, count: 1024 };
    const refused = (o2: SimOptions, t: number | 'auto' = 2) =>
      simulateOnThreads(o2, call, t).then(
        () => 'ran',
        (e) => e.code,
      );
    expect(await refused({ ...net(8, 2), mode: 'data' })).toBe('INVALID_ARGUMENT');
    expect(await refused(net(8, 2, { faults: [{ kind: 'stop', rank: 1, atUs: 3 }] }))).toBe('INVALID_ARGUMENT');
    expect(await refused(net(8, 2, { trace: true }))).toBe('INVALID_ARGUMENT');
    expect(await refused(net(8, 2), 0)).toBe('INVALID_ARGUMENT');
    expect(await refused(net(8, 2), 1.5)).toBe('INVALID_ARGUMENT');
    expect(await refused(net(8, 2), 2)).toBe('ran');
    expect(simThreads(net(512, 64), 'auto')).toBe(1);
    expect(simThreads(net(1024, 128), 'auto')).toBe(Math.min(availableParallelism(), 128));
    expect(simThreads(net(1024, 1), 'auto')).toBe(1);
    expect(simThreads(net(16, 2), 8)).toBe(2);
  });
});

interface FixtureResult {
  outcomes?: { rank: number; state: string; code?: string; by?: number }[];
  error?: string;
}

function runFixture(workerData: Record<string, unknown>): Promise<FixtureResult> {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL('fixtures/sim-border-thread.mjs', import.meta.url), { workerData });
    w.once('message', (m: FixtureResult) => {
      resolve(m);
      void w.terminate();
    });
    w.once('error', reject);
  });
}
