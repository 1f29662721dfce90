// Transposes of 8-bit elements (see tiles.ts for the method): the 16×16 tile, 16 rows of 16
// bytes read at `src` with a stride of `ss` bytes and written as 16 rows at `dst` with a
// stride of `ds`, and the 8 × 16 half tile. SIMD build only.

@inline
function lo8(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}

@inline
function hi8(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

/** 16×16 tile of 8-bit elements. */
@inline
export function tile8(dst: usize, src: usize, ss: usize, ds: usize): void {
  tile8Rows(dst, src, ss, ds, 0, 16);
}

/**
 * The dst rows [from, to) of a 16×16 tile of 8-bit elements (the engine drops the shuffles of
 * the rows not stored). transpose.ts writes a tile in two halves of 8 rows when its 16 dst rows
 * would fall into one L1 set: 8 write streams fit the cache's 8 ways, 16 evict each other.
 */
@inline
export function tile8Rows(dst: usize, src: usize, ss: usize, ds: usize, from: i32, to: i32): void {
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
  store8(dst, ds, r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15, from, to);
}

@inline
function store8(
  dst: usize,
  ds: usize,
  r0: v128,
  r1: v128,
  r2: v128,
  r3: v128,
  r4: v128,
  r5: v128,
  r6: v128,
  r7: v128,
  r8: v128,
  r9: v128,
  r10: v128,
  r11: v128,
  r12: v128,
  r13: v128,
  r14: v128,
  r15: v128,
  from: i32,
  to: i32,
): void {
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

/**
 * An 8 × 16 tile (8 src rows of 16 bytes) as 16 dst rows of 8 bytes: three rounds of the
 * perfect shuffle leave dst rows 2k and 2k + 1 in the low and the high half of vector k.
 * transpose.ts reads 1-byte src rows far apart with these: a full tile's 16 src rows share an
 * L1 set when the planes alias and, with 8 ways, evict each other between the tiles across a
 * line; 8 fit. Reading four full tiles side by side, each row's 64 bytes at once, was 1.4×
 * the single tiles in cache, and these are 1.2–1.4× that (1.06–1.3× at 16 MiB).
 */
@inline
export function tile8Half(dst: usize, src: usize, ss: usize, ds: usize): void {
  const r0 = v128.load(src);
  const r1 = v128.load(src + ss);
  const r2 = v128.load(src + 2 * ss);
  const r3 = v128.load(src + 3 * ss);
  const r4 = v128.load(src + 4 * ss);
  const r5 = v128.load(src + 5 * ss);
  const r6 = v128.load(src + 6 * ss);
  const r7 = v128.load(src + 7 * ss);
  const a0 = lo8(r0, r4);
  const a1 = hi8(r0, r4);
  const a2 = lo8(r1, r5);
  const a3 = hi8(r1, r5);
  const a4 = lo8(r2, r6);
  const a5 = hi8(r2, r6);
  const a6 = lo8(r3, r7);
  const a7 = hi8(r3, r7);
  const b0 = lo8(a0, a4);
  const b1 = hi8(a0, a4);
  const b2 = lo8(a1, a5);
  const b3 = hi8(a1, a5);
  const b4 = lo8(a2, a6);
  const b5 = hi8(a2, a6);
  const b6 = lo8(a3, a7);
  const b7 = hi8(a3, a7);
  half2(dst, ds, lo8(b0, b4));
  half2(dst + 2 * ds, ds, hi8(b0, b4));
  half2(dst + 4 * ds, ds, lo8(b1, b5));
  half2(dst + 6 * ds, ds, hi8(b1, b5));
  half2(dst + 8 * ds, ds, lo8(b2, b6));
  half2(dst + 10 * ds, ds, hi8(b2, b6));
  half2(dst + 12 * ds, ds, lo8(b3, b7));
  half2(dst + 14 * ds, ds, hi8(b3, b7));
}

@inline
function half2(dst: usize, ds: usize, v: v128): void {
  v128.store64_lane(dst, v, 0);
  v128.store64_lane(dst + ds, v, 1);
}
