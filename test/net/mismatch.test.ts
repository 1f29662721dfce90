// Ranks across nodes that disagree on an op fail with a coded error on every rank well before
// the deadline, never a hang, never a wrong result reported as success. A disagreement on a
// broadcast's, reduce's, gather's or scatter's root or count, an allReduce's algorithm or
// reduction, or the collective itself is a MISMATCH on every rank at once, naming the field and
// both values (each rank hears from the root, or the root from each); a disagreement on an
// allToAll's per-peer counts between two ranks fails both of them naming the counts, and the
// others either fail too or complete with every block right. In this process (netRanks: real
// stores and TCP meshes over loopback), and across real processes (`webccl run --procs`, and two
// `webccl run --nnodes 2` launchers of two threads each, on the built package) with the rank
// script test/net/fixtures/net-faults.mjs; every process started is gone when each test ends.
import { describe, expect, it } from 'vitest';
import type { Run } from '../helpers/jobs.js';
import { worldPerTest } from '../helpers/net-world.js';
import { type Outcome, outcomes } from '../helpers/outcomes.js';
import { expectNoneLeft, faultJobs, faultsIn } from '../helpers/rank-faults.js';

const DEADLINE = 30_000;
const world = worldPerTest();
const launch = faultJobs('mismatch');

/** Every rank failed MISMATCH, well before the deadline, naming `field` and its two values. */
function expectMismatch(os: Outcome[], field: string, values?: string[]) {
  for (const [r, o] of os.entries()) {
    expect({ rank: r, code: o.code }, o.message).toEqual({ rank: r, code: 'MISMATCH' });
    expect(o.ms).toBeLessThan(DEADLINE / 2);
    expect(o.details.field, o.message).toBe(field);
    expect(o.details.ranks).toHaveLength(2);
    if (values) expect([...o.details.values].sort()).toEqual([...values].sort());
  }
}

/** expectMismatch, and every message says which op, and what each of two ranks has. */
function expectNamedMismatch(os: Outcome[], field: string, values?: string[]) {
  expectMismatch(os, field, values);
  for (const o of os) {
    expect(o.message).toMatch(
      new RegExp(`disagree on the ${field} of op #\\d+: rank \\d+ has \\S+, rank \\d+ has \\S+`),
    );
  }
}

const SHAPES: [number, number][] = [
  [2, 1],
  [3, 1],
  [4, 1],
  [2, 2],
];

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
        expectNamedMismatch(os, 'root');
        xs.forEach((x, r) => expect(x[0]).toBe(r + 1)); // nothing was received
      }, 60_000);
    }
  }

  it('broadcast whose counts differ: the root fails too', async () => {
    const cs = await world(2, 1);
    const os = await outcomes(cs, (c, r) => c.broadcast(new Float32Array(r === 0 ? 10 : 12), { root: 0 }));
    expectNamedMismatch(os, 'count', ['10', '12']);
  });

  it('reduce with two roots (each waits for the other without the ready notice): 2 and 3 ranks', async () => {
    for (const n of [2, 3]) {
      const cs = await world(n, 1);
      const os = await outcomes(cs, (c, r) => c.reduce(new Float32Array(100), { root: r === 0 ? 0 : 1 }));
      expectNamedMismatch(os, 'root');
      for (const c of cs) c.destroy();
    }
  }, 60_000);

  // No rank a root: nothing would flow from a root, and every rank would wait for the deadline,
  // unless each rooted op has its ranks say so to a neighbour at their start.
  for (const [nodes, perNode] of [
    [2, 1],
    [3, 1],
    [2, 2],
  ]) {
    for (const name of ['broadcast', 'reduce', 'gather', 'scatter'] as const) {
      it(`${name}, each rank naming the next as root (no rank its own root): ${nodes}x${perNode} ranks`, async () => {
        const cs = await world(nodes, perNode);
        const n = cs.length;
        const os = await outcomes(cs, (c, r) => {
          const root = (r + 1) % n;
          const x = new Float32Array(16).fill(r + 1);
          const whole = new Float32Array(16 * n).fill(r + 1);
          if (name === 'broadcast') return c.broadcast(x, { root });
          if (name === 'reduce') return c.reduce(x, { root });
          if (name === 'gather') return c.gather(whole, x, { root });
          return c.scatter(x, whole, { root });
        });
        expectMismatch(os, 'root');
      }, 60_000);
    }
  }

  it('allReduce with another algorithm per rank (ring, doubling) on 2 ranks', async () => {
    const cs = await world(2, 1);
    const os = await outcomes(cs, (c, r) => c.allReduce(new Float32Array(64), { algo: r === 0 ? 'ring' : 'doubling' }));
    expectNamedMismatch(os, 'algorithm', ['doubling', 'ring']);
  });

  it('allReduce, hierarchical on one node and ring on the other (2x2)', async () => {
    const cs = await world(2, 2);
    const os = await outcomes(cs, (c, r) =>
      c.allReduce(new Float32Array(1 << 16), { algo: r < 2 ? 'hierarchical' : 'ring' }),
    );
    expectNamedMismatch(os, 'algorithm', ['hierarchical', 'ring']);
  });

  it('allReduce with another reduction on one of 3 ranks: every rank names the op, sum and max', async () => {
    const cs = await world(3, 1);
    const os = await outcomes(cs, (c, r) => c.allReduce(new Float32Array(64), { op: r === 2 ? 'max' : 'sum' }));
    expectNamedMismatch(os, 'op', ['max', 'sum']);
  });

  it('a rank that issues a broadcast the others do not: it fails, and they fail on their next op', async () => {
    const cs = await world(2, 1);
    const os = await outcomes(cs, (c, r) =>
      r === 0 ? c.broadcast(new Float32Array(4), { root: 0 }) : c.allReduce(new Float32Array(4)),
    );
    for (const o of os) expect(o.code).toBe('MISMATCH');
  });
});

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

describe('across processes (webccl run --procs, --nnodes)', () => {
  const every = (n: number) => Array.from({ length: n }, (_, k) => k);

  /** Each of `ranks` printed a MISMATCH naming `field`; no launcher hung. */
  const expectFaults = (rs: Run[], ranks: number[], field: string) => {
    const fs = faultsIn(rs.map((r) => r.stdout).join(''));
    for (const r of ranks) {
      const f = fs.get(r);
      expect(
        { rank: r, code: f?.code, field: f?.details.field },
        f?.message ?? rs.map((x) => x.stderr).join('\n'),
      ).toEqual({ rank: r, code: 'MISMATCH', field });
    }
    for (const r of rs) expect(r.hung).toBe(false);
  };

  describe('a broadcast whose ranks name different roots fails with MISMATCH on every rank', () => {
    it.each([
      ['--procs -n 2, 64 bytes', 'procs', 2, 64],
      [`--procs -n 2, ${16 << 20} bytes`, 'procs', 2, 16 << 20],
      ['--procs -n 4, 64 bytes', 'procs', 4, 64],
      [`--procs -n 4, ${16 << 20} bytes`, 'procs', 4, 16 << 20],
      ['--nnodes 2 --nproc-per-node 2, 16 MiB', 'nnodes', 4, 16 << 20],
    ] as const)(
      '%s',
      async (_, form, n, bytes) => {
        const rs = await launch(form, n, ['roots', String(bytes)]);
        const out = rs.map((r) => r.stdout).join('');
        expect(out).not.toMatch(/^completed/m);
        expect([...faultsIn(out).keys()].sort(), rs.map((r) => r.stderr).join('\n')).toEqual(every(n));
        expectFaults(rs, every(n), 'root');
        for (const [, f] of faultsIn(out)) {
          expect(f.message).toMatch(/disagree on the root of op #\d+: rank \d has \d, rank \d has \d/);
        }
        for (const r of rs) expect({ code: r.code, hung: r.hung }).toEqual({ code: 1, hung: false });
        await expectNoneLeft(...rs);
      },
      60_000,
    );
  });

  it.each([
    ['broadcast', 'procs', 2],
    ['scatter', 'procs', 2],
    ['broadcast', 'procs', 3],
    ['broadcast', 'nnodes', 4],
  ] as const)(
    '%s with each rank naming the next as root, --%s on %i ranks: MISMATCH at once, no deadline',
    async (op, form, n) => {
      const rs = await launch(form, n, ['next-roots', op, '4096']);
      expect(rs.map((r) => r.stdout).join('')).not.toMatch(/^completed/m);
      expectFaults(rs, every(n), 'root');
      await expectNoneLeft(...rs);
    },
    60_000,
  );

  describe('gather, scatter and allToAll whose ranks disagree fail with MISMATCH', () => {
    for (const [mode, n, bytes] of [
      ['gather-roots', 2, 64],
      ['gather-roots', 4, 4 << 20],
      ['scatter-roots', 3, 64],
      ['scatter-roots', 4, 4 << 20],
    ] as const) {
      it(`${mode}, --procs -n ${n}, ${bytes} bytes: every rank`, async () => {
        const rs = await launch('procs', n, [mode, String(bytes)]);
        expect(rs[0].stdout).not.toMatch(/^completed/m);
        expectFaults(rs, every(n), 'root');
        await expectNoneLeft(...rs);
      }, 60_000);
    }

    it('allToAll, rank 1 expects less from rank 0 than it sends, --procs -n 3: both fail naming the counts', async () => {
      const rs = await launch('procs', 3, ['counts', String(1 << 20)]);
      expectFaults(rs, [0, 1], 'counts');
      expect(faultsIn(rs[0].stdout).get(1)?.details.values).toEqual([
        `sendCounts[1]=${(1 << 18) + 1}`,
        `recvCounts[0]=${1 << 18}`,
      ]);
      await expectNoneLeft(...rs);
    }, 60_000);

    it('gather-roots and counts on --nnodes 2 --nproc-per-node 2', async () => {
      const rs = await launch('nnodes', 4, ['gather-roots', String(1 << 20)]);
      expectFaults(rs, [0, 1, 2, 3], 'root');
      const cs = await launch('nnodes', 4, ['counts', '64']);
      expectFaults(cs, [0, 1], 'counts');
      await expectNoneLeft(...rs, ...cs);
    }, 90_000);
  });
});
