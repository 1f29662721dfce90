// Ring reduce-scatter and allgather over `size` blocks, and allreduce as the two in a row
// (bandwidth-optimal: each rank sends 2(n-1)/n of the buffer). Every block is cut into pieces
// that travel independently in a few lanes, so the kernel reduces piece k while piece k+1 is
// on the wire, and several channels carry the lanes at once.
import { exchange, type Group, type Mem, mod, PIECE_BYTES, pieceCount, type Span, singleHopPieces } from './group.js';

/** Lanes of pieces in flight per rank; each holds one piece of scratch (the tuner's counts use it). */
export const LANES = 4;

/**
 * One phase: at step s a rank sends block `first - s` and receives block `first - s - 1`
 * (mod size). Numbers, not functions: a simulation runs a 4,096-rank ring in one process
 * (33 M steps), and every closure a step calls is one more object to fetch from memory.
 */
interface Phase {
  first: number;
  reduce: boolean;
  /** First tag step of the phase (phases of one op must not share steps). */
  stepBase: number;
}

/** Start (in elements) and length of part `k` of `parts` near-equal parts of `count` (as subSpan). */
const partStart = (count: number, parts: number, k: number): number =>
  k * Math.floor(count / parts) + Math.min(k, count % parts);
const partCount = (count: number, parts: number, k: number): number =>
  Math.floor(count / parts) + (k < count % parts ? 1 : 0);

/**
 * The blocks a ring moves: `size` near-equal parts of one span (allreduce), or the spans given
 * (reduce-scatter, allgather). Made as needed rather than held as n spans per rank: n ranks of
 * n blocks add up in a simulation.
 */
class Blocks {
  private constructor(
    private readonly list: Span[] | null,
    private readonly addr0: number,
    private readonly total: number,
    private readonly parts: number,
    private readonly eb: number,
  ) {}

  static of(buf: Span, parts: number, eb: number): Blocks {
    return new Blocks(null, buf.addr, buf.count, parts, eb);
  }

  static listed(list: Span[]): Blocks {
    return new Blocks(list, 0, 0, 0, 0);
  }

  addr(i: number): number {
    return this.list ? this.list[i].addr : this.addr0 + partStart(this.total, this.parts, i) * this.eb;
  }

  count(i: number): number {
    return this.list ? this.list[i].count : partCount(this.total, this.parts, i);
  }

  largest(): number {
    // Part 0 is among the largest (the first count % parts hold one element more).
    return this.list ? this.list.reduce((a, b) => Math.max(a, b.count), 0) : partCount(this.total, this.parts, 0);
  }
}

/**
 * Runs one or more phases over the group's `size` blocks, piece by piece in lanes. With `from`
 * (an allreduce out of place), the first reducing phase reads this rank's own data there: its
 * first send is `from`'s block, and each block it receives is combined with `from`'s into
 * `blocks` (the first write of that block), so the input needs no copy into the output first.
 */
async function runPhases(
  g: Group,
  m: Mem,
  phases: Phase[],
  r: { blocks: Blocks; from?: Blocks; piece?: number },
): Promise<void> {
  const { blocks, from, piece = PIECE_BYTES } = r;
  const n = g.size;
  if (n === 1) return;
  const right = mod(g.rank + 1, n);
  const left = mod(g.rank - 1, n);
  const eb = m.elemBytes;
  const largest = blocks.largest();
  const reduces = phases.some((p) => p.reduce);
  // Between 2 ranks a phase is one exchange: without a reduction to overlap, pieces pipeline
  // nothing, but each of the pair's connections takes one.
  const pieces = n === 2 && !reduces ? singleHopPieces(largest * eb, g.lanes) : pieceCount(largest * eb, piece);
  const lanes = Math.min(LANES, pieces);
  const most = Math.ceil(largest / pieces);
  const lane = async (first: number): Promise<void> => {
    const scratch = reduces ? m.scratch(most) : 0;
    for (let j = first; j < pieces; j += lanes) {
      for (let p = 0; p < phases.length; p++) {
        const { first: f0, reduce, stepBase } = phases[p];
        for (let s = 0; s < n - 1; s++) {
          const sb = mod(f0 - s, n);
          const rb = mod(f0 - s - 1, n);
          const sn = blocks.count(sb);
          const rn = blocks.count(rb);
          const own = from !== undefined && p === 0; // this phase still reads the input
          const outAddr = (own && s === 0 ? from.addr(sb) : blocks.addr(sb)) + partStart(sn, pieces, j) * eb;
          const intoAddr = blocks.addr(rb) + partStart(rn, pieces, j) * eb;
          const intoCount = partCount(rn, pieces, j);
          await exchange(
            g,
            right,
            left,
            (stepBase + s) * pieces + j,
            m.view(outAddr, partCount(sn, pieces, j)),
            m.view(reduce ? scratch : intoAddr, intoCount),
          );
          if (reduce && own) m.reduceFrom(intoAddr, from.addr(rb) + partStart(rn, pieces, j) * eb, scratch, intoCount);
          else if (reduce) m.reduce(intoAddr, scratch, intoCount);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: lanes }, (_, i) => lane(i)));
}

/**
 * Allreduce of `buf` in place: reduce-scatter over `size` blocks, then allgather. With `from`
 * (as long as `buf`, not overlapping it), of `from` into `buf`: every block of `buf` is written
 * once by the two phases together (the reduce-scatter the n−1 it receives, the allgather the
 * rest), so nothing is copied first. `pieceBytes`: the pieces' size (the tuner's choice for the
 * message; every rank must pass the same, as the tags count pieces).
 */
export async function ringAllReduce(g: Group, m: Mem, buf: Span, from?: Span, pieceBytes = PIECE_BYTES): Promise<void> {
  const n = g.size;
  if (n === 1) {
    if (from) m.copy(buf.addr, from.addr, buf.count);
    return;
  }
  // Reduce-scatter ends with block rank + 1 reduced here; the allgather starts from it.
  const rs: Phase = { first: g.rank, reduce: true, stepBase: 0 };
  const ag: Phase = { first: mod(g.rank + 1, n), reduce: false, stepBase: n - 1 };
  return runPhases(g, m, [rs, ag], {
    blocks: Blocks.of(buf, n, m.elemBytes),
    from: from && Blocks.of(from, n, m.elemBytes),
    piece: pieceBytes,
  });
}

/** Block `rank` of `blocks` ends holding the reduction of every rank's block `rank`. */
export function ringReduceScatter(g: Group, m: Mem, blocks: Span[]): Promise<void> {
  return runPhases(g, m, [{ first: g.rank - 1, reduce: true, stepBase: 0 }], { blocks: Blocks.listed(blocks) });
}

/** Every rank's block `rank` of `blocks` ends in block `rank` on every rank. */
export function ringAllGather(g: Group, m: Mem, blocks: Span[]): Promise<void> {
  return runPhases(g, m, [{ first: g.rank, reduce: false, stepBase: 0 }], { blocks: Blocks.listed(blocks) });
}
