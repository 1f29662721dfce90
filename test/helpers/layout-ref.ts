// Plain reference for tensor layouts: where logical element (n, c, h, w) lies in each layout,
// written from the definitions, and tensors filled from a logical function.

import type { Communicator } from '../../src/api/communicator.js';
import { type Layout, physicalCount, type TensorLayout } from '../../src/core/tensor-layout.js';
import { bf16ToNumber, f16ToNumber, numberToBf16, numberToF16 } from './reference.js';

export const LAYOUT_NAMES: Layout[] = ['NCHW', 'NHWC', 'NC1HWC0'];

/** Element offset of logical (n, c, h, w). */
export function offsetOf(t: TensorLayout, n: number, c: number, h: number, w: number): number {
  const [, C, H, W] = t.shape;
  if (t.layout === 'NCHW') return ((n * C + c) * H + h) * W + w;
  if (t.layout === 'NHWC') return ((n * H + h) * W + w) * C + c;
  const C1 = Math.ceil(C / t.c0);
  return (((n * C1 + Math.floor(c / t.c0)) * H + h) * W + w) * t.c0 + (c % t.c0);
}

export function forEachElement(shape: number[], f: (n: number, c: number, h: number, w: number) => void): void {
  const [N, C, H, W] = shape;
  for (let n = 0; n < N; n++)
    for (let c = 0; c < C; c++) for (let h = 0; h < H; h++) for (let w = 0; w < W; w++) f(n, c, h, w);
}

/** Marks the padding elements of a tensor (true where padding; none outside NC1HWC0). */
export function paddingMask(t: TensorLayout): boolean[] {
  const mask = new Array(physicalCount(t)).fill(t.layout === 'NC1HWC0');
  if (t.layout === 'NC1HWC0')
    forEachElement(t.shape, (n, c, h, w) => {
      mask[offsetOf(t, n, c, h, w)] = false;
    });
  return mask;
}

/** Copies every logical element (es bytes) from one layout to another; padding zero. */
export function refConvert(es: number, src: Uint8Array, from: TensorLayout, to: TensorLayout): Uint8Array {
  const out = new Uint8Array(physicalCount(to) * es);
  forEachElement(from.shape, (n, c, h, w) => {
    const s = offsetOf(from, n, c, h, w) * es;
    const d = offsetOf(to, n, c, h, w) * es;
    for (let b = 0; b < es; b++) out[d + b] = src[s + b];
  });
  return out;
}

// ---------------------------------------------------------------- tensors for the collective tests

export type Dt = 'f32' | 'f16' | 'bf16' | 'i8' | 'u8' | 'i32' | 'f64';
const ARR = {
  f32: Float32Array,
  f16: Uint16Array,
  bf16: Uint16Array,
  i8: Int8Array,
  u8: Uint8Array,
  i32: Int32Array,
  f64: Float64Array,
} as const;
const enc = (dt: Dt, v: number) => (dt === 'f16' ? numberToF16(v) : dt === 'bf16' ? numberToBf16(v) : v);
const dec = (dt: Dt, v: number) => (dt === 'f16' ? f16ToNumber(v) : dt === 'bf16' ? bf16ToNumber(v) : v);
export const c0Of = (dt: Dt) => (dt === 'i8' || dt === 'u8' ? 32 : 16);

/** Logical value of rank r at (n, c, h, w): small integers, exact in every dtype and their sums. */
export const val = (r: number, n: number, c: number, h: number, w: number) =>
  ((r + 1 + n + 2 * c + 3 * h + 5 * w) % 7) - 3;

export interface T {
  data: any;
  dtype: Dt;
  shape: number[];
  layout: Layout;
  c0?: number;
}

export function tensor(
  dt: Dt,
  layout: Layout,
  shape: number[],
  c0: number,
  f: (n: number, c: number, h: number, w: number) => number,
  o: { garbage?: boolean; data?: any } = {},
): T {
  const t: TensorLayout = { shape: shape as TensorLayout['shape'], layout, c0 };
  const data = o.data ?? new ARR[dt](physicalCount(t));
  if (o.garbage)
    paddingMask(t).forEach((p, i) => {
      if (p) data[i] = enc(dt, 3);
    });
  forEachElement(shape, (n, c, h, w) => {
    data[offsetOf(t, n, c, h, w)] = enc(dt, f(n, c, h, w));
  });
  return { data, dtype: dt, shape, layout, ...(layout === 'NC1HWC0' ? { c0 } : {}) };
}

/** The first element of `t` that differs from f (or padding that is not zero), or undefined. */
export function wrongIn(t: T, f: (n: number, c: number, h: number, w: number) => number): string | undefined {
  const l: TensorLayout = { shape: t.shape as TensorLayout['shape'], layout: t.layout, c0: t.c0 ?? 16 };
  let bad: string | undefined;
  forEachElement(t.shape, (n, c, h, w) => {
    const got = dec(t.dtype, t.data[offsetOf(l, n, c, h, w)]);
    if (!bad && got !== f(n, c, h, w)) bad = `(${n},${c},${h},${w}) is ${got}, expected ${f(n, c, h, w)}`;
  });
  paddingMask(l).forEach((p, i) => {
    if (!bad && p && t.data[i] !== 0) bad = `padding element ${i} is ${t.data[i]}`;
  });
  return bad;
}

export const zeroCopy = (c: Communicator, dt: Dt, t: TensorLayout) => {
  const a = c.alloc(dt, physicalCount(t)) as any;
  return a.data ?? a;
};
