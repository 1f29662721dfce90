// Which allReduce algorithm runs: call option > communicator option > WEBCCL_ALGO > size.
import { afterEach, expect, it } from 'vitest';
import { chooseAllReduceAlgo, chunkElems, directMaxBytes, resolveTuning } from '../src/tuner/tuner.js';
import { inprocRanks, together } from './helpers/inproc.js';

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
  process.env.WEBCCL_ALGO = 'ring';
  expect(() => resolveTuning(2)).toThrow(/WEBCCL_ALGO: unknown algorithm "ring"/);
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
});

it('cuts chunks to whole cache lines that fit a slot', () => {
  expect(chunkElems('allReduce', 4096, 4, 2)).toBe(1024);
  expect(chunkElems('reduceScatter', 4096, 4, 3)).toBe(336); // 1365 rounded down to 16s
  expect(chunkElems('reduceScatter', 4096, 8, 64)).toBe(8);
});
