// Collectives on tensors with layouts. What crosses between ranks is the wire layout, part of
// the op's signature with the tensors' logical shape (its "layout class", tensor-layout.ts
// shapeClass), so ranks never mix layouts or shapes silently.
//
//   same layout  nothing is converted: element-wise ops (sum, prod, max, min, avg, broadcast)
//                run on the data as it lies, padding included; allGather, gather,
//                reduceScatter and scatter concatenate and split along N, which is the
//                outermost dimension of every layout. The padding rule: once an op ends, the
//                padding channels of its output are zero, whatever any rank's padding held, so
//                no result depends on padding.
//   mixed        (one node) each rank signs with its own layout; the signature check finds
//                ranks holding one shape in different layouts (no extra message), ends the op
//                at its first step on every rank, and the engine runs it again after each rank
//                converted to row-major (relayout below): HCCL's convert-to-row-major for the
//                wire, paid only when layouts differ. Across nodes no check precedes the data,
//                so a rank whose tensors are not row-major always converts (the copy into
//                working memory it replaces costs about the same), unless wireLayout says what
//                every rank sends.
//   wireLayout   a rank whose tensors hold another layout converts its input into a buffer of
//                the wire layout in its node memory before the op, runs the op there, and
//                converts the result into its output's own layout when the op ends.
// stats() counts the conversions and their bytes; WEBCCL_DEBUG=INFO logs each with its cost.

import { DTYPE_SIZE, type Dtype } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import type { NodeHeap } from '../core/heap.js';
import { enabled, log } from '../core/log.js';
import type { Kind } from '../core/shm-map.js';
import {
  defaultC0,
  layoutSignature,
  parseLayoutName,
  physicalCount,
  sameBytes,
  shapeClass,
  type TensorLayout,
  withN,
} from '../core/tensor-layout.js';
import type { WasmCore } from '../core/wasm.js';
import { type Buf, sameView } from '../engine/buffers.js';
import type { Relayout } from '../engine/engine.js';
import { convertAt } from './convert.js';

/** What stats() reports of conversions. */
export interface ConversionCounters {
  conversions: number;
  /** Bytes read by conversions (the source tensors, padding included). */
  conversionBytes: number;
  conversionMs: number;
}

export interface PlanContext {
  core: WasmCore;
  heap: NodeHeap;
  rank: number;
  size: number;
  counters: ConversionCounters;
  /** Ranks on several nodes: no signature check precedes the data (see the header). */
  acrossNodes: boolean;
}

/** The buffers and count the engine runs the op on, the wire layout, and what to do at the end. */
export interface LayoutPlan {
  input: Buf | null;
  output: Buf | null;
  count: number;
  layout: number;
  /** The logical shape behind the count (shapeClass); 0 for plain buffers. */
  shape: number;
  /** Tensors only (with shape, always): convert to row-major for a run again (one node, mixed layouts). */
  relayout?: () => Relayout;
  /** When the op ends (error set if it failed): the output conversion or padding rule, then the temporaries freed. */
  finish(error: unknown): void;
}

/**
 * @internal Carries an op's wire layout (its signature value) into the ops of its node phase,
 * which move plain arrays: the ranks of a node then agree on it too, not only those that meet
 * over the network. A symbol key: option checks see only string keys.
 */
export const WIRE_SIGNATURE = Symbol('webccl.wireSignature');

type ZeroFn = (es: number, dst: number, n: number, c: number, hw: number, c0: number) => void;

const sameLayout = (a: TensorLayout, b: TensorLayout) =>
  a.layout === b.layout && (a.layout !== 'NC1HWC0' || a.c0 === b.c0);
const show = (t: TensorLayout) => `${t.layout}${t.layout === 'NC1HWC0' ? `(c0 ${t.c0})` : ''} [${t.shape.join(', ')}]`;

/** The shape output must have, given the input's: N scales for the gathering and scattering ops. */
function outputN(name: Kind, n: number, size: number): number {
  if (name === 'allGather' || name === 'gather') return n * size;
  if (name === 'reduceScatter' || name === 'scatter') return n / size;
  return n;
}

/** The ops whose count is the output's (a block of the input), not the input's. */
const countsOutput = (name: Kind) => name === 'reduceScatter' || name === 'scatter';

/**
 * The plan for one op, or undefined when neither buffer has a layout and no wire layout was
 * asked for (plain buffers take no detour). Refuses layouts that do not fit before anything moves.
 */
/** The collectives whose tensors may carry a layout; the others take row-major (NCHW) data only. */
const LAYOUT_AWARE: readonly Kind[] = [
  'allReduce',
  'allGather',
  'reduceScatter',
  'broadcast',
  'reduce',
  'gather',
  'scatter',
  'barrier',
];

export function planLayouts(
  p: PlanContext,
  name: Kind,
  input: Buf | null,
  output: Buf | null,
  wireOption: unknown,
  inherited?: number,
): LayoutPlan | undefined {
  const own = input?.layout ?? output?.layout;
  if (!LAYOUT_AWARE.includes(name)) {
    const laid =
      input?.layout && input.layout.layout !== 'NCHW'
        ? input.layout
        : output?.layout && output.layout.layout !== 'NCHW'
          ? output.layout
          : undefined;
    if (laid || wireOption !== undefined) {
      fail(
        'INVALID_ARGUMENT',
        `${name}: takes row-major data only (a ${laid ? laid.layout : 'wireLayout'} tensor here); convertLayout it to NCHW first`,
        { layout: laid?.layout, option: laid ? undefined : 'wireLayout' },
      );
    }
    return undefined;
  }
  if (!own && wireOption === undefined) {
    return inherited
      ? {
          input,
          output,
          count: countsOutput(name) ? (output?.count ?? 0) : (input?.count ?? 0),
          layout: inherited,
          shape: 0,
          finish: () => undefined,
        }
      : undefined;
  }
  const b = (input ?? output)!;
  const dtype = b.dtype;
  if (!own) {
    return fail(
      'INVALID_ARGUMENT',
      `${name}: wireLayout needs tensors { data, shape, layout }; the buffers have no shape`,
      { option: 'wireLayout' },
    );
  }
  const [inL, outL] = layoutsFit(name, input, output, p.size);
  const counted = (countsOutput(name) ? outL : inL) ?? inL ?? outL!;
  const shape = shapeClass(counted.shape);
  const rowMajor: TensorLayout = { shape: own.shape, layout: 'NCHW', c0: 1 };
  // The wire: wireLayout's (NC1HWC0 with the dtype's default C0); else on one node the
  // tensors' own layout (row-major when it places bytes alike, so that such ranks need no run
  // again), across nodes row-major.
  const wire: TensorLayout =
    wireOption !== undefined
      ? { shape: own.shape, layout: parseLayoutName(wireOption, `${name}: wireLayout`), c0: defaultC0(dtype) }
      : p.acrossNodes || sameBytes(own, rowMajor)
        ? rowMajor
        : own;
  const layout = layoutSignature(wire.layout === 'NCHW' ? undefined : wire);
  const engineCount = (w: TensorLayout) => {
    const l = countsOutput(name) ? outL : inL;
    return (countsOutput(name) ? output : input) && l ? physicalCount({ ...w, shape: l.shape }) : 0;
  };
  // One node, mixed layouts: convert to row-major (unless the wire is already), then the engine
  // runs the op again. The plan's earlier temporaries are freed, its output conversion skipped.
  const relayout = (): Relayout => {
    if (layout === 0) return { input: plan.input, output: plan.output, count: plan.count };
    plan.finish(RELAYOUT);
    const c = converting(p, { name, dtype, own, wire: rowMajor, input, output, inL, outL });
    Object.assign(plan, {
      input: c.input,
      output: c.output,
      count: engineCount(rowMajor),
      layout: 0,
      finish: c.finish,
    });
    return { input: plan.input, output: plan.output, count: plan.count };
  };
  const plan: LayoutPlan = {
    input,
    output,
    count: engineCount(wire),
    layout,
    shape,
    relayout,
    finish: () => undefined,
  };
  if (sameLayout(own, wire) || sameBytes(own, wire)) {
    // No conversion: the op runs on the caller's buffers; the output's padding is zeroed after.
    plan.finish = (error) => {
      if (!error && output && outL?.layout === 'NC1HWC0') zeroPadding(p, output, outL, dtype);
    };
    return plan;
  }
  return Object.assign(plan, converting(p, { name, dtype, own, wire, input, output, inL, outL }));
}

/** What a plan's finish is given when the op runs again in row-major: not an error, but no output yet. */
const RELAYOUT = Symbol('relayout');

/**
 * Converts a rank's input into a buffer of the wire layout in its node memory now, and gives
 * the buffers the op runs on and what to do when it ends (convert the result into the output's
 * own layout, free the temporaries).
 */
function converting(
  p: PlanContext,
  c: {
    name: Kind;
    dtype: Dtype;
    /** The rank's own layout, and the one the op runs in. */
    own: TensorLayout;
    wire: TensorLayout;
    input: Buf | null;
    output: Buf | null;
    /** The input's and output's layouts (layoutsFit). */
    inL: TensorLayout | null;
    outL: TensorLayout | null;
  },
): { input: Buf | null; output: Buf | null; finish(error: unknown): void } {
  const { name, dtype, own, wire, input, output, inL, outL } = c;
  const es = DTYPE_SIZE[dtype];
  const temps: number[] = [];
  const wireBuf = (l: TensorLayout): Buf => {
    const bytes = physicalCount({ ...wire, shape: l.shape }) * es;
    const addr = p.heap.alloc(bytes);
    temps.push(addr);
    const memory = freshBuffer(p.core.memory);
    return { bytes: new Uint8Array(memory, addr, bytes), memory, dtype, count: bytes / es, addr, words: undefined };
  };
  const release = () => {
    for (const a of temps.splice(0)) p.heap.free(a);
  };
  if (sameLayout(own, wire) || sameBytes(own, wire)) return { input, output, finish: () => undefined };
  try {
    const inPlace = input !== null && output !== null && sameView(input, output);
    const wIn = input && inL ? wireBuf(inL) : null;
    if (input && inL && wIn)
      convert(p, { name, what: 'input', dtype, from: inL, to: { ...wire, shape: inL.shape }, src: input, dst: wIn });
    const wOut = inPlace ? wIn : output && outL ? wireBuf(outL) : null;
    return {
      input: wIn,
      output: wOut,
      finish: (error) => {
        try {
          if (!error && output && outL && wOut)
            convert(p, {
              name,
              what: 'output',
              dtype,
              from: { ...wire, shape: outL.shape },
              to: outL,
              src: wOut,
              dst: output,
            });
        } finally {
          release();
        }
      },
    };
  } catch (e) {
    release();
    throw e;
  }
}

/**
 * The layouts of an op's input and output, checked: one rank's buffers hold one layout, and their
 * shapes fit the collective. A plain array beside a tensor takes the tensor's layout.
 */
export function layoutsFit(
  name: Kind,
  input: Buf | null,
  output: Buf | null,
  size: number,
): [TensorLayout | null, TensorLayout | null] {
  const own = (input?.layout ?? output?.layout)!;
  // A rank's input and output hold one layout; a plain array beside a tensor takes its layout.
  const inL =
    input?.layout ??
    (input && {
      ...own,
      shape: [
        name === 'reduceScatter' ? own.shape[0] * size : name === 'allGather' ? own.shape[0] / size : own.shape[0],
        own.shape[1],
        own.shape[2],
        own.shape[3],
      ] as TensorLayout['shape'],
    });
  const outL = output?.layout ?? (output && inL && withN(inL, outputN(name, inL.shape[0], size)));
  if (inL && outL) {
    if (!sameLayout(inL, outL)) {
      fail(
        'INVALID_ARGUMENT',
        `${name}: input is ${show(inL)} and output ${show(outL)}: one rank's buffers hold one layout (convertLayout one of them, or pass wireLayout to convert on the way)`,
        { layouts: [inL.layout, outL.layout] },
      );
    }
    const [n, c, h, w] = inL.shape;
    const [m, c2, h2, w2] = outL.shape;
    if (c !== c2 || h !== h2 || w !== w2 || m !== outputN(name, n, size)) {
      fail(
        'SIZE_MISMATCH',
        `${name}: input shape [${inL.shape.join(', ')}] and output shape [${outL.shape.join(', ')}] do not fit (${name === 'allGather' ? 'output N = size × input N' : name === 'reduceScatter' ? 'input N = size × output N' : 'they must be equal'}; C, H, W equal)`,
        {
          input: inL.shape,
          output: outL.shape,
        },
      );
    }
  }
  return [inL ?? null, outL ?? null];
}

/** One conversion between a caller's buffer and a wire buffer (addresses in the node memory when they have them). */
function convert(
  p: PlanContext,
  c: { name: Kind; what: 'input' | 'output'; dtype: Dtype; from: TensorLayout; to: TensorLayout; src: Buf; dst: Buf },
): void {
  const { name, what, dtype, from, to, src, dst } = c;
  const t0 = performance.now();
  const es = DTYPE_SIZE[dtype];
  const scratch: number[] = [];
  const at = (b: Buf): number => {
    if (b.addr) return b.addr;
    const a = p.heap.alloc(b.bytes.byteLength);
    scratch.push(a);
    return a;
  };
  try {
    const s = at(src);
    const d = at(dst);
    const mem = () => new Uint8Array(freshBuffer(p.core.memory));
    if (!src.addr) mem().set(src.bytes, s);
    const tmp = () => {
      const a = p.heap.alloc(physicalCount({ ...from, layout: 'NCHW' }) * es);
      scratch.push(a);
      return a;
    };
    convertAt(p.core.exports, { es, from, to, src: s, dst: d, tmp });
    if (!dst.addr) dst.bytes.set(mem().subarray(d, d + dst.bytes.byteLength));
  } finally {
    for (const a of scratch) p.heap.free(a);
  }
  const ms = performance.now() - t0;
  p.counters.conversions++;
  p.counters.conversionBytes += src.bytes.byteLength;
  p.counters.conversionMs += ms;
  if (enabled('INFO')) {
    const bytes = src.bytes.byteLength + dst.bytes.byteLength;
    log(
      'INFO',
      `rank ${p.rank}: ${name} converted its ${what} ${show(from)} -> ${to.layout}${to.layout === 'NC1HWC0' ? `(c0 ${to.c0})` : ''} ${dtype}: ${src.bytes.byteLength} B in ${(ms * 1000).toFixed(1)} us (${(bytes / (ms * 1e6)).toFixed(2)} GB/s read + written)`,
    );
  }
}

/** The padding rule: zero in the padding channels of an NC1HWC0 output once the op has ended. */
function zeroPadding(p: PlanContext, out: Buf, l: TensorLayout, dtype: Dtype): void {
  const [n, c, h, w] = l.shape;
  const es = DTYPE_SIZE[dtype];
  if (c % l.c0 === 0 || n * h * w === 0) return;
  if (out.addr) {
    (p.core.exports.zeroPadding as ZeroFn)(es, out.addr, n, c, h * w, l.c0);
    return;
  }
  const c1 = Math.ceil(c / l.c0);
  const valid = c - (c1 - 1) * l.c0;
  const run = l.c0 * es;
  for (let i = 0; i < n; i++) {
    let at = ((i * c1 + c1 - 1) * h * w * l.c0 + valid) * es;
    for (let px = 0; px < h * w; px++, at += run) out.bytes.fill(0, at, at + (l.c0 - valid) * es);
  }
}
