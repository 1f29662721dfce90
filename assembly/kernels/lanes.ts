// The four reductions as lane operations, for every dtype whose elements keep their width
// (f32, f64, i32, u32, i8, u8, i64). Each op is a field-less class: the loops in loops.ts take
// it as a type parameter and call its methods on `changetype<K>(0)`, so every dtype × op pair
// compiles to its own loop with the operation inlined.
//
// Semantics, the same in the vector body and in the scalar tail:
//   floats: IEEE add / mul; max / min propagate NaN and order -0 below +0 (wasm fmax / fmin).
//           Any NaN a kernel writes is the canonical quiet NaN (see canonV / canonS): wasm leaves
//           the payload of an arithmetic NaN open, so two builds or two engines could differ.
//   integers: wrap-around add and mul; max / min signed or unsigned as the dtype is.

/** Canonical quiet NaNs written in place of every NaN result. */
export const F32_QNAN: u32 = 0x7fc00000;
export const F64_QNAN: u64 = 0x7ff8000000000000;

@inline
export function vadd<T>(a: v128, b: v128): v128 {
  if (isFloat<T>()) return sizeof<T>() == 4 ? f32x4.add(a, b) : f64x2.add(a, b);
  if (sizeof<T>() == 1) return i8x16.add(a, b);
  if (sizeof<T>() == 2) return i16x8.add(a, b);
  if (sizeof<T>() == 4) return i32x4.add(a, b);
  return i64x2.add(a, b);
}

@inline
export function vmul<T>(a: v128, b: v128): v128 {
  if (isFloat<T>()) return sizeof<T>() == 4 ? f32x4.mul(a, b) : f64x2.mul(a, b);
  if (sizeof<T>() == 1) return mulBytes(a, b);
  if (sizeof<T>() == 2) return i16x8.mul(a, b);
  if (sizeof<T>() == 4) return i32x4.mul(a, b);
  return i64x2.mul(a, b);
}

/**
 * Byte-wise wrapping multiply (wasm SIMD has no i8x16.mul). The low byte of a 16-bit product
 * depends only on the low bytes of its factors, so one i16x8.mul gives the even bytes; the odd
 * bytes come from (a >> 8) * (b & 0xff00), whose product lands in the high byte.
 */
@inline
function mulBytes(a: v128, b: v128): v128 {
  const lowMask = i16x8.splat(0x00ff);
  const even = v128.and(i16x8.mul(a, b), lowMask);
  const odd = i16x8.mul(i16x8.shr_u(a, 8), v128.andnot(b, lowMask));
  return v128.or(even, odd);
}

@inline
export function vmax<T>(a: v128, b: v128): v128 {
  if (isFloat<T>()) return sizeof<T>() == 4 ? f32x4.max(a, b) : f64x2.max(a, b);
  if (sizeof<T>() == 1) return isSigned<T>() ? i8x16.max_s(a, b) : i8x16.max_u(a, b);
  if (sizeof<T>() == 2) return isSigned<T>() ? i16x8.max_s(a, b) : i16x8.max_u(a, b);
  if (sizeof<T>() == 4) return isSigned<T>() ? i32x4.max_s(a, b) : i32x4.max_u(a, b);
  // i64x2 has a signed compare but no max: select by it (u64 is not a webccl dtype).
  return v128.bitselect(a, b, i64x2.gt_s(a, b));
}

@inline
export function vmin<T>(a: v128, b: v128): v128 {
  if (isFloat<T>()) return sizeof<T>() == 4 ? f32x4.min(a, b) : f64x2.min(a, b);
  if (sizeof<T>() == 1) return isSigned<T>() ? i8x16.min_s(a, b) : i8x16.min_u(a, b);
  if (sizeof<T>() == 2) return isSigned<T>() ? i16x8.min_s(a, b) : i16x8.min_u(a, b);
  if (sizeof<T>() == 4) return isSigned<T>() ? i32x4.min_s(a, b) : i32x4.min_u(a, b);
  return v128.bitselect(a, b, i64x2.lt_s(a, b));
}

/** Replaces NaN lanes by the canonical quiet NaN; integers pass through. */
@inline
export function canonV<T>(r: v128): v128 {
  if (isFloat<T>()) {
    if (sizeof<T>() == 4) return v128.bitselect(i32x4.splat(F32_QNAN), r, nanMask<T>(r));
    return v128.bitselect(i64x2.splat(F64_QNAN), r, nanMask<T>(r));
  }
  return r;
}

/** NaN mask of a float vector (all-ones lanes where NaN). */
@inline
function nanMask<T>(r: v128): v128 {
  return sizeof<T>() == 4 ? f32x4.ne(r, r) : f64x2.ne(r, r);
}

/**
 * Stores four result blocks at dst .. dst+64. Float NaN lanes are canonicalised, with one test
 * per 64 bytes and the rewrite only when a NaN is there: cheaper than four selects per block
 * on NaN-free data, the same bytes either way.
 */
@inline
export function store4<T>(dst: usize, r0: v128, r1: v128, r2: v128, r3: v128): void {
  if (isFloat<T>()) {
    // NaN in any lane of r0..r3 makes that lane of the sum NaN (so does +Inf + -Inf: a
    // harmless false alarm), so one compare covers the block.
    const t = vadd<T>(vadd<T>(r0, r1), vadd<T>(r2, r3));
    if (v128.any_true(nanMask<T>(t))) {
      r0 = canonV<T>(r0);
      r1 = canonV<T>(r1);
      r2 = canonV<T>(r2);
      r3 = canonV<T>(r3);
    }
  }
  v128.store(dst, r0);
  v128.store(dst, r1, 16);
  v128.store(dst, r2, 32);
  v128.store(dst, r3, 48);
}

/** Scalar twin of canonV. */
@inline
export function canonS<T>(r: T): T {
  if (isFloat<T>()) {
    if (sizeof<T>() == 4) return select<T>(reinterpret<T>(F32_QNAN), r, r != r);
    return select<T>(reinterpret<T>(F64_QNAN), r, r != r);
  }
  return r;
}

/** v128 with `x` in every lane of type T. */
@inline
export function vsplat<T>(x: T): v128 {
  if (sizeof<T>() == 4) return f32x4.splat(<f32>x);
  return f64x2.splat(<f64>x);
}

@final
export class Sum<T> {
  /** Marks addition: f16 sums take the scaled-domain loops of f16sum.ts. */
  @inline adds(): bool {
    return true;
  }
  @inline v(a: v128, b: v128): v128 {
    return vadd<T>(a, b);
  }
  @inline s(a: T, b: T): T {
    return <T>(a + b);
  }
}

@final
export class Prod<T> {
  @inline v(a: v128, b: v128): v128 {
    return vmul<T>(a, b);
  }
  @inline s(a: T, b: T): T {
    return <T>(a * b);
  }
}

// Max and Min also offer `ord`, the same choice on i16 order keys (see halfloops.ts): halves
// need no widening for it.
@final
export class Max<T> {
  @inline v(a: v128, b: v128): v128 {
    return vmax<T>(a, b);
  }
  @inline ord(a: v128, b: v128): v128 {
    return i16x8.max_s(a, b);
  }
  @inline s(a: T, b: T): T {
    return max<T>(a, b);
  }
}

@final
export class Min<T> {
  @inline v(a: v128, b: v128): v128 {
    return vmin<T>(a, b);
  }
  @inline ord(a: v128, b: v128): v128 {
    return i16x8.min_s(a, b);
  }
  @inline s(a: T, b: T): T {
    return min<T>(a, b);
  }
}
