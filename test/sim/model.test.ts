// The simulated network's model: times equal their α-β closed forms on an uncontended topology,
// links carry one message at a time per direction, the same seed gives the same trace, faults
// end every rank's part with the engine's coded error at virtual time (never a hang), and bad
// options are refused.
import { describe, expect, it } from 'vitest';
import { treeLinks } from '../../src/algorithms/tree.js';
import { type Fault, type SimOptions, simulate, simulateCollective } from '../../src/sim/index.js';
import { Network } from '../../src/sim/network.js';

const A = 5;
const B = 3125; // 25 Gbit/s in bytes per µs
const flat = (ranks: number, extra: Partial<SimOptions> = {}): SimOptions => ({
  ranks,
  nodes: ranks,
  mode: 'size',
  inter: { latencyUs: A, bytesPerUs: B },
  intra: { latencyUs: 1, bytesPerUs: 50000 },
  ...extra,
});
const states = (r: { outcomes: { state: string }[] }) => r.outcomes.map((o) => o.state);

describe('closed forms on an uncontended topology (one rank per node)', () => {
  it('ring allreduce takes 2(n−1)(α + S/(nβ)) while a block fits one piece', async () => {
    for (const n of [2, 3, 8, 17]) {
      const count = n * 1024; // f32: blocks of 4 KiB
      const r = await simulateCollective(flat(n), { collective: 'allreduce', algo: 'ring', count });
      expect(r.timeUs).toBeCloseTo(2 * (n - 1) * (A + (count * 4) / n / B), 6);
    }
  });

  it("a per-message overhead o adds to every step: ring 2(n−1)(o + α + S/(nβ)); a rank's messages leave o apart", async () => {
    const n = 8;
    const count = n * 1024;
    const r = await simulateCollective(flat(n, { overheadUs: 50 }), { collective: 'allreduce', algo: 'ring', count });
    expect(r.timeUs).toBeCloseTo(2 * (n - 1) * (50 + A + (count * 4) / n / B), 6);
    const two = await simulate(flat(3, { overheadUs: 10, trace: true }), async (s) => {
      const g = s.group(0);
      if (s.rank === 0) await Promise.all([g.send(1, 0, new Uint8Array(0)), g.send(2, 0, new Uint8Array(0))]);
      else await g.recv(0, 0, new Uint8Array(0));
    });
    expect(two.trace!.map((m) => m.arriveUs)).toEqual([10 + A, 20 + A]);
    await expect(
      simulateCollective(flat(2, { overheadUs: -1 }), { collective: 'allreduce', count: 1 }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('recursive doubling takes log2(n)(α + S/β) over a power of two', async () => {
    const S = 64 * 1024;
    for (const [n, steps] of [
      [2, 1],
      [8, 3],
      [64, 6],
    ]) {
      const r = await simulateCollective(flat(n), { collective: 'allreduce', algo: 'doubling', count: S / 4 });
      expect(r.timeUs).toBeCloseTo(steps * (A + S / B), 6);
    }
  });

  it('links inside a node: each directed pair carries one message at a time, also in nodes too large for the array of their links (2,049 and 65,536 ranks, whose array would take 32 GiB: a map)', () => {
    const S = 64 * 1024;
    const w = S / B;
    for (const ranks of [8, 2049, 65536]) {
      const net = new Network(
        { ranks, nodes: 1, inter: { latencyUs: 1, bytesPerUs: 1 }, intra: { latencyUs: A, bytesPerUs: B } },
        0,
        1,
        [],
      );
      expect([net.inside(0, 0, 1, S, 0), net.inside(0, 0, 1, S, 0)].map((t) => t - A)).toEqual([w, 2 * w]);
      expect(net.inside(0, 2, 1, S, 0) - A).toBe(w); // another link into rank 1
      expect(net.inside(0, 1, 0, S, 0) - A).toBe(w); // the other direction
      // free again once the two have crossed: starts at once
      expect(net.inside(3 * w, 0, 1, S, 0) - A).toBeCloseTo(4 * w, 9);
      expect(net.inside(0, ranks - 1, ranks - 2, S, 0) - A).toBe(w); // the last pair of the node
    }
  });

  it('chain broadcast of one piece takes (n−1)(α + S/β) + α (the last rank acks the root; of 2 ranks, at its start: α + S/β)', async () => {
    for (const n of [2, 5, 32]) {
      const r = await simulateCollective(flat(n), { collective: 'broadcast', count: 1000, root: 1 });
      expect(r.timeUs).toBeCloseTo((n - 1) * (A + 4000 / B) + (n === 2 ? 0 : A), 6);
    }
  });

  it('tree allreduce of a small message takes 2·depth·α, depth ≤ log2(n) + 1: latency grows as log n', async () => {
    // Levels below the root of the in-order tree over [lo, hi) (its root is the middle).
    const below = (lo: number, hi: number): number => {
      if (hi - lo <= 1) return 0;
      const mid = (lo + hi) >> 1;
      return 1 + Math.max(lo < mid ? below(lo, mid) : -1, mid + 1 < hi ? below(mid + 1, hi) : -1);
    };
    const depth = (n: number) => below(0, n);
    for (const n of [2, 7, 64, 1000, 4096]) {
      const r = await simulateCollective(flat(n), { collective: 'allreduce', algo: 'tree', count: 0 });
      expect(depth(n)).toBeLessThanOrEqual(Math.log2(n) + 1);
      expect(r.timeUs).toBeCloseTo(2 * depth(n) * A, 6);
    }
    const ring = await simulateCollective(flat(200), { collective: 'allreduce', algo: 'ring', count: 0 });
    expect(ring.timeUs).toBeCloseTo(2 * 199 * A, 6);
  }, 60_000);
});

describe('the double binary tree', () => {
  it('each tree spans every rank once, and a rank forwards in at most one tree when n = 2^k − 1', () => {
    const bad: string[] = [];
    for (let n = 1; n <= 300; n++) {
      for (const t of [0, 1] as const) {
        const parents = Array.from({ length: n }, (_, r) => treeLinks(n, r, t).parent);
        if (parents.filter((p) => p < 0).length !== 1) bad.push(`n ${n} tree ${t}: not one root`);
        // Every child is listed by its parent, and every rank reaches the root.
        for (let r = 0; r < n; r++) {
          if (parents[r] >= 0 && !treeLinks(n, parents[r], t).children.includes(r))
            bad.push(`n ${n} tree ${t}: ${r} not a child of ${parents[r]}`);
          let q = r;
          for (let hops = 0; parents[q] >= 0 && hops <= n; hops++) q = parents[q];
          if (parents[q] >= 0) bad.push(`n ${n} tree ${t}: ${r} never reaches the root`);
        }
      }
      if (Number.isInteger(Math.log2(n + 1))) {
        for (let r = 0; r < n; r++)
          if (treeLinks(n, r, 0).children.length && treeLinks(n, r, 1).children.length)
            bad.push(`n ${n}: ${r} forwards in both trees`);
      }
    }
    expect(bad).toEqual([]);
  });
});

describe('links', () => {
  it('a node interface carries one message at a time each way; pairs inside a node do not wait for each other', async () => {
    const o: SimOptions = {
      ranks: 4,
      nodes: 2,
      mode: 'size',
      trace: true,
      inter: { latencyUs: 5, bytesPerUs: 1000 },
      intra: { latencyUs: 1, bytesPerUs: 1000 },
    };
    const across = await simulate(o, async (s) => {
      const g = s.group(0);
      const b = new Uint8Array(1000);
      if (s.rank < 2) await g.send(s.rank + 2, 0, b);
      else await g.recv(s.rank - 2, 0, b);
    });
    expect(across.trace!.map((m) => m.arriveUs)).toEqual([6, 7]);
    const inside = await simulate(o, async (s) => {
      const g = s.group(0);
      const b = new Uint8Array(1000);
      if (s.rank % 2 === 0) await g.send(s.rank + 1, 0, b);
      else await g.recv(s.rank - 1, 0, b);
    });
    expect(inside.trace!.map((m) => m.arriveUs)).toEqual([2, 2]);
  });
});

describe('determinism', () => {
  const jittery = (seed: number) => ({ ...flat(12, { nodes: 3, jitter: 0.5, seed, trace: true }) });
  it('the same seed gives the same trace; another seed another', async () => {
    const call = { collective: 'allreduce' as const, algo: 'ring', count: 3 << 20 };
    const a = await simulateCollective(jittery(7), call);
    const b = await simulateCollective(jittery(7), call);
    const c = await simulateCollective(jittery(8), call);
    expect(a.trace!.length).toBeGreaterThan(100);
    expect(b.trace).toEqual(a.trace);
    expect(b.traceHash).toBe(a.traceHash);
    expect(b.timeUs).toBe(a.timeUs);
    expect(c.traceHash).not.toBe(a.traceHash);
    const still = await simulateCollective({ ...jittery(7), jitter: 0 }, call);
    expect(a.timeUs).toBeGreaterThan(still.timeUs);
  });
});

describe('faults', () => {
  const eight = (faults: Fault[], mode: 'size' | 'data' = 'size') =>
    flat(8, { nodes: 4, faults, timeoutUs: 2e6, mode });
  const big = { collective: 'allreduce' as const, algo: 'ring', count: 1 << 20 };

  it('a rank that stops mid-op: every other rank fails with TIMEOUT naming it, at the virtual deadline', async () => {
    const r = await simulateCollective(eight([{ kind: 'stop', rank: 3, atUs: 50 }]), big);
    expect(r.outcomes[3].state).toBe('stopped');
    for (const o of r.outcomes.filter((x) => x.rank !== 3)) {
      expect(o.state).toBe('failed');
      expect(o.error).toMatchObject({ code: 'TIMEOUT', details: { missing: [3] } });
      expect(o.atUs).toBe(2e6);
    }
  });

  it('every schedule: each rank completes or fails with TIMEOUT naming the stopped rank', async () => {
    const calls = [
      ...['ring', 'doubling', 'tree', 'hierarchical'].map((algo) => ({
        collective: 'allreduce' as const,
        algo,
        count: 1 << 20,
      })),
      { collective: 'broadcast' as const, count: 1 << 20 },
      { collective: 'reduce' as const, count: 1 << 20 },
      { collective: 'allgather' as const, count: 1 << 17 },
      { collective: 'reducescatter' as const, count: 1 << 17 },
      { collective: 'alltoall' as const, count: 1 << 17 },
      { collective: 'gather' as const, count: 1 << 17, root: 2 },
      { collective: 'scatter' as const, count: 1 << 17, root: 2 },
      { collective: 'barrier' as const, count: 0 },
    ];
    for (const call of calls) {
      const r = await simulateCollective(eight([{ kind: 'stop', rank: 5, atUs: 3 }]), call);
      const others = r.outcomes.filter((x) => x.rank !== 5);
      // allToAll, gather and scatter send all rank 5 owes at its start: the others may complete.
      if (!['alltoall', 'gather', 'scatter'].includes(call.collective))
        expect(others.some((o) => o.state === 'failed')).toBe(true);
      for (const o of others)
        if (o.state !== 'done') expect(o.error).toMatchObject({ code: 'TIMEOUT', details: { missing: [5] } });
    }
  });

  it('a rank that dies: every rank still in the op fails with CONNECTION_CLOSED naming it', async () => {
    const r = await simulateCollective(eight([{ kind: 'crash', rank: 6, atUs: 40 }]), big);
    expect(r.outcomes[6].state).toBe('stopped');
    for (const o of r.outcomes.filter((x) => x.rank !== 6))
      expect(o.error).toMatchObject({ code: 'CONNECTION_CLOSED', details: { peer: 6 } });
  });

  it('a dropped connection: both ends name each other, the others hear an ABORT from one of them', async () => {
    const r = await simulateCollective(eight([{ kind: 'drop', ranks: [1, 2], atUs: 40 }]), big);
    expect(r.outcomes[1].error).toMatchObject({ code: 'CONNECTION_CLOSED', details: { peer: 2 } });
    expect(r.outcomes[2].error).toMatchObject({ code: 'CONNECTION_CLOSED', details: { peer: 1 } });
    for (const o of r.outcomes.filter((x) => x.rank !== 1 && x.rank !== 2)) {
      expect(o.error?.code).toBe('ABORTED');
      expect([1, 2]).toContain(o.error?.details.by);
    }
  });

  it('a slow link only slows the op: results stay right', async () => {
    const sums: number[][] = [];
    const hooks = {
      input: (r: number, x: Float64Array | Float32Array | Int32Array) => x.fill(r),
      output: (r: number, x: Float64Array | Float32Array | Int32Array) => (sums[r] = [...x]),
    };
    const call = { collective: 'allreduce' as const, algo: 'ring', count: 4096, dtype: 'i32' as const };
    const fast = await simulateCollective(eight([], 'data'), call, hooks);
    const slow = await simulateCollective(eight([{ kind: 'slow', ranks: [3, 4], factor: 10 }], 'data'), call, hooks);
    expect(slow.timeUs).toBeGreaterThan(fast.timeUs * 2);
    expect(sums.every((s) => s.length === 4096 && s.every((v) => v === 28))).toBe(true);
  });

  it('a receive nothing answers ends at the deadline naming whom it awaits (no hang); a wrong length is MISMATCH', async () => {
    const r = await simulate(flat(3, { timeoutUs: 1000 }), async (s) => {
      if (s.rank === 0) await s.group(0).recv(2, 0, new Uint8Array(4));
    });
    expect(states(r)).toEqual(['failed', 'done', 'done']);
    expect(r.outcomes[0]).toMatchObject({
      atUs: 1000,
      error: { code: 'TIMEOUT', details: { awaited: [2], missing: [2] } },
    });
    const m = await simulate(flat(2), async (s) => {
      const g = s.group(0);
      if (s.rank === 0) await g.send(1, 0, new Uint8Array(4));
      else await g.recv(0, 0, new Uint8Array(8));
    });
    expect(m.outcomes[1].error).toMatchObject({ code: 'MISMATCH', details: { peer: 0, bytes: 4, expected: 8 } });
    const twice = await simulate(flat(2), async (s) => {
      const g = s.group(0);
      if (s.rank === 0) await Promise.all([g.send(1, 3, new Uint8Array(4)), g.send(1, 3, new Uint8Array(4))]);
      else await new Promise<void>(() => undefined);
    });
    expect(twice.outcomes[1].error).toMatchObject({ code: 'MISMATCH', details: { peer: 0 } });
  });
});

describe('options refused', () => {
  it.each([
    [{ ranks: 0 }, 'ranks'],
    [{ ranks: 8, nodes: 3 }, 'nodes'],
    [{ inter: { latencyUs: -1, bytesPerUs: 1 } }, 'latency'],
    [{ intra: { latencyUs: 1, bytesPerUs: 0 } }, 'bandwidth'],
    [{ jitter: -0.1 }, 'jitter'],
    [{ faults: [{ kind: 'stop', rank: 9, atUs: 0 }] }, 'fault'],
    [{ faults: [{ kind: 'drop', ranks: [1, 1], atUs: 0 }] }, 'fault'],
  ] as [Partial<SimOptions>, string][])('%j', async (bad) => {
    await expect(
      simulateCollective({ ...flat(8), ...bad }, { collective: 'allreduce', count: 8 }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
  it('unknown algorithm, negative count, root out of range, data mode without hooks', async () => {
    for (const call of [
      { algo: 'tree', collective: 'allgather' },
      { count: -1 },
      { collective: 'broadcast', root: 8 },
      { collective: 'nope' },
    ]) {
      await expect(
        simulateCollective(flat(8), { collective: 'allreduce', count: 8, ...call } as never),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    await expect(
      simulateCollective(flat(8, { mode: 'data' }), { collective: 'allreduce', count: 8 }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('tree pipeline', () => {
  it('a mid-size buffer streams in pieces down the trees: far faster than crossing each hop whole', async () => {
    const S = 1 << 20;
    const r = await simulateCollective(flat(512), { collective: 'allreduce', algo: 'tree', count: S / 4 });
    // Whole halves hop by hop would take 2·depth·(α + S/(2β)) = 18·(5 + 167.8) µs ≈ 3.1 ms.
    expect(r.timeUs).toBeLessThan(0.5 * 18 * (A + S / 2 / B));
  });
});
