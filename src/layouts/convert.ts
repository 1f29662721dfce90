// convertLayout and convertDtype: tensors between layouts (the kernels of assembly/layouts/)
// and between dtypes, for buffers anywhere in JS memory (they pass through a wasm memory of
// this thread's own; the collectives convert in their node's memory instead, see
// layouts/plan.ts).
import { ARRAY_OF, DTYPE_SIZE, type Dtype, type DtypeName, parseDtype } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import { anything, checkOptions, integer, type OptionSpec } from '../core/options.js';
import {
  LAYOUT_CODE,
  type Layout,
  MAX_C0,
  parseC0,
  parseLayoutName,
  parseTensorLayout,
  physicalCount,
  sameBytes,
  type TensorLayout,
} from '../core/tensor-layout.js';
import { createSharedMemory, type KernelExports, loadWasm, type WasmCore } from '../core/wasm.js';
import { describe, type TypedArray, toBuf } from '../engine/buffers.js';

/** A tensor with a layout, as the conversions give it (and the collectives take it). */
export interface LayoutTensor {
  data: TypedArray;
  dtype: Dtype;
  shape: number[];
  layout: Layout;
  c0?: number;
}

// ---------------------------------------------------------------- running the kernels

interface Scratch {
  core: WasmCore;
  base: number;
}
let scratch: Scratch | undefined;

/**
 * A wasm core of this thread's own for conversions of buffers outside any node memory: made at
 * the first call, grown to the largest conversion and kept (a shared memory, as the core
 * imports one; where SharedArrayBuffer is missing, an unshared one of a fixed 256 MiB). Only this
 * thread grows it, so its `buffer` is always current (no fresh-buffer.ts: it has no node header).
 */
function scratchCore(bytes: number): Scratch {
  if (!scratch) {
    const memory = createSharedMemory(bytes + (1 << 20));
    const core = loadWasm(memory);
    scratch = { core, base: (core.exports.heapBase() + 63) & ~63 };
  }
  const have = scratch.core.memory.buffer.byteLength;
  const need = scratch.base + bytes;
  if (need > have) scratch.core.memory.grow(Math.ceil((need - have) / 65536));
  return scratch;
}

type ConvertFn = (
  es: number,
  from: number,
  to: number,
  dst: number,
  src: number,
  n: number,
  c: number,
  hw: number,
  c0: number,
) => void;

/** One conversion of `es`-byte elements between addresses `src` and `dst` (apart) of a core's memory. */
export interface ConversionAt {
  es: number;
  from: TensorLayout;
  to: TensorLayout;
  src: number;
  dst: number;
  /** Scratch for a change of C0 (it goes through NCHW). */
  tmp?: () => number;
}

/**
 * Runs the layout kernel of `exports` for conversion `x`; `from.c0` and `to.c0` must agree when both are NC1HWC0
 * (else it goes through NCHW, in x.tmp()).
 */
export function convertAt(exports: KernelExports, x: ConversionAt): void {
  const { es, from, to, dst, src, tmp } = x;
  const [n, c, h, w] = from.shape;
  const run = exports.convertLayout as ConvertFn;
  if (from.layout === 'NC1HWC0' && to.layout === 'NC1HWC0' && from.c0 !== to.c0) {
    const mid = tmp ? tmp() : fail('INTERNAL', 'a C0 change needs a scratch buffer');
    run(es, LAYOUT_CODE.NC1HWC0, LAYOUT_CODE.NCHW, mid, src, n, c, h * w, from.c0);
    run(es, LAYOUT_CODE.NCHW, LAYOUT_CODE.NC1HWC0, dst, mid, n, c, h * w, to.c0);
    return;
  }
  const c0 = from.layout === 'NC1HWC0' ? from.c0 : to.c0;
  run(es, LAYOUT_CODE[from.layout], LAYOUT_CODE[to.layout], dst, src, n, c, h * w, c0);
}

/** Converts bytes held anywhere (JS memory) through this thread's scratch core. */
export function convertBytes(es: number, from: TensorLayout, to: TensorLayout, src: Uint8Array, dst: Uint8Array): void {
  const inBytes = src.byteLength;
  const outBytes = dst.byteLength;
  const midBytes = physicalCount({ ...from, layout: 'NCHW' }) * es;
  const s = scratchCore(inBytes + outBytes + midBytes + 128);
  const at = s.base;
  const out = (at + inBytes + 63) & ~63;
  const mid = (out + outBytes + 63) & ~63;
  const mem = new Uint8Array(s.core.memory.buffer);
  mem.set(src, at);
  convertAt(s.core.exports, { es, from, to, src: at, dst: out, tmp: () => mid });
  dst.set(mem.subarray(out, out + outBytes));
}

// ---------------------------------------------------------------- public conversions

const CONVERT_LAYOUT_OPTIONS = { c0: integer(1, MAX_C0), out: anything } as const satisfies OptionSpec;

/** The tensor argument of convertLayout / convertDtype, with its layout (NCHW when it has none). */
function tensorArg(x: unknown, where: string): { t: LayoutTensor; layout: TensorLayout; bytes: Uint8Array } {
  const b = toBuf(x, where, () => false);
  const o = x as Record<string, unknown>;
  const layout =
    typeof o === 'object' && o !== null && 'layout' in o
      ? parseTensorLayout(o, b.dtype, b.count, where)
      : fail(
          'INVALID_ARGUMENT',
          `${where}: expected a tensor { data, dtype?, shape, layout, c0? }, got ${describe(x)}`,
        );
  const data = (ArrayBuffer.isView(x) ? x : o.data) as TypedArray;
  return {
    t: {
      data,
      dtype: b.dtype,
      shape: [...layout.shape],
      layout: layout.layout,
      ...(layout.layout === 'NC1HWC0' ? { c0: layout.c0 } : {}),
    },
    layout,
    bytes: b.bytes,
  };
}

function outArray(out: unknown, dtype: Dtype, count: number, where: string): TypedArray {
  if (out === undefined) return new ARRAY_OF[dtype](new ArrayBuffer(count * DTYPE_SIZE[dtype]), 0, count) as TypedArray;
  const data = (ArrayBuffer.isView(out) ? out : (out as { data?: unknown } | null)?.data) as
    | ArrayBufferView
    | undefined;
  if (!(data instanceof ARRAY_OF[dtype]))
    fail(
      'INVALID_DTYPE',
      `${where}: out must be a ${ARRAY_OF[dtype].name} for dtype ${dtype}, got ${describe(data ?? out)}`,
    );
  const arr = data as TypedArray;
  if (arr.length !== count)
    fail('SIZE_MISMATCH', `${where}: out holds ${arr.length} elements; the result needs ${count}`, {
      expected: count,
      actual: arr.length,
    });
  return arr;
}

function overlapping(a: Uint8Array, b: Uint8Array): boolean {
  return (
    a.buffer === b.buffer && a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength
  );
}

/**
 * The tensor `src` in `layout` (with `c0` for NC1HWC0): a new tensor, or written into `out` (a
 * TypedArray of the dtype, or a tensor whose data is one). Padding channels are written as zero
 * and ignored on the way back. `out` may be src's own data only when both layouts place every
 * byte alike (the conversion is then a copy, or nothing).
 */
export function convertLayout(src: unknown, layout: Layout, options?: { c0?: number; out?: unknown }): LayoutTensor {
  const where = 'convertLayout';
  const opts = checkOptions<{ c0?: number; out?: unknown }>(where, options, CONVERT_LAYOUT_OPTIONS, '{ c0: 16 }');
  const { t, layout: from, bytes } = tensorArg(src, where);
  const toName = parseLayoutName(layout, where);
  const to: TensorLayout = { shape: from.shape, layout: toName, c0: parseC0(opts.c0, toName, t.dtype, where) };
  const es = DTYPE_SIZE[t.dtype];
  const data = outArray(opts.out, t.dtype, physicalCount(to), where);
  const dst = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const result: LayoutTensor = {
    data,
    dtype: t.dtype,
    shape: [...to.shape],
    layout: toName,
    ...(toName === 'NC1HWC0' ? { c0: to.c0 } : {}),
  };
  if (sameBytes(from, to)) {
    if (dst.buffer !== bytes.buffer || dst.byteOffset !== bytes.byteOffset) dst.set(bytes);
    return result;
  }
  if (overlapping(dst, bytes))
    fail(
      'INVALID_ARGUMENT',
      `${where}: out overlaps the source data; converting ${from.layout} to ${toName} needs apart buffers`,
      { overlap: true },
    );
  convertBytes(es, from, to, bytes, dst);
  return result;
}

// ---------------------------------------------------------------- dtypes

/** Conversions convertDtype offers: exact widenings, and the roundings to nearest even. */
const DTYPE_TARGETS: Partial<Record<Dtype, readonly Dtype[]>> = {
  f32: ['f16', 'bf16', 'f64'],
  f16: ['f32', 'f64'],
  bf16: ['f32', 'f64'],
  f64: ['f32'],
  i8: ['i32', 'f32', 'f64'],
  u8: ['i32', 'u32', 'f32', 'f64'],
  i32: ['f64'],
  u32: ['f64'],
};

type HalfFn = (dst: number, src: number, count: number) => void;
const CONVERT_DTYPE_OPTIONS = { out: anything } as const satisfies OptionSpec;

/**
 * `src` (a TypedArray, or a tensor: its shape, layout and c0 carry over) as `dtype`. f32 → f16 /
 * bf16 round to nearest even (NaN becomes the canonical quiet NaN, overflow ±Inf, subnormals
 * kept); f64 → f32 rounds to nearest even; the rest widen exactly. Returns { data, dtype, … }.
 */
export function convertDtype(
  src: unknown,
  dtype: DtypeName,
  options?: { out?: unknown },
): { data: TypedArray; dtype: Dtype; shape?: number[]; layout?: Layout; c0?: number } {
  const where = 'convertDtype';
  const opts = checkOptions<{ out?: unknown }>(where, options, CONVERT_DTYPE_OPTIONS, '{ out: new Float32Array(n) }');
  const b = toBuf(src, where, () => false);
  const to = parseDtype(dtype, where);
  const carried =
    typeof src === 'object' && src !== null && 'layout' in src
      ? (() => {
          const l = parseTensorLayout(src as Record<string, unknown>, b.dtype, b.count, where);
          // NC1HWC0 keeps its blocks of C0 elements, so its c0 stays what it was.
          return { shape: [...l.shape], layout: l.layout, ...(l.layout === 'NC1HWC0' ? { c0: l.c0 } : {}) };
        })()
      : {};
  const out = outArray(opts.out, to, b.count, where);
  const result = { data: out, dtype: to, ...carried };
  if (to === b.dtype) {
    new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(b.bytes);
    return result;
  }
  if (!DTYPE_TARGETS[b.dtype]?.includes(to)) {
    const targets = DTYPE_TARGETS[b.dtype] ?? [];
    fail(
      'INVALID_DTYPE',
      `${where}: ${b.dtype} → ${to} is not offered (${b.dtype} converts to ${targets.length ? targets.join(', ') : 'nothing'}; every conversion offered is exact or rounds to nearest even)`,
      { from: b.dtype, to },
    );
  }
  const outBytes = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  if (overlapping(outBytes, b.bytes))
    fail('INVALID_ARGUMENT', `${where}: out overlaps the source data`, { overlap: true });
  const halves = b.dtype === 'f16' || b.dtype === 'bf16' ? b.dtype : to === 'f16' || to === 'bf16' ? to : undefined;
  if (halves && (b.dtype === 'f32' || to === 'f32')) {
    runHalf(
      b.dtype === 'f32' ? (to === 'f16' ? 'f32ToF16' : 'f32ToBf16') : b.dtype === 'f16' ? 'f16ToF32' : 'bf16ToF32',
      b.bytes,
      outBytes,
      b.count,
    );
  } else if (halves) {
    // A half to f64: exact through f32.
    const mid = new Float32Array(b.count);
    runHalf(b.dtype === 'f16' ? 'f16ToF32' : 'bf16ToF32', b.bytes, new Uint8Array(mid.buffer), b.count);
    (out as Float64Array).set(mid);
  } else {
    const from = new ARRAY_OF[b.dtype](b.bytes.buffer, b.bytes.byteOffset, b.count) as Float32Array;
    (out as Float32Array).set(from); // JS conversions: exact widenings, f64 → f32 to nearest even
  }
  return result;
}

function runHalf(
  kernel: 'f32ToF16' | 'f32ToBf16' | 'f16ToF32' | 'bf16ToF32',
  src: Uint8Array,
  dst: Uint8Array,
  count: number,
): void {
  const s = scratchCore(src.byteLength + dst.byteLength + 64);
  const at = s.base;
  const out = (at + src.byteLength + 63) & ~63;
  const mem = new Uint8Array(s.core.memory.buffer);
  mem.set(src, at);
  (s.core.exports[kernel] as HalfFn)(out, at, count);
  dst.set(new Uint8Array(s.core.memory.buffer, out, dst.byteLength));
}
