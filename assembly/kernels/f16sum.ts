// f16 sums in the scaled domain. An f16 bit pattern moved into an f32's sign, exponent and
// mantissa places (sign | em << 13) is, read as an f32, the same value times 2^-112, exactly:
// f16 normals land on f32 normals and f16 subnormals on f32 subnormals. Sums of such values are
// the f32 sums of the true values times 2^-112, bit for bit: while a (partial) sum stays at or
// above 2^-14 its scaled twin is an f32 normal and rounds at the same relative place, and below
// that both sums are exact (multiples of 2^-24, resp. 2^-136, with few significant bits). The
// f16 rounding of a scaled sum is then one integer step: add 0xfff plus the kept LSB (ties to
// even), shift by 13 (subnormal results and the carry into the exponent fall out of the same
// step) and clamp at 0x7c00 (every sum of 65520 or more is Inf). So a sum costs three integer
// instructions per widening and six per narrowing, where the general path (half.ts) needs a
// select between a normal and a subnormal widening and one between two narrowings.
//
// Inf and NaN have no place in the scaled domain (their exponent field would be read as a
// finite 2^16): a block that holds one in any input goes the general way, for the whole block.
import { srcAt } from './loops';

/** Four f16 (sign-extended i16 lanes of `w`) as scaled f32 lanes. */
@inline
function scaled(w: v128): v128 {
  return v128.and(i32x4.shl(w, 13), i32x4.splat(0x8fffe000));
}

/** Four scaled f32 sums to f16 bit patterns, one per i32 lane. */
@inline
function narrow(s: v128): v128 {
  const a = v128.and(s, i32x4.splat(0x7fffffff));
  const odd = v128.and(i32x4.shr_u(a, 13), i32x4.splat(1));
  const r = i32x4.min_u(i32x4.shr_u(i32x4.add(i32x4.add(a, i32x4.splat(0xfff)), odd), 13), i32x4.splat(0x7c00));
  return v128.or(r, i32x4.shr_u(v128.xor(s, a), 16));
}

/** Magnitudes of eight f16 (sign dropped): above 0x7bff is Inf or NaN. */
@inline
function mag(v: v128): v128 {
  return v128.and(v, i16x8.splat(0x7fff));
}

@inline
function infOrNaN(m: v128): bool {
  return v128.any_true(i16x8.gt_u(m, i16x8.splat(0x7bff)));
}

@inline
function lo(v: v128): v128 {
  return scaled(i32x4.extend_low_i16x8_s(v));
}

@inline
function hi(v: v128): v128 {
  return scaled(i32x4.extend_high_i16x8_s(v));
}

@inline
function pack(l: v128, h: v128): v128 {
  return i16x8.narrow_i32x4_u(narrow(l), narrow(h));
}

/**
 * dst[i] = round(a[i] + b[i]) over whole 32-byte blocks of finite inputs; returns the bytes
 * done: it stops at the first block holding an Inf or NaN (before writing it).
 */
@inline
export function f16SumBlocks(dst: usize, a: usize, b: usize, bytes: usize, from: usize): usize {
  let i = from;
  for (; i + 32 <= bytes; i += 32) {
    const x0 = v128.load(a + i);
    const x1 = v128.load(a + i, 16);
    const y0 = v128.load(b + i);
    const y1 = v128.load(b + i, 16);
    if (infOrNaN(i16x8.max_u(i16x8.max_u(mag(x0), mag(x1)), i16x8.max_u(mag(y0), mag(y1))))) break;
    v128.store(dst + i, pack(f32x4.add(lo(x0), lo(y0)), f32x4.add(hi(x0), hi(y0))));
    v128.store(dst + i, pack(f32x4.add(lo(x1), lo(y1)), f32x4.add(hi(x1), hi(y1))), 16);
  }
  return i;
}

/**
 * The k-way twin: dst[i] = round(((s0[i] + s1[i]) + s2[i]) + …) over whole 32-byte blocks of
 * finite inputs, stopping at the first block holding an Inf or NaN; returns the bytes done.
 */
@inline
export function f16SumFoldBlocks(dst: usize, table: usize, k: i32, bytes: usize, from: usize): usize {
  const p0 = srcAt(table, 0);
  let i = from;
  for (; i + 32 <= bytes; i += 32) {
    let x = v128.load(p0 + i);
    let y = v128.load(p0 + i, 16);
    let m = i16x8.max_u(mag(x), mag(y));
    let l0 = lo(x);
    let h0 = hi(x);
    let l1 = lo(y);
    let h1 = hi(y);
    for (let j = 1; j < k; j++) {
      const p = srcAt(table, j) + i;
      x = v128.load(p);
      y = v128.load(p, 16);
      m = i16x8.max_u(m, i16x8.max_u(mag(x), mag(y)));
      l0 = f32x4.add(l0, lo(x));
      h0 = f32x4.add(h0, hi(x));
      l1 = f32x4.add(l1, lo(y));
      h1 = f32x4.add(h1, hi(y));
    }
    if (infOrNaN(m)) break;
    v128.store(dst + i, pack(l0, h0));
    v128.store(dst + i, pack(l1, h1), 16);
  }
  return i;
}
