// In-register transposes of one square tile, one function per element width (1-byte: tile8.ts): the tile is N
// rows of 16 bytes (N = 16 / element bytes) read at `src` with a stride of `ss` bytes and
// written as N rows at `dst` with a stride of `ds` bytes. Each is log2(N) rounds of the
// perfect shuffle: round outputs 2i and 2i+1 interleave the low and the high halves of rows i
// and i + N/2, and after log2(N) rounds row r holds column r. The interleaves are the unpack
// instructions of x86 and the zip instructions of Arm, which engines match from these shuffles.
// SIMD build only (the callers guard them with ASC_FEATURE_SIMD).

@inline
function lo16(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
}

@inline
function hi16(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
}

@inline
function lo32(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
}

@inline
function hi32(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
}

@inline
function lo64(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
}

@inline
function hi64(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
}

/** 2×2 tile of 64-bit elements. */
@inline
export function tile64(dst: usize, src: usize, ss: usize, ds: usize): void {
  const r0 = v128.load(src);
  const r1 = v128.load(src + ss);
  const a0 = lo64(r0, r1);
  const a1 = hi64(r0, r1);
  v128.store(dst, a0);
  v128.store(dst + ds, a1);
}

/** 4×4 tile of 32-bit elements. */
@inline
export function tile32(dst: usize, src: usize, ss: usize, ds: usize): void {
  const r0 = v128.load(src);
  const r1 = v128.load(src + ss);
  const r2 = v128.load(src + 2 * ss);
  const r3 = v128.load(src + 3 * ss);
  const a0 = lo32(r0, r2);
  const a1 = hi32(r0, r2);
  const a2 = lo32(r1, r3);
  const a3 = hi32(r1, r3);
  const b0 = lo32(a0, a2);
  const b1 = hi32(a0, a2);
  const b2 = lo32(a1, a3);
  const b3 = hi32(a1, a3);
  v128.store(dst, b0);
  v128.store(dst + ds, b1);
  v128.store(dst + 2 * ds, b2);
  v128.store(dst + 3 * ds, b3);
}

/** 8×8 tile of 16-bit elements. */
@inline
export function tile16(dst: usize, src: usize, ss: usize, ds: usize): void {
  const r0 = v128.load(src);
  const r1 = v128.load(src + ss);
  const r2 = v128.load(src + 2 * ss);
  const r3 = v128.load(src + 3 * ss);
  const r4 = v128.load(src + 4 * ss);
  const r5 = v128.load(src + 5 * ss);
  const r6 = v128.load(src + 6 * ss);
  const r7 = v128.load(src + 7 * ss);
  const a0 = lo16(r0, r4);
  const a1 = hi16(r0, r4);
  const a2 = lo16(r1, r5);
  const a3 = hi16(r1, r5);
  const a4 = lo16(r2, r6);
  const a5 = hi16(r2, r6);
  const a6 = lo16(r3, r7);
  const a7 = hi16(r3, r7);
  const b0 = lo16(a0, a4);
  const b1 = hi16(a0, a4);
  const b2 = lo16(a1, a5);
  const b3 = hi16(a1, a5);
  const b4 = lo16(a2, a6);
  const b5 = hi16(a2, a6);
  const b6 = lo16(a3, a7);
  const b7 = hi16(a3, a7);
  const c0 = lo16(b0, b4);
  const c1 = hi16(b0, b4);
  const c2 = lo16(b1, b5);
  const c3 = hi16(b1, b5);
  const c4 = lo16(b2, b6);
  const c5 = hi16(b2, b6);
  const c6 = lo16(b3, b7);
  const c7 = hi16(b3, b7);
  v128.store(dst, c0);
  v128.store(dst + ds, c1);
  v128.store(dst + 2 * ds, c2);
  v128.store(dst + 3 * ds, c3);
  v128.store(dst + 4 * ds, c4);
  v128.store(dst + 5 * ds, c5);
  v128.store(dst + 6 * ds, c6);
  v128.store(dst + 7 * ds, c7);
}
