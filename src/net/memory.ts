// Working memory of a network op, in the node's wasm memory so that the kernels reach it:
// a buffer from comm.alloc() is used in place, any other is copied into the op's scratch at its
// start and out at its end. The schedules see it as a Mem (src/algorithms/group.ts).

import type { Mem, Span } from '../algorithms/group.js';
import { DTYPE_CODE, DTYPE_SIZE, type Dtype, OP_CODE } from '../core/dtypes.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import type { Buf } from '../engine/buffers.js';
import type { Arena } from './arena.js';

/** The wasm kernels the schedules reduce, copy and scale with. */
export interface Kernels {
  reduceInto(dtype: number, op: number, dst: number, src: number, count: number): void;
  reduce2(dtype: number, op: number, dst: number, a: number, b: number, count: number): void;
  copyBytes(dst: number, src: number, bytes: number): void;
  scale(dtype: number, dst: number, src: number, count: number, factor: number): void;
}

/** An op's memory: element size, kernels for its dtype and op (avg reduces as sum), scratch from `arena`. */
export function workingMemory(
  memory: WebAssembly.Memory,
  ex: Kernels,
  arena: Arena,
  { dtype, op }: { dtype: Dtype; op: string },
): Mem {
  const e = DTYPE_SIZE[dtype];
  const d = DTYPE_CODE[dtype];
  const o = OP_CODE[op === 'avg' ? 'sum' : (op as 'sum')];
  return {
    elemBytes: e,
    view: (addr, count) => new Uint8Array(freshBuffer(memory), addr, count * e),
    reduce: (dst, src, count) => ex.reduceInto(d, o, dst, src, count),
    reduceFrom: (dst, a, b, count) => ex.reduce2(d, o, dst, a, b, count),
    copy: (dst, src, count) => ex.copyBytes(dst, src, count * e),
    scratch: (count) => arena.take(count * e),
  };
}

/** Working memory for `count` elements: `b` itself when it lives in the node memory. */
export function region(m: Mem, b: Buf | null, count: number): Span {
  return b?.addr ? { addr: b.addr, count } : { addr: m.scratch(count), count };
}

export function copyIn(m: Mem, to: Span, from: Buf): void {
  if (from.addr === to.addr) return;
  if (from.addr) m.copy(to.addr, from.addr, to.count);
  else m.view(to.addr, to.count).set(from.bytes);
}

export function copyOut(m: Mem, from: Span, to: Buf): void {
  if (to.addr !== from.addr) to.bytes.set(m.view(from.addr, from.count));
}

/** s *= factor, in place (avg = sum / ranks). */
export function scale(ex: Kernels, dtype: Dtype, s: Span, factor: number): void {
  ex.scale(DTYPE_CODE[dtype], s.addr, s.addr, s.count, factor);
}
