// Matrix transpose for any element width: dst[c][r] = src[r][c] for a rows × cols matrix whose
// rows lie `ss` elements apart in src and whose columns land `ds` elements apart in dst. NCHW ↔
// NHWC is one transpose per image (C × HW), NCHW ↔ NC1HWC0 one per channel block (C0 × HW).
//
// The SIMD build moves whole square tiles of 16-byte rows through registers (tiles.ts), in
// blocks of COLS columns × (BLOCK_BYTES / COLS / element bytes) rows, a tile column at a time:
// the block's source (32 KiB) stays in cache while each of a tile's dst rows is written as one
// run of the block's rows, so the writes stream even when dst rows lie a power of two apart
// (square blocks wrote 16 bytes per row before moving on, and rows 4 KiB apart evict each
// other from L1). The rows and columns past the last whole tile, and the scalar build, copy
// element by element. Both give the same bytes: a transpose only moves them.
import { tile16, tile32, tile64, tile8, tile8Rows } from './tiles';

const COLS: usize = 64;
const BLOCK_BYTES: usize = 32768;

@inline function tile<T>(dst: usize, src: usize, ss: usize, ds: usize): void {
  if (sizeof<T>() == 1) tile8(dst, src, ss, ds);
  else if (sizeof<T>() == 2) tile16(dst, src, ss, ds);
  else if (sizeof<T>() == 4) tile32(dst, src, ss, ds);
  else tile64(dst, src, ss, ds);
}

/** Element-wise over rows [r0, r1) × columns [c0, c1). */
@inline function byElement<T>(dst: usize, src: usize, r0: usize, r1: usize, c0: usize, c1: usize, ss: usize, ds: usize): void {
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
    rowsDone = rows - rows % n;
    colsDone = cols - cols % n;
    const ssb = ss * sizeof<T>();
    const dsb = ds * sizeof<T>();
    const rowsPerBlock: usize = BLOCK_BYTES / COLS / sizeof<T>();
    // 1-byte tiles write 16 dst rows: when those lie a multiple of 2 KiB apart they share an L1
    // set (4 KiB of sets, 8 ways) and evict each other between the tile's 16-byte visits.
    const split = (dsb & 2047) == 0;
    for (let cb: usize = 0; cb < colsDone; cb += COLS) {
      const ce = min(cb + COLS, colsDone);
      for (let rb: usize = 0; rb < rowsDone; rb += rowsPerBlock) {
        const re = min(rb + rowsPerBlock, rowsDone);
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
  byElement<T>(dst, src, rowsDone, rows, 0, cols, ss, ds);
  byElement<T>(dst, src, 0, rowsDone, colsDone, cols, ss, ds);
}
