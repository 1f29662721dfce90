// The ring allReduce in pieces other than 512 KiB, in this process over TCP loopback: with
// WEBCCL_PIECE_BYTES=4096 a block of a few thousand floats is many pieces in four lanes, with
// counts that divide by neither the ranks nor the piece, flat (3 nodes) and as the network phase
// of hierarchical (2 nodes × 2), in place and out of place; a bad value fails the communicator.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import { all, destroyAll, netRanks } from '../helpers/net-world.js';

const saved = process.env.WEBCCL_PIECE_BYTES;
const restore = () => {
  if (saved === undefined) delete process.env.WEBCCL_PIECE_BYTES;
  else process.env.WEBCCL_PIECE_BYTES = saved;
};

describe.each([
  [3, 1, 'ring'],
  [2, 2, 'hierarchical'],
] as const)('WEBCCL_PIECE_BYTES=4096, %i node(s) × %i rank(s), %s', (nodes, perNode, algo) => {
  let cs: Communicator[] = [];
  afterAll(() => destroyAll(cs));

  it('allReduce sum (f32) and max (i32), in place and out of place: every element right', async () => {
    process.env.WEBCCL_PIECE_BYTES = '4096';
    try {
      cs = await netRanks(nodes, perNode);
    } finally {
      restore(); // read when the communicator is made
    }
    const n = nodes * perNode;
    for (const count of [0, 1, 1001, 30_011, 300_007]) {
      for (const outOfPlace of [false, true]) {
        const xs = cs.map((_, r) => Float32Array.from({ length: count }, (_, i) => (i % 11) + r));
        const outs = cs.map(() => new Float32Array(count));
        await all(cs, (c, r) => c.allReduce(xs[r], { algo, ...(outOfPlace ? { out: outs[r] } : {}) }));
        for (let r = 0; r < n; r++) {
          const got = outOfPlace ? outs[r] : xs[r];
          const bad = got.findIndex((v, i) => v !== n * (i % 11) + (n * (n - 1)) / 2);
          expect(bad, `${count} floats, rank ${r}, ${outOfPlace ? 'out of place' : 'in place'}: element ${bad}`).toBe(
            -1,
          );
        }
        const ys = cs.map((_, r) => Int32Array.from({ length: count }, (_, i) => ((i * 7 + r * 13) % 101) - 50));
        await all(cs, (c, r) => c.allReduce(ys[r], { op: 'max', algo }));
        for (let r = 0; r < n; r++) {
          const bad = ys[r].findIndex((v, i) => v !== Math.max(...cs.map((_, q) => ((i * 7 + q * 13) % 101) - 50)));
          expect(bad, `${count} ints max, rank ${r}: element ${bad}`).toBe(-1);
        }
      }
    }
  });
});

describe('a bad WEBCCL_PIECE_BYTES', () => {
  afterEach(restore);
  it('fails every rank at communicator creation with INVALID_ARGUMENT naming it', async () => {
    process.env.WEBCCL_PIECE_BYTES = '1000';
    const err = await netRanks(2, 1, { timeoutMs: 10_000 }).then(destroyAll, (e) => e);
    expect(err?.code).toBe('INVALID_ARGUMENT');
    expect(err?.message).toContain('WEBCCL_PIECE_BYTES=1000');
  });
});
