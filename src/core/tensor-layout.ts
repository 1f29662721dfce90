// Tensor layouts: what a tensor's `shape`, `layout` and `c0` mean, how much data they need, and
// the conversions between layouts (in the wasm core, assembly/layouts/) and between dtypes.
//
//   NCHW     row-major [N, C, H, W] (the default)
//   NHWC     channels last
//   NC1HWC0  channels in C1 = ⌈C / C0⌉ blocks of C0 (Ascend's device layout): N·C1·H·W·C0
//            elements, the channels past C in the last block being padding
// `shape` is always the logical [N, C, H, W]. C0 defaults to 32 for 1-byte dtypes and 16 for
// the others, as CANN uses.
import { DTYPE_SIZE, type Dtype } from './dtypes.js';
import { fail } from './errors.js';
import { showValue } from './options.js';

/**
 * The layouts a tensor may name: 'NCHW' (row-major, what a plain array is), 'NHWC' (channels
 * last) and 'NC1HWC0' (Ascend's: blocks of C0 channels); see docs/buffers.md.
 */
export const LAYOUTS = ['NCHW', 'NHWC', 'NC1HWC0'] as const;
/** One of {@link LAYOUTS}. */
export type Layout = (typeof LAYOUTS)[number];
/** Layout codes of the wasm core (assembly/layouts/convert.ts). */
export const LAYOUT_CODE: Record<Layout, number> = { NCHW: 0, NHWC: 1, NC1HWC0: 2 };

/** The layout of a tensor's data: logical shape [N, C, H, W], layout, and C0 (NC1HWC0 only). */
export interface TensorLayout {
  shape: [number, number, number, number];
  layout: Layout;
  c0: number;
}

export const MAX_C0 = 4096;

export function defaultC0(dtype: Dtype): number {
  return DTYPE_SIZE[dtype] === 1 ? 32 : 16;
}

/** Elements the data of `t` holds (padding included). */
export function physicalCount(t: TensorLayout): number {
  const [n, c, h, w] = t.shape;
  return t.layout === 'NC1HWC0' ? n * Math.ceil(c / t.c0) * t.c0 * h * w : n * c * h * w;
}

/** The same tensor with N images instead of shape[0]. */
export function withN(t: TensorLayout, n: number): TensorLayout {
  return { ...t, shape: [n, t.shape[1], t.shape[2], t.shape[3]] };
}

/** The signature value of a wire layout: code, and C0 above it when it matters. */
export function layoutSignature(t: TensorLayout | undefined): number {
  if (!t) return 0;
  return LAYOUT_CODE[t.layout] | (t.layout === 'NC1HWC0' ? t.c0 << 8 : 0);
}

export function showLayoutSignature(v: number): string {
  const name = LAYOUTS[v & 0xff] ?? String(v);
  return name === 'NC1HWC0' ? `${name} (c0 ${v >>> 8})` : name;
}

export function parseLayoutName(v: unknown, where: string): Layout {
  if (typeof v === 'string' && (LAYOUTS as readonly string[]).includes(v)) return v as Layout;
  return fail('INVALID_ARGUMENT', `${where}: unknown layout ${showValue(v)} (expected one of ${LAYOUTS.join(', ')})`, {
    option: 'layout',
    value: v,
  });
}

export function parseC0(v: unknown, layout: Layout, dtype: Dtype, where: string): number {
  if (v === undefined) return defaultC0(dtype);
  if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > MAX_C0) {
    fail('INVALID_ARGUMENT', `${where}: c0 must be an integer in 1..${MAX_C0}, got ${showValue(v)}`, {
      option: 'c0',
      value: v,
    });
  }
  if (layout !== 'NC1HWC0')
    fail('INVALID_ARGUMENT', `${where}: c0 applies to layout NC1HWC0 only, not ${layout}`, { option: 'c0', layout });
  return v as number;
}

function parseShape(v: unknown, where: string): [number, number, number, number] {
  if (!Array.isArray(v) || v.length !== 4 || !v.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    return fail(
      'INVALID_ARGUMENT',
      `${where}: shape must be the logical [N, C, H, W] (four non-negative integers), got ${showValue(v)}`,
      { option: 'shape', value: v },
    );
  }
  return [v[0], v[1], v[2], v[3]];
}

/**
 * The layout of a tensor argument ({ data, dtype?, shape, layout, c0? }) whose data holds
 * `count` elements of `dtype`, checked: SIZE_MISMATCH when the data does not hold exactly what
 * shape and layout need.
 */
export function parseTensorLayout(
  x: Record<string, unknown>,
  dtype: Dtype,
  count: number,
  where: string,
): TensorLayout {
  const layout = parseLayoutName(x.layout, where);
  const shape = parseShape(x.shape, where);
  const c0 = parseC0(x.c0, layout, dtype, where);
  const t: TensorLayout = { shape, layout, c0 };
  const need = physicalCount(t);
  if (need !== count) {
    const form =
      layout === 'NC1HWC0'
        ? `N·⌈C/c0⌉·H·W·c0 = ${shape[0]}·${Math.ceil(shape[1] / c0)}·${shape[2]}·${shape[3]}·${c0}`
        : `N·C·H·W = ${shape.join('·')}`;
    fail(
      'SIZE_MISMATCH',
      `${where}: shape [${shape.join(', ')}] in layout ${layout} needs ${form} = ${need} elements; the data holds ${count}`,
      {
        expected: need,
        actual: count,
        shape,
        layout,
        c0,
      },
    );
  }
  return t;
}

/** Whether two layouts of one shape place every element at the same byte (the conversion is a copy). */
export function sameBytes(a: TensorLayout, b: TensorLayout): boolean {
  const [n, c, h, w] = a.shape;
  if (n * c * h * w === 0) return true; // nothing to place (and no padding)
  // NC1HWC0 with C0 = 1 is NCHW; with C0 = C (one block, no padding) it is NHWC.
  const order = (t: TensorLayout) =>
    t.layout === 'NCHW' || (t.layout === 'NC1HWC0' && t.c0 === 1)
      ? 'NCHW'
      : t.layout === 'NHWC' || t.c0 === c
        ? 'NHWC'
        : `C0=${t.c0}`;
  const [x, y] = [order(a), order(b)];
  if (x === y) return true;
  // One channel, or one pixel: channels-first and channels-last orders coincide.
  return (c === 1 || h * w === 1) && !x.startsWith('C0') && !y.startsWith('C0');
}

/** Logical shapes this thread has hashed, to name them in a MISMATCH on 'shape' (bounded). */
const SHAPES_SEEN = new Map<number, string>();
const SHAPES_KEPT = 256;

/**
 * The signature value of a tensor's logical shape (its "layout class"): FNV-1a over [N, C, H, W],
 * never 0 (0 is a plain buffer, which carries no shape). Ranks whose tensors share it may hold
 * them in different layouts: the op then crosses in row-major (layouts/plan.ts); ranks whose
 * shapes differ fail with MISMATCH on 'shape'.
 */
export function shapeClass(shape: readonly number[]): number {
  let h = 0x811c9dc5;
  for (const v of shape) {
    for (let b = 0; b < 4; b++) h = Math.imul(h ^ (Math.floor(v / 2 ** (8 * b)) & 0xff), 0x01000193);
  }
  const c = h >>> 0 || 1;
  if (!SHAPES_SEEN.has(c)) {
    if (SHAPES_SEEN.size >= SHAPES_KEPT) SHAPES_SEEN.delete(SHAPES_SEEN.keys().next().value!);
    SHAPES_SEEN.set(c, `[${shape.join(', ')}]`);
  }
  return c;
}

/** A shape class as a MISMATCH names it: the shape when this thread hashed it, else the hash. */
export function showShapeClass(v: number): string {
  return v === 0 ? 'no shape (a plain buffer)' : (SHAPES_SEEN.get(v) ?? `shape #${v.toString(16).padStart(8, '0')}`);
}
