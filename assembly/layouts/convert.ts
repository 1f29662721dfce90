// Tensor layout conversions of a logical [N, C, H, W] tensor (HW = H·W), for elements of 1, 2,
// 4 or 8 bytes (the bytes move unchanged, so every dtype of that width is served):
//   NCHW     row-major: n, c, hw
//   NHWC     channels last: n, hw, c
//   NC1HWC0  channel blocks: n, c1, hw, k with c = c1·C0 + k, C1 = ⌈C / C0⌉; the channels
//            past C in the last block are padding, written as zero and never read back.
// The layout codes are those of src/comm/tensor-layout.ts. dst and src must not overlap.
import { copyRuns } from './runs';
import { transpose } from './transpose';

export const L_NCHW: i32 = 0;
export const L_NHWC: i32 = 1;
export const L_NC1HWC0: i32 = 2;

/** Elements a tensor holds in a layout (padding included). */
@inline function physical(layout: i32, c: usize, hw: usize, c0: usize): usize {
  return layout == L_NC1HWC0 ? (c + c0 - 1) / c0 * c0 * hw : c * hw;
}

function convertAs<T>(from: i32, to: i32, dst: usize, src: usize, n: usize, c: usize, hw: usize, c0: usize): void {
  const es = sizeof<T>();
  const srcImage = physical(from, c, hw, c0) * es;
  const dstImage = physical(to, c, hw, c0) * es;
  const c1n = (c + c0 - 1) / c0;
  for (let i: usize = 0; i < n; i++) {
    const s = src + i * srcImage;
    const d = dst + i * dstImage;
    if (from == L_NCHW && to == L_NHWC) transpose<T>(d, s, c, hw, hw, c);
    else if (from == L_NHWC && to == L_NCHW) transpose<T>(d, s, hw, c, c, hw);
    else {
      for (let c1: usize = 0; c1 < c1n; c1++) {
        const valid = min(c0, c - c1 * c0);
        const block = c1 * hw * c0 * es; // the block's offset in the NC1HWC0 image
        if (from == L_NCHW) {
          transpose<T>(d + block, s + c1 * c0 * hw * es, valid, hw, hw, c0);
          if (valid < c0) copyRuns(d + block + valid * es, 0, hw, 0, 0, c0 * es, (c0 - valid) * es);
        } else if (to == L_NCHW) {
          transpose<T>(d + c1 * c0 * hw * es, s + block, hw, valid, c0, hw);
        } else if (from == L_NHWC) {
          copyRuns(d + block, s + c1 * c0 * es, hw, valid * es, c * es, c0 * es, (c0 - valid) * es);
        } else {
          copyRuns(d + c1 * c0 * es, s + block, hw, valid * es, c0 * es, c * es, 0);
        }
      }
    }
  }
}

/**
 * Converts n images of c × hw elements of `es` bytes from layout `from` to layout `to` (c0:
 * the NC1HWC0 block, used when either side is NC1HWC0). The same layout copies.
 */
export function convertLayout(es: i32, from: i32, to: i32, dst: usize, src: usize, n: usize, c: usize, hw: usize, c0: usize): void {
  if (<u32>from > <u32>L_NC1HWC0 || <u32>to > <u32>L_NC1HWC0) unreachable();
  if (from == to) {
    memory.copy(dst, src, n * physical(from, c, hw, c0) * <usize>es);
    return;
  }
  switch (es) {
    case 1: convertAs<u8>(from, to, dst, src, n, c, hw, c0); break;
    case 2: convertAs<u16>(from, to, dst, src, n, c, hw, c0); break;
    case 4: convertAs<u32>(from, to, dst, src, n, c, hw, c0); break;
    case 8: convertAs<u64>(from, to, dst, src, n, c, hw, c0); break;
    default: unreachable();
  }
}

/** Writes zero into the padding channels of n NC1HWC0 images (the last block of each). */
export function zeroPadding(es: i32, dst: usize, n: usize, c: usize, hw: usize, c0: usize): void {
  const c1n = (c + c0 - 1) / c0;
  const valid = c - (c1n - 1) * c0;
  if (valid == c0 || c1n == 0) return;
  const image = c1n * c0 * hw * <usize>es;
  const last = (c1n - 1) * c0 * hw * <usize>es + valid * <usize>es;
  for (let i: usize = 0; i < n; i++) copyRuns(dst + i * image + last, 0, hw, 0, 0, c0 * <usize>es, (c0 - valid) * <usize>es);
}
