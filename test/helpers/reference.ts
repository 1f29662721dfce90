// Plain-JS reference for the wasm kernels, written from the definitions (IEEE rounding by
// arithmetic on doubles), not from the kernels' bit tricks. Values move as raw little-endian
// bytes; every NaN a reduction produces is expected as the canonical quiet NaN.

export type Dtype = 'f32' | 'f64' | 'i32' | 'u32' | 'i8' | 'u8' | 'i64' | 'bf16' | 'f16';
export type Op = 'sum' | 'prod' | 'max' | 'min';
export const DTYPE_LIST: Dtype[] = ['f32', 'f64', 'i32', 'u32', 'i8', 'u8', 'i64', 'bf16', 'f16'];
export const OP_LIST: Op[] = ['sum', 'prod', 'max', 'min'];
export const CODE: Record<Dtype, number> = { f32: 0, f64: 1, i32: 2, u32: 3, i8: 4, u8: 5, i64: 6, bf16: 7, f16: 8 };
export const OP_CODE: Record<Op, number> = { sum: 0, prod: 1, max: 2, min: 3 };
export const SIZE: Record<Dtype, number> = { f32: 4, f64: 8, i32: 4, u32: 4, i8: 1, u8: 1, i64: 8, bf16: 2, f16: 2 };
export const FLOATS: Dtype[] = ['f32', 'f64', 'bf16', 'f16'];

export const F16_QNAN = 0x7e00;
export const BF16_QNAN = 0x7fc0;

/** Round a non-negative double to an integer, ties to even. */
function roundEven(v: number): number {
  const f = Math.floor(v);
  const d = v - f;
  return d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f;
}

/** Exponent e with 2^e <= a < 2^(e+1), for finite a > 0. */
function exponentOf(a: number): number {
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  return e;
}

export function f16ToNumber(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 31;
  const m = h & 1023;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1024 + m) * 2 ** (e - 25);
}

/** Nearest f16 (ties to even) of a double that is exactly an f32; NaN -> 0x7e00. */
export function numberToF16(x: number): number {
  if (Number.isNaN(x)) return F16_QNAN;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a >= 65520) return sign | 0x7c00;
  if (a < 2 ** -14) return sign | roundEven(a * 2 ** 24); // 1024 is the smallest normal's bits
  let e = exponentOf(a);
  let m = roundEven((a / 2 ** e) * 1024);
  if (m === 2048) {
    m = 1024;
    e++;
  }
  return sign | ((e + 15) << 10) | (m - 1024);
}

export function bf16ToNumber(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 7) & 255;
  const m = h & 127;
  if (e === 0) return s * m * 2 ** -133;
  if (e === 255) return m ? NaN : s * Infinity;
  return s * (128 + m) * 2 ** (e - 134);
}

/** Nearest bf16 (ties to even) of a double that is exactly an f32; NaN -> 0x7fc0. */
export function numberToBf16(x: number): number {
  if (Number.isNaN(x)) return BF16_QNAN;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === Infinity) return sign | 0x7f80;
  if (a < 2 ** -126) return sign | roundEven(a * 2 ** 133);
  let e = exponentOf(a);
  let m = roundEven((a / 2 ** e) * 128);
  if (m === 256) {
    m = 128;
    e++;
  }
  if (e > 127) return sign | 0x7f80;
  return sign | ((e + 127) << 7) | (m - 128);
}

type Val = number | bigint;

/** Element i of a little-endian byte array as a JS value (halves widened to their f32 value). */
export function readElem(dt: Dtype, v: DataView, i: number): Val {
  switch (dt) {
    case 'f32':
      return v.getFloat32(i * 4, true);
    case 'f64':
      return v.getFloat64(i * 8, true);
    case 'i32':
      return v.getInt32(i * 4, true);
    case 'u32':
      return v.getUint32(i * 4, true);
    case 'i8':
      return v.getInt8(i);
    case 'u8':
      return v.getUint8(i);
    case 'i64':
      return v.getBigInt64(i * 8, true);
    case 'bf16':
      return bf16ToNumber(v.getUint16(i * 2, true));
    case 'f16':
      return f16ToNumber(v.getUint16(i * 2, true));
  }
}

/** Stores a result; float NaNs as the canonical quiet NaN, halves rounded to nearest even. */
export function writeElem(dt: Dtype, v: DataView, i: number, x: Val): void {
  switch (dt) {
    case 'f32':
      if (Number.isNaN(x)) v.setUint32(i * 4, 0x7fc00000, true);
      else v.setFloat32(i * 4, x as number, true);
      return;
    case 'f64':
      if (Number.isNaN(x)) v.setBigUint64(i * 8, 0x7ff8000000000000n, true);
      else v.setFloat64(i * 8, x as number, true);
      return;
    case 'i32':
      return v.setInt32(i * 4, x as number, true);
    case 'u32':
      return v.setUint32(i * 4, x as number, true);
    case 'i8':
      return v.setInt8(i, x as number);
    case 'u8':
      return v.setUint8(i, x as number);
    case 'i64':
      return v.setBigInt64(i * 8, x as bigint, true);
    case 'bf16':
      return v.setUint16(i * 2, numberToBf16(x as number), true);
    case 'f16':
      return v.setUint16(i * 2, numberToF16(x as number), true);
  }
}

/** a ⊕ b as the kernels define it (halves: in f32, unrounded to half until writeElem). */
export function combine(dt: Dtype, op: Op, a: Val, b: Val): Val {
  if (dt === 'i64') {
    const x = a as bigint;
    const y = b as bigint;
    if (op === 'sum') return BigInt.asIntN(64, x + y);
    if (op === 'prod') return BigInt.asIntN(64, x * y);
    if (op === 'max') return x > y ? x : y;
    return x < y ? x : y;
  }
  const x = a as number;
  const y = b as number;
  // Math.max / Math.min already propagate NaN and order -0 below +0, as wasm fmax / fmin do.
  if (op === 'max') return Math.max(x, y);
  if (op === 'min') return Math.min(x, y);
  switch (dt) {
    case 'f64':
      return op === 'sum' ? x + y : x * y;
    case 'f32':
    case 'bf16':
    case 'f16':
      return Math.fround(op === 'sum' ? x + y : x * y);
    case 'i32':
      return op === 'sum' ? (x + y) | 0 : Math.imul(x, y);
    case 'u32':
      return (op === 'sum' ? x + y : Math.imul(x, y)) >>> 0;
    case 'i8':
      return ((op === 'sum' ? x + y : Math.imul(x, y)) << 24) >> 24;
    case 'u8':
      return (op === 'sum' ? x + y : Math.imul(x, y)) & 255;
  }
}

/** Left fold of k >= 2 sources, element by element, into a fresh byte array. */
export function refFold(dt: Dtype, op: Op, sources: Uint8Array[], n: number): Uint8Array {
  const out = new Uint8Array(n * SIZE[dt]);
  const ov = new DataView(out.buffer);
  const views = sources.map((s) => new DataView(s.buffer, s.byteOffset, s.byteLength));
  for (let i = 0; i < n; i++) {
    let acc = readElem(dt, views[0], i);
    for (let j = 1; j < views.length; j++) acc = combine(dt, op, acc, readElem(dt, views[j], i));
    writeElem(dt, ov, i, acc);
  }
  return out;
}

/** src * factor for float dtypes (f32 and halves multiply by fround(factor) in f32). */
export function refScale(dt: Dtype, src: Uint8Array, n: number, factor: number): Uint8Array {
  const out = new Uint8Array(n * SIZE[dt]);
  const ov = new DataView(out.buffer);
  const sv = new DataView(src.buffer, src.byteOffset, src.byteLength);
  const f = dt === 'f64' ? factor : Math.fround(factor);
  for (let i = 0; i < n; i++) {
    const x = readElem(dt, sv, i) as number;
    writeElem(dt, ov, i, dt === 'f64' ? x * f : Math.fround(x * f));
  }
  return out;
}
