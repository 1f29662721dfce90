// 16-bit floats (IEEE binary16 "f16" and bfloat16 "bf16"), stored as u16 and computed in f32.
// Widening to f32 is exact and keeps every bit (NaN payloads included). Narrowing rounds to
// nearest, ties to even, through subnormals and into ±Inf; every NaN narrows to the canonical
// quiet NaN (0x7e00 for f16, 0x7fc0 for bf16), sign dropped. The vector versions work on the
// bits of i32x4 lanes and take the same decisions as the scalar ones, so both builds agree.
//
// F16 and BF16 are field-less classes used as type parameters (see halfloops.ts):
//   lo(v) / hi(v): the low / high four halves of 16 bytes as f32x4
//   pack(lo, hi):  eight f32 lanes rounded to eight halves (16 bytes); packFinite when no lane
//                  is NaN (it skips the NaN rewrite)
//   up(h) / down(x): one element each way
//   nan(v):        i16 lanes of 16 bytes that hold a NaN (all ones).

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

@inline
function f16BitsToF32(h: u32): u32 {
  const em = h & 0x7fff;
  const sign = (h ^ em) << 16;
  const o = em << 13;
  let r: u32;
  if (em > 0x7bff) r = o | F32_INF;
  else if (em > 0x3ff) r = o + F32_REBIAS;
  else r = reinterpret<u32>(<f32>em * reinterpret<f32>(TWO_M24));
  return r | sign;
}

@inline
function f32BitsToF16(x: u32): u32 {
  const a = x & 0x7fffffff;
  if (a > F32_INF) return F16_QNAN;
  let r: u32;
  if (a > F16_OVERFLOW_M1) r = 0x7c00;
  else if (a > F16_MIN_NORMAL_M1) r = (a + F16_REBIAS_ROUND + ((a >> 13) & 1)) >> 13;
  else r = reinterpret<u32>(reinterpret<f32>(a) + reinterpret<f32>(HALF_F)) - HALF_F;
  return r | ((x ^ a) >> 16);
}

@inline
function f16x4ToF32(h: v128): v128 {
  const em = v128.and(h, i32x4.splat(0x7fff));
  const sign = i32x4.shl(v128.xor(h, em), 16);
  // Inf / NaN get the rebias twice: exponent 31 + 224 = 255.
  const bias = v128.and(i32x4.gt_s(em, i32x4.splat(0x7bff)), i32x4.splat(F32_REBIAS));
  const nrm = i32x4.add(i32x4.add(i32x4.shl(em, 13), i32x4.splat(F32_REBIAS)), bias);
  const sub = f32x4.mul(f32x4.convert_i32x4_s(em), i32x4.splat(TWO_M24));
  return v128.or(v128.bitselect(nrm, sub, i32x4.gt_s(em, i32x4.splat(0x3ff))), sign);
}

/** Four f32 lanes to four f16 bit patterns, one per i32 lane; no lane may be NaN. */
@inline
function f32x4ToF16Finite(x: v128): v128 {
  const a = v128.and(x, i32x4.splat(0x7fffffff));
  const odd = v128.and(i32x4.shr_u(a, 13), i32x4.splat(1));
  // The rebias wraps below 2^-15 (the subnormal path covers that) and is monotonic above, so
  // everything from 65520 up (Inf and NaN included) clamps to 0x7c00.
  let nrm = i32x4.shr_u(i32x4.add(i32x4.add(a, i32x4.splat(F16_REBIAS_ROUND)), odd), 13);
  nrm = i32x4.min_u(nrm, i32x4.splat(0x7c00));
  const sub = i32x4.sub(f32x4.add(a, i32x4.splat(HALF_F)), i32x4.splat(HALF_F));
  const r = v128.bitselect(nrm, sub, i32x4.gt_s(a, i32x4.splat(F16_MIN_NORMAL_M1)));
  return v128.or(r, i32x4.shr_u(v128.xor(x, a), 16));
}

/** NaN lanes of f32x4 (all ones), by the bits: the same answer in any build. */
@inline
function nanLanes(x: v128): v128 {
  return i32x4.gt_s(v128.and(x, i32x4.splat(0x7fffffff)), i32x4.splat(F32_INF));
}

@inline
function f32x4ToF16(x: v128): v128 {
  return v128.bitselect(i32x4.splat(F16_QNAN), f32x4ToF16Finite(x), nanLanes(x));
}

// bf16 is the top half of an f32: widening is a shift; narrowing adds 0x7fff plus the kept LSB
// (round half to even; a carry runs into the exponent and, past the largest finite, to Inf).
@inline
function f32BitsToBf16(x: u32): u32 {
  if ((x & 0x7fffffff) > F32_INF) return BF16_QNAN;
  return (x + 0x7fff + ((x >> 16) & 1)) >> 16;
}

@inline
function f32x4ToBf16Finite(x: v128): v128 {
  const odd = v128.and(i32x4.shr_u(x, 16), i32x4.splat(1));
  return i32x4.shr_u(i32x4.add(i32x4.add(x, i32x4.splat(0x7fff)), odd), 16);
}

@inline
function f32x4ToBf16(x: v128): v128 {
  return v128.bitselect(i32x4.splat(BF16_QNAN), f32x4ToBf16Finite(x), nanLanes(x));
}

@final
export class F16 {
  /** Marks f16: its sums take the scaled-domain loops of f16sum.ts. */
  @inline scaledSums(): bool {
    return true;
  }
  @inline lo(v: v128): v128 {
    return f16x4ToF32(i32x4.extend_low_i16x8_u(v));
  }
  @inline hi(v: v128): v128 {
    return f16x4ToF32(i32x4.extend_high_i16x8_u(v));
  }
  @inline pack(lo: v128, hi: v128): v128 {
    return i16x8.narrow_i32x4_u(f32x4ToF16(lo), f32x4ToF16(hi));
  }
  @inline packFinite(lo: v128, hi: v128): v128 {
    return i16x8.narrow_i32x4_u(f32x4ToF16Finite(lo), f32x4ToF16Finite(hi));
  }
  @inline up(h: u32): f32 {
    return reinterpret<f32>(f16BitsToF32(h));
  }
  @inline down(x: f32): u32 {
    return f32BitsToF16(reinterpret<u32>(x));
  }
  @inline nan(v: v128): v128 {
    return i16x8.gt_s(v128.and(v, i16x8.splat(0x7fff)), i16x8.splat(0x7c00));
  }
  @inline qnan(): v128 {
    return i16x8.splat(<i16>F16_QNAN);
  }
}

@final
export class BF16 {
  // Interleaving zero halves below the bf16 halves is the widening: one unpack instruction.
  @inline lo(v: v128): v128 {
    return i8x16.shuffle(v128.splat<i32>(0), v, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
  }
  @inline hi(v: v128): v128 {
    return i8x16.shuffle(v128.splat<i32>(0), v, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
  }
  @inline pack(lo: v128, hi: v128): v128 {
    return i16x8.narrow_i32x4_u(f32x4ToBf16(lo), f32x4ToBf16(hi));
  }
  @inline packFinite(lo: v128, hi: v128): v128 {
    return i16x8.narrow_i32x4_u(f32x4ToBf16Finite(lo), f32x4ToBf16Finite(hi));
  }
  @inline up(h: u32): f32 {
    return reinterpret<f32>(h << 16);
  }
  @inline down(x: f32): u32 {
    return f32BitsToBf16(reinterpret<u32>(x));
  }
  @inline nan(v: v128): v128 {
    return i16x8.gt_s(v128.and(v, i16x8.splat(0x7fff)), i16x8.splat(0x7f80));
  }
  @inline qnan(): v128 {
    return i16x8.splat(<i16>BF16_QNAN);
  }
}

/**
 * Rounds sixteen f32 results (four f32x4) to halves at dst .. dst+32. One test per block finds
 * NaN lanes (a NaN anywhere makes the sum NaN; +Inf + -Inf is a harmless false alarm) so the
 * NaN rewrite runs only where it is needed.
 */
@inline
export function store16<H>(dst: usize, l0: v128, h0: v128, l1: v128, h1: v128): void {
  const h = changetype<H>(0);
  const t = f32x4.add(f32x4.add(l0, h0), f32x4.add(l1, h1));
  if (v128.any_true(f32x4.ne(t, t))) {
    v128.store(dst, h.pack(l0, h0));
    v128.store(dst, h.pack(l1, h1), 16);
  } else {
    v128.store(dst, h.packFinite(l0, h0));
    v128.store(dst, h.packFinite(l1, h1), 16);
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
      store16<H>(dst + (i << 1), x0, x1, x2, x3);
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
