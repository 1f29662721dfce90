// Reduction loops for the halves (H = F16 or BF16 from half.ts, K = an op class on f32 from
// lanes.ts). Elements are widened to f32, combined in f32, and rounded once when stored: a
// k-way fold keeps its whole accumulation in f32. Steps: 32 bytes (sixteen halves, four f32x4
// accumulators), then 16 bytes, then single elements.
//
// Max and min skip the conversions in the vector code: the larger of two halves is one of the
// two bit patterns, so they compare order keys instead (sign-magnitude turned into two's
// complement: negatives get their magnitude bits flipped, so -0 sorts just below +0), and any
// NaN among the inputs gives the canonical NaN. That is what widening, fmax / fmin and
// narrowing give, bit for bit; the scalar tail still goes through f32.

import { f16SumBlocks, f16SumFoldBlocks } from './f16sum';
import { store16 } from './half';
import { srcAt } from './loops';

/** Order key of eight halves; the mapping is its own inverse. */
@inline
function key(v: v128): v128 {
  return v128.xor(v, i16x8.shr_u(i16x8.shr_s(v, 15), 1));
}

/** Eight halves of x ⊕ y (16 bytes each way). */
@inline
function pair<H, K>(x: v128, y: v128): v128 {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  if (isDefined(op.ord)) {
    const r = key(op.ord(key(x), key(y)));
    return v128.bitselect(h.qnan(), r, v128.or(h.nan(x), h.nan(y)));
  }
  return h.pack(op.v(h.lo(x), h.lo(y)), op.v(h.hi(x), h.hi(y)));
}

/** Max / min k-way fold on order keys over whole 16-byte blocks; returns the bytes done. */
@inline
function orderedFoldBlocks<H, K>(dst: usize, table: usize, k: i32, bytes: usize): usize {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  const p0 = srcAt(table, 0);
  let i: usize = 0;
  for (; i + 32 <= bytes; i += 32) {
    let x = v128.load(p0 + i);
    let y = v128.load(p0 + i, 16);
    let a0 = key(x);
    let a1 = key(y);
    let n0 = h.nan(x);
    let n1 = h.nan(y);
    for (let j = 1; j < k; j++) {
      const p = srcAt(table, j) + i;
      x = v128.load(p);
      y = v128.load(p, 16);
      a0 = op.ord(a0, key(x));
      a1 = op.ord(a1, key(y));
      n0 = v128.or(n0, h.nan(x));
      n1 = v128.or(n1, h.nan(y));
    }
    v128.store(dst + i, v128.bitselect(h.qnan(), key(a0), n0));
    v128.store(dst + i, v128.bitselect(h.qnan(), key(a1), n1), 16);
  }
  for (; i + 16 <= bytes; i += 16) {
    let x = v128.load(p0 + i);
    let a = key(x);
    let m = h.nan(x);
    for (let j = 1; j < k; j++) {
      x = v128.load(srcAt(table, j) + i);
      a = op.ord(a, key(x));
      m = v128.or(m, h.nan(x));
    }
    v128.store(dst + i, v128.bitselect(h.qnan(), key(a), m));
  }
  return i;
}

/** Sixteen halves of a ⊕ b at byte i (32 bytes each way), widened to f32 unless ordered. */
@inline
function pairBlock<H, K>(dst: usize, a: usize, b: usize, i: usize): void {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  const x0 = v128.load(a + i);
  const x1 = v128.load(a + i, 16);
  const y0 = v128.load(b + i);
  const y1 = v128.load(b + i, 16);
  if (isDefined(op.ord)) {
    v128.store(dst + i, pair<H, K>(x0, y0));
    v128.store(dst + i, pair<H, K>(x1, y1), 16);
  } else {
    const l0 = op.v(h.lo(x0), h.lo(y0));
    const h0 = op.v(h.hi(x0), h.hi(y0));
    store16<H>(dst + i, l0, h0, op.v(h.lo(x1), h.lo(y1)), op.v(h.hi(x1), h.hi(y1)));
  }
}

/** Whether H ⊕ K is an f16 sum (scaled-domain loops, f16sum.ts). */
@inline
function scaledSum<H, K>(): bool {
  return isDefined(changetype<H>(0).scaledSums) && isDefined(changetype<K>(0).adds);
}

/** dst[i] = round(a[i] ⊕ b[i]); dst may be a or b. */
export function halfBinary<H, K>(dst: usize, a: usize, b: usize, n: usize): void {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  const bytes = n << 1;
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    if (scaledSum<H, K>()) {
      // Scaled-domain blocks; a block holding Inf or NaN goes the general way.
      for (i = f16SumBlocks(dst, a, b, bytes, 0); i + 32 <= bytes; i = f16SumBlocks(dst, a, b, bytes, i + 32)) {
        pairBlock<H, K>(dst, a, b, i);
      }
    } else {
      for (; i + 32 <= bytes; i += 32) pairBlock<H, K>(dst, a, b, i);
    }
    for (; i + 16 <= bytes; i += 16) v128.store(dst + i, pair<H, K>(v128.load(a + i), v128.load(b + i)));
  }
  for (; i < bytes; i += 2) {
    store<u16>(dst + i, h.down(op.s(h.up(load<u16>(a + i)), h.up(load<u16>(b + i)))));
  }
}

/** Sum / prod k-way fold in f32 over whole 16-byte blocks; returns the bytes done. */
@inline
function widenedFoldBlocks<H, K>(dst: usize, table: usize, k: i32, bytes: usize): usize {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  const p0 = srcAt(table, 0);
  const p1 = srcAt(table, 1);
  let i: usize = 0;
  // f16 sums: scaled-domain blocks, each block holding Inf or NaN done the general way (once).
  const scaled = scaledSum<H, K>();
  if (scaled) i = f16SumFoldBlocks(dst, table, k, bytes, 0);
  for (; i + 32 <= bytes; i = scaled ? f16SumFoldBlocks(dst, table, k, bytes, i + 32) : i + 32) {
    let x = v128.load(p0 + i);
    let y = v128.load(p1 + i);
    let l0 = op.v(h.lo(x), h.lo(y));
    let h0 = op.v(h.hi(x), h.hi(y));
    x = v128.load(p0 + i, 16);
    y = v128.load(p1 + i, 16);
    let l1 = op.v(h.lo(x), h.lo(y));
    let h1 = op.v(h.hi(x), h.hi(y));
    for (let j = 2; j < k; j++) {
      const p = srcAt(table, j) + i;
      x = v128.load(p);
      y = v128.load(p, 16);
      l0 = op.v(l0, h.lo(x));
      h0 = op.v(h0, h.hi(x));
      l1 = op.v(l1, h.lo(y));
      h1 = op.v(h1, h.hi(y));
    }
    store16<H>(dst + i, l0, h0, l1, h1);
  }
  for (; i + 16 <= bytes; i += 16) {
    const x = v128.load(p0 + i);
    const y = v128.load(p1 + i);
    let l = op.v(h.lo(x), h.lo(y));
    let u = op.v(h.hi(x), h.hi(y));
    for (let j = 2; j < k; j++) {
      const z = v128.load(srcAt(table, j) + i);
      l = op.v(l, h.lo(z));
      u = op.v(u, h.hi(z));
    }
    v128.store(dst + i, h.pack(l, u));
  }
  return i;
}

/** dst[i] = round(((s0[i] ⊕ s1[i]) ⊕ s2[i]) ⊕ …) for k >= 2 sources; dst may be any source. */
export function halfFoldK<H, K>(dst: usize, table: usize, k: i32, n: usize): void {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  const bytes = n << 1;
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    if (isDefined(op.ord)) i = orderedFoldBlocks<H, K>(dst, table, k, bytes);
    else i = widenedFoldBlocks<H, K>(dst, table, k, bytes);
  }
  const p0 = srcAt(table, 0);
  const p1 = srcAt(table, 1);
  for (; i < bytes; i += 2) {
    let acc = op.s(h.up(load<u16>(p0 + i)), h.up(load<u16>(p1 + i)));
    for (let j = 2; j < k; j++) acc = op.s(acc, h.up(load<u16>(srcAt(table, j) + i)));
    store<u16>(dst + i, h.down(acc));
  }
}

/** dst[i] = round(src[i] * factor) in f32; dst may be src. */
export function halfScale<H>(dst: usize, src: usize, n: usize, factor: f32): void {
  const h = changetype<H>(0);
  const bytes = n << 1;
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    const f = f32x4.splat(factor);
    for (; i + 32 <= bytes; i += 32) {
      const x0 = v128.load(src + i);
      const x1 = v128.load(src + i, 16);
      const l0 = f32x4.mul(h.lo(x0), f);
      const h0 = f32x4.mul(h.hi(x0), f);
      store16<H>(dst + i, l0, h0, f32x4.mul(h.lo(x1), f), f32x4.mul(h.hi(x1), f));
    }
    for (; i + 16 <= bytes; i += 16) {
      const x = v128.load(src + i);
      v128.store(dst + i, h.pack(f32x4.mul(h.lo(x), f), f32x4.mul(h.hi(x), f)));
    }
  }
  for (; i < bytes; i += 2) store<u16>(dst + i, h.down(h.up(load<u16>(src + i)) * factor));
}
