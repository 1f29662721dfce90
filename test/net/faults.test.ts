// Faults across nodes other than a disagreement (that is test/net/mismatch.test.ts): abort(reason)
// reaches every peer as ABORTED with the aborting rank and its text; a TIMEOUT names the rank at
// the root of the stall (one that never issues the op, or a process frozen by SIGSTOP), not the
// neighbour it waits for; a rank with the wrong token fails with its peer well before the connect
// deadline; a data port closes idle strangers within seconds and logs refusals a few per
// interval; a sender cannot run ahead of its receivers (no pile-up in the mailbox). In this
// process (netRanks: real stores and TCP meshes over loopback), and across real processes
// (`webccl run --procs`, and two `webccl run --nnodes 2` launchers of two threads each, on the
// built package) with the rank script test/net/fixtures/net-faults.mjs; every process started
// is gone when each test ends.
import net from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { RateLimitedLog } from '../../src/core/rate-log.js';
import { TcpTransport } from '../../src/transport/tcp/nodejs/tcp-transport.js';
import { abortError, encodeAbortInfo } from '../../src/transport/transport.js';
import { alive } from '../helpers/jobs.js';
import type { Form } from '../helpers/launch-forms.js';
import { destroyAll, worldPerTest } from '../helpers/net-world.js';
import { outcomes } from '../helpers/outcomes.js';
import { expectFailedEarly, joinByHand } from '../helpers/procs.js';
import { expectNoneLeft, faultJobs, faultsIn } from '../helpers/rank-faults.js';

const world = worldPerTest();
const launch = faultJobs('net-faults');

/**
 * The fault script's allReduce loop on `n` ranks in `form`, with 3 s deadlines: once every rank
 * loops, world rank `victim` is stopped (SIGSTOP); once `reports` survivors have printed their
 * fault, it is ended rather than left to the launcher's SIGTERM (held while stopped) and its
 * SIGKILL a grace later. Each survivor's fault; the stopped process is gone afterwards.
 */
async function freeze(form: Form, n: number, victim: number, reports: number) {
  let looping = 0;
  let reported = 0;
  let stopped = 0;
  const pids = new Map<number, number>();
  const rs = await launch(form, n, ['loop'], { WEBCCL_TIMEOUT_MS: '3000' }, (line) => {
    const p = /^pid rank (\d+) (\d+)$/.exec(line);
    if (p) pids.set(Number(p[1]), Number(p[2]));
    if (/^looping rank/.test(line) && ++looping === n) {
      stopped = pids.get(victim)!;
      process.kill(stopped, 'SIGSTOP');
    }
    if (/^fault rank/.test(line) && ++reported === reports) process.kill(stopped, 'SIGKILL');
  });
  if (stopped && alive(stopped)) {
    process.kill(stopped, 'SIGCONT');
    process.kill(stopped, 'SIGKILL');
  }
  return { rs, stopped, faults: faultsIn(rs.map((r) => r.stdout).join('')) };
}

describe('abort(reason) reaches every peer as ABORTED naming the rank and its reason', () => {
  for (const [nodes, perNode] of [
    [3, 1],
    [2, 2],
  ]) {
    it(`${nodes}x${perNode}: rank 1 aborts while 16 MiB allReduces are in flight`, async () => {
      const cs = await world(nodes, perNode);
      const works = cs.map((c, r) => (r === 1 ? undefined : c.allReduce(new Float32Array(4 << 20))));
      await new Promise((r) => setTimeout(r, 100));
      cs[1].abort('stopping on purpose');
      const os = await outcomes(cs, (_, r) => works[r]);
      for (const [r, o] of os.entries()) {
        if (r === 1) continue;
        expect({ rank: r, code: o.code }, o.message).toEqual({ rank: r, code: 'ABORTED' });
        expect(o.details.by, o.message).toBe(1);
        expect(o.details.reason).toBe('stopping on purpose');
        expect(o.message).toMatch(/rank 1 aborted the communicator: stopping on purpose/);
      }
      destroyAll(cs.filter((_, r) => r !== 1));
    }, 60_000);
  }

  it('abort() on one rank fails a pending allToAll on every other rank with ABORTED naming it', async () => {
    const cs = await world(3, 1);
    const big = 1 << 20;
    const works = cs.slice(1).map((c) => c.allToAll(new Float32Array(3 * big), new Float32Array(3 * big)));
    cs[0].abort('stopping on purpose');
    for (const w of works) {
      const e = await w.wait().catch((x) => x);
      expect({ code: e.code, by: e.details.by }).toEqual({ code: 'ABORTED', by: 0 });
    }
  });

  it.each([
    ['--procs -n 3: ranks 0 and 2, in a 32 MiB allReduce, hear it from rank 1', 'procs', 3, [0, 2]],
    [
      "--nnodes 2 x 2 threads: ranks 2 and 3 of the other node and rank 1's node mate 0 hear it from rank 1",
      'nnodes',
      4,
      [0, 2, 3],
    ],
  ] as const)(
    '%s',
    async (_, form, n, survivors) => {
      const rs = await launch(form, n, ['abort']);
      const fs = faultsIn(rs.map((x) => x.stdout).join(''));
      for (const k of survivors) {
        const f = fs.get(k);
        expect({ rank: k, code: f?.code, by: f?.details.by, reason: f?.details.reason }, f?.message).toEqual({
          rank: k,
          code: 'ABORTED',
          by: 1,
          reason: 'stopping on purpose',
        });
        expect(f!.message).toMatch(/rank 1 aborted the communicator: stopping on purpose/);
      }
      for (const r of rs) expect(r.stdout).not.toMatch(/EPIPE|ECONNRESET/);
      await expectNoneLeft(...rs);
    },
    60_000,
  );
});

describe('a TIMEOUT names the rank at the root of the stall', () => {
  it('4-rank ring, rank 1 never issues the op: ranks 0, 2 and 3 all name rank 1', async () => {
    const cs = await world(4, 1);
    const os = await outcomes(cs, (c, r) =>
      r === 1 ? undefined : c.allReduce(new Float32Array(1 << 16), { algo: 'ring', timeoutMs: 1500 }),
    );
    for (const r of [0, 2, 3]) {
      expect(['TIMEOUT', 'ABORTED'], os[r].message).toContain(os[r].code);
      expect(os[r].details.missing, os[r].message).toEqual([1]);
    }
    expect(os.filter((o) => o.code === 'TIMEOUT').length).toBeGreaterThan(0);
    expect(os.find((o) => o.code === 'TIMEOUT')!.message).toMatch(/the stall starts at rank 1\b/);
  }, 60_000);

  it('a gather whose rank 2 never issues it: TIMEOUT on the root naming rank 2, and rank 1 fails too', async () => {
    const cs = await world(3, 1, 1000);
    const ws = [
      cs[0].gather(new Float32Array(3), new Float32Array(1), { root: 0 }),
      cs[1].gather(null, new Float32Array(1), { root: 0 }),
    ];
    const [e0, e1] = await Promise.all(ws.map((w) => w.wait().catch((x) => x)));
    expect(e0.code).toBe('TIMEOUT');
    expect(e0.details.missing).toEqual([2]);
    expect(['TIMEOUT', 'ABORTED']).toContain(e1.code);
  }, 30_000);
});

describe('a frozen rank (SIGSTOP): every TIMEOUT names it, not the neighbour waiting for it', () => {
  for (const n of [3, 4]) {
    it(`--procs -n ${n}, rank 1 stopped mid-loop`, async () => {
      const { rs, stopped, faults } = await freeze('procs', n, 1, n - 1);
      expect(stopped).toBeGreaterThan(0);
      const survivors = Array.from({ length: n }, (_, k) => k).filter((k) => k !== 1);
      expect([...faults.keys()].sort(), rs[0].stderr).toEqual(survivors);
      for (const [k, f] of faults) {
        expect(
          { rank: k, code: ['TIMEOUT', 'ABORTED'].includes(f.code), missing: f.details.missing },
          f.message,
        ).toEqual({ rank: k, code: true, missing: [1] });
      }
      expect(
        [...faults.values()].some((f) => f.code === 'TIMEOUT' && /the stall starts at rank 1\b/.test(f.message)),
      ).toBe(true);
      expect(rs[0].hung).toBe(false);
      await expectNoneLeft(...rs);
    }, 60_000);
  }
});

describe('a frozen node (SIGSTOP) in --nnodes 2 x 2 threads', () => {
  it('node 1 stopped mid-loop: ranks 0 and 1 name a rank of node 1, never their node mate waiting on it', async () => {
    const { rs } = await freeze('nnodes', 4, 2, 2);
    const fs = faultsIn(rs[0].stdout);
    expect([...fs.keys()].sort(), rs[0].stderr).toEqual([0, 1]);
    for (const [, f] of fs) {
      expect(['TIMEOUT', 'ABORTED'], f.message).toContain(f.code);
      expect(f.details.missing).toHaveLength(1);
      expect([2, 3], f.message).toContain(f.details.missing[0]);
    }
    await expectNoneLeft(...rs);
  }, 60_000);
});

describe('a rank with the wrong token', () => {
  it('rank 1 of 2 (by hand): both fail well before the connect deadline; rank 0 AUTH_FAILED naming rank 1', async () => {
    const rs = await joinByHand(2, (k) => (k === 1 ? { WEBCCL_TOKEN: 'token-b' } : {}));
    expectFailedEarly(rs);
    expect(rs[1].stderr).toMatch(/rank 1 cannot reach the rendezvous store .*token mismatch.*\[AUTH_FAILED\]/);
    expect(rs[0].stderr).toMatch(
      /rank 0: the store at 127\.0\.0\.1:\d+ refused .*token mismatch.*rank 1 of 2 has not joined.*\[AUTH_FAILED\]/,
    );
  }, 60_000);
});

describe('a data port and its strangers', () => {
  it('300 idle connections that never say HELLO: each closed within seconds, a bounded number of log lines', async () => {
    const errors: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void errors.push(a.join(' ')));
    const t = await TcpTransport.listen({ rank: 0, size: 2, jobId: 'strangers', token: 'secret', timeoutMs: 120_000 });
    try {
      const t0 = performance.now();
      const closed = await Promise.all(
        Array.from(
          { length: 300 },
          () =>
            new Promise<number>((resolve) => {
              const s = net.connect(t.address.port, '127.0.0.1');
              s.on('error', () => undefined);
              s.on('close', () => resolve(performance.now() - t0));
            }),
        ),
      );
      expect(Math.max(...closed)).toBeLessThan(20_000); // the connect timeout is 120 s
      const refusals = errors.filter((l) => /refused/.test(l));
      expect(refusals.length).toBeGreaterThan(0);
      expect(refusals.length).toBeLessThanOrEqual(6);
    } finally {
      t.close();
      spy.mockRestore();
    }
  }, 60_000);
});

describe("the ABORT frame's text and the refusal log", () => {
  it('carries code, reason and details within the frame limit, ASCII only; a plain text is a reason', () => {
    const info = {
      code: 'MISMATCH' as const,
      reason: `é${'x'.repeat(3000)}`,
      details: { seq: 4, fields: { 0: { root: '0' } } },
    };
    const text = encodeAbortInfo(info, 1024);
    expect(text.length).toBeLessThanOrEqual(1024);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the check is that every byte is ASCII
    expect(/^[\x00-\x7f]*$/.test(text)).toBe(true);
    const e = abortError(2, text);
    expect({ code: e.code, by: e.details.by, seq: e.details.seq }).toEqual({ code: 'MISMATCH', by: 2, seq: 4 });
    expect(e.details.reason).toMatch(/^éx+\.\.\.$/);
    const plain = abortError(3, 'out of memory');
    expect({ code: plain.code, by: plain.details.by, reason: plain.details.reason }).toEqual({
      code: 'ABORTED',
      by: 3,
      reason: 'out of memory',
    });
    expect(plain.message).toMatch(/^rank 3 failed: out of memory/);
  });

  it('a peer may hand on only ABORTED or MISMATCH, and names the first cause', () => {
    expect(abortError(1, JSON.stringify({ code: 'INTERNAL', reason: 'x' })).code).toBe('ABORTED');
    const relayed = abortError(
      1,
      encodeAbortInfo({ code: 'ABORTED', reason: 'stop', user: true, details: { by: 3 } }, 1024),
    );
    expect({ by: relayed.details.by, peer: relayed.details.peer, user: relayed.details.user }).toEqual({
      by: 3,
      peer: 1,
      user: true,
    });
    expect(relayed.message).toMatch(/^rank 3 aborted the communicator: stop/);
  });

  it('shows the first few lines of an interval, then one summary', () => {
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
    try {
      const l = new RateLimitedLog('refused connections', 3, 60_000);
      for (let i = 0; i < 50; i++) l.warn(`refused #${i}`);
      l.flush();
      expect(lines).toHaveLength(4);
      expect(lines[3]).toMatch(/refused connections: 47 more in the last 60 s/);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('a sender cannot run ahead of its receivers', () => {
  it('3000 broadcasts issued by the root before the receiver issues any: all complete (no pile-up)', async () => {
    const cs = await world(2, 1);
    const n = 3000; // more than the 1024 messages a mailbox holds for a peer
    const sent = Array.from({ length: n }, (_, i) => cs[0].broadcast(new Float32Array(1).fill(i), { root: 0 }));
    await new Promise((r) => setTimeout(r, 200));
    const got = Array.from({ length: n }, () => new Float32Array(1));
    const recv = got.map((g) => cs[1].broadcast(g, { root: 0 }));
    await Promise.all([...sent, ...recv].map((w) => w.wait()));
    expect(got.every((g, i) => g[0] === i)).toBe(true);
  }, 120_000);

  it('2000 gathers issued by the non-root, then 2000 scatters by the root, before the other side issues any', async () => {
    const cs = await world(2, 1);
    const ops = 2000;
    const settle = () => new Promise((ok) => setTimeout(ok, 200));
    const g1 = Array.from({ length: ops }, (_, i) => cs[1].gather(null, new Float32Array(1).fill(i), { root: 0 }));
    await settle();
    const outs = Array.from({ length: ops }, () => new Float32Array(2));
    const g0 = outs.map((o) => cs[0].gather(o, new Float32Array(1).fill(-1), { root: 0 }));
    await Promise.all([...g1, ...g0].map((w) => w.wait()));
    outs.forEach((o, i) => expect([...o]).toEqual([-1, i]));
    const s0 = Array.from({ length: ops }, (_, i) =>
      cs[0].scatter(new Float32Array(1), new Float32Array(2).fill(i), { root: 0 }),
    );
    await settle();
    const got = Array.from({ length: ops }, () => new Float32Array(1));
    const s1 = got.map((o) => cs[1].scatter(o, null, { root: 0 }));
    await Promise.all([...s0, ...s1].map((w) => w.wait()));
    got.forEach((o, i) => expect(o[0]).toBe(i));
  }, 120_000);
});
