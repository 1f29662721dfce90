// Dtypes and reduction ops: names, numeric codes shared with assembly/kernels/codes.ts, sizes,
// and how a JS buffer maps onto them.
import { fail } from './errors.js';
import { closest, showValue } from './options.js';

/**
 * The dtypes webccl reduces and moves: f32, f64, i32, u32, i8, u8, i64 (each its TypedArray),
 * and the half types bf16 and f16 (held in a Uint16Array, reduced in f32).
 */
export const DTYPES = ['f32', 'f64', 'i32', 'u32', 'i8', 'u8', 'i64', 'bf16', 'f16'] as const;
/** One of {@link DTYPES}. */
export type Dtype = (typeof DTYPES)[number];

export const DTYPE_CODE: Record<Dtype, number> = {
  f32: 0,
  f64: 1,
  i32: 2,
  u32: 3,
  i8: 4,
  u8: 5,
  i64: 6,
  bf16: 7,
  f16: 8,
};
export const DTYPE_SIZE: Record<Dtype, number> = {
  f32: 4,
  f64: 8,
  i32: 4,
  u32: 4,
  i8: 1,
  u8: 1,
  i64: 8,
  bf16: 2,
  f16: 2,
};
export const FLOAT_DTYPES: ReadonlySet<Dtype> = new Set(['f32', 'f64', 'bf16', 'f16']);

/** The reduction op 'sum' (torch's ReduceOp.SUM); integer sums wrap as the dtype does. */
export const Sum = 'sum';
/** The reduction op 'prod': the product over the ranks. */
export const Prod = 'prod';
/** The reduction op 'max': the largest value over the ranks. */
export const Max = 'max';
/** The reduction op 'min': the smallest value over the ranks. */
export const Min = 'min';
/** The reduction op 'avg': the mean over the ranks (a sum, then scaled), on float dtypes only (else INVALID_OP). */
export const Avg = 'avg';
/** Every reduction op: sum, prod, max, min, avg. */
export const REDUCE_OPS = [Sum, Prod, Max, Min, Avg] as const;
/** A reduction op, one of {@link REDUCE_OPS}; any other string is refused with INVALID_OP. */
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

/**
 * The runtime's Float16Array, where it has one (Node 24 and later, recent browsers; not Node 20
 * or 22): its elements are f16 patterns, so it passes as f16 in place, as ONNX Runtime's float16
 * tensors hold it. A Uint16Array with dtype 'f16' works everywhere.
 */
export const FLOAT16_ARRAY = (
  globalThis as { Float16Array?: new (b: ArrayBufferLike, off: number, len: number) => ArrayBufferView }
).Float16Array;

const DTYPE_OF_CTOR = new Map<unknown, Dtype>([
  [Float32Array, 'f32'],
  [Float64Array, 'f64'],
  [Int32Array, 'i32'],
  [Uint32Array, 'u32'],
  [Int8Array, 'i8'],
  [Uint8Array, 'u8'],
  [BigInt64Array, 'i64'],
  ...(FLOAT16_ARRAY ? [[FLOAT16_ARRAY, 'f16'] as const] : []),
]);

/** Whether `data` can hold dtype `d`'s elements: its array type, or a Float16Array for f16. */
export function holds(d: Dtype, data: unknown): boolean {
  return data instanceof ARRAY_OF[d] || (d === 'f16' && FLOAT16_ARRAY !== undefined && data instanceof FLOAT16_ARRAY);
}

/** The dtype of a plain TypedArray (one map lookup: this runs on every call). */
export function dtypeOfArray(a: ArrayBufferView): Dtype | undefined {
  return DTYPE_OF_CTOR.get(a.constructor);
}

/**
 * The dtype names of TensorFlow.js and ONNX Runtime whose element type is one of ours, bit for
 * bit (the same width, signedness and encoding), so their tensors' arrays pass unchanged.
 */
export const DTYPE_ALIASES = {
  float32: 'f32',
  float64: 'f64',
  int32: 'i32',
  uint32: 'u32',
  int8: 'i8',
  uint8: 'u8',
  int64: 'i64',
  float16: 'f16',
  bfloat16: 'bf16',
} as const satisfies Record<string, Dtype>;
/**
 * A dtype by our name or by the TensorFlow.js / ONNX Runtime name of the same element type
 * ({@link DTYPE_ALIASES}): what `{ data, dtype }`, comm.alloc() and convertDtype take.
 */
export type DtypeName = Dtype | keyof typeof DTYPE_ALIASES;

/** Their names for element types we have no exact match for, and what to do instead. */
const NO_EXACT_DTYPE: Record<string, string> = {
  bool: "bool has no dtype here (a sum would count, not OR): pass the values as uint8, with op 'max' for OR or 'min' for AND",
  int16: 'no 16-bit integer dtype: widen the values to int32',
  uint16:
    'no 16-bit integer dtype: widen the values to int32 (a Uint16Array alone is read as nothing: halves need { data, dtype: "f16" | "bf16" })',
  uint64: 'no unsigned 64-bit dtype: pass a BigInt64Array as int64 when the values stay below 2^63',
  int4: 'no 4-bit dtype: widen the values to int8',
  uint4: 'no 4-bit dtype: widen the values to uint8',
  complex64:
    'no complex dtype: pass the real and imaginary parts as one float32 array of twice the length (sum and avg work element-wise)',
  string: 'strings cannot be reduced',
};

/** `where` (e.g. "allReduce buffer") starts the message when given. */
export function parseDtype(name: unknown, where?: string): Dtype {
  const at = where ? `${where}: ` : '';
  if (typeof name === 'string') {
    if ((DTYPES as readonly string[]).includes(name)) return name as Dtype;
    if (Object.hasOwn(DTYPE_ALIASES, name)) return DTYPE_ALIASES[name as keyof typeof DTYPE_ALIASES];
    if (Object.hasOwn(NO_EXACT_DTYPE, name))
      fail('INVALID_DTYPE', `${at}dtype ${JSON.stringify(name)} is not supported: ${NO_EXACT_DTYPE[name]}`, {
        dtype: name,
      });
  }
  return fail(
    'INVALID_DTYPE',
    `${at}unknown dtype ${showValue(name)} (expected one of ${DTYPES.join(', ')}, or ${Object.keys(DTYPE_ALIASES).join(', ')})`,
    { dtype: name },
  );
}

/** Other libraries' names for the ops (torch's ReduceOp, NumPy, TF.js), for the hint of a refusal. */
const OP_SYNONYMS: Record<string, ReduceOp> = {
  mean: 'avg',
  average: 'avg',
  add: 'sum',
  plus: 'sum',
  product: 'prod',
  mul: 'prod',
  multiply: 'prod',
  maximum: 'max',
  minimum: 'min',
};

export function parseOp(op: unknown, dtype: Dtype): ReduceOp {
  if (op === undefined) return Sum;
  if (typeof op !== 'string' || !(REDUCE_OPS as readonly string[]).includes(op)) {
    const near = typeof op === 'string' ? (OP_SYNONYMS[op.toLowerCase()] ?? closest(op, REDUCE_OPS)) : undefined;
    fail(
      'INVALID_OP',
      `unknown reduction op ${JSON.stringify(op)}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ''} (expected one of ${REDUCE_OPS.join(', ')})`,
      near ? { op, suggestion: near } : { op },
    );
  }
  if (op === Avg && !FLOAT_DTYPES.has(dtype)) {
    fail('INVALID_OP', `avg is defined for float dtypes only, not ${dtype} (use sum and divide)`);
  }
  return op as ReduceOp;
}
