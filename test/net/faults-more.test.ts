// allToAll, gather and scatter across nodes whose ranks disagree (in this process, over TCP):
// every rank fails with a coded error well before the deadline, never a hang, never a wrong
// result reported as success. A disagreement on the root or the count reaches every rank (each
// rank hears from the root, or the root from each); a disagreement on per-peer counts between
// two ranks fails both of them with MISMATCH naming the counts, and the others either fail too
// or complete with every block right. Also: abort() and a rank that never comes fail the others
// (no hang), and a sender cannot run ahead of its receiver.
import { afterEach, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import { netRanks } from '../helpers/net-world.js';
import { type Outcome, outcomes } from '../helpers/outcomes.js';

let open: Communicator[] = [];
afterEach(() => {
  for (const c of open) if (c.stats().pending === 0) c.destroy();
  open = [];
});
const DEADLINE = 30_000;
const world = async (nodes: number, perNode: number) =>
  (open = await netRanks(nodes, perNode, { timeoutMs: DEADLINE }));

/** Every rank failed MISMATCH well before the deadline, naming `field`. */
function expectMismatch(os: Outcome[], field: string) {
  for (const [r, o] of os.entries()) {
    expect({ rank: r, code: o.code }, o.message).toEqual({ rank: r, code: 'MISMATCH' });
    expect(o.ms).toBeLessThan(DEADLINE / 2);
    expect(o.details.field, o.message).toBe(field);
    expect(o.details.ranks).toHaveLength(2);
  }
}

const SHAPES: [number, number][] = [
  [2, 1],
  [3, 1],
  [4, 1],
  [2, 2],
];

describe('gather and scatter whose ranks disagree fail on every rank with MISMATCH', () => {
  for (const [nodes, perNode] of SHAPES) {
    const n = nodes * perNode;
    const shape = `${nodes}x${perNode}`;
    for (const bytes of [64, 4 << 20]) {
      it(`gather, rank 0 names root 0 and the others root 1: ${shape}, ${bytes} bytes`, async () => {
        const cs = await world(nodes, perNode);
        const count = bytes / 4;
        const os = await outcomes(cs, (c, r) => {
          const root = r === 0 ? 0 : 1;
          return c.gather(r === root ? new Float32Array(n * count) : null, new Float32Array(count).fill(r), { root });
        });
        expectMismatch(os, 'root');
      }, 60_000);

      it(`scatter, every rank its own root: ${shape}, ${bytes} bytes`, async () => {
        const cs = await world(nodes, perNode);
        const count = bytes / 4;
        const outs = cs.map(() => new Float32Array(count).fill(-1));
        const os = await outcomes(cs, (c, r) => c.scatter(outs[r], new Float32Array(n * count).fill(r), { root: r }));
        expectMismatch(os, 'root');
      }, 60_000);
    }

    it(`gather and scatter whose last rank has another count: ${shape}`, async () => {
      const cs = await world(nodes, perNode);
      const count = (r: number) => (r === n - 1 ? 6 : 5);
      const os = await outcomes(cs, (c, r) =>
        c.gather(r === 0 ? new Float32Array(n * count(r)) : null, new Float32Array(count(r)), { root: 0 }),
      );
      expectMismatch(os, 'count');
      for (const c of cs) c.destroy();
      const cs2 = await world(nodes, perNode);
      const os2 = await outcomes(cs2, (c, r) =>
        c.scatter(new Float32Array(count(r)), r === 0 ? new Float32Array(n * count(r)) : null, { root: 0 }),
      );
      expectMismatch(os2, 'count');
    }, 60_000);
  }

  it('gather on one rank, scatter on the other', async () => {
    const cs = await world(2, 1);
    const os = await outcomes(cs, (c, r) =>
      r === 0
        ? c.gather(new Float32Array(8), new Float32Array(4), { root: 0 })
        : c.scatter(new Float32Array(4), null, { root: 0 }),
    );
    expectMismatch(os, 'collective');
  });
});

describe('allToAll whose ranks disagree', () => {
  for (const [nodes, perNode] of SHAPES) {
    const n = nodes * perNode;
    const shape = `${nodes}x${perNode}`;
    it(`equal blocks, the last rank with another block size: every rank fails naming the count (${shape})`, async () => {
      const cs = await world(nodes, perNode);
      const block = (r: number) => (r === n - 1 ? 3 : 2);
      const os = await outcomes(cs, (c, r) =>
        c.allToAll(new Float64Array(n * block(r)), new Float64Array(n * block(r)), {}),
      );
      expectMismatch(os, 'count');
    }, 60_000);

    for (const bytes of [4, 4 << 20]) {
      it(`per-peer counts: rank 0 sends rank 1 more than rank 1 expects (${shape}, ${bytes} bytes): both fail naming the counts`, async () => {
        const cs = await world(nodes, perNode);
        const base = bytes / 4;
        // m[i][j]: what rank i sends rank j; rank 1 expects one element less from rank 0.
        const m = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => base + i + j));
        const send = (r: number) => m[r];
        const recv = (r: number) => m.map((row, i) => (r === 1 && i === 0 ? row[r] - 1 : row[r]));
        const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
        const ins = cs.map((_, r) => Float32Array.from({ length: sum(send(r)) }, (_, i) => r * 1e6 + i));
        const outs = cs.map((_, r) => new Float32Array(sum(recv(r))).fill(-1));
        const os = await outcomes(cs, (c, r) =>
          c.allToAll(outs[r], ins[r], { sendCounts: send(r), recvCounts: recv(r) }),
        );
        for (const r of [0, 1]) {
          const o = os[r];
          expect({ rank: r, code: o.code }, o.message).toEqual({ rank: r, code: 'MISMATCH' });
          expect(o.details.field, o.message).toBe('counts');
          expect(o.details.ranks).toEqual([0, 1]);
          expect(o.details.values).toEqual([`sendCounts[1]=${m[0][1]}`, `recvCounts[0]=${m[0][1] - 1}`]);
        }
        for (const [r, o] of os.entries()) {
          expect(o.ms).toBeLessThan(DEADLINE / 2);
          if (o.code !== 'ok') {
            expect(['MISMATCH', 'ABORTED'], o.message).toContain(o.code);
            continue;
          }
          // a rank that completed before hearing of the disagreement has every block right
          const at = [0];
          for (let j = 0; j < n; j++) at.push(at[j] + recv(r)[j]);
          for (let j = 0; j < n; j++) {
            const off = m[j].slice(0, r).reduce((x, y) => x + y, 0);
            expect(outs[r][at[j]], `rank ${r} block from ${j}`).toBe(j * 1e6 + off);
            expect(outs[r][at[j + 1] - 1], `rank ${r} block from ${j}`).toBe(j * 1e6 + off + m[j][r] - 1);
          }
        }
      }, 60_000);
    }
  }

  it('per-peer counts issued by one rank long before the other: its messages wait, and are taken (or refused) by their own counts', async () => {
    const cs = await world(2, 1);
    const late = () => new Promise((ok) => setTimeout(ok, 200));
    // rank 0 sends rank 1 three elements, rank 1 sends rank 0 one
    const w0 = cs[0].allToAll(new Float32Array(3), Float32Array.from([1, 2, 3, 4, 5]), {
      sendCounts: [2, 3],
      recvCounts: [2, 1],
    });
    await late();
    const out1 = new Float32Array(4);
    await Promise.all([
      w0.wait(),
      cs[1].allToAll(out1, Float32Array.from([6, 7]), { sendCounts: [1, 1], recvCounts: [3, 1] }).wait(),
    ]);
    expect([...out1]).toEqual([3, 4, 5, 7]);
    // the same, with rank 1 expecting two from rank 0: its submit meets the held message and both fail
    const v0 = cs[0].allToAll(new Float32Array(3), Float32Array.from([1, 2, 3, 4, 5]), {
      sendCounts: [2, 3],
      recvCounts: [2, 1],
    });
    await late();
    const os = await outcomes(cs.slice(1), (c) =>
      c.allToAll(new Float32Array(3), Float32Array.from([6, 7]), { sendCounts: [1, 1], recvCounts: [2, 1] }),
    );
    const e0 = await v0.wait().catch((e) => e);
    expect([e0.code, os[0].code]).toEqual(['MISMATCH', 'MISMATCH']);
    expect(os[0].details).toMatchObject({
      field: 'counts',
      ranks: [0, 1],
      values: ['sendCounts[1]=3', 'recvCounts[0]=2'],
    });
  });

  it('a rank whose sendCounts and recvCounts disagree on its own block is refused before anything moves', async () => {
    const cs = await world(2, 1);
    expect(() =>
      cs[0].allToAll(new Float32Array(3), new Float32Array(3), { sendCounts: [2, 1], recvCounts: [1, 2] }),
    ).toThrow(expect.objectContaining({ code: 'SIZE_MISMATCH', details: { sendCount: 2, recvCount: 1 } }));
    expect(cs[0].stats().pending).toBe(0);
  });
});

describe('a rank that aborts or never comes', () => {
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

  it('a gather whose rank 2 never issues it: TIMEOUT on the root naming rank 2, and rank 1 fails too', async () => {
    open = await netRanks(3, 1, { timeoutMs: 1000 });
    const cs = open;
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

describe('a sender cannot run ahead of its receiver', () => {
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
