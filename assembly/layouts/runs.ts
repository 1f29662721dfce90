// Strided runs: `count` runs of `len` bytes, run i read at src + i·ss and written at dst + i·ds,
// each followed in dst by `pad` zero bytes. NHWC ↔ NC1HWC0 is one call per channel block: a run
// is the block's channels of one pixel (C0 of them, fewer in the last block, whose padding is
// the zeros). With len 0 it only writes padding.

/** Copies `len` bytes in 16-byte steps, then bytes (dst and src apart). */
@inline
export function copy(dst: usize, src: usize, len: usize): void {
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 16 <= len; i += 16) v128.store(dst + i, v128.load(src + i));
  }
  for (; i + 4 <= len; i += 4) store<u32>(dst + i, load<u32>(src + i));
  for (; i < len; i++) store<u8>(dst + i, load<u8>(src + i));
}

@inline
export function zero(dst: usize, len: usize): void {
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 16 <= len; i += 16) v128.store(dst + i, v128.splat<i32>(0));
  }
  for (; i < len; i++) store<u8>(dst + i, 0);
}

export function copyRuns(dst: usize, src: usize, count: usize, len: usize, ss: usize, ds: usize, pad: usize): void {
  for (let i: usize = 0; i < count; i++) {
    copy(dst + i * ds, src + i * ss, len);
    if (pad) zero(dst + i * ds + len, pad);
  }
}
