// The ring allReduce's piece size from the cost model (src/tuner/ring-pieces.ts): the cost of
// each size against a closed form, the choice as the minimum of those costs, the cases that keep
// 512 KiB pieces, WEBCCL_PIECE_BYTES checked, and the ring's predicted time in the chosen pieces.
import { afterEach, describe, expect, it } from 'vitest';
import { PIECE_BYTES } from '../../src/algorithms/group.js';
import type { CostModel } from '../../src/tuner/cost-model.js';
import { predictUs } from '../../src/tuner/cost-model.js';
import { DEFAULT_MODEL } from '../../src/tuner/default-model.js';
import { flatPredictions } from '../../src/tuner/predict.js';
import { forcedPieceBytes, RING_PIECES, ringPieceBytes, ringPieceCosts } from '../../src/tuner/ring-pieces.js';
import { netCounts, onPath } from '../../src/tuner/schedules.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const M: CostModel = {
  ...DEFAULT_MODEL,
  tcp: { alphaUs: 0, wakeUs: 77.5, betaBytesPerUs: 2643, gammaBytesPerUs: 1926, messageUs: 83.1 },
};

describe('the cost of a piece size', () => {
  it('is 2(n−1)·p messages at o plus one round of lanes reduced per reduce step at γ, for 2 ranks on 2 cores', () => {
    const costs = ringPieceCosts(M, 2, 64 * MiB, 2, 2);
    const block = 32 * MiB;
    for (const { pieceBytes, us } of costs) {
      const p = Math.ceil(block / pieceBytes);
      expect(us).toBeCloseTo(2 * p * 83.1 + (Math.min(p, 4) * (block / p)) / 1926, 6);
    }
    // 64 KiB .. 4 MiB, every size giving at least four pieces of a 32 MiB block.
    expect(costs.map((c) => c.pieceBytes)).toEqual(RING_PIECES);
  });

  it('weighs one piece per block or four and more, never two or three (lanes left idle)', () => {
    for (const [n, bytes] of [
      [2, 12 * MiB],
      [3, 9 * MiB],
      [4, 4 * MiB],
      [2, 1 * MiB],
    ] as const) {
      const block = bytes / n;
      for (const { pieceBytes } of ringPieceCosts(M, n, bytes, n, 8)) {
        const p = Math.max(1, Math.ceil(block / pieceBytes));
        expect(p === 1 || p >= 4, `${n} ranks, ${bytes} bytes, ${pieceBytes}-byte pieces: ${p}`).toBe(true);
      }
    }
  });

  it('counts the ranks beyond the cores: messages and reductions cost their share', () => {
    const alone = ringPieceCosts(M, 4, 64 * MiB, 4, 4);
    const shared = ringPieceCosts(M, 4, 64 * MiB, 4, 2);
    // Twice the share, and each round of lanes wakes the 2 ranks beyond the cores once per step.
    for (let i = 0; i < alone.length; i++) {
      const p = Math.ceil((16 * MiB) / alone[i].pieceBytes);
      expect(shared[i].us).toBeCloseTo(2 * alone[i].us + 6 * Math.ceil(p / 4) * 2 * 77.5, 6);
    }
  });
});

describe('the chosen piece size', () => {
  it('is the cheapest size weighed: 2 MiB for 64 MiB and 1 MiB for 16 MiB between 2 processes on 2 cores', () => {
    for (const [n, bytes] of [
      [2, 64 * MiB],
      [2, 16 * MiB],
      [2, 4 * MiB],
      [3, 64 * MiB],
      [8, 256 * MiB],
    ] as const) {
      const costs = ringPieceCosts(M, n, bytes, n, n);
      const best = Math.min(...costs.map((c) => c.us));
      expect(costs.find((c) => c.us === best)!.pieceBytes).toBe(ringPieceBytes(M, n, bytes, n, n));
    }
    expect(ringPieceBytes(M, 2, 64 * MiB, 2, 2)).toBe(2 * MiB);
    expect(ringPieceBytes(M, 2, 16 * MiB, 2, 2)).toBe(1 * MiB);
    // A 2 MiB block in one piece: 2 messages instead of 8, and the same reduction shows.
    expect(ringPieceBytes(M, 2, 4 * MiB, 2, 2)).toBe(2 * MiB);
  });

  it('grows with the message (never shrinks) for a fixed rank count', () => {
    for (const n of [2, 3, 5, 8]) {
      let last = 0;
      for (let bytes = 1 * MiB; bytes <= 1024 * MiB; bytes *= 2) {
        const p = ringPieceBytes(M, n, bytes, n, n);
        expect(RING_PIECES).toContain(p);
        // Within a factor of 2 of the closed form √(2·o·γ·B/4) once blocks are large.
        if (bytes / n >= 64 * MiB) {
          const ideal = Math.sqrt((2 * 83.1 * 1926 * (bytes / n)) / 4);
          expect(
            p === 4 * MiB || (p >= ideal / 2 && p <= ideal * 2),
            `${n} ranks, ${bytes}: ${p} against ${ideal}`,
          ).toBe(true);
        }
        if (bytes / n >= 4 * 4 * MiB) expect(p).toBeGreaterThanOrEqual(last);
        last = p;
      }
    }
  });

  it('stays 512 KiB when the ranks outnumber the cores, for one rank, and for a model without o or α', () => {
    expect(ringPieceBytes(M, 4, 64 * MiB, 4, 2)).toBe(PIECE_BYTES);
    expect(ringPieceBytes(M, 3, 64 * MiB, 3, 2)).toBe(PIECE_BYTES);
    expect(ringPieceBytes(M, 1, 64 * MiB, 1, 2)).toBe(PIECE_BYTES);
    const old: CostModel = { ...M, tcp: { alphaUs: 0, wakeUs: 0, betaBytesPerUs: 2000, gammaBytesPerUs: 2000 } };
    expect(ringPieceBytes(old, 2, 64 * MiB, 2, 2)).toBe(PIECE_BYTES);
    // With o and α but no measurable γ nothing is hidden: the largest size weighed.
    const noGamma: CostModel = { ...M, tcp: { ...M.tcp, gammaBytesPerUs: null } };
    expect(ringPieceBytes(noGamma, 2, 64 * MiB, 2, 2)).toBe(RING_PIECES[RING_PIECES.length - 1]);
  });

  it('is what the tuner predicts the ring with', () => {
    for (const [n, bytes] of [
      [2, 64 * MiB],
      [2, 16 * MiB],
      [4, 64 * MiB],
    ] as const) {
      const ring = flatPredictions(M, n, bytes, 2, n).find((p) => p.algo === 'ring')!;
      const piece = ringPieceBytes(M, n, bytes, n, 2);
      expect(ring.us).toBeCloseTo(predictUs(M, onPath('tcp', netCounts('ring', n, bytes, piece)), n, 2), 6);
    }
    // Fewer messages in 2 MiB pieces: predicted faster than in 512 KiB ones.
    const fixed = predictUs(M, onPath('tcp', netCounts('ring', 2, 64 * MiB)), 2, 2);
    expect(flatPredictions(M, 2, 64 * MiB, 2, 2).find((p) => p.algo === 'ring')!.us).toBeLessThan(fixed);
  });
});

describe('WEBCCL_PIECE_BYTES', () => {
  const saved = process.env.WEBCCL_PIECE_BYTES;
  afterEach(() => {
    if (saved === undefined) delete process.env.WEBCCL_PIECE_BYTES;
    else process.env.WEBCCL_PIECE_BYTES = saved;
  });

  it('is read as a byte count in 4096..16777216; unset: undefined', () => {
    delete process.env.WEBCCL_PIECE_BYTES;
    expect(forcedPieceBytes()).toBeUndefined();
    for (const v of ['4096', '65536', '16777216']) {
      process.env.WEBCCL_PIECE_BYTES = v;
      expect(forcedPieceBytes()).toBe(Number(v));
    }
  });

  it('refuses anything else with INVALID_ARGUMENT naming the variable', () => {
    for (const v of ['4095', '16777217', '1e9', '65536.5', '-4096', 'big']) {
      process.env.WEBCCL_PIECE_BYTES = v;
      let err: any;
      try {
        forcedPieceBytes();
      } catch (e) {
        err = e;
      }
      expect(err?.code, v).toBe('INVALID_ARGUMENT');
      expect(err?.message).toContain('WEBCCL_PIECE_BYTES');
    }
  });
});
