// Moving data between a rank's own buffers and shared memory. When a buffer lives in shared
// memory (comm.alloc) the step loop copies it here with memory.copy; when it is an ordinary
// JS array the loop cannot see it, so it returns a copy request (ST_NEED_IN / ST_NEED_OUT)
// that JS serves with one TypedArray.set before calling the loop again.

import { reduceK, scale } from '../kernels/api';
import { dtypeSize, OP_AVG, OP_SUM } from '../kernels/codes';
import { claim } from './chunk-loop';
import {
  D_CHUNK,
  D_COMM,
  D_COUNT,
  D_DTYPE,
  D_IN,
  D_IO_ADDR,
  D_IO_LEN,
  D_IO_OFF,
  D_NRANKS,
  D_OP,
  D_OUT,
  D_RANK,
  D_TABLE,
  field,
  ST_DONE,
  ST_NEED_IN,
  ST_NEED_OUT,
  scratchAddr,
  setField,
  slotAddr,
} from './shm-map';
import { chunkLen, chunkOff } from './step';

@inline
export function elemSize(desc: usize): usize {
  return dtypeSize(<i32>field(desc, D_DTYPE));
}

/** Brings `len` elements at element `off` of the input to shared address `dst`. */
export function stageIn(desc: usize, off: u32, len: u32, dst: usize): i32 {
  if (len == 0) return ST_DONE;
  const es = elemSize(desc);
  const input = <usize>field(desc, D_IN);
  if (input != 0) {
    memory.copy(dst, input + <usize>off * es, <usize>len * es);
    return ST_DONE;
  }
  setField(desc, D_IO_OFF, off);
  setField(desc, D_IO_ADDR, <u32>dst);
  setField(desc, D_IO_LEN, len);
  return ST_NEED_IN;
}

/** Sends `len` elements at shared address `src` to element `off` of the output. */
export function stageOut(desc: usize, off: u32, len: u32, src: usize): i32 {
  if (len == 0) return ST_DONE;
  const es = elemSize(desc);
  const output = <usize>field(desc, D_OUT);
  if (output != 0) {
    if (output + <usize>off * es != src) memory.copy(output + <usize>off * es, src, <usize>len * es);
    return ST_DONE;
  }
  setField(desc, D_IO_OFF, off);
  setField(desc, D_IO_ADDR, <u32>src);
  setField(desc, D_IO_LEN, len);
  return ST_NEED_OUT;
}

/** Sets source i of the reduction table. */
@inline
export function setSource(desc: usize, i: u32, addr: usize): void {
  store<u32>(desc + D_TABLE + ((<usize>i) << 2), <u32>addr);
}

// Kernel calls are cut into slices: V8 does not tier a wasm function up while it runs, so one
// long call over a large buffer would stay in the baseline compiler.
const SLICE_BYTES: usize = 256 << 10;

/**
 * dst = ⊕ of the k table sources (each advanced by the same byte offset), then / nranks for
 * avg. Sources are offset in place in the table, slice by slice.
 */
export function reduceTable(desc: usize, k: u32, dst: usize, len: u32): void {
  const dtype = <i32>field(desc, D_DTYPE);
  const es = dtypeSize(dtype);
  // avg is sum followed by a scale; the signature keeps it apart from sum.
  const avg = field(desc, D_OP) == OP_AVG;
  const op = avg ? OP_SUM : <i32>field(desc, D_OP);
  const factor = 1.0 / <f64>field(desc, D_NRANKS);
  const slice = <u32>(SLICE_BYTES / es);
  const table = desc + D_TABLE;
  let done: u32 = 0;
  while (done < len) {
    const n = min(slice, len - done);
    const d = dst + <usize>done * es;
    reduceK(dtype, op, d, table, <i32>k, n);
    if (avg) scale(dtype, d, d, n, factor);
    done += n;
    if (done < len) {
      for (let i: u32 = 0; i < k; i++)
        store<u32>(table + ((<usize>i) << 2), load<u32>(table + ((<usize>i) << 2)) + n * <u32>es);
    }
  }
}

// ---- hook parts shared by the one-sync-per-chunk algorithms (see chunk-loop.ts)

/** Where this rank's result for chunk s goes: its output when shared, else its scratch. */
export function resultAddr(desc: usize, s: u32): usize {
  const out = <usize>field(desc, D_OUT);
  if (out != 0) return out + <usize>(s * field(desc, D_CHUNK)) * elemSize(desc);
  return scratchAddr(<usize>field(desc, D_COMM), field(desc, D_RANK));
}

/** Copies this rank's part of chunk s into its slot of step t (one piece). */
export function stageOwnChunk(desc: usize, s: u32, t: u32): i32 {
  if (!claim(desc, 0)) return ST_DONE;
  const slot = slotAddr(<usize>field(desc, D_COMM), field(desc, D_RANK), t);
  return stageIn(desc, chunkOff(desc, s), chunkLen(desc, s), slot);
}

/** Reduces `len` elements at byte offset `at` of every rank's slot of step t into dst. */
export function reduceSlots(desc: usize, t: u32, at: usize, dst: usize, len: u32): void {
  const comm = <usize>field(desc, D_COMM);
  const n = field(desc, D_NRANKS);
  for (let i: u32 = 0; i < n; i++) setSource(desc, i, slotAddr(comm, i, t) + at);
  reduceTable(desc, n, dst, len);
}

/** Copies this rank's result for chunk s out (one piece). */
export function outputResult(desc: usize, s: u32, t: u32): i32 {
  if (!claim(desc, 0)) return ST_DONE;
  return stageOut(desc, chunkOff(desc, s), chunkLen(desc, s), resultAddr(desc, s));
}

/** Stages chunk s of each of the n blocks of this rank's input into its slot, n pieces of the chunk's length. */
export function stagePieces(desc: usize, s: u32, t: u32): i32 {
  const slot = slotAddr(<usize>field(desc, D_COMM), field(desc, D_RANK), t);
  const count = field(desc, D_COUNT);
  const off = chunkOff(desc, s);
  const len = chunkLen(desc, s);
  const n = field(desc, D_NRANKS);
  for (let j: u32 = 0; j < n; j++) {
    if (!claim(desc, j)) continue;
    const r = stageIn(desc, j * count + off, len, slot + <usize>(j * len) * elemSize(desc));
    if (r != ST_DONE) return r;
  }
  return ST_DONE;
}
