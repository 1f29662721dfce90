// The op memory (Mem) of a virtual rank, in two kinds:
//  - DataMem: real bytes in plain ArrayBuffers, with the reductions in JavaScript. A thousand
//    virtual ranks each with a wasm instance would cost far more than the small buffers they
//    check; the wasm kernels have their own tests, and what the simulator checks is the
//    schedule (which block goes where, and is reduced how many times).
//  - SizeMem: no bytes at all. Views only carry their length, which is all the simulated
//    network reads in size-only mode, so a rank can "hold" a gigabyte.
import type { Mem } from '../algorithms/group.js';
import { fail } from '../core/errors.js';

export const SIM_DTYPES = ['f64', 'f32', 'i32'] as const;
export type SimDtype = (typeof SIM_DTYPES)[number];
export const SIM_OPS = ['sum', 'prod', 'min', 'max'] as const;
export type SimOp = (typeof SIM_OPS)[number];

const ARRAY = { f64: Float64Array, f32: Float32Array, i32: Int32Array } as const;
export const SIM_DTYPE_SIZE: Record<SimDtype, number> = { f64: 8, f32: 4, i32: 4 };

/** Each allocation is its own buffer; an address is segment × SEGMENT + offset. */
const SEGMENT = 2 ** 32;

type Combine = (a: number, b: number) => number;
const COMBINE: Record<SimOp, Combine> = {
  sum: (a, b) => a + b,
  prod: (a, b) => a * b,
  min: (a, b) => (b < a ? b : a),
  max: (a, b) => (b > a ? b : a),
};

export class DataMem implements Mem {
  readonly elemBytes: number;
  /** Segment 0 stays empty, so no region has address 0 (which the engine reads as "none"). */
  private readonly segments: ArrayBuffer[] = [new ArrayBuffer(0)];
  private readonly combine: Combine;

  constructor(
    readonly dtype: SimDtype,
    op: SimOp,
  ) {
    this.elemBytes = SIM_DTYPE_SIZE[dtype];
    // i32 wraps modulo 2^32 as the wasm kernels do: Int32Array stores sums so, and imul multiplies so.
    this.combine = dtype === 'i32' && op === 'prod' ? Math.imul : COMBINE[op];
  }

  /** A fresh region of `count` elements (zeroed). */
  scratch(count: number): number {
    const at = this.segments.length;
    this.segments.push(new ArrayBuffer(count * this.elemBytes));
    return at * SEGMENT;
  }

  private locate(addr: number, count: number): [ArrayBuffer, number] {
    const seg = Math.floor(addr / SEGMENT);
    const off = addr - seg * SEGMENT;
    const buf = this.segments[seg];
    if (!buf || off + count * this.elemBytes > buf.byteLength)
      fail('INTERNAL', `simulated memory: ${count} elements at ${addr} lie outside every region`);
    return [buf, off];
  }

  view(addr: number, count: number): Uint8Array {
    const [buf, off] = this.locate(addr, count);
    return new Uint8Array(buf, off, count * this.elemBytes);
  }

  /** The region as elements of the dtype. */
  elements(addr: number, count: number): Float64Array | Float32Array | Int32Array {
    const [buf, off] = this.locate(addr, count);
    return new ARRAY[this.dtype](buf, off, count);
  }

  reduce(dst: number, src: number, count: number): void {
    const d = this.elements(dst, count);
    const s = this.elements(src, count);
    const f = this.combine;
    for (let i = 0; i < count; i++) d[i] = f(d[i], s[i]);
  }

  reduceFrom(dst: number, a: number, b: number, count: number): void {
    this.copy(dst, a, count);
    this.reduce(dst, b, count);
  }

  copy(dst: number, src: number, count: number): void {
    this.view(dst, count).set(this.view(src, count));
  }
}

/** A view that only knows its length: the network in size-only mode reads nothing else. */
export function sizedView(bytes: number): Uint8Array {
  return { length: bytes, byteLength: bytes } as unknown as Uint8Array;
}

export class SizeMem implements Mem {
  private next = SEGMENT;

  constructor(readonly elemBytes: number) {}

  /** Views are only lengths, so one per length serves every region. */
  private readonly views = new Map<number, Uint8Array>();

  /** The last view handed out: a schedule asks for the same length step after step. */
  private lastCount = -1;
  private last = sizedView(0);

  view(_addr: number, count: number): Uint8Array {
    if (count === this.lastCount) return this.last;
    let v = this.views.get(count);
    if (!v) this.views.set(count, (v = sizedView(count * this.elemBytes)));
    this.lastCount = count;
    this.last = v;
    return v;
  }

  reduce(): void {}

  reduceFrom(): void {}

  copy(): void {}

  scratch(count: number): number {
    const at = this.next;
    this.next += (count + 1) * this.elemBytes;
    return at;
  }
}
