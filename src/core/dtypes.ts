// Dtypes and reduction ops: names, numeric codes shared with assembly/kernels/codes.ts, sizes,
// and how a JS buffer maps onto them.
import { fail } from './errors.js';

export const DTYPES = ['f32', 'f64', 'i32', 'u32', 'i8', 'u8', 'i64', 'bf16', 'f16'] as const;
export type Dtype = (typeof DTYPES)[number];

export const DTYPE_CODE: Record<Dtype, number> = { f32: 0, f64: 1, i32: 2, u32: 3, i8: 4, u8: 5, i64: 6, bf16: 7, f16: 8 };
export const DTYPE_SIZE: Record<Dtype, number> = { f32: 4, f64: 8, i32: 4, u32: 4, i8: 1, u8: 1, i64: 8, bf16: 2, f16: 2 };
export const FLOAT_DTYPES: ReadonlySet<Dtype> = new Set(['f32', 'f64', 'bf16', 'f16']);

export const Sum = 'sum';
export const Prod = 'prod';
export const Max = 'max';
export const Min = 'min';
export const Avg = 'avg';
export const REDUCE_OPS = [Sum, Prod, Max, Min, Avg] as const;
export type ReduceOp = (typeof REDUCE_OPS)[number];
/** Op codes of the wasm core (assembly/kernels/codes.ts); avg runs as sum then a scale. */
export const OP_CODE: Record<ReduceOp, number> = { sum: 0, prod: 1, max: 2, min: 3, avg: 4 };

/** The JS array type that holds each dtype's elements (halves live in a Uint16Array). */
export const ARRAY_OF: Record<Dtype, { new (b: ArrayBufferLike, off: number, len: number): ArrayBufferView }> = {
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

const DTYPE_OF_CTOR = new Map<unknown, Dtype>([
  [Float32Array, 'f32'], [Float64Array, 'f64'], [Int32Array, 'i32'], [Uint32Array, 'u32'],
  [Int8Array, 'i8'], [Uint8Array, 'u8'], [BigInt64Array, 'i64'],
]);

/** The dtype of a plain TypedArray (one map lookup: this runs on every call). */
export function dtypeOfArray(a: ArrayBufferView): Dtype | undefined {
  return DTYPE_OF_CTOR.get(a.constructor);
}

export function parseDtype(name: unknown): Dtype {
  if (typeof name === 'string' && (DTYPES as readonly string[]).includes(name)) return name as Dtype;
  return fail('INVALID_DTYPE', `unknown dtype ${JSON.stringify(name)} (expected one of ${DTYPES.join(', ')})`);
}

export function parseOp(op: unknown, dtype: Dtype): ReduceOp {
  if (op === undefined) return Sum;
  if (typeof op !== 'string' || !(REDUCE_OPS as readonly string[]).includes(op)) {
    fail('INVALID_OP', `unknown reduction op ${JSON.stringify(op)} (expected one of ${REDUCE_OPS.join(', ')})`);
  }
  if (op === Avg && !FLOAT_DTYPES.has(dtype)) {
    fail('INVALID_OP', `avg is defined for float dtypes only, not ${dtype} (use sum and divide)`);
  }
  return op as ReduceOp;
}
