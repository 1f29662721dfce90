// Closed-form data for `perf -c 1`: rank r fills element i with value(r, i), and the expected
// result of every collective is known without a second implementation. Values are small
// integers (1..4, or 1 and 2 for prod), so float sums and products are exact in every dtype,
// and integer overflow (i8 with many ranks) wraps the same in any order. The pattern repeats
// every PERIOD elements, so one period of expected values checks a buffer of any length.
import type { Dtype, ReduceOp } from '../../core/dtypes.js';
import type { TypedArray } from '../../engine/buffers.js';

export const PERIOD = 8;

/**
 * The data of a block that goes from rank `src` to rank `dst` (alltoall, gather, scatter,
 * sendrecv, pingpong): the pattern of value() repeats over four ranks and every four elements,
 * so a block delivered to the wrong rank, or taken from the wrong one, could still look right.
 * This one differs for every (src, dst) pair of up to 11 ranks, and for every shift shorter than
 * its period. Values 1..127 are exact in every dtype (bf16 holds integers to 256, i8 to 127).
 */
export const BLOCK_PERIOD = 127;
const SRC_STRIDE = 1;
const DST_STRIDE = 11;

export function blockValue(src: number, dst: number, i: number): number {
  return 1 + ((i + SRC_STRIDE * src + DST_STRIDE * dst) % BLOCK_PERIOD);
}

export function value(op: ReduceOp, rank: number, i: number): number {
  if (op === 'prod') return (rank + i) % PERIOD === 0 ? 2 : 1;
  return 1 + ((rank + i) % 4);
}

/** The exact (real-number) reduction over ranks 0..n−1 of value(·, i). */
export function reduced(op: ReduceOp, nranks: number, i: number): number {
  let acc = value(op, 0, i);
  for (let r = 1; r < nranks; r++) {
    const v = value(op, r, i);
    acc = op === 'prod' ? acc * v : op === 'max' ? Math.max(acc, v) : op === 'min' ? Math.min(acc, v) : acc + v;
  }
  return op === 'avg' ? acc / nranks : acc;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Nearest bf16 (round to nearest even) as bits. */
export function toBf16(x: number): number {
  f32[0] = x;
  const b = u32[0];
  if ((b & 0x7f800000) === 0x7f800000 && b & 0x7fffff) return (b >>> 16) | 0x40;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

export function fromBf16(h: number): number {
  u32[0] = h << 16;
  return f32[0];
}

/** Nearest f16 (round to nearest even) as bits; overflow gives infinity. */
export function toF16(x: number): number {
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (Number.isNaN(x)) return 0x7e00;
  if (a >= 65520) return sign | 0x7c00;
  if (a < 2 ** -14) {
    // Subnormal: units of 2^-24, rounded to even.
    return sign | roundEven(a * 2 ** 24);
  }
  const e = Math.floor(Math.log2(a));
  const exp = a >= 2 ** (e + 1) ? e + 1 : a < 2 ** e ? e - 1 : e;
  const m = roundEven((a / 2 ** exp - 1) * 1024);
  return m === 1024 ? sign | ((exp + 16) << 10) : sign | ((exp + 15) << 10) | m;
}

export function fromF16(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (exp === 0) return sign * m * 2 ** -24;
  if (exp === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (exp - 15);
}

function roundEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  return d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f;
}

/** The element a buffer of `dtype` holds for the real value x (rounded, or wrapped for integers). */
export function encode(dtype: Dtype, x: number): number | bigint {
  switch (dtype) {
    case 'f64':
      return x;
    case 'f32':
      return Math.fround(x);
    case 'bf16':
      return toBf16(x);
    case 'f16':
      return toF16(x);
    case 'i32':
      return x | 0;
    case 'u32':
      return x >>> 0;
    case 'i8':
      return (x << 24) >> 24;
    case 'u8':
      return x & 0xff;
    case 'i64':
      return BigInt.asIntN(64, BigInt(x));
  }
}

export function decode(dtype: Dtype, e: number | bigint): number {
  if (dtype === 'bf16') return fromBf16(e as number);
  if (dtype === 'f16') return fromF16(e as number);
  return Number(e);
}

/** Relative tolerance of avg (the one op whose result is rounded): a few units in the last place. */
const ULP: Partial<Record<Dtype, number>> = { f64: 2 ** -50, f32: 2 ** -21, f16: 2 ** -8, bf16: 2 ** -5 };

/** Fills a[0..len) with value(rank, offset + k), by doubling one period. */
export function fill(a: TypedArray, dtype: Dtype, op: ReduceOp, rank: number, offset: number): void {
  fillPattern(a, dtype, PERIOD, (k) => value(op, rank, offset + k));
}

/** Fills a[0..len) with the block from `src` to `dst`: blockValue(src, dst, k). */
export function fillBlock(a: TypedArray, dtype: Dtype, src: number, dst: number): void {
  fillPattern(a, dtype, BLOCK_PERIOD, (k) => blockValue(src, dst, k));
}

/** Wrong elements of a received block that should hold blockValue(src, dst, ·). */
export function countWrongBlock(a: TypedArray, dtype: Dtype, src: number, dst: number): number {
  return countWrong(a, dtype, 'sum', 0, (i) => blockValue(src, dst, i), BLOCK_PERIOD);
}

/** Fills a[0..len) with at(k), a function of period `period`: one period written, then doubled. */
function fillPattern(a: TypedArray, dtype: Dtype, period: number, at: (k: number) => number): void {
  const first = Math.min(period, a.length);
  for (let k = 0; k < first; k++) (a as unknown as (number | bigint)[])[k] = encode(dtype, at(k));
  for (let have = first; have < a.length; have *= 2) a.copyWithin(have, 0, Math.min(have, a.length - have));
}

/**
 * Counts elements of a[0..len) that differ from `expect(offset + k)`; expect gives the real
 * value and repeats every `period` elements, so one period is precomputed. avg is compared
 * within a tolerance, everything else exactly.
 */
export function countWrong(
  a: TypedArray,
  dtype: Dtype,
  op: ReduceOp,
  offset: number,
  expect: (i: number) => number,
  period = PERIOD,
): number {
  const enc = Array.from({ length: period }, (_, k) => encode(dtype, expect(offset + k)));
  const arr = a as unknown as ArrayLike<number | bigint>;
  let wrong = 0;
  if (op === 'avg') {
    const tol = ULP[dtype] ?? 0;
    const exact = Array.from({ length: period }, (_, k) => expect(offset + k));
    for (let k = 0; k < arr.length; k++) {
      const e = exact[k % period];
      if (!(Math.abs(decode(dtype, arr[k]) - e) <= tol * Math.abs(e))) wrong++;
    }
    return wrong;
  }
  for (let k = 0; k < arr.length; k++) if (arr[k] !== enc[k % period]) wrong++;
  return wrong;
}
