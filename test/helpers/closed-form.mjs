// Closed-form test data: rank r fills element i with value(op, r, i), small integers whose
// reduction every dtype represents exactly (integers wrap as the dtype does), so the expected
// result is computed here without a second implementation of the kernels.

export const DTYPES = ['f32', 'f64', 'i32', 'u32', 'i8', 'u8', 'i64', 'bf16', 'f16'];
export const FLOATS = new Set(['f32', 'f64', 'bf16', 'f16']);
const UNSIGNED = new Set(['u32', 'u8']);
export const opsFor = (dtype) =>
  FLOATS.has(dtype) ? ['sum', 'prod', 'max', 'min', 'avg'] : ['sum', 'prod', 'max', 'min'];

const ARRAY = {
  f32: Float32Array,
  f64: Float64Array,
  i32: Int32Array,
  u32: Uint32Array,
  i8: Int8Array,
  u8: Uint8Array,
  i64: BigInt64Array,
  bf16: Uint16Array,
  f16: Uint16Array,
};
export const SIZE = { f32: 4, f64: 8, i32: 4, u32: 4, i8: 1, u8: 1, i64: 8, bf16: 2, f16: 2 };

export function value(op, dtype, r, i) {
  const neg = !UNSIGNED.has(dtype);
  switch (op) {
    case 'prod':
      return (r + i) % 3 === 0 ? 2 : neg && (r * 5 + i) % 7 === 3 ? -1 : 1;
    case 'max':
    case 'min':
      return ((r * 13 + i * 5) % 17) - (neg ? 8 : 0);
    default:
      return ((r * 7 + i * 3) % 11) - (neg ? 5 : 0);
  }
}

// ---- half-precision bits (round to nearest even), for the values these tests use
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
export function toBf16(x) {
  f32[0] = x;
  const b = u32[0];
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}
export function fromBf16(h) {
  u32[0] = h << 16;
  return f32[0];
}
export function toF16(x) {
  f32[0] = x;
  const b = u32[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = ((b >>> 23) & 0xff) - 127 + 15;
  const man = b & 0x7fffff;
  if ((b & 0x7fffffff) === 0) return sign;
  if (exp <= 0 || exp >= 31) throw new Error(`closed-form: ${x} is outside the f16 normal range these tests use`);
  let m = man >>> 13;
  const rem = man & 0x1fff;
  let e = exp;
  if (rem > 0x1000 || (rem === 0x1000 && m & 1)) m++;
  if (m === 0x400) {
    m = 0;
    e++;
  }
  return sign | (e << 10) | m;
}
export function fromF16(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Stores number v as the dtype stores it. */
export function encode(dtype, v) {
  if (dtype === 'i64') return BigInt(v);
  if (dtype === 'bf16') return toBf16(v);
  if (dtype === 'f16') return toF16(v);
  return v;
}

/** The reduction over ranks 0..n-1 of value(op, ·, i), in the dtype's arithmetic, encoded. */
export function expected(op, dtype, n, i, rankOf = (r) => r) {
  const vals = Array.from({ length: n }, (_, r) => value(op, dtype, rankOf(r), i));
  if (dtype === 'i64') {
    const b = vals.map(BigInt);
    const f = {
      sum: (a, c) => a + c,
      avg: (a, c) => a + c,
      prod: (a, c) => a * c,
      max: (a, c) => (c > a ? c : a),
      min: (a, c) => (c < a ? c : a),
    }[op];
    return BigInt.asIntN(64, b.reduce(f));
  }
  const f = { sum: (a, c) => a + c, avg: (a, c) => a + c, prod: (a, c) => a * c, max: Math.max, min: Math.min }[op];
  let acc = vals.reduce((a, c) => f(a, c));
  if (op === 'avg') {
    if (dtype === 'f64') acc = acc * (1 / n);
    else acc = Math.fround(Math.fround(acc) * Math.fround(1 / n));
  }
  const A = ARRAY[dtype];
  if (!FLOATS.has(dtype)) return new A([acc])[0]; // wraps like the dtype
  return encode(dtype, acc);
}

/** A buffer argument for webccl: a TypedArray, or { data, dtype } for halves. */
export function makeBuffer(dtype, count) {
  const data = new ARRAY[dtype](count);
  return { arg: dtype === 'bf16' || dtype === 'f16' ? { data, dtype } : data, data };
}

export function fill(data, dtype, op, r) {
  const src = inputArray(op, dtype, r, data.length);
  if (src.constructor === data.constructor) data.set(src.subarray(0, data.length));
  else for (let i = 0; i < data.length; i++) data[i] = src[i];
  return data;
}

/**
 * Index of the first element of `data` that differs from want (a function of the index, or an array to compare with),
 * or -1.
 */
export function firstWrong(data, want) {
  if (typeof want !== 'function') {
    for (let i = 0; i < data.length; i++) if (data[i] !== want[i]) return i;
    return -1;
  }
  for (let i = 0; i < data.length; i++) if (data[i] !== want(i)) return i;
  return -1;
}

// value(op, dtype, r, i) repeats in i with these periods (the moduli in value()), so the memoised
// arrays compute one period and copy it along: the grids compare megabytes against them.
const PERIOD = { sum: 11, avg: 11, prod: 21, max: 17, min: 17 };
const cache = new Map();
function memo(key, dtype, op, count, at) {
  let a = cache.get(key);
  if (!a || a.length < count) {
    const length = Math.max(count, 2 * (a?.length ?? 0));
    a = new ARRAY[dtype](length);
    const p = Math.min(PERIOD[op], length);
    for (let i = 0; i < p; i++) a[i] = at(i);
    for (let filled = p; filled < length; filled *= 2) a.copyWithin(filled, 0, Math.min(filled, length - filled));
    cache.set(key, a);
  }
  return a;
}

/**
 * expected(op, dtype, n, i) for i < count (at least), as the dtype's typed array, memoised (tests compare many buffers
 * against it).
 */
export const expectedArray = (op, dtype, n, count) =>
  memo(`${op}/${dtype}/${n}`, dtype, op, count, (i) => expected(op, dtype, n, i));

/** The input rank r holds: encode(value(op, r, i)) for i < count (at least), as the dtype's typed array, memoised. */
export const inputArray = (op, dtype, r, count) =>
  memo(`in/${op}/${dtype}/${r}`, dtype, op, count, (i) => encode(dtype, value(op, dtype, r, i)));
