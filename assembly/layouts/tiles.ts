// In-register transposes of one square tile, one function per element width: the tile is N
// rows of 16 bytes (N = 16 / element bytes) read at `src` with a stride of `ss` bytes and
// written as N rows at `dst` with a stride of `ds` bytes. Each is log2(N) rounds of the
// perfect shuffle: round outputs 2i and 2i+1 interleave the low and the high halves of rows i
// and i + N/2, and after log2(N) rounds row r holds column r. The interleaves are the unpack
// instructions of x86 and the zip instructions of Arm, which engines match from these shuffles.
// SIMD build only (the callers guard them with ASC_FEATURE_SIMD).

@inline function lo8(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}

@inline function hi8(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

@inline function lo16(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
}

@inline function hi16(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
}

@inline function lo32(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
}

@inline function hi32(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
}

@inline function lo64(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
}

@inline function hi64(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
}

/** 2×2 tile of 64-bit elements. */
@inline export function tile64(dst: usize, src: usize, ss: usize, ds: usize): void {
  const r0 = v128.load(src);
  const r1 = v128.load(src + ss);
  const a0 = lo64(r0, r1);
  const a1 = hi64(r0, r1);
  v128.store(dst, a0);
  v128.store(dst + ds, a1);
}

/** 4×4 tile of 32-bit elements. */
@inline export function tile32(dst: usize, src: usize, ss: usize, ds: usize): void {
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
@inline export function tile16(dst: usize, src: usize, ss: usize, ds: usize): void {
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

/** 16×16 tile of 8-bit elements. */
@inline export function tile8(dst: usize, src: usize, ss: usize, ds: usize): void {
  tile8Rows(dst, src, ss, ds, 0, 16);
}

/**
 * The dst rows [from, to) of a 16×16 tile of 8-bit elements (the engine drops the shuffles of
 * the rows not stored). transpose.ts writes a tile in two halves of 8 rows when its 16 dst rows
 * would fall into one L1 set: 8 write streams fit the cache's 8 ways, 16 evict each other.
 */
@inline export function tile8Rows(dst: usize, src: usize, ss: usize, ds: usize, from: i32, to: i32): void {
  const r0 = v128.load(src);
  const r1 = v128.load(src + ss);
  const r2 = v128.load(src + 2 * ss);
  const r3 = v128.load(src + 3 * ss);
  const r4 = v128.load(src + 4 * ss);
  const r5 = v128.load(src + 5 * ss);
  const r6 = v128.load(src + 6 * ss);
  const r7 = v128.load(src + 7 * ss);
  const r8 = v128.load(src + 8 * ss);
  const r9 = v128.load(src + 9 * ss);
  const r10 = v128.load(src + 10 * ss);
  const r11 = v128.load(src + 11 * ss);
  const r12 = v128.load(src + 12 * ss);
  const r13 = v128.load(src + 13 * ss);
  const r14 = v128.load(src + 14 * ss);
  const r15 = v128.load(src + 15 * ss);
  const a0 = lo8(r0, r8);
  const a1 = hi8(r0, r8);
  const a2 = lo8(r1, r9);
  const a3 = hi8(r1, r9);
  const a4 = lo8(r2, r10);
  const a5 = hi8(r2, r10);
  const a6 = lo8(r3, r11);
  const a7 = hi8(r3, r11);
  const a8 = lo8(r4, r12);
  const a9 = hi8(r4, r12);
  const a10 = lo8(r5, r13);
  const a11 = hi8(r5, r13);
  const a12 = lo8(r6, r14);
  const a13 = hi8(r6, r14);
  const a14 = lo8(r7, r15);
  const a15 = hi8(r7, r15);
  const b0 = lo8(a0, a8);
  const b1 = hi8(a0, a8);
  const b2 = lo8(a1, a9);
  const b3 = hi8(a1, a9);
  const b4 = lo8(a2, a10);
  const b5 = hi8(a2, a10);
  const b6 = lo8(a3, a11);
  const b7 = hi8(a3, a11);
  const b8 = lo8(a4, a12);
  const b9 = hi8(a4, a12);
  const b10 = lo8(a5, a13);
  const b11 = hi8(a5, a13);
  const b12 = lo8(a6, a14);
  const b13 = hi8(a6, a14);
  const b14 = lo8(a7, a15);
  const b15 = hi8(a7, a15);
  const c0 = lo8(b0, b8);
  const c1 = hi8(b0, b8);
  const c2 = lo8(b1, b9);
  const c3 = hi8(b1, b9);
  const c4 = lo8(b2, b10);
  const c5 = hi8(b2, b10);
  const c6 = lo8(b3, b11);
  const c7 = hi8(b3, b11);
  const c8 = lo8(b4, b12);
  const c9 = hi8(b4, b12);
  const c10 = lo8(b5, b13);
  const c11 = hi8(b5, b13);
  const c12 = lo8(b6, b14);
  const c13 = hi8(b6, b14);
  const c14 = lo8(b7, b15);
  const c15 = hi8(b7, b15);
  const d0 = lo8(c0, c8);
  const d1 = hi8(c0, c8);
  const d2 = lo8(c1, c9);
  const d3 = hi8(c1, c9);
  const d4 = lo8(c2, c10);
  const d5 = hi8(c2, c10);
  const d6 = lo8(c3, c11);
  const d7 = hi8(c3, c11);
  const d8 = lo8(c4, c12);
  const d9 = hi8(c4, c12);
  const d10 = lo8(c5, c13);
  const d11 = hi8(c5, c13);
  const d12 = lo8(c6, c14);
  const d13 = hi8(c6, c14);
  const d14 = lo8(c7, c15);
  const d15 = hi8(c7, c15);
  if (from <= 0) v128.store(dst, d0);
  if (from <= 1 && 1 < to) v128.store(dst + ds, d1);
  if (from <= 2 && 2 < to) v128.store(dst + 2 * ds, d2);
  if (from <= 3 && 3 < to) v128.store(dst + 3 * ds, d3);
  if (from <= 4 && 4 < to) v128.store(dst + 4 * ds, d4);
  if (from <= 5 && 5 < to) v128.store(dst + 5 * ds, d5);
  if (from <= 6 && 6 < to) v128.store(dst + 6 * ds, d6);
  if (from <= 7 && 7 < to) v128.store(dst + 7 * ds, d7);
  if (from <= 8 && 8 < to) v128.store(dst + 8 * ds, d8);
  if (from <= 9 && 9 < to) v128.store(dst + 9 * ds, d9);
  if (from <= 10 && 10 < to) v128.store(dst + 10 * ds, d10);
  if (from <= 11 && 11 < to) v128.store(dst + 11 * ds, d11);
  if (from <= 12 && 12 < to) v128.store(dst + 12 * ds, d12);
  if (from <= 13 && 13 < to) v128.store(dst + 13 * ds, d13);
  if (from <= 14 && 14 < to) v128.store(dst + 14 * ds, d14);
  if (from <= 15 && 15 < to) v128.store(dst + 15 * ds, d15);
}
