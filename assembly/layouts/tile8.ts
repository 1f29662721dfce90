// The 16×16 transpose of 8-bit elements (see tiles.ts for the method): 16 rows of 16 bytes
// read at `src` with a stride of `ss` bytes, written as 16 rows at `dst` with a stride of `ds`.
// SIMD build only.

@inline function lo8(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}

@inline function hi8(a: v128, b: v128): v128 {
  return i8x16.shuffle(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
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
  store8(dst, ds, r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15, from, to);
}

/**
 * Four 16×16 tiles side by side (16 rows of 64 bytes, a cache line each when aligned): each
 * src row is read whole before the next, so 16 src rows of one L1 set (8 ways) are not
 * evicted between the four tiles' visits. The 64 vectors exceed the registers: the engine
 * keeps the rest on its stack, which stays in L1.
 */
@inline export function tile8x4(dst: usize, src: usize, ss: usize, ds: usize): void {
  const r0_0 = v128.load(src + 0 * ss + 0);
  const r0_1 = v128.load(src + 0 * ss + 16);
  const r0_2 = v128.load(src + 0 * ss + 32);
  const r0_3 = v128.load(src + 0 * ss + 48);
  const r1_0 = v128.load(src + 1 * ss + 0);
  const r1_1 = v128.load(src + 1 * ss + 16);
  const r1_2 = v128.load(src + 1 * ss + 32);
  const r1_3 = v128.load(src + 1 * ss + 48);
  const r2_0 = v128.load(src + 2 * ss + 0);
  const r2_1 = v128.load(src + 2 * ss + 16);
  const r2_2 = v128.load(src + 2 * ss + 32);
  const r2_3 = v128.load(src + 2 * ss + 48);
  const r3_0 = v128.load(src + 3 * ss + 0);
  const r3_1 = v128.load(src + 3 * ss + 16);
  const r3_2 = v128.load(src + 3 * ss + 32);
  const r3_3 = v128.load(src + 3 * ss + 48);
  const r4_0 = v128.load(src + 4 * ss + 0);
  const r4_1 = v128.load(src + 4 * ss + 16);
  const r4_2 = v128.load(src + 4 * ss + 32);
  const r4_3 = v128.load(src + 4 * ss + 48);
  const r5_0 = v128.load(src + 5 * ss + 0);
  const r5_1 = v128.load(src + 5 * ss + 16);
  const r5_2 = v128.load(src + 5 * ss + 32);
  const r5_3 = v128.load(src + 5 * ss + 48);
  const r6_0 = v128.load(src + 6 * ss + 0);
  const r6_1 = v128.load(src + 6 * ss + 16);
  const r6_2 = v128.load(src + 6 * ss + 32);
  const r6_3 = v128.load(src + 6 * ss + 48);
  const r7_0 = v128.load(src + 7 * ss + 0);
  const r7_1 = v128.load(src + 7 * ss + 16);
  const r7_2 = v128.load(src + 7 * ss + 32);
  const r7_3 = v128.load(src + 7 * ss + 48);
  const r8_0 = v128.load(src + 8 * ss + 0);
  const r8_1 = v128.load(src + 8 * ss + 16);
  const r8_2 = v128.load(src + 8 * ss + 32);
  const r8_3 = v128.load(src + 8 * ss + 48);
  const r9_0 = v128.load(src + 9 * ss + 0);
  const r9_1 = v128.load(src + 9 * ss + 16);
  const r9_2 = v128.load(src + 9 * ss + 32);
  const r9_3 = v128.load(src + 9 * ss + 48);
  const r10_0 = v128.load(src + 10 * ss + 0);
  const r10_1 = v128.load(src + 10 * ss + 16);
  const r10_2 = v128.load(src + 10 * ss + 32);
  const r10_3 = v128.load(src + 10 * ss + 48);
  const r11_0 = v128.load(src + 11 * ss + 0);
  const r11_1 = v128.load(src + 11 * ss + 16);
  const r11_2 = v128.load(src + 11 * ss + 32);
  const r11_3 = v128.load(src + 11 * ss + 48);
  const r12_0 = v128.load(src + 12 * ss + 0);
  const r12_1 = v128.load(src + 12 * ss + 16);
  const r12_2 = v128.load(src + 12 * ss + 32);
  const r12_3 = v128.load(src + 12 * ss + 48);
  const r13_0 = v128.load(src + 13 * ss + 0);
  const r13_1 = v128.load(src + 13 * ss + 16);
  const r13_2 = v128.load(src + 13 * ss + 32);
  const r13_3 = v128.load(src + 13 * ss + 48);
  const r14_0 = v128.load(src + 14 * ss + 0);
  const r14_1 = v128.load(src + 14 * ss + 16);
  const r14_2 = v128.load(src + 14 * ss + 32);
  const r14_3 = v128.load(src + 14 * ss + 48);
  const r15_0 = v128.load(src + 15 * ss + 0);
  const r15_1 = v128.load(src + 15 * ss + 16);
  const r15_2 = v128.load(src + 15 * ss + 32);
  const r15_3 = v128.load(src + 15 * ss + 48);
  store8(dst + 0 * ds, ds, r0_0, r1_0, r2_0, r3_0, r4_0, r5_0, r6_0, r7_0, r8_0, r9_0, r10_0, r11_0, r12_0, r13_0, r14_0, r15_0, 0, 16);
  store8(dst + 16 * ds, ds, r0_1, r1_1, r2_1, r3_1, r4_1, r5_1, r6_1, r7_1, r8_1, r9_1, r10_1, r11_1, r12_1, r13_1, r14_1, r15_1, 0, 16);
  store8(dst + 32 * ds, ds, r0_2, r1_2, r2_2, r3_2, r4_2, r5_2, r6_2, r7_2, r8_2, r9_2, r10_2, r11_2, r12_2, r13_2, r14_2, r15_2, 0, 16);
  store8(dst + 48 * ds, ds, r0_3, r1_3, r2_3, r3_3, r4_3, r5_3, r6_3, r7_3, r8_3, r9_3, r10_3, r11_3, r12_3, r13_3, r14_3, r15_3, 0, 16);
}

@inline function store8(dst: usize, ds: usize, r0: v128, r1: v128, r2: v128, r3: v128, r4: v128, r5: v128, r6: v128, r7: v128, r8: v128, r9: v128, r10: v128, r11: v128, r12: v128, r13: v128, r14: v128, r15: v128, from: i32, to: i32): void {
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
