// Every network schedule over the simulated network, in data mode: results against closed
// forms at 1..1,024 virtual ranks (primes and non-powers of two among them), counts 0, 1, fewer
// elements than ranks, and counts that do not divide; all four reductions; i32, f32 and f64.
import { describe, expect, it } from 'vitest';
import { SIM_ALGORITHMS, type SimCall, type SimCollective, simulateCollective } from '../../src/sim/collectives.js';
import type { SimDtype, SimOp } from '../../src/sim/memory.js';

/** Rank r's element i: small integers of both signs, so every sum and order is exact. */
const value = (r: number, i: number) => ((r * 31 + i * 17) % 13) - 6;
const combine: Record<SimOp, (a: number, b: number) => number> = {
  sum: (a, b) => a + b,
  prod: Math.imul,
  min: Math.min,
  max: Math.max,
};

/** nodes for n ranks: several ranks per node where n allows, so hierarchical has two levels. */
const nodesFor = (n: number) =>
  n % 8 === 0 && n > 8 ? n / 8 : n % 4 === 0 && n > 4 ? n / 4 : n % 2 === 0 && n > 2 ? n / 2 : n % 3 === 0 ? 1 : n;
const net = (ranks: number) => ({
  ranks,
  nodes: nodesFor(ranks),
  mode: 'data' as const,
  inter: { latencyUs: 5, bytesPerUs: 3125 },
  intra: { latencyUs: 1, bytesPerUs: 50000 },
});

/** Runs `call` on n virtual ranks and returns a description of every wrong element (at most 5). */
async function wrongs(n: number, call: SimCall): Promise<string[]> {
  const { collective: coll, count: c, root = 0 } = call;
  const op = call.op ?? 'sum';
  const memo = new Map<number, number>();
  const reduced = (i: number) => {
    let acc = memo.get(i);
    if (acc !== undefined) return acc;
    acc = value(0, i);
    for (let r = 1; r < n; r++) acc = combine[op](acc, value(r, i));
    memo.set(i, acc);
    return acc;
  };
  const want = (rank: number, i: number): number => {
    switch (coll) {
      case 'allreduce':
      case 'reduce':
        return reduced(i);
      case 'broadcast':
        return value(root, i);
      case 'allgather':
        return value(Math.floor(i / c), i % c);
      case 'reducescatter':
        return reduced(rank * c + i);
      case 'alltoall':
        return value(Math.floor(i / c), rank * c + (i % c));
      case 'gather':
        return value(Math.floor(i / c), i % c);
      case 'scatter':
        return value(root, rank * c + i);
      case 'sendrecv':
        return value((rank + n - 1) % n, i);
      default:
        return NaN;
    }
  };
  const bad: string[] = [];
  const seen = new Set<number>();
  const res = await simulateCollective(net(n), call, {
    input: (rank, x) => x.forEach((_, i) => (x[i] = value(rank, i))),
    output: (rank, x) => {
      seen.add(rank);
      const len = coll === 'allgather' || coll === 'alltoall' || (coll === 'gather' && rank === root) ? c * n : c;
      if (x.length !== len) bad.push(`rank ${rank}: ${x.length} elements, expected ${len}`);
      for (let i = 0; i < x.length && bad.length < 5; i++) {
        const w = want(rank, i);
        if (x[i] !== w) bad.push(`rank ${rank} element ${i}: ${x[i]}, expected ${w}`);
      }
    },
  });
  const failed = res.outcomes.filter((o) => o.state !== 'done');
  if (failed.length) bad.push(`${failed.length} ranks did not finish: ${failed[0].error?.message ?? failed[0].state}`);
  const outputs = coll === 'reduce' || coll === 'gather' ? 1 : coll === 'barrier' ? 0 : n;
  if (seen.size !== outputs) bad.push(`${seen.size} ranks produced a result, expected ${outputs}`);
  return bad;
}

const RANKS = [1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16, 31, 64];
const countsFor = (n: number) => [...new Set([0, 1, Math.max(0, n - 1), 3 * n + 2])];
const OPS: [SimDtype, SimOp][] = [
  ['i32', 'sum'],
  ['f64', 'max'],
  ['i32', 'prod'],
  ['f32', 'min'],
];
const COLLECTIVES: SimCollective[] = [
  'allreduce',
  'reducescatter',
  'allgather',
  'broadcast',
  'reduce',
  'alltoall',
  'gather',
  'scatter',
  'sendrecv',
  'barrier',
];

describe('every schedule over the simulated network, data mode', () => {
  for (const coll of COLLECTIVES) {
    for (const algo of SIM_ALGORITHMS[coll]) {
      it(`${coll} ${algo} at ${RANKS.join(', ')} ranks`, async () => {
        const bad: string[] = [];
        // sendrecv needs a peer other than itself (refused at 1 rank: the test below).
        for (const n of RANKS.filter((r) => coll !== 'sendrecv' || r > 1)) {
          for (const count of countsFor(n)) {
            const [dtype, op] = OPS[(n + count) % OPS.length];
            const call = {
              collective: coll,
              algo,
              count,
              dtype,
              op,
              root: ['broadcast', 'reduce', 'gather', 'scatter'].includes(coll) ? (count * 7) % n : 0,
            };
            for (const w of await wrongs(n, call)) bad.push(`${n} ranks, count ${count}, ${dtype} ${op}: ${w}`);
          }
        }
        expect(bad).toEqual([]);
      }, 60_000);
    }
  }

  // The logarithmic schedules (and the pipelined chain) at hundreds of ranks; the rings, whose
  // message count grows as n², once each at 100 and 257 ranks and allreduce at 1,024.
  const big: [SimCollective, string, number[], number[]][] = [
    ['allreduce', 'tree', [100, 257, 1024], [0, 1, 1000, 2500]],
    // Halves of several pieces (512 KiB, and 64 KiB ones filling the pipeline), and the ring's lanes.
    ['allreduce', 'tree', [5, 12], [40_000, 300_001]],
    ['allreduce', 'ring', [3, 6], [600_001]],
    ['allreduce', 'doubling', [100, 257, 1024], [1, 1000]],
    ['allreduce', 'hierarchical', [100, 256, 1024], [1, 1000]],
    ['broadcast', 'chain', [257, 1024], [1, 999]],
    ['reduce', 'chain', [257, 1024], [1, 999]],
    ['barrier', 'dissemination', [257, 1024], [0]],
    ['allreduce', 'ring', [100, 257, 1024], [1000]],
    ['allgather', 'ring', [100, 257], [3]],
    ['reducescatter', 'ring', [100, 257], [3]],
    ['alltoall', 'pairwise', [100, 257], [0, 3]],
    ['gather', 'direct', [257, 1024], [0, 2]],
    ['scatter', 'direct', [257, 1024], [0, 2]],
    ['sendrecv', 'p2p', [257, 1024], [0, 2]],
  ];
  for (const [coll, algo, ranks, counts] of big) {
    it(`${coll} ${algo} at ${ranks.join(', ')} ranks`, async () => {
      const bad: string[] = [];
      for (const n of ranks)
        for (const count of counts) {
          for (const w of await wrongs(n, {
            collective: coll,
            algo,
            count,
            dtype: 'i32',
            op: 'sum',
            root: coll === 'barrier' ? 0 : n >> 1,
          }))
            bad.push(`${n} ranks, count ${count}: ${w}`);
        }
      expect(bad).toEqual([]);
    }, 120_000);
  }

  it('sendrecv on one rank is refused (a rank is never its own peer), as webccl perf refuses it', async () => {
    await expect(wrongs(1, { collective: 'sendrecv', count: 4 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it("sendrecv: the data, then the receiver's 8-byte answer, per rank (the engine's send/recv protocol)", async () => {
    const r = await simulateCollective({ ...net(6), mode: 'size' }, { collective: 'sendrecv', count: 100 });
    expect(r.messages).toBe(12);
    expect(r.bytes).toBe(6 * (400 + 8));
  });

  it('allreduce with no algorithm named runs what the engine would pick', async () => {
    for (const n of [4, 16])
      for (const count of [5, 300_000])
        expect(await wrongs(n, { collective: 'allreduce', count, dtype: 'f32' })).toEqual([]);
  }, 60_000);
});
