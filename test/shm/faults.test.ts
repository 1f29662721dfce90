// Faults of buffers on one node: a partly overlapping out is refused,
// BUFFER_BUSY is decided alike on every rank, and WEBCCL_CHECK=1 catches a program that writes
// a buffer while its op is in flight, on in-process ranks, thread ranks and across nodes. Faults
// of ranks on worker threads started by the launcher (test/ranks/scenario.mjs): mismatched
// calls, a missing rank, a dying rank, reported on every rank.
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import { ENV_VARS } from '../../src/core/config.js';
import { WebcclError } from '../../src/core/errors.js';
import { caught } from '../helpers/caught.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';
import { destroyAll, netRanks } from '../helpers/net-world.js';
import { runScenario } from '../helpers/threads.js';

describe('an out that partly overlaps its input', () => {
  const [a, b] = inprocRanks(2);

  it('is refused with INVALID_ARGUMENT by every collective that takes both, plain or alloc() memory', () => {
    const plain = new Float32Array(24);
    const shared = a.alloc('f32', 24) as Float32Array;
    for (const buf of [plain, shared]) {
      const [x, shifted] = [buf.subarray(0, 16), buf.subarray(4, 20)];
      expect(caught(() => a.allReduce(x, { out: shifted })).code).toBe('INVALID_ARGUMENT');
      expect(caught(() => a.allReduce(shifted, { out: x })).code).toBe('INVALID_ARGUMENT');
      expect(caught(() => a.broadcast(x, { out: shifted })).code).toBe('INVALID_ARGUMENT');
      expect(caught(() => a.reduce(x, { out: buf.subarray(1, 17), root: 1 })).details).toEqual({ overlap: 'partial' });
      // allGather: input inside out, but not at this rank's block; reduceScatter likewise.
      expect(caught(() => a.allGather(buf.subarray(0, 16), buf.subarray(4, 12))).code).toBe('INVALID_ARGUMENT');
      expect(caught(() => b.allGather(buf.subarray(0, 16), buf.subarray(0, 8))).code).toBe('INVALID_ARGUMENT');
      expect(caught(() => a.reduceScatter(buf.subarray(2, 10), buf.subarray(0, 16))).code).toBe('INVALID_ARGUMENT');
      expect(caught(() => a.reduceScatter(buf.subarray(0, 8), buf.subarray(4, 20))).code).toBe('INVALID_ARGUMENT');
    }
    expect(a.stats().ops).toBe(0); // nothing was issued
  });

  it('exact in place, and NCCL in-place allGather/reduceScatter, still work', async () => {
    const [x, y] = [new Float32Array(8).fill(1), new Float32Array(8).fill(2)];
    await settleAll([a.allReduce(x, { out: x }), b.allReduce(y, { out: y })]);
    expect(x[7]).toBe(3);
    const ga = new Float32Array(8).fill(0);
    const gb = new Float32Array(8).fill(0);
    ga.subarray(0, 4).fill(5);
    gb.subarray(4, 8).fill(6);
    await settleAll([a.allGather(ga, ga.subarray(0, 4)), b.allGather(gb, gb.subarray(4, 8))]);
    expect(Array.from(ga)).toEqual([5, 5, 5, 5, 6, 6, 6, 6]);
    const ra = new Float32Array(8).fill(1);
    const rb = new Float32Array(8).fill(2);
    await settleAll([a.reduceScatter(ra.subarray(0, 4), ra), b.reduceScatter(rb.subarray(4, 8), rb)]);
    expect(Array.from(ra.subarray(0, 4))).toEqual([3, 3, 3, 3]);
    expect(Array.from(rb.subarray(4, 8))).toEqual([3, 3, 3, 3]);
  });

  it('on 4 thread ranks too', async () => {
    const { result, reports } = await runScenario(4, 'overlap', { timeoutMs: 20_000 });
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    for (const [rep] of reports) {
      expect(rep.codes).toEqual(['INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'INVALID_ARGUMENT']);
      expect(rep.gathered).toEqual([1, 2, 3, 4]);
      expect(rep.scattered).toBe(10);
    }
  }, 120_000);
});

describe('BUFFER_BUSY is decided alike on every rank', () => {
  it('in-process: the rank whose op already completed refuses too, until the caller waits', async () => {
    const [a, b] = inprocRanks(2);
    const xa = new Float32Array(100).fill(1);
    const xb = new Float32Array(100).fill(2);
    const wa = a.allReduce(xa); // pending: rank 1 has not posted
    const wb = b.allReduce(xb); // completes inside the call: rank 0 had posted
    expect(wb.settled).toBe(true);
    expect(caught(() => a.allReduce(xa.subarray(10, 50))).code).toBe('BUFFER_BUSY');
    expect(caught(() => b.allReduce(xb.subarray(10, 50))).code).toBe('BUFFER_BUSY');
    await settleAll([wa, wb]);
    await settleAll([a.allReduce(xa.subarray(10, 50)), b.allReduce(xb.subarray(10, 50))]);
    expect([xa[0], xa[20]]).toEqual([3, 6]);
  });

  it('waiting for a later op releases the earlier ones (they complete in issue order)', async () => {
    const [a, b] = inprocRanks(2);
    const [x0, y0, x1, y1] = [1, 2, 3, 4].map(() => new Float32Array(10).fill(1));
    a.allReduce(x0);
    b.allReduce(x1);
    await settleAll([a.allReduce(y0), b.allReduce(y1)]);
    await settleAll([a.allReduce(x0), b.allReduce(x1)]);
    expect(x0[0]).toBe(4);
  });

  it('on 4 thread ranks: every rank throws, and the communicator goes on', async () => {
    const { result, reports } = await runScenario(4, 'busyAlike', { timeoutMs: 10_000 });
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    for (const [rep] of reports) {
      expect(rep.error?.code).toBe('BUFFER_BUSY');
      expect([rep.first, rep.mid]).toEqual([4, 16]);
    }
  }, 120_000);
});

describe('a buffer transferred while its op is in flight', () => {
  it('fails that rank with INVALID_ARGUMENT (not TypeError) and its peer with ABORTED at once', async () => {
    const [a, b] = inprocRanks(2, { timeoutMs: 60_000 });
    const x = new Float32Array(5000).fill(1); // several chunks: the op copies it in slice by slice
    const w = a.allReduce(x);
    structuredClone(x.buffer, { transfer: [x.buffer] });
    const t0 = performance.now();
    const errs = await settleAll([w, b.allReduce(new Float32Array(5000))]);
    expect((errs[0] as WebcclError).code).toBe('INVALID_ARGUMENT');
    expect((errs[0] as WebcclError).details).toEqual({ detached: true });
    expect((errs[1] as WebcclError).code).toBe('ABORTED');
    expect(performance.now() - t0).toBeLessThan(20_000);
  });
});

describe('WEBCCL_CHECK=1: writes to a buffer in flight', () => {
  beforeEach(() => {
    process.env.WEBCCL_CHECK = '1';
  });
  afterEach(() => {
    delete process.env.WEBCCL_CHECK;
  });

  it('is a known environment variable; other values than 0 and 1 are refused', () => {
    expect(ENV_VARS.WEBCCL_CHECK).toBeDefined();
    process.env.WEBCCL_CHECK = 'yes';
    expect(caught(() => inprocRanks(1)).code).toBe('INVALID_ARGUMENT');
  });

  it('a write between two slices of an in-place op: BUFFER_BUSY naming op and buffer; the peer gets ABORTED', async () => {
    const [a, b] = inprocRanks(2);
    const x = new Float32Array(5000).fill(1); // several chunks of the 4 KiB slots
    const w = a.allReduce(x);
    x[4999] = 7;
    const errs = await settleAll([w, b.allReduce(new Float32Array(5000).fill(1))]);
    const e = errs[0] as WebcclError;
    expect(e.code).toBe('BUFFER_BUSY');
    expect(e.details).toMatchObject({ op: 'allReduce', seq: 0, buffer: 'input', modified: true });
    expect((errs[1] as WebcclError).code).toBe('ABORTED');
  });

  it('a write to the input of an op queued behind another: caught when it starts', async () => {
    const [a, b] = inprocRanks(2);
    const [y, x] = [new Float32Array(10), new Float32Array(10)];
    const w1 = a.allReduce(y);
    const w2 = a.allReduce(x, { out: new Float32Array(10) });
    x[3] = 1;
    const errs = await settleAll([
      w1,
      w2,
      b.allReduce(new Float32Array(10)),
      b.allReduce(new Float32Array(10), { out: new Float32Array(10) }),
    ]);
    expect(errs[0]).toBeUndefined();
    expect((errs[1] as WebcclError).details).toMatchObject({ op: 'allReduce', seq: 1, buffer: 'input' });
  });

  it('a write to the output of an op in flight is caught too; untouched buffers pass', async () => {
    const [a, b] = inprocRanks(2);
    const out = new Float32Array(3000);
    const w = a.allReduce(new Float32Array(3000).fill(1), { out });
    out[0] = 9;
    const errs = await settleAll([w, b.allReduce(new Float32Array(3000).fill(1))]);
    expect((errs[0] as WebcclError).details).toMatchObject({ buffer: 'output' });
    const [c, d] = inprocRanks(2);
    await settleAll([c.allReduce(new Float32Array(3000).fill(1)), d.allReduce(new Float32Array(3000).fill(1))]);
  });

  it('without WEBCCL_CHECK the same program completes (with a torn result)', async () => {
    delete process.env.WEBCCL_CHECK;
    const [a, b] = inprocRanks(2);
    const x = new Float32Array(5000).fill(1);
    const w = a.allReduce(x);
    x[4999] = 7;
    expect(await settleAll([w, b.allReduce(new Float32Array(5000).fill(1))])).toEqual([undefined, undefined]);
  });

  it('on 4 thread ranks: the writer gets BUFFER_BUSY, the others ABORTED, well within the deadline', async () => {
    const { result, reports } = await runScenario(
      4,
      'writeInFlight',
      { timeoutMs: 3000, count: 1 << 20 },
      { env: { WEBCCL_CHECK: '1' } },
    );
    expect(reports[0][0].error?.code, JSON.stringify(reports)).toBe('BUFFER_BUSY');
    expect(reports[0][0].error.details).toMatchObject({ op: 'allReduce', buffer: 'input', modified: true });
    for (const [rep] of reports.slice(1)) {
      expect(rep.error?.code).toBe('ABORTED');
      expect(rep.ms).toBeLessThan(2500);
    }
    expect(result.exitCode).toBe(0);
  }, 120_000);

  describe('across nodes (2 nodes × 1 rank, TCP)', () => {
    let cs: Communicator[] = [];
    afterAll(() => destroyAll(cs));

    it('a write between issue and start', async () => {
      cs = await netRanks(2, 1, { timeoutMs: 10_000 });
      const [a, b] = cs;
      const x = new Float32Array(100).fill(1);
      const w = a.allReduce(x);
      x[0] = 5;
      const errs = await Promise.all([
        w.wait().catch((e) => e),
        b
          .allReduce(new Float32Array(100))
          .wait()
          .catch((e) => e),
      ]);
      expect(errs[0].code).toBe('BUFFER_BUSY');
      expect(errs[0].details).toMatchObject({ op: 'allReduce', seq: 0, buffer: 'input' });
      expect(WebcclError.is(errs[1])).toBe(true); // the peer learns the op failed (ABORTED or CONNECTION_CLOSED)
    }, 60_000);

    it('an out-of-place op whose input is written while it waits for its peer', async () => {
      const c = await netRanks(2, 1, { timeoutMs: 10_000 });
      cs.push(...c);
      const [a, b] = c;
      const x = new Float32Array(100).fill(1);
      const w = a.allReduce(x, { out: new Float32Array(100) });
      await new Promise((res) => setTimeout(res, 50));
      x[0] = 5;
      const errs = await Promise.all([
        w.wait().catch((e) => e),
        b
          .allReduce(new Float32Array(100))
          .wait()
          .catch((e) => e),
      ]);
      expect(errs[0].code).toBe('BUFFER_BUSY');
      expect(errs[0].details).toMatchObject({ buffer: 'input', modified: true });
    }, 60_000);
  });
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
