// Which allReduce algorithm runs: call option > communicator option > WEBCCL_ALGO > size.
import { afterEach, expect, it } from 'vitest';
import { chooseNetAllReduce, doublingMaxBytes, resolveNetAlgo } from '../../src/tuner/net-tuner.js';
import { chooseAllReduceAlgo, chunkElems, directMaxBytes, resolveTuning } from '../../src/tuner/tuner.js';
import { inprocRanks, together } from '../helpers/inproc.js';

afterEach(() => {
  delete process.env.WEBCCL_ALGO;
  delete process.env.WEBCCL_DIRECT_MAX_BYTES;
});

it('picks direct for small messages and twoshot for large ones', () => {
  const t = resolveTuning(2);
  expect(chooseAllReduceAlgo(8, t)).toBe('direct');
  expect(chooseAllReduceAlgo(directMaxBytes(2), t)).toBe('direct');
  expect(chooseAllReduceAlgo(directMaxBytes(2) + 1, t)).toBe('twoshot');
  expect(directMaxBytes(8)).toBeGreaterThan(0);
});

it('honours the call, then the communicator, then WEBCCL_ALGO', () => {
  process.env.WEBCCL_ALGO = 'twoshot';
  expect(chooseAllReduceAlgo(8, resolveTuning(2))).toBe('twoshot');
  expect(chooseAllReduceAlgo(8, resolveTuning(2, 'direct'))).toBe('direct');
  expect(chooseAllReduceAlgo(1 << 30, resolveTuning(2, 'twoshot'), 'direct')).toBe('direct');
  process.env.WEBCCL_ALGO = 'bogus';
  expect(() => resolveTuning(2)).toThrow(/WEBCCL_ALGO: unknown algorithm "bogus"/);
  process.env.WEBCCL_ALGO = 'ring'; // a network algorithm: for communicators across nodes, not this one
  expect(resolveTuning(2).algo).toBeUndefined();
  delete process.env.WEBCCL_ALGO;
  process.env.WEBCCL_DIRECT_MAX_BYTES = '0';
  expect(chooseAllReduceAlgo(8, resolveTuning(2))).toBe('twoshot');
});

it('reports what ran in stats()', async () => {
  process.env.WEBCCL_ALGO = 'twoshot';
  const cs = inprocRanks(2);
  await together(cs, (c) => c.allReduce(new Float32Array(4)));
  await together(cs, (c) => c.allReduce(new Float32Array(4), { algo: 'direct' }));
  expect(cs[0].stats().allReduceAlgorithms).toEqual({ direct: 1, twoshot: 1 });
  expect(cs[1].stats()).toMatchObject({ ops: 2, failed: 0, pending: 0, bytes: 32 });
  // Busy time splits into waiting for the peers and moving data, each non-negative.
  for (const c of cs) {
    const { busyMs, waitMs, moveMs } = c.stats();
    expect(waitMs).toBeGreaterThanOrEqual(0);
    expect(moveMs).toBeGreaterThanOrEqual(0);
    expect(waitMs + moveMs).toBeCloseTo(busyMs, 6);
  }
});

it('cuts chunks to whole cache lines that fit a slot', () => {
  expect(chunkElems('allReduce', 4096, 4, 2)).toBe(1024);
  expect(chunkElems('reduceScatter', 4096, 4, 3)).toBe(336); // 1365 rounded down to 16s
  expect(chunkElems('reduceScatter', 4096, 8, 64)).toBe(8);
  // allToAll and scatter stage a piece for each rank per slot; gather one chunk per rank
  expect(['allToAll', 'scatter', 'gather', 'allGather'].map((k) => chunkElems(k, 4096, 4, 3))).toEqual([
    336, 336, 1024, 1024,
  ]);
  expect(chunkElems('allToAll', 4096, 1, 64)).toBe(64);
});

it('across nodes: hierarchical when every node has several ranks, else doubling for small and ring for large', () => {
  const flat = { nodes: 4, perNode: 1 };
  const grid = { nodes: 2, perNode: 2 };
  const uneven = { nodes: 2, perNode: 0 };
  expect(chooseNetAllReduce(8, 4, flat, undefined)).toBe('doubling');
  expect(chooseNetAllReduce(doublingMaxBytes(4), 4, flat, undefined)).toBe('doubling');
  expect(chooseNetAllReduce(doublingMaxBytes(4) + 1, 4, flat, undefined)).toBe('ring');
  // even at 2 ranks the ring wins large messages: it reduces half what doubling does, in pieces
  expect(chooseNetAllReduce(64 << 20, 2, { nodes: 2, perNode: 1 }, undefined)).toBe('ring');
  expect(chooseNetAllReduce(8, 4, grid, undefined)).toBe('hierarchical');
  expect(chooseNetAllReduce(8, 4, uneven, undefined)).toBe('doubling');
  // call > communicator > WEBCCL_ALGO; a shared-memory name in WEBCCL_ALGO is left to the node phase
  expect(chooseNetAllReduce(8, 4, grid, 'ring', 'doubling')).toBe('doubling');
  process.env.WEBCCL_ALGO = 'ring';
  expect(resolveNetAlgo(undefined, grid)).toBe('ring');
  expect(resolveNetAlgo('doubling', grid)).toBe('doubling');
  process.env.WEBCCL_ALGO = 'direct';
  expect(resolveNetAlgo(undefined, grid)).toBeUndefined();
  expect(() => chooseNetAllReduce(8, 4, grid, undefined, 'direct')).toThrow(/expected ring, doubling, hierarchical/);
  expect(() => chooseNetAllReduce(8, 4, uneven, undefined, 'hierarchical')).toThrow(
    /same number of ranks on every node/,
  );
});
