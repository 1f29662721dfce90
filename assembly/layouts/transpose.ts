// Matrix transpose for any element width: dst[c][r] = src[r][c] for a rows × cols matrix whose
// rows lie `ss` elements apart in src and whose columns land `ds` elements apart in dst. NCHW ↔
// NHWC is one transpose per image (C × HW), NCHW ↔ NC1HWC0 one per channel block (C0 × HW).
//
// The SIMD build moves whole square tiles of 16-byte rows through registers (tiles.ts). The
// long stride is on one side: src rows far apart (NCHW -> NHWC / NC1HWC0, `gather`) or dst
// rows far apart (NHWC / NC1HWC0 -> NCHW, `scatter`); with C planes of H·W elements that
// stride is often a power of two, so the far-apart rows all fall into one L1 set (and past
// 128 KiB into one L2 set). The walk keeps few of them live at once and sweeps each one in
// long runs; the compact side stays in cache. The rows and columns past the last whole tile,
// and the scalar build, copy element by element. Both give the same bytes: a transpose only
// moves them.

import { tile8, tile8Half, tile8Rows } from './tile8';
import { tile16, tile32, tile64 } from './tiles';

// Past L2 (1 MiB) the lines come from L3 or DRAM and the walk favours long runs of the far
// rows over keeping the compact side in L1.
const LARGE: usize = 1 << 20;
// gather: columns per block, in bytes of the compact (dst) side in cache, or of a src run.
const GATHER_L1: usize = 16384;
const GATHER_RUN: usize = 4096;
const GATHER_L2: usize = 262144;
// gather past L2 with all rows in one dst line: bytes of a src run.
const LINED_RUN: usize = 128;
// staged gather: columns (bytes) per block.
const STAGE: usize = 4096;
// scatter: a block of COLS columns and as many rows as its src bytes allow.
const COLS: usize = 64;
const SCATTER_L1: usize = 32768;
const SCATTER_L2: usize = 131072;
// Bytes of one way of L2 (2048 sets of 64 bytes): dst rows at least this far apart share L2 sets.
const L2_SPAN: usize = 131072;

@inline
function tile<T>(dst: usize, src: usize, ss: usize, ds: usize): void {
  if (sizeof<T>() == 1) tile8(dst, src, ss, ds);
  else if (sizeof<T>() == 2) tile16(dst, src, ss, ds);
  else if (sizeof<T>() == 4) tile32(dst, src, ss, ds);
  else tile64(dst, src, ss, ds);
}

/** Element-wise over rows [r0, r1) × columns [c0, c1). */
@inline
function byElement<T>(dst: usize, src: usize, r0: usize, r1: usize, c0: usize, c1: usize, ss: usize, ds: usize): void {
  for (let r = r0; r < r1; r++) {
    const s = src + r * ss * sizeof<T>();
    for (let c = c0; c < c1; c++) store<T>(dst + (c * ds + r) * sizeof<T>(), load<T>(s + c * sizeof<T>()));
  }
}

export function transpose<T>(dst: usize, src: usize, rows: usize, cols: usize, ss: usize, ds: usize): void {
  let rowsDone: usize = 0;
  let colsDone: usize = 0;
  if (ASC_FEATURE_SIMD) {
    const n: usize = 16 / sizeof<T>(); // tile side
    rowsDone = rows - (rows % n);
    colsDone = cols - (cols % n);
    if (ss > ds) gather<T>(dst, src, rowsDone, colsDone, ss, ds);
    else scatter<T>(dst, src, rowsDone, colsDone, ss, ds);
  }
  byElement<T>(dst, src, rowsDone, rows, 0, cols, ss, ds);
  byElement<T>(dst, src, 0, rowsDone, colsDone, cols, ss, ds);
}

/**
 * Src rows far apart: a block of columns at a time, and within it one tile row (n src rows) at
 * a time across the block, so each src line is used whole right after it is fetched (walking
 * down the rows first touched 64 lines of one L1 set per tile column: every line was fetched
 * four times). In cache the block's dst (rows × block) stays in L1; past L2 each src row is
 * read in runs of 4 KiB (runs of 256 bytes left the prefetcher little to follow: at 16 MiB
 * 4 KiB runs measured 1.16–1.4× as fast as the 16 KiB dst block, 16 KiB runs 0.77–0.93×).
 */
@inline
function gather<T>(dst: usize, src: usize, rows: usize, cols: usize, ss: usize, ds: usize): void {
  const n: usize = 16 / sizeof<T>();
  const ssb = ss * sizeof<T>();
  const dsb = ds * sizeof<T>();
  const r1 = max<usize>(rows, 1);
  const bytes = rows * cols * sizeof<T>() > LARGE ? min<usize>(GATHER_RUN, GATHER_L2 / r1) : GATHER_L1 / r1;
  // All rows fit one dst line (NCHW -> NC1HWC0 with C0 = 16 of 4 bytes): past L2 the runs are
  // LINED_RUN bytes, the block's dst 2 KiB. A tile column of all the rows at a time (its dst
  // lines written whole, 1.08× the 4 KiB runs) read each src line in four 16-byte visits, its 16
  // rows sharing an L1 set; at 16 MiB these runs measured 1.16–1.28× as fast as that, runs of
  // 64 bytes 1.09×, 512 1.0×, 1024 0.88×. 1- and 2-byte elements keep the 4 KiB runs.
  const lined = rows * cols * sizeof<T>() > LARGE && rows * sizeof<T>() <= 64 && sizeof<T>() >= 4;
  const block = lined ? LINED_RUN / sizeof<T>() : max<usize>(n, (bytes / sizeof<T>() / n) * n);
  let from: usize = 0;
  if (sizeof<T>() == 1 && rows * cols > LARGE && ds == rows && rows >= 64) {
    from = staged(dst, src, rows, cols, ss);
    if (from == cols) return;
  }
  for (let cb: usize = from; cb < cols; cb += block) {
    const ce = min(cb + block, cols);
    if (sizeof<T>() == 1) {
      // Half tiles: 8 src rows at a time, not 16 (see tile8Half).
      for (let r: usize = 0; r < rows; r += 8) {
        for (let c = cb; c < ce; c += 16) tile8Half(dst + c * ds + r, src + r * ss + c, ssb, dsb);
      }
      continue;
    }
    for (let r: usize = 0; r < rows; r += n) {
      for (let c = cb; c < ce; c += n) {
        tile<T>(dst + (c * ds + r) * sizeof<T>(), src + (r * ss + c) * sizeof<T>(), ssb, dsb);
      }
    }
  }
}

/**
 * 1-byte gather past L2 whose dst rows are whole lines or more (ds == rows >= 64, NCHW -> NHWC
 * with C >= 64): each block of STAGE columns is first copied, one src row at a time, into dst
 * bytes past the block that later blocks write (rows STAGE + 64 bytes apart, so they fall into
 * different L1 sets), then transposed from there with whole tiles, 16 dst lines at a time. The
 * half tiles' runs read 8 rows at once and wrote each 64-byte dst line in 8 pieces; at 16 MiB
 * (C = 64) this measured 1.12–1.21× as fast. For 32-byte dst rows (NC1HWC0, C0 = 32) it was
 * 0.82–0.86×, for 2- and 4-byte elements 0.92–0.97×, and interleaving the next block's copies
 * with this block's tiles 0.7×. Returns the first column left to the caller (the blocks whose
 * staging would pass the end of dst).
 */
function staged(dst: usize, src: usize, rows: usize, cols: usize, ss: usize): usize {
  const pitch = STAGE + 64;
  const image = rows * STAGE; // dst bytes of one block
  const end = dst + cols * rows;
  let cb: usize = 0;
  for (; cb + STAGE <= cols; cb += STAGE) {
    const d = dst + cb * rows;
    const stage = d + image;
    if (stage + rows * pitch > end) break;
    for (let r: usize = 0; r < rows; r++) memory.copy(stage + r * pitch, src + r * ss + cb, STAGE);
    for (let c: usize = 0; c < STAGE; c += 16) {
      for (let r: usize = 0; r < rows; r += 16) tile8(d + c * rows + r, stage + r * pitch + c, pitch, rows);
    }
  }
  return cb;
}

/**
 * Dst rows far apart: blocks of COLS columns × as many rows as fit the block's bytes, a tile
 * column at a time, so each of a tile's dst rows is written as one run of the block's rows
 * (square blocks wrote 16 bytes per row before moving on, and rows 4 KiB apart evicted each
 * other from L1). The block's src is 32 KiB (L1); past L2 with dst rows 128 KiB or more apart
 * it is 128 KiB (read again from L2 for each tile column) for runs 4× longer in dst: at 16 MiB
 * 1.02–1.23× as fast, at 2–4 MiB (rows 32–64 KiB apart) up to 10 % slower, so only there.
 */
@inline
function scatter<T>(dst: usize, src: usize, rows: usize, cols: usize, ss: usize, ds: usize): void {
  const n: usize = 16 / sizeof<T>();
  const ssb = ss * sizeof<T>();
  const dsb = ds * sizeof<T>();
  const far = rows * cols * sizeof<T>() > LARGE && dsb >= L2_SPAN;
  const rowsPerBlock: usize = (far ? SCATTER_L2 : SCATTER_L1) / COLS / sizeof<T>();
  // 1-byte tiles write 16 dst rows: when those lie a multiple of 2 KiB apart they share an L1
  // set (4 KiB of sets, 8 ways) and evict each other between the tile's 16-byte visits.
  const split = (dsb & 2047) == 0;
  for (let cb: usize = 0; cb < cols; cb += COLS) {
    const ce = min(cb + COLS, cols);
    for (let rb: usize = 0; rb < rows; rb += rowsPerBlock) {
      const re = min(rb + rowsPerBlock, rows);
      for (let c = cb; c < ce; c += n) {
        if (sizeof<T>() == 1 && split) {
          // Two passes of 8 dst rows each (see tile8Rows): the second reads the block again, from cache.
          for (let r = rb; r < re; r += n) tile8Rows(dst + c * ds + r, src + r * ss + c, ssb, dsb, 0, 8);
          for (let r = rb; r < re; r += n) tile8Rows(dst + c * ds + r, src + r * ss + c, ssb, dsb, 8, 16);
          continue;
        }
        for (let r = rb; r < re; r += n) {
          tile<T>(dst + (c * ds + r) * sizeof<T>(), src + (r * ss + c) * sizeof<T>(), ssb, dsb);
        }
      }
    }
  }
}
