// send/recv on every path: ranks sharing one thread over the node memory (in process), real
// worker threads (test/ranks/scenario.mjs), and 2 nodes over TCP. The cases themselves are in
// api/p2p-cases.ts; here they run per path, with the failures each path has of its own.
import { afterAll, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import type { WebcclError } from '../../src/core/errors.js';
import type { Work } from '../../src/engine/work.js';
import { caught } from '../helpers/caught.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { expectExit, launchForm, stdoutOf } from '../helpers/launch-forms.js';
import { destroyAll, netRanks } from '../helpers/net-world.js';
import { runScenario } from '../helpers/threads.js';
import { manyInFlight, mixed, outOfOrderTags, pingPong, ring, sizesAndDtypes, wrongSize } from './p2p-cases.js';

const MiB = 1 << 20;
const awaitAll = (works: Work[]) =>
  Promise.all(
    works.map((w) =>
      w.wait().then(
        () => undefined,
        (e: Error) => e,
      ),
    ),
  );

describe('send/recv in one node memory (ranks sharing a thread)', () => {
  const settle = (w: Work[]) => settleAll(w, 60_000);

  it('ping-pong, ring both ways round, out-of-order tags', async () => {
    const cs = inprocRanks(3);
    await pingPong(cs, settle, 50);
    await ring(cs, settle, 1000, false);
    await ring(cs, settle, 3, true);
    await outOfOrderTags(cs, settle);
  });

  it('thousands of messages each way, every send issued before any recv', async () => {
    await manyInFlight(inprocRanks(2), settle, 3000);
  });

  it('sizes 0, 1 element, 40 B, 1000 B and 5 MiB in every dtype width, alloc() and plain buffers', async () => {
    await sizesAndDtypes(inprocRanks(2), settle, 5 * MiB);
  });

  it('a recv of another size is SIZE_MISMATCH on both sides; the communicator goes on', async () => {
    await wrongSize(inprocRanks(2), settle);
  });

  it('mixed with collectives issued after a pending p2p op', async () => {
    await mixed(inprocRanks(2), settle);
  });

  it('a peer that never matches: TIMEOUT naming it, counted in pending() until then', async () => {
    const cs = inprocRanks(2, { timeoutMs: 30_000 });
    const w = cs[0].send(new Uint8Array(100), 1, { tag: 3, timeoutMs: 300 });
    expect(cs[0].stats().pending).toBe(1);
    const [e] = await settle([w]);
    expect((e as WebcclError).code).toBe('TIMEOUT');
    expect((e as WebcclError).details).toMatchObject({ peer: 1, tag: 3, missing: [1] });
    expect(e!.message).toContain('rank 1');
    // The peer learns of it: its own p2p op fails at once, ABORTED.
    const [e1] = await settle([cs[1].recv(new Uint8Array(100), 0)]);
    expect((e1 as WebcclError).code).toBe('ABORTED');
  });

  it('abort() fails the pending p2p ops of both sides', async () => {
    const cs = inprocRanks(2);
    const r0 = cs[0].recv(new Float32Array(4), 1);
    const s1 = cs[1].send(new Float32Array(8), 0, { tag: 1 });
    cs[1].abort('stop');
    const errs = await settle([r0, s1]);
    expect(errs.map((e) => (e as WebcclError)?.code)).toEqual(['ABORTED', 'ABORTED']);
    expect((errs[0] as WebcclError).details).toMatchObject({ by: 1, reason: 'stop' });
  });

  it('a pending recv keeps its buffer busy after a later send was seen to end (p2p ops end out of order)', async () => {
    const cs = inprocRanks(2);
    const buf = new Float32Array(4);
    const r0 = cs[0].recv(buf, 1, { tag: 1 });
    const s0 = cs[0].send(new Float32Array(2), 1, { tag: 2 });
    await settle([s0, cs[1].recv(new Float32Array(2), 0, { tag: 2 })]);
    expect(caught(() => cs[0].allReduce(buf)).code).toBe('BUFFER_BUSY');
    expect(caught(() => cs[0].recv(buf, 1, { tag: 1 })).code).toBe('BUFFER_BUSY');
    await settle([r0, cs[1].send(new Float32Array(4), 0, { tag: 1 })]);
    await settle(cs.map((c) => c.allReduce(new Float32Array(4))));
  });

  it('destroy() frees the channels: memory stays flat over many communicators', async () => {
    const { createNode } = await import('../../src/progress/create-node.js');
    const { joinNode } = await import('../../src/engine/context.js');
    const { Communicator } = await import('../../src/api/communicator.js');
    const node = createNode({ nranks: 2, slotBytes: 4096 });
    const ctxs = [0, 1].map((r) => joinNode(node, r, { spinUs: 0 }));
    const top = () => new Int32Array(node.memory.buffer)[(64 * 1024 + 28) >> 2];
    let first = 0;
    for (let i = 0; i < 20; i++) {
      // Each round a fresh pair of communicators on the same node memory (the world block is reused).
      const cs = ctxs.map((ctx) => new Communicator(ctx, { timeoutMs: 20_000 }));
      await pingPong(cs, settle, 2, 'u8', 100);
      cs.forEach((c) => c.destroy());
      if (i === 0) first = top();
      expect(top()).toBe(first);
    }
  });
});

describe('send/recv on worker threads', () => {
  it('the same with collectives run by the progress thread (WEBCCL_PROGRESS=thread) beside send/recv run by the ranks', async () => {
    const { result, reports } = await runScenario(
      3,
      'p2p',
      { large: 3 * MiB, many: 2000 },
      { env: { WEBCCL_PROGRESS: 'thread' } },
    );
    expect(result.failure?.message).toBeUndefined();
    expect(reports.map((r) => r.at(-1))).toEqual(
      reports.map(() => ({ wrong: [], sizeCodes: ['SIZE_MISMATCH', 'SIZE_MISMATCH'] })),
    );
  });

  it('ping-pong, ring, tags, many in flight, sizes, wrong size, mixed, on 2 and 3 threads', async () => {
    for (const n of [2, 3]) {
      const { result, reports } = await runScenario(n, 'p2p', { large: 3 * MiB, many: 2000 });
      expect(result.failure?.message).toBeUndefined();
      expect(reports.map((r) => r.at(-1))).toEqual(
        reports.map(() => ({ wrong: [], sizeCodes: ['SIZE_MISMATCH', 'SIZE_MISMATCH'] })),
      );
    }
  });

  it('TIMEOUT naming the peer that never posts; its own op finds the communicator aborted', async () => {
    const { reports } = await runScenario(2, 'p2pTimeout', { timeoutMs: 800 });
    expect(reports[0].at(-1).error).toMatchObject({ code: 'TIMEOUT', details: { peer: 1, missing: [1] } });
    expect(reports[0].at(-1).error.message).toContain('rank 1');
    expect(reports[1].at(-1).error.code).toBe('ABORTED');
  });

  it('a peer whose script ends without matching: the other side fails with a coded error', async () => {
    const { reports } = await runScenario(2, 'p2pLeave', { timeoutMs: 20_000 });
    expect(reports[0].at(-1).error).toMatchObject({ code: 'CONNECTION_CLOSED', details: { peer: 1 } });
  });
});

describe('send/recv across 2 nodes over TCP', () => {
  let cs: Communicator[] = [];
  afterAll(() => destroyAll(cs));

  it('every case on 2 nodes × 1 rank', async () => {
    cs = await netRanks(2, 1);
    await pingPong(cs, awaitAll, 30);
    await ring(cs, awaitAll, 1000, false);
    await ring(cs, awaitAll, 3, true);
    await outOfOrderTags(cs, awaitAll);
    await manyInFlight(cs, awaitAll, 400);
    await sizesAndDtypes(cs, awaitAll, 5 * MiB);
    await wrongSize(cs, awaitAll);
    await mixed(cs, awaitAll);
  });

  it('ring across 2 nodes × 2 ranks (node mates over TCP too)', async () => {
    const c4 = await netRanks(2, 2);
    await ring(c4, awaitAll, 5000, false);
    await ring(c4, awaitAll, 0, true);
    destroyAll(c4);
  });

  it('a peer that never matches: TIMEOUT naming it; the peer learns of it', async () => {
    const c2 = await netRanks(2, 1, { timeoutMs: 30_000 });
    const [e] = await awaitAll([c2[0].recv(new Uint8Array(8), 1, { tag: 6, timeoutMs: 300 })]);
    expect((e as WebcclError).code).toBe('TIMEOUT');
    expect((e as WebcclError).details).toMatchObject({ peer: 1, tag: 6, missing: [1] });
    expect(e!.message).toContain('rank 1');
    const [e1] = await awaitAll([c2[1].send(new Uint8Array(8), 0, { tag: 6 })]);
    expect((e1 as WebcclError).code).toBe('ABORTED');
  });

  it('a peer whose connections close: the pending recv fails with CONNECTION_CLOSED', async () => {
    const c2 = await netRanks(2, 1, { timeoutMs: 30_000 });
    const r0 = c2[0].recv(new Float32Array(4), 1, { tag: 8 });
    c2[1].destroy();
    const [e] = await awaitAll([r0]);
    expect((e as WebcclError).code).toBe('CONNECTION_CLOSED');
    expect(e!.message).toContain('rank 1');
  });

  it("abort() on one side fails the other side's pending p2p op", async () => {
    const c2 = await netRanks(2, 1, { timeoutMs: 30_000 });
    const r0 = c2[0].recv(new Float32Array(4), 1);
    const s1 = c2[1].send(new Float32Array(8), 0, { tag: 1 });
    c2[1].abort('stop');
    const errs = await awaitAll([r0, s1]);
    expect(errs.map((e) => (e as WebcclError)?.code)).toEqual(['ABORTED', 'ABORTED']);
  });
});

describe('send/recv across real processes and nodes (the built CLI)', () => {
  const f = launchFixture(new URL('fixtures/p2p-check.mjs', import.meta.url), 'p2p');
  const oks = (out: string, n: number) =>
    [...out.matchAll(/^ok rank (\d+) of (\d+)$/gm)]
      .filter((m) => Number(m[2]) === n)
      .map((m) => Number(m[1]))
      .sort();

  it.each([
    ['--procs -n 3', 'procs', 3],
    ['--nnodes 2 --nproc-per-node 2', 'nnodes', 4],
  ] as const)(
    '%s: every case, checked by each rank',
    async (_, form, n) => {
      const runs = await launchForm(f, form, n, [], {}, { guardMs: 120_000 });
      expectExit(runs);
      expect(oks(stdoutOf(runs), n)).toEqual([...Array(n).keys()]);
    },
    180_000,
  );
});
