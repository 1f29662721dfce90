// Faults across nodes, in this process (netRanks: real stores and TCP meshes over loopback):
// ranks that disagree on a broadcast's root or count, a reduce's root or an allReduce's
// algorithm fail with MISMATCH on every rank at once, naming the field and both values, and
// never report success; a correct root cannot run ahead of its receivers (no pile-up in the
// mailbox); abort(reason) reaches every peer as ABORTED with the aborting rank and its text; a
// TIMEOUT names the rank at the root of the stall, not the neighbour it waits for; a data port
// closes idle strangers within seconds and logs refusals a few per interval.
// test/net/faults-procs.test.ts runs the same faults across real processes.
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import { RateLimitedLog } from '../../src/core/rate-log.js';
import { TcpTransport } from '../../src/transport/tcp/nodejs/tcp-transport.js';
import { abortError, encodeAbortInfo } from '../../src/transport/transport.js';
import { destroyAll, netRanks } from '../helpers/net-world.js';
import { type Outcome, outcomes } from '../helpers/outcomes.js';

let open: Communicator[] = [];
afterEach(() => {
  for (const c of open) if (c.stats().pending === 0) c.destroy();
  open = [];
});
const world = async (nodes: number, perNode: number, timeoutMs = 30_000) =>
  (open = await netRanks(nodes, perNode, { timeoutMs }));

/** Every rank failed MISMATCH, well before the deadline, naming `field` and its two values. */
function expectMismatch(os: Outcome[], field: string, values?: string[]) {
  for (const [r, o] of os.entries()) {
    expect({ rank: r, code: o.code }, o.message).toEqual({ rank: r, code: 'MISMATCH' });
    expect(o.ms).toBeLessThan(15_000);
    expect(o.details.field, o.message).toBe(field);
    expect(o.details.ranks).toHaveLength(2);
    if (values) expect([...o.details.values].sort()).toEqual([...values].sort());
    expect(o.message).toMatch(
      new RegExp(`disagree on the ${field} of op #\\d+: rank \\d+ has \\S+, rank \\d+ has \\S+`),
    );
  }
}

describe('ranks that disagree fail with MISMATCH on every rank, at once', () => {
  for (const [nodes, perNode] of [
    [2, 1],
    [4, 1],
    [2, 2],
  ]) {
    for (const bytes of [64, 16 << 20]) {
      it(`broadcast, every rank its own root: ${nodes}x${perNode} ranks, ${bytes} bytes`, async () => {
        const cs = await world(nodes, perNode);
        const xs = cs.map((_, r) => new Float32Array(bytes / 4).fill(r + 1));
        const os = await outcomes(cs, (c, r) => c.broadcast(xs[r], { root: r }));
        expectMismatch(os, 'root');
        xs.forEach((x, r) => expect(x[0]).toBe(r + 1)); // nothing was received
      }, 60_000);
    }
  }

  it('broadcast whose counts differ: the root fails too', async () => {
    const cs = await world(2, 1);
    const os = await outcomes(cs, (c, r) => c.broadcast(new Float32Array(r === 0 ? 10 : 12), { root: 0 }));
    expectMismatch(os, 'count', ['10', '12']);
  });

  it('reduce with two roots (each waits for the other without the ready notice): 2 and 3 ranks', async () => {
    for (const n of [2, 3]) {
      const cs = await world(n, 1);
      const os = await outcomes(cs, (c, r) => c.reduce(new Float32Array(100), { root: r === 0 ? 0 : 1 }));
      expectMismatch(os, 'root');
      destroyAll(cs);
    }
  }, 60_000);

  it('allReduce with another algorithm per rank (ring, doubling) on 2 ranks', async () => {
    const cs = await world(2, 1);
    const os = await outcomes(cs, (c, r) => c.allReduce(new Float32Array(64), { algo: r === 0 ? 'ring' : 'doubling' }));
    expectMismatch(os, 'algorithm', ['doubling', 'ring']);
  });

  it('allReduce, hierarchical on one node and ring on the other (2x2)', async () => {
    const cs = await world(2, 2);
    const os = await outcomes(cs, (c, r) =>
      c.allReduce(new Float32Array(1 << 16), { algo: r < 2 ? 'hierarchical' : 'ring' }),
    );
    expectMismatch(os, 'algorithm', ['hierarchical', 'ring']);
  });

  it('allReduce with another reduction on one of 3 ranks: every rank names the op, sum and max', async () => {
    const cs = await world(3, 1);
    const os = await outcomes(cs, (c, r) => c.allReduce(new Float32Array(64), { op: r === 2 ? 'max' : 'sum' }));
    expectMismatch(os, 'op', ['max', 'sum']);
  });

  it('a rank that issues a broadcast the others do not: it fails, and they fail on their next op', async () => {
    const cs = await world(2, 1);
    const os = await outcomes(cs, (c, r) =>
      r === 0 ? c.broadcast(new Float32Array(4), { root: 0 }) : c.allReduce(new Float32Array(4)),
    );
    for (const o of os) expect(o.code).toBe('MISMATCH');
  });
});

describe('a correct root cannot run ahead of its receivers', () => {
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
});

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
