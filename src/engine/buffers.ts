// Buffers at the API boundary: a TypedArray, or { data, dtype } for dtypes JS lacks (bf16 and
// f16 held in a Uint16Array). Normalised to bytes + dtype + count, and to the address in the
// node's shared memory when the buffer lives there (comm.alloc): such buffers are used in place.
import { ARRAY_OF, DTYPE_SIZE, type Dtype, type DtypeName, dtypeOfArray, holds, parseDtype } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import { type Layout, parseTensorLayout, type TensorLayout } from '../core/tensor-layout.js';

/**
 * The TypedArrays webccl takes as data, each read as its dtype (Float32Array f32, Float64Array
 * f64, Int32Array i32, Uint32Array u32, Int8Array i8, Uint8Array u8, BigInt64Array i64). A
 * Uint16Array holds bf16 or f16 inside `{ data, dtype }` only: alone it is refused.
 */
export type TypedArray =
  | Float32Array
  | Float64Array
  | Int32Array
  | Uint32Array
  | Int8Array
  | Uint8Array
  | BigInt64Array
  | Uint16Array;
/**
 * A buffer that names its dtype, `{ data, dtype }`: how bf16 and f16 pass (`data` a Uint16Array),
 * and any array with a dtype name of ours, TF.js's or ONNX Runtime's. `shape` alone is not read.
 */
export interface TensorLike {
  data: TypedArray | Float16ArrayLike;
  /** Ours (f32, bf16, …) or the TF.js / ONNX Runtime name of the same type (float32, bfloat16, …). */
  dtype: DtypeName;
  shape?: number[];
}
/** A tensor with a layout: `shape` is the logical [N, C, H, W]; dtype may be left out for plain TypedArrays. */
export interface LayoutTensorArg {
  data: TypedArray;
  dtype?: DtypeName;
  shape: number[];
  layout: Layout;
  /** NC1HWC0 only: channels per block (default 32 for 1-byte dtypes, 16 for the others). */
  c0?: number;
}
/** An ONNX Runtime Tensor on the CPU, used in place: its `type` names the dtype. */
export interface OrtTensorLike {
  data: TypedArray | Float16ArrayLike;
  type: DtypeName;
  dims?: readonly number[];
}
/**
 * A Float16Array (Node 24 and later, recent browsers): passed as f16. Typed by shape, so that
 * programs compiled against libraries without it still compile.
 */
export interface Float16ArrayLike extends ArrayBufferView {
  readonly [Symbol.toStringTag]: 'Float16Array';
  readonly length: number;
  [index: number]: number;
}
/**
 * What a collective takes as a buffer: a TypedArray, a Float16Array, `{ data, dtype }`, an ONNX
 * Runtime tensor on the CPU, or a tensor with a layout (docs/buffers.md). An in-place op leaves
 * its result in the caller's own array.
 */
export type BufferArg = TypedArray | Float16ArrayLike | TensorLike | OrtTensorLike | LayoutTensorArg;

export interface Buf {
  bytes: Uint8Array; // the same memory, as bytes
  /**
   * bytes.buffer, read once: the getter is a call V8 does not inline (~17 ns), and ops compare memories per message.
   */
  memory: ArrayBufferLike;
  dtype: Dtype;
  count: number;
  /** Byte address in the node memory when the buffer lives there, else 0. */
  addr: number;
  /** The tensor's shape and layout, when it was given one (see tensor-layout.ts). */
  layout?: TensorLayout;
  /**
   * The same bytes as 32-bit words, made at the first small copy that may use them (null: the
   * view is not word-aligned; see wordsOf).
   */
  words?: Int32Array | null;
}

/**
 * `b` as 32-bit words, made once per record: copying a small buffer word by word takes a
 * quarter of the time of TypedArray.set or a byte loop. null when its offset or length is not a
 * multiple of 4.
 */
export function wordsOf(b: Buf): Int32Array | null {
  if (b.words !== undefined) return b.words;
  const { byteOffset, byteLength } = b.bytes;
  b.words = (byteOffset | byteLength) & 3 ? null : new Int32Array(b.memory, byteOffset, byteLength >> 2);
  return b.words;
}

export function describe(x: unknown): string {
  if (x === null) return 'null';
  if (ArrayBuffer.isView(x)) return x.constructor.name;
  if (Array.isArray(x)) return 'Array';
  return typeof x === 'object' ? `object with keys {${Object.keys(x as object).join(', ')}}` : typeof x;
}

export function toBuf(x: unknown, what: string, isShared: (b: ArrayBufferLike) => boolean): Buf {
  let dtype: Dtype | undefined;
  let data: ArrayBufferView;
  if (ArrayBuffer.isView(x) && !(x instanceof DataView)) {
    dtype = dtypeOfArray(x);
    if (!dtype)
      fail(
        'INVALID_DTYPE',
        `${what}: ${x.constructor.name} is not supported (use Float32Array, Float64Array, Int32Array, Uint32Array, Int8Array, Uint8Array, BigInt64Array, Float16Array where the runtime has one, or { data: Uint16Array, dtype: 'bf16' | 'f16' })`,
      );
    data = x;
  } else if (
    typeof x === 'object' &&
    x !== null &&
    ('dataSync' in x || ('data' in x && ('dtype' in x || 'type' in x || 'layout' in x)))
  ) {
    const t = tensorFields(x, what);
    // A tensor with a layout may leave its dtype to its array (a Uint16Array still needs one).
    const implied =
      t.dtype === undefined && 'layout' in x && ArrayBuffer.isView(t.data) ? dtypeOfArray(t.data) : undefined;
    const d = implied ?? parseDtype(t.dtype, what);
    dtype = d;
    if (!holds(d, t.data)) {
      fail(
        'INVALID_DTYPE',
        `${what}: dtype ${d} needs data in a ${ARRAY_OF[d].name}${d === 'f16' ? ' (or a Float16Array, where the runtime has one)' : ''}, got ${describe(t.data)}`,
      );
    }
    data = t.data as ArrayBufferView;
  } else {
    return fail('INVALID_ARGUMENT', `${what}: expected a TypedArray or { data, dtype }, got ${describe(x)}`);
  }
  if (isDetached(data.buffer)) {
    fail(
      'INVALID_ARGUMENT',
      `${what}: its ArrayBuffer is detached (it was transferred with postMessage or structuredClone); pass a buffer this thread still owns`,
      { detached: true },
    );
  }
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const count = data.byteLength / DTYPE_SIZE[dtype];
  const addr = isShared(data.buffer) ? data.byteOffset : 0;
  // Without a layout, a literal of one shape (a spread costs every op a slower object copy).
  const memory = data.buffer;
  if (!('layout' in (x as object))) return { bytes, memory, dtype, count, addr, words: undefined };
  return {
    bytes,
    memory,
    dtype,
    count,
    addr,
    layout: parseTensorLayout(x as Record<string, unknown>, dtype, count, what),
  };
}

/**
 * toBuf with a memory, one per communicator: each TypedArray's record is made once, so a loop
 * passing the same arrays op after op (a ping-pong, a training step's buffers) checks and
 * describes each once. A view whose length changed (a resizable buffer) or fell to 0 (detached)
 * is looked at again; tensor objects, whose fields may change, always are. A WeakMap, so no
 * array is kept alive that its caller dropped.
 */
export class BufRecords {
  private readonly known = new WeakMap<ArrayBufferView, Buf>();

  constructor(private readonly isShared: (b: ArrayBufferLike) => boolean) {}

  of(x: unknown, what: string): Buf {
    const len = ArrayBuffer.isView(x) ? x.byteLength : 0;
    const known = len !== 0 ? this.known.get(x as ArrayBufferView) : undefined;
    if (known !== undefined && len === known.bytes.byteLength) return known;
    const b = toBuf(x, what, this.isShared);
    if (len !== 0 && b.layout === undefined) this.known.set(x as ArrayBufferView, b);
    return b;
  }
}

/**
 * The data and dtype of a tensor object: ours ({ data, dtype }, dtype names of TF.js and ONNX
 * Runtime included), or an ONNX Runtime Tensor on the CPU ({ data, type, dims }: its data is
 * the tensor's own array, so in-place results land in the tensor). A TensorFlow.js tensor, or
 * any object whose data is not there yet, is refused with what to pass instead.
 */
function tensorFields(x: object, what: string): { data: unknown; dtype: unknown } {
  const t = x as Record<string, unknown>;
  if (typeof t.dataSync === 'function') {
    fail(
      'INVALID_ARGUMENT',
      `${what}: a TensorFlow.js tensor holds its values in its backend, out of reach: pass a copy, tensor.dataSync().slice() (dataSync() may be the tensor's own storage), and make the result with tf.tensor(array, tensor.shape) from an array nothing else writes`,
      { tensor: 'tfjs' },
    );
  }
  const ortLocation = 'dims' in t && typeof t.location === 'string' ? t.location : undefined;
  if (ortLocation !== undefined && ortLocation !== 'cpu' && ortLocation !== 'cpu-pinned') {
    fail(
      'INVALID_ARGUMENT',
      `${what}: this ONNX Runtime tensor lives on ${JSON.stringify(ortLocation)}: pass the array of await tensor.getData() (or a tensor on the CPU, whose tensor.data is used in place)`,
      { tensor: 'onnxruntime', location: ortLocation },
    );
  }
  const data = t.data;
  if (typeof data === 'function') {
    fail(
      'INVALID_ARGUMENT',
      `${what}: data is a function: pass the TypedArray it gives (e.g. await tensor.data() for TF.js, or dataSync())`,
    );
  }
  if (typeof (data as { then?: unknown } | null)?.then === 'function') {
    fail('INVALID_ARGUMENT', `${what}: data is a Promise: await it and pass the TypedArray it resolves to`);
  }
  // ONNX Runtime names the dtype `type`; ours and TF.js's `dtype`.
  return { data, dtype: 'dtype' in t ? t.dtype : t.type };
}

/** Whether a buffer was transferred away (ArrayBuffer.prototype.detached is newer than Node 20). */
function isDetached(b: ArrayBufferLike): boolean {
  const flag = (b as { detached?: boolean }).detached;
  if (flag !== undefined) return flag;
  if (b.byteLength !== 0) return false;
  try {
    new Uint8Array(b, 0, 0);
    return false;
  } catch {
    return true;
  }
}

/** Whether two buffers share a byte. */
export function overlaps(a: Buf, b: Buf): boolean {
  const x = a.bytes,
    y = b.bytes;
  return (
    a.memory === b.memory &&
    x.byteOffset < y.byteOffset + y.byteLength &&
    y.byteOffset < x.byteOffset + x.byteLength &&
    x.byteLength > 0 &&
    y.byteLength > 0
  );
}

/** Whether two buffers are the same bytes (an op in place). */
export function sameView(a: Buf, b: Buf): boolean {
  return (
    a.memory === b.memory && a.bytes.byteOffset === b.bytes.byteOffset && a.bytes.byteLength === b.bytes.byteLength
  );
}
