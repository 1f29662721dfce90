// The ring allReduce's piece size, per message, from the cost model. A block of B = S/n bytes
// travels in p pieces, in L = min(4, p) lanes (src/algorithms/ring.ts):
//   - every piece is a message, so the ring sends 2(n−1)·p of them, each costing o (and each
//     round of lanes a step, α): small pieces pay for their number;
//   - the lanes start together and keep in step, so the kernel reduces one round of L pieces
//     while the next round travels, and of each of the n−1 reduce steps the last round's
//     reduction shows: (n−1)·L·(B/p)/γ. Large pieces hide less of the reduction.
// Two or three pieces leave lanes idle and expose as much as one (16 MiB between 2 processes
// in 4 MiB pieces, two per block, was the slowest of the sweep below: 12.8 ms against 9.2 ms
// in 1 MiB pieces), so only sizes that make one piece or at least four are weighed.
// The piece size that minimises the sum (with α = 0 and p ≥ 4: √(2·o·γ·B/4), about 1.6 MB for
// 64 MiB between 2 processes with the built-in model) is taken among powers of two from 64 KiB
// to 4 MiB (the largest keeps the lanes' scratch at 16 MiB per rank). On this machine's loopback
// that matched a sweep of fixed sizes: 2 MiB pieces fastest at 64 MiB over 2 processes (1.2–1.6×
// 512 KiB ones), 1 MiB at 16 MiB, and 4–8 MiB slower again (bench/ring-pieces.mjs measures the
// choice). The model is fitted with the ring in PIECE_BYTES pieces (webccl tune forces them),
// so its o, α and γ are those of one fixed schedule; this uses them to move along it.
//
// Ranks that outnumber the cores keep PIECE_BYTES: they run in turns, and how pieces pipeline
// across ranks that wait for the CPU is not in the model. Measured on 2 cores, the picks made
// for 4 processes ran 0.46–0.94× as fast as 512 KiB pieces (a block in one piece stalls the
// ring while its next rank waits for a core); for 2 processes, 1.06–1.45× as fast at 4–64 MiB.
//
// A model without a per-message or per-step cost (o = α = 0: one written before o existed) has
// nothing to weigh against the hidden reduction, and keeps PIECE_BYTES. WEBCCL_PIECE_BYTES
// forces a size; every rank must agree (the piece size is part of the op's signature).
import { PIECE_BYTES } from '../algorithms/group.js';
import { LANES } from '../algorithms/ring.js';
import { envNumber } from '../core/config.js';
import { fail } from '../core/errors.js';
import { type CostModel, pathTimeUs } from './cost-model.js';
import { netCounts, pieceCount } from './schedules.js';

export const MIN_RING_PIECE = 64 * 1024;
export const MAX_RING_PIECE = 4 * 1024 * 1024;

/** The sizes the tuner weighs, smallest first. */
export const RING_PIECES: readonly number[] = Array.from(
  { length: Math.log2(MAX_RING_PIECE / MIN_RING_PIECE) + 1 },
  (_, i) => MIN_RING_PIECE * 2 ** i,
);

/** Limits of WEBCCL_PIECE_BYTES. */
export const FORCED_PIECE_MIN = 4096;
export const FORCED_PIECE_MAX = 16 * 1024 * 1024;

export interface PieceCost {
  pieceBytes: number;
  /** The part of the ring's predicted time (µs) that depends on the piece size. */
  us: number;
}

/**
 * What each piece size weighed (one piece per block, or four and more) costs a ring allReduce
 * of `bytes` over `n` ranks, `sharing` of them on a machine of `cores`: its steps and messages at the model's α and o,
 * and the
 * reduction of one round of lanes per reduce step at γ (the rest of the time is the same for all).
 */
export function ringPieceCosts(
  model: CostModel,
  n: number,
  bytes: number,
  sharing: number,
  cores: number,
): PieceCost[] {
  const block = bytes / Math.max(1, n);
  const weighed = (pieceBytes: number) => pieceCount(block, pieceBytes) === 1 || pieceCount(block, pieceBytes) >= LANES;
  return RING_PIECES.filter(weighed).map((pieceBytes) => {
    const p = pieceCount(block, pieceBytes);
    // The schedule's counts with no bytes moved (the same for every size) and, of the
    // reduction, only the round of lanes that shows at each reduce step.
    const c = {
      ...netCounts('ring', n, bytes, pieceBytes),
      bytes: 0,
      reduced: (n - 1) * Math.min(p, LANES) * (block / p),
    };
    return { pieceBytes, us: pathTimeUs(model.tcp, c, sharing, cores) };
  });
}

/** The model's piece size for a ring allReduce of `bytes` (see the top of this file). */
export function ringPieceBytes(model: CostModel, n: number, bytes: number, sharing: number, cores: number): number {
  if (n <= 1 || sharing > cores || ((model.tcp.messageUs ?? 0) === 0 && model.tcp.alphaUs === 0)) return PIECE_BYTES;
  const costs = ringPieceCosts(model, n, bytes, sharing, cores);
  // Ties (a block smaller than several candidates) go to the smallest: the same message.
  return costs.reduce((a, b) => (b.us < a.us ? b : a)).pieceBytes;
}

/** WEBCCL_PIECE_BYTES, checked: an integer number of bytes in 4 KiB..16 MiB, or undefined. */
export function forcedPieceBytes(): number | undefined {
  const x = envNumber('WEBCCL_PIECE_BYTES');
  if (x === undefined) return undefined;
  if (!Number.isInteger(x) || x < FORCED_PIECE_MIN || x > FORCED_PIECE_MAX) {
    fail(
      'INVALID_ARGUMENT',
      `WEBCCL_PIECE_BYTES=${x}: expected an integer number of bytes in ${FORCED_PIECE_MIN}..${FORCED_PIECE_MAX}`,
    );
  }
  return x;
}
