// How many messages the network schedules cut a buffer into, counted on the simulated network
// (the same schedules the TCP engine runs): pieces where they pipeline something (a chain of
// several hops, a reduction to overlap), one message per 16 MiB where they pipeline nothing (a
// broadcast or an allgather between 2 ranks; the simulated network has one connection a pair,
// over several such data goes one piece a connection: lanes.test.ts); and the data arrives whole.
import { describe, expect, it } from 'vitest';
import { PIECE_BYTES, SINGLE_HOP_PIECE_BYTES } from '../../src/algorithms/group.js';
import { type SimOptions, simulateCollective } from '../../src/sim/index.js';

const flat = (ranks: number, mode: 'size' | 'data' = 'size'): SimOptions => ({
  ranks,
  nodes: ranks,
  mode,
  inter: { latencyUs: 5, bytesPerUs: 3125 },
  intra: { latencyUs: 1, bytesPerUs: 50000 },
});
const MiB = 1 << 20;
const pieces = (bytes: number, piece: number) => Math.max(1, Math.ceil(bytes / piece));

describe('pieces per message', () => {
  it('broadcast between 2 ranks: one message per 16 MiB (and the ack); across 3 ranks, 512 KiB pieces on each hop (and the ack, and a ready from each receiver)', async () => {
    for (const bytes of [4, PIECE_BYTES + 4, 32 * MiB, SINGLE_HOP_PIECE_BYTES + 4]) {
      const two = await simulateCollective(flat(2), { collective: 'broadcast', count: bytes / 4 });
      expect(two.messages).toBe(pieces(bytes, SINGLE_HOP_PIECE_BYTES) + 1);
      const three = await simulateCollective(flat(3), { collective: 'broadcast', count: bytes / 4 });
      expect(three.messages).toBe(2 * pieces(bytes, PIECE_BYTES) + 1 + 2);
    }
  });

  it('allgather between 2 ranks: each rank sends its block in 16 MiB messages; across 3 ranks, 512 KiB pieces', async () => {
    for (const bytes of [4, PIECE_BYTES + 4, 32 * MiB]) {
      const two = await simulateCollective(flat(2), { collective: 'allgather', count: bytes / 4 });
      expect(two.messages).toBe(2 * pieces(bytes, SINGLE_HOP_PIECE_BYTES));
      const three = await simulateCollective(flat(3), { collective: 'allgather', count: bytes / 4 });
      expect(three.messages).toBe(3 * 2 * pieces(bytes, PIECE_BYTES));
    }
  });

  it('allreduce and reduce between 2 ranks keep 512 KiB pieces (the reduction of one overlaps the transfer of the next)', async () => {
    const bytes = 32 * MiB;
    const ring = await simulateCollective(flat(2), { collective: 'allreduce', algo: 'ring', count: bytes / 4 });
    expect(ring.messages).toBe(2 * 2 * pieces(bytes / 2, PIECE_BYTES));
    const reduce = await simulateCollective(flat(2), { collective: 'reduce', count: bytes / 4 });
    expect(reduce.messages).toBe(pieces(bytes, PIECE_BYTES) + 1);
  });

  it('the data arrives whole in big pieces: broadcast and allgather of 16 MiB + 3 elements between 2 ranks, every element checked', async () => {
    const count = SINGLE_HOP_PIECE_BYTES / 4 + 3;
    const value = (r: number, i: number) => ((r * 31 + i * 17) % 13) - 6;
    for (const collective of ['broadcast', 'allgather'] as const) {
      let wrong = 0;
      let outputs = 0;
      const r = await simulateCollective(
        flat(2, 'data'),
        { collective, count, dtype: 'i32' },
        {
          input: (rank, x) => x.forEach((_, i) => (x[i] = value(rank, i))),
          output: (_rank, x) => {
            outputs++;
            for (let i = 0; i < x.length; i++) {
              const want = collective === 'broadcast' ? value(0, i) : value(Math.floor(i / count), i % count);
              if (x[i] !== want) wrong++;
            }
          },
        },
      );
      expect(r.outcomes.map((o) => o.state)).toEqual(['done', 'done']);
      expect([outputs, wrong]).toEqual([2, 0]);
    }
  });
});

describe('the ring allreduce in the piece size it is given (the tuner picks one per message)', () => {
  it('sends 2(n−1)·⌈block/piece⌉ messages per rank, and the data arrives whole', async () => {
    for (const [ranks, piece] of [
      [2, 2 * MiB],
      [3, 64 * 1024],
      [4, 4096],
    ] as const) {
      const count = (3 * 1024 * 1024) / 4 + 5; // 3 MiB + 5 floats: blocks that divide by neither
      const block = Math.ceil(count / ranks) * 4;
      const sized = await simulateCollective(flat(ranks), {
        collective: 'allreduce',
        algo: 'ring',
        count,
        pieceBytes: piece,
      });
      expect(sized.messages, `${ranks} ranks, ${piece}-byte pieces`).toBe(
        ranks * 2 * (ranks - 1) * pieces(block, piece),
      );
      let wrong = 0;
      await simulateCollective(
        flat(ranks, 'data'),
        { collective: 'allreduce', algo: 'ring', count: 10_007, dtype: 'i32', pieceBytes: piece },
        {
          input: (rank, x) => x.forEach((_, i) => (x[i] = (i % 9) + rank)),
          output: (_rank, x) =>
            x.forEach((v, i) => {
              if (v !== ranks * (i % 9) + (ranks * (ranks - 1)) / 2) wrong++;
            }),
        },
      );
      expect(wrong).toBe(0);
    }
  });
});
