// Ring reduce-scatter and allgather over `size` blocks, and allreduce as the two in a row
// (bandwidth-optimal: each rank sends 2(n-1)/n of the buffer). Every block is cut into pieces
// that travel independently in a few lanes, so the kernel reduces piece k while piece k+1 is
// on the wire, and several channels carry the lanes at once.
import { type Group, type Mem, type Span, PIECE_BYTES, SINGLE_HOP_PIECE_BYTES, exchange, mod, piecesFor, subSpan } from './group.js';

/** Lanes of pieces in flight per rank; each holds one piece of scratch. */
const LANES = 4;

interface Phase {
  /** Block this rank sends at step s, and the block it receives at step s. */
  sendBlock(s: number): number;
  recvBlock(s: number): number;
  reduce: boolean;
  /** First tag step of the phase (phases of one op must not share steps). */
  stepBase: number;
}

/**
 * Runs one or more phases over the group's `size` blocks (`block(i)` is block i; `largest`, the
 * largest), piece by piece in lanes. Blocks are made as needed rather than held in an array:
 * a simulation runs thousands of ranks in one process, and n arrays of n blocks add up.
 */
async function runPhases(g: Group, m: Mem, block: (i: number) => Span, largest: Span, phases: Phase[]): Promise<void> {
  if (g.size === 1) return;
  const right = mod(g.rank + 1, g.size);
  const left = mod(g.rank - 1, g.size);
  // Between 2 ranks a phase is one exchange: without a reduction to overlap, pieces pipeline nothing.
  const single = g.size === 2 && !phases.some((p) => p.reduce);
  const pieces = piecesFor([largest], m.elemBytes, single ? SINGLE_HOP_PIECE_BYTES : PIECE_BYTES);
  const lanes = Math.min(LANES, pieces);
  const most = Math.ceil(largest.count / pieces);
  const lane = async (first: number): Promise<void> => {
    const scratch = phases.some((p) => p.reduce) ? m.scratch(most) : 0;
    for (let j = first; j < pieces; j += lanes) {
      for (const ph of phases) {
        for (let s = 0; s < g.size - 1; s++) {
          const out = subSpan(block(ph.sendBlock(s)), pieces, j, m.elemBytes);
          const into = subSpan(block(ph.recvBlock(s)), pieces, j, m.elemBytes);
          const step = (ph.stepBase + s) * pieces + j;
          const target = ph.reduce ? scratch : into.addr;
          await exchange(g, right, left, step, m.view(out.addr, out.count), m.view(target, into.count));
          if (ph.reduce) m.reduce(into.addr, scratch, into.count);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: lanes }, (_, i) => lane(i)));
}

/** Reduce-scatter phase ending with block `(rank + 1 + shift)` fully reduced here. */
function rsPhase(g: Group, shift: number): Phase {
  return { sendBlock: (s) => mod(g.rank - s + shift, g.size), recvBlock: (s) => mod(g.rank - s - 1 + shift, g.size), reduce: true, stepBase: 0 };
}

/** Allgather phase starting from block `own` complete here. */
function agPhase(g: Group, own: number, stepBase: number): Phase {
  return { sendBlock: (s) => mod(own - s, g.size), recvBlock: (s) => mod(own - s - 1, g.size), reduce: false, stepBase };
}

/** Allreduce of `buf` in place: reduce-scatter over `size` blocks, then allgather. */
export function ringAllReduce(g: Group, m: Mem, buf: Span): Promise<void> {
  // Block 0 is among the largest (the first count % size blocks hold one element more).
  const block = (i: number) => subSpan(buf, g.size, i, m.elemBytes);
  return runPhases(g, m, block, block(0), [rsPhase(g, 0), agPhase(g, mod(g.rank + 1, g.size), g.size - 1)]);
}

const largestOf = (blocks: Span[]): Span => blocks.reduce((a, b) => (b.count > a.count ? b : a), blocks[0]);

/** Block `rank` of `blocks` ends holding the reduction of every rank's block `rank`. */
export function ringReduceScatter(g: Group, m: Mem, blocks: Span[]): Promise<void> {
  return runPhases(g, m, (i) => blocks[i], largestOf(blocks), [rsPhase(g, -1)]);
}

/** Every rank's block `rank` of `blocks` ends in block `rank` on every rank. */
export function ringAllGather(g: Group, m: Mem, blocks: Span[]): Promise<void> {
  return runPhases(g, m, (i) => blocks[i], largestOf(blocks), [agPhase(g, g.rank, 0)]);
}
