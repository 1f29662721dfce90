// Plain reference for tensor layouts: where logical element (n, c, h, w) lies in each layout,
// written from the definitions, and tensors filled from a logical function.
import { physicalCount, type Layout, type TensorLayout } from '../../src/comm/tensor-layout.js';

export const LAYOUT_NAMES: Layout[] = ['NCHW', 'NHWC', 'NC1HWC0'];

/** Element offset of logical (n, c, h, w). */
export function offsetOf(t: TensorLayout, n: number, c: number, h: number, w: number): number {
  const [, C, H, W] = t.shape;
  if (t.layout === 'NCHW') return ((n * C + c) * H + h) * W + w;
  if (t.layout === 'NHWC') return ((n * H + h) * W + w) * C + c;
  const C1 = Math.ceil(C / t.c0);
  return ((((n * C1 + Math.floor(c / t.c0)) * H + h) * W + w) * t.c0) + (c % t.c0);
}

export function forEachElement(shape: number[], f: (n: number, c: number, h: number, w: number) => void): void {
  const [N, C, H, W] = shape;
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) for (let h = 0; h < H; h++) for (let w = 0; w < W; w++) f(n, c, h, w);
}

/** Marks the padding elements of a tensor (true where padding; none outside NC1HWC0). */
export function paddingMask(t: TensorLayout): boolean[] {
  const mask = new Array(physicalCount(t)).fill(t.layout === 'NC1HWC0');
  if (t.layout === 'NC1HWC0') forEachElement(t.shape, (n, c, h, w) => { mask[offsetOf(t, n, c, h, w)] = false; });
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
