// Tensor layout conversions of a logical [N, C, H, W] tensor (HW = H·W), for elements of 1, 2,
// 4 or 8 bytes (the bytes move unchanged, so every dtype of that width is served):
//   NCHW     row-major: n, c, hw
//   NHWC     channels last: n, hw, c
//   NC1HWC0  channel blocks: n, c1, hw, k with c = c1·C0 + k, C1 = ⌈C / C0⌉; the channels
//            past C in the last block are padding, written as zero and never read back.
// The layout codes are those of src/core/tensor-layout.ts. dst and src must not overlap.
import { copy, copyRuns, zero } from './runs';
import { transpose } from './transpose';

export const L_NCHW: i32 = 0;
export const L_NHWC: i32 = 1;
export const L_NC1HWC0: i32 = 2;

/** Elements a tensor holds in a layout (padding included). */
@inline
function physical(layout: i32, c: usize, hw: usize, c0: usize): usize {
  return layout == L_NC1HWC0 ? ((c + c0 - 1) / c0) * c0 * hw : c * hw;
}

/** NCHW -> NC1HWC0 for one image: a transpose per channel block (C0 rows of HW), then its padding. */
@inline
function rowsToBlocks<T>(d: usize, s: usize, c: usize, hw: usize, c0: usize): void {
  const es = sizeof<T>();
  for (let c1: usize = 0; c1 * c0 < c; c1++) {
    const valid = min(c0, c - c1 * c0);
    const block = d + c1 * hw * c0 * es;
    transpose<T>(block, s + c1 * c0 * hw * es, valid, hw, hw, c0);
    if (valid < c0) copyRuns(block + valid * es, 0, hw, 0, 0, c0 * es, (c0 - valid) * es);
  }
}

/** NC1HWC0 -> NCHW for one image: the inverse transposes, padding left unread. */
@inline
function blocksToRows<T>(d: usize, s: usize, c: usize, hw: usize, c0: usize): void {
  const es = sizeof<T>();
  for (let c1: usize = 0; c1 * c0 < c; c1++) {
    transpose<T>(d + c1 * c0 * hw * es, s + c1 * hw * c0 * es, hw, min(c0, c - c1 * c0), c0, hw);
  }
}

// NHWC <-> NC1HWC0 goes pixel by pixel: the NHWC side streams once and each channel block is
// one more stream (block by block, every pass would rewrite each line of the NHWC side).

// Whole blocks go a group of pixels at a time, block by block, in runs of RUN bytes per block
// (the group's NHWC side, RUN · blocks bytes, is read again from L1). At 16 MiB runs of 512
// bytes measured 1.2–1.5× as fast as pixel by pixel for 1-, 2- and 4-byte elements (256 KiB:
// 1.1–1.2×); 128–256 byte runs gained less, 1–2 KiB runs lost it for 4-byte ones (4 blocks).
const RUN: usize = 512;

/**
 * Both directions when every block is whole and a multiple of 16 bytes: pixel p's block k is
 * read at src + p·ssp + k·ssk and written at dst + p·dsp + k·dsk, `len` bytes each. Without
 * the general copy's tail loops and the last block's min and padding tests per block, 1-byte
 * NHWC -> NC1HWC0 ran 1.4× as fast at 16 MiB, f16 1.1×.
 */
@inline
function wholeBlocks(
  dst: usize,
  src: usize,
  blocks: usize,
  hw: usize,
  len: usize,
  ssk: usize,
  dsk: usize,
  ssp: usize,
  dsp: usize,
): void {
  const group = max<usize>(1, RUN / len);
  let p: usize = 0;
  for (; p + group <= hw; p += group) {
    for (let k: usize = 0; k < blocks; k++) {
      const s = src + p * ssp + k * ssk;
      const d = dst + p * dsp + k * dsk;
      // The usual run lengths (C0 of 1, 2 or 4 bytes) with the length known: 1.1–1.25× more.
      if (len == 32) runs(d, s, RUN / 32, 32, ssp, dsp);
      else if (len == 64) runs(d, s, RUN / 64, 64, ssp, dsp);
      else runs(d, s, group, len, ssp, dsp);
    }
  }
  for (let k: usize = 0; k < blocks; k++) runs(dst + p * dsp + k * dsk, src + p * ssp + k * ssk, hw - p, len, ssp, dsp);
}

@inline
function runs(d: usize, s: usize, count: usize, len: usize, ssp: usize, dsp: usize): void {
  for (let p: usize = 0; p < count; p++) {
    for (let i: usize = 0; i < len; i += 16) v128.store(d + p * dsp + i, v128.load(s + p * ssp + i));
  }
}

/** NHWC -> NC1HWC0 for one image. */
@inline
function pixelsToBlocks<T>(d: usize, s: usize, c: usize, hw: usize, c0: usize): void {
  const es = sizeof<T>();
  if (ASC_FEATURE_SIMD && c % c0 == 0 && (c0 * es) % 16 == 0) {
    wholeBlocks(d, s, c / c0, hw, c0 * es, c0 * es, hw * c0 * es, c * es, c0 * es);
    return;
  }
  for (let p: usize = 0; p < hw; p++) {
    for (let c1: usize = 0; c1 * c0 < c; c1++) {
      const valid = min(c0, c - c1 * c0);
      const at = d + (c1 * hw + p) * c0 * es;
      copy(at, s + (p * c + c1 * c0) * es, valid * es);
      if (valid < c0) zero(at + valid * es, (c0 - valid) * es);
    }
  }
}

/** NC1HWC0 -> NHWC for one image. */
@inline
function blocksToPixels<T>(d: usize, s: usize, c: usize, hw: usize, c0: usize): void {
  const es = sizeof<T>();
  if (ASC_FEATURE_SIMD && c % c0 == 0 && (c0 * es) % 16 == 0) {
    wholeBlocks(d, s, c / c0, hw, c0 * es, hw * c0 * es, c0 * es, c0 * es, c * es);
    return;
  }
  for (let p: usize = 0; p < hw; p++) {
    for (let c1: usize = 0; c1 * c0 < c; c1++) {
      copy(d + (p * c + c1 * c0) * es, s + (c1 * hw + p) * c0 * es, min(c0, c - c1 * c0) * es);
    }
  }
}

function convertAs<T>(from: i32, to: i32, dst: usize, src: usize, n: usize, c: usize, hw: usize, c0: usize): void {
  const srcImage = physical(from, c, hw, c0) * sizeof<T>();
  const dstImage = physical(to, c, hw, c0) * sizeof<T>();
  for (let i: usize = 0; i < n; i++) {
    const s = src + i * srcImage;
    const d = dst + i * dstImage;
    if (from == L_NCHW && to == L_NHWC) transpose<T>(d, s, c, hw, hw, c);
    else if (from == L_NHWC && to == L_NCHW) transpose<T>(d, s, hw, c, c, hw);
    else if (from == L_NCHW) rowsToBlocks<T>(d, s, c, hw, c0);
    else if (to == L_NCHW) blocksToRows<T>(d, s, c, hw, c0);
    else if (from == L_NHWC) pixelsToBlocks<T>(d, s, c, hw, c0);
    else blocksToPixels<T>(d, s, c, hw, c0);
  }
}

/**
 * Converts n images of c × hw elements of `es` bytes from layout `from` to layout `to` (c0:
 * the NC1HWC0 block, used when either side is NC1HWC0). The same layout copies.
 */
export function convertLayout(
  es: i32,
  from: i32,
  to: i32,
  dst: usize,
  src: usize,
  n: usize,
  c: usize,
  hw: usize,
  c0: usize,
): void {
  if (<u32>from > <u32>L_NC1HWC0 || <u32>to > <u32>L_NC1HWC0) unreachable();
  if (from == to) {
    memory.copy(dst, src, n * physical(from, c, hw, c0) * <usize>es);
    return;
  }
  switch (es) {
    case 1:
      convertAs<u8>(from, to, dst, src, n, c, hw, c0);
      break;
    case 2:
      convertAs<u16>(from, to, dst, src, n, c, hw, c0);
      break;
    case 4:
      convertAs<u32>(from, to, dst, src, n, c, hw, c0);
      break;
    case 8:
      convertAs<u64>(from, to, dst, src, n, c, hw, c0);
      break;
    default:
      unreachable();
  }
}

/** Writes zero into the padding channels of n NC1HWC0 images (the last block of each). */
export function zeroPadding(es: i32, dst: usize, n: usize, c: usize, hw: usize, c0: usize): void {
  const c1n = (c + c0 - 1) / c0;
  const valid = c - (c1n - 1) * c0;
  if (valid == c0 || c1n == 0) return;
  const image = c1n * c0 * hw * <usize>es;
  const last = (c1n - 1) * c0 * hw * <usize>es + valid * <usize>es;
  for (let i: usize = 0; i < n; i++)
    copyRuns(dst + i * image + last, 0, hw, 0, 0, c0 * <usize>es, (c0 - valid) * <usize>es);
}
