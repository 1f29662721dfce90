// 16-bit floats (IEEE binary16 "f16" and bfloat16 "bf16"), stored as u16 and computed in f32.
// Widening to f32 is exact and keeps every bit (NaN payloads included). Narrowing rounds to
// nearest, ties to even, through subnormals and into ±Inf; every NaN narrows to the canonical
// quiet NaN (0x7e00 for f16, 0x7fc0 for bf16), sign dropped. The vector versions work on the
// bits of i32x4 lanes and take the same decisions as the scalar ones, so both builds agree.
//
// F16 and BF16 are field-less classes used as type parameters (see halfloops.ts):
//   lo(v) / hi(v): the low / high four halves of 16 bytes as f32x4
//   pack(lo, hi):  eight f32 lanes rounded to eight halves (16 bytes)
//   up(h) / down(x): one element each way.

export const F16_QNAN: u32 = 0x7e00;
export const BF16_QNAN: u32 = 0x7fc0;

// f16 -> f32. Normals: shift the 15 exponent+mantissa bits into place and rebias the exponent
// (+112 << 23). Subnormals (and zero): the mantissa as an integer times 2^-24, exact in f32 and
// with no subnormal operand (which some CPUs slow down). Inf / NaN: all-ones f32 exponent.
const F32_REBIAS: u32 = 0x38000000; // 112 << 23
const TWO_M24: u32 = 0x33800000; // 2^-24
// f32 -> f16. Normals: rebias (-112 << 23) and add 0xfff plus the kept mantissa LSB before
// the shift by 13 (round half to even). Below 2^-14: adding 0.5f makes the f32 adder round to a
// multiple of 2^-24, and the low bits of the sum are then the f16 subnormal mantissa.
const F16_REBIAS_ROUND: u32 = 0xc8000fff; // 0xfff - 0x38000000 (mod 2^32)
const F16_MIN_NORMAL_M1: u32 = 0x387fffff; // below 2^-14 -> subnormal path
const F16_OVERFLOW_M1: u32 = 0x477fefff; // at or above 65520 -> Inf
const F32_INF: u32 = 0x7f800000;
const HALF_F: u32 = 0x3f000000; // 0.5f

@inline function f16BitsToF32(h: u32): u32 {
  const em = h & 0x7fff;
  const sign = (h ^ em) << 16;
  const o = em << 13;
  let r: u32;
  if (em > 0x7bff) r = o | F32_INF;
  else if (em > 0x3ff) r = o + F32_REBIAS;
  else r = reinterpret<u32>(<f32>em * reinterpret<f32>(TWO_M24));
  return r | sign;
}

@inline function f32BitsToF16(x: u32): u32 {
  const a = x & 0x7fffffff;
  if (a > F32_INF) return F16_QNAN;
  let r: u32;
  if (a > F16_OVERFLOW_M1) r = 0x7c00;
  else if (a > F16_MIN_NORMAL_M1) r = (a + F16_REBIAS_ROUND + ((a >> 13) & 1)) >> 13;
  else r = reinterpret<u32>(reinterpret<f32>(a) + reinterpret<f32>(HALF_F)) - HALF_F;
  return r | ((x ^ a) >> 16);
}

@inline function f16x4ToF32(h: v128): v128 {
  const em = v128.and(h, i32x4.splat(0x7fff));
  const sign = i32x4.shl(v128.xor(h, em), 16);
  const o = i32x4.shl(em, 13);
  const sub = f32x4.mul(f32x4.convert_i32x4_s(em), i32x4.splat(TWO_M24));
  let r = v128.bitselect(i32x4.add(o, i32x4.splat(F32_REBIAS)), sub, i32x4.gt_s(em, i32x4.splat(0x3ff)));
  r = v128.bitselect(v128.or(o, i32x4.splat(F32_INF)), r, i32x4.gt_s(em, i32x4.splat(0x7bff)));
  return v128.or(r, sign);
}

/** Four f32 lanes to four f16 bit patterns, one per i32 lane. */
@inline function f32x4ToF16(x: v128): v128 {
  const a = v128.and(x, i32x4.splat(0x7fffffff));
  const odd = v128.and(i32x4.shr_u(a, 13), i32x4.splat(1));
  const nrm = i32x4.shr_u(i32x4.add(i32x4.add(a, i32x4.splat(F16_REBIAS_ROUND)), odd), 13);
  const sub = i32x4.sub(f32x4.add(a, i32x4.splat(HALF_F)), i32x4.splat(HALF_F));
  let r = v128.bitselect(nrm, sub, i32x4.gt_s(a, i32x4.splat(F16_MIN_NORMAL_M1)));
  r = v128.bitselect(i32x4.splat(0x7c00), r, i32x4.gt_s(a, i32x4.splat(F16_OVERFLOW_M1)));
  r = v128.or(r, i32x4.shr_u(v128.xor(x, a), 16));
  return v128.bitselect(i32x4.splat(F16_QNAN), r, i32x4.gt_s(a, i32x4.splat(F32_INF)));
}

// bf16 is the top half of an f32: widening is a shift; narrowing adds 0x7fff plus the kept LSB
// (round half to even; a carry runs into the exponent and, past the largest finite, to Inf).
@inline function f32BitsToBf16(x: u32): u32 {
  if ((x & 0x7fffffff) > F32_INF) return BF16_QNAN;
  return (x + 0x7fff + ((x >> 16) & 1)) >> 16;
}

@inline function f32x4ToBf16(x: v128): v128 {
  const odd = v128.and(i32x4.shr_u(x, 16), i32x4.splat(1));
  const r = i32x4.shr_u(i32x4.add(i32x4.add(x, i32x4.splat(0x7fff)), odd), 16);
  const nan = i32x4.gt_s(v128.and(x, i32x4.splat(0x7fffffff)), i32x4.splat(F32_INF));
  return v128.bitselect(i32x4.splat(BF16_QNAN), r, nan);
}

@final export class F16 {
  @inline lo(v: v128): v128 {
    return f16x4ToF32(i32x4.extend_low_i16x8_u(v));
  }
  @inline hi(v: v128): v128 {
    return f16x4ToF32(i32x4.extend_high_i16x8_u(v));
  }
  @inline pack(lo: v128, hi: v128): v128 {
    return i16x8.narrow_i32x4_u(f32x4ToF16(lo), f32x4ToF16(hi));
  }
  @inline up(h: u32): f32 {
    return reinterpret<f32>(f16BitsToF32(h));
  }
  @inline down(x: f32): u32 {
    return f32BitsToF16(reinterpret<u32>(x));
  }
}

@final export class BF16 {
  @inline lo(v: v128): v128 {
    return i32x4.shl(i32x4.extend_low_i16x8_u(v), 16);
  }
  @inline hi(v: v128): v128 {
    return i32x4.shl(i32x4.extend_high_i16x8_u(v), 16);
  }
  @inline pack(lo: v128, hi: v128): v128 {
    return i16x8.narrow_i32x4_u(f32x4ToBf16(lo), f32x4ToBf16(hi));
  }
  @inline up(h: u32): f32 {
    return reinterpret<f32>(h << 16);
  }
  @inline down(x: f32): u32 {
    return f32BitsToBf16(reinterpret<u32>(x));
  }
}

/** f32 -> half for n elements. dst may equal src (the write never passes the read). */
export function fromF32<H>(dst: usize, src: usize, n: usize): void {
  const h = changetype<H>(0);
  let i: usize = 0; // element index
  if (ASC_FEATURE_SIMD) {
    for (; i + 16 <= n; i += 16) {
      const s = src + (i << 2);
      const x0 = v128.load(s);
      const x1 = v128.load(s, 16);
      const x2 = v128.load(s, 32);
      const x3 = v128.load(s, 48);
      v128.store(dst + (i << 1), h.pack(x0, x1));
      v128.store(dst + (i << 1), h.pack(x2, x3), 16);
    }
    for (; i + 8 <= n; i += 8) {
      const s = src + (i << 2);
      v128.store(dst + (i << 1), h.pack(v128.load(s), v128.load(s, 16)));
    }
  }
  for (; i < n; i++) store<u16>(dst + (i << 1), h.down(load<f32>(src + (i << 2))));
}

/** half -> f32 for n elements; dst and src must not overlap. */
export function toF32<H>(dst: usize, src: usize, n: usize): void {
  const h = changetype<H>(0);
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 16 <= n; i += 16) {
      const d = dst + (i << 2);
      const x0 = v128.load(src + (i << 1));
      const x1 = v128.load(src + (i << 1), 16);
      v128.store(d, h.lo(x0));
      v128.store(d, h.hi(x0), 16);
      v128.store(d, h.lo(x1), 32);
      v128.store(d, h.hi(x1), 48);
    }
    for (; i + 8 <= n; i += 8) {
      const x = v128.load(src + (i << 1));
      v128.store(dst + (i << 2), h.lo(x));
      v128.store(dst + (i << 2), h.hi(x), 16);
    }
  }
  for (; i < n; i++) store<f32>(dst + (i << 2), h.up(load<u16>(src + (i << 1))));
}
