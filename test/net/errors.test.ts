// A job over IPv6 loopback, and failures across nodes, in this process: a rank that never
// arrives (TIMEOUT on the waiting rank naming it; the late rank then learns why), ranks that
// disagree on the count, dtype, reduction or collective (MISMATCH, and every rank fails),
// abort(), waitSync() refused, and a rank whose script ends while the others finish their last op.
import { describe, expect, it } from 'vitest';
import { canListen } from '../helpers/net.js';
import { all, netRanks } from '../helpers/net-world.js';

const hasIPv6 = await canListen('::1');
if (!hasIPv6) console.warn('net-errors: no IPv6 loopback (::1) on this machine; skipping the IPv6 job');

const code = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (e) => e.code as string,
  );

describe('errors across nodes', () => {
  it.skipIf(!hasIPv6)('a job over IPv6 loopback (store and mesh on ::1)', async () => {
    const cs = await netRanks(2, 1, { masterAddr: '::1' });
    const xs = cs.map((_, r) => new Float64Array(3).fill(r + 1));
    await all(cs, (c, r) => c.allReduce(xs[r]));
    expect([...xs[1]]).toEqual([3, 3, 3]);
  });

  it('a missing rank: TIMEOUT naming it, then the absent rank learns the communicator is gone', async () => {
    const [a, b] = await netRanks(2, 1, { timeoutMs: 60_000 });
    const err = await a
      .allReduce(new Float32Array(4), { timeoutMs: 300 })
      .wait()
      .catch((e) => e);
    expect(err.code).toBe('TIMEOUT');
    expect(err.message).toMatch(/allReduce #\d+ on rank 0: timed out after 300 ms waiting for rank 1/);
    expect(err.details.missing).toEqual([1]);
    // Rank 0 is aborted: its later ops fail at once. Rank 1, late, may still complete the op
    // whose data rank 0 had already sent; from then on it finds rank 0 gone.
    expect(() => a.allReduce(new Float32Array(4))).toThrow(/timed out/);
    // (When rank 1's op fails, its next one is refused at issue: either way it names the cause.)
    const first = await b
      .allReduce(new Float32Array(4))
      .wait()
      .then(
        () => undefined,
        (e) => e,
      );
    const late = first ?? (await (async () => b.allReduce(new Float32Array(4)).wait())().catch((e) => e));
    expect(late.code).toBe('ABORTED');
    expect(late.message).toMatch(/rank 0 failed: allReduce #\d+ on rank 0: timed out/);
  });

  it('ranks that disagree on the count fail on both sides', async () => {
    const cs = await netRanks(2, 1);
    const codes = await Promise.all(
      cs.map((c, r) => code(c.allReduce(new Float32Array(r === 0 ? 10 : 12), { algo: 'doubling' }).wait())),
    );
    expect(codes).toContain('MISMATCH');
    expect(codes.every((x) => x !== 'ok')).toBe(true);
  });

  for (const [what, issue] of [
    ['the dtype (same bytes)', (c: any, r: number) => c.allReduce(r === 0 ? new Float32Array(4) : new Int32Array(4))],
    ['the reduction', (c: any, r: number) => c.allReduce(new Float32Array(4), { op: r === 0 ? 'sum' : 'max' })],
    ['the algorithm', (c: any, r: number) => c.allReduce(new Float32Array(4), { algo: r === 0 ? 'ring' : 'doubling' })],
  ] as const) {
    it(`ranks that disagree on ${what} fail on every side with a message that says so`, async () => {
      const cs = await netRanks(3, 1);
      const errs = await Promise.all(
        cs.map((c, r) =>
          (issue(c, Math.min(r, 1)) as any).wait().then(
            () => undefined,
            (e: any) => e,
          ),
        ),
      );
      expect(errs.every((e) => e)).toBe(true);
      const direct = errs.filter((e) => e.code === 'MISMATCH');
      expect(direct.length).toBeGreaterThan(0);
      expect(direct[0].message).toMatch(
        /ranks disagree on the (dtype|op|algorithm) of op #\d+: rank \d has \w+, rank \d has \w+/,
      );
      for (const e of errs)
        expect(e.code === 'MISMATCH' || (e.code === 'ABORTED' && /disagree/.test(e.message))).toBe(true);
    });
  }

  it('abort() fails the pending op here and the op of every other rank', async () => {
    const cs = await netRanks(3, 1);
    const works = cs.slice(1).map((c) => c.allReduce(new Float32Array(8)));
    cs[0].abort('test');
    const codes = await Promise.all(works.map((w) => code(w.wait())));
    expect(codes).toEqual(['ABORTED', 'ABORTED']);
    expect(() => cs[0].barrier()).toThrow(/aborted on rank 0: test/);
  });

  it('a chain whose root aborts fails its posted receives with no stray rejection', async () => {
    // Vitest fails the run on an unhandled rejection: the receives the chain posted up front
    // and had not reached yet must fail quietly behind the one it awaited.
    const [a, b] = await netRanks(2, 1);
    const w = b.broadcast(new Float32Array(1 << 20), { root: 0 });
    a.abort('test');
    expect(await code(w.wait())).toBe('ABORTED');
    await new Promise((ok) => setTimeout(ok, 100));
  });

  it('refuses waitSync() on an op across nodes, and completes it when awaited', async () => {
    const cs = await netRanks(2, 1);
    expect(cs[0].acrossNodes).toBe(true);
    const works = cs.map((c) => c.allReduce(new Float32Array(1).fill(2)));
    expect(() => works[0].waitSync()).toThrow(expect.objectContaining({ code: 'UNSUPPORTED' }));
    await Promise.all(works.map((w) => w.wait()));
    expect(works.every((w) => w.isCompleted())).toBe(true);
  });

  it('a rank may leave after its last op while the others still finish theirs', async () => {
    const cs = await netRanks(4, 1);
    const xs = cs.map(() => new Float32Array(1000).fill(1));
    await all(cs, (c, r) => c.allReduce(xs[r]));
    // Rank 0 ends as soon as its barrier completes; the others must still complete theirs.
    await Promise.all(
      cs.map((c, r) =>
        c
          .barrier()
          .wait()
          .then(() => r === 0 && c.destroy()),
      ),
    );
    expect(xs.every((x) => x[999] === 4)).toBe(true);
  });
});
