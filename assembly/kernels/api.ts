// Exported kernels: byte addresses into linear memory and element counts, nothing allocated.
// dtype and op are the codes of codes.ts; an unknown code traps (unreachable). Addresses need no
// alignment. A destination may be exactly one of its sources where a kernel says so; partial
// overlaps are not supported. Reductions: floats add / multiply in IEEE arithmetic, max / min propagate NaN and
// order -0 below +0, NaN results are written as the canonical quiet NaN; integers wrap; halves
// are combined in f32 and rounded to nearest even once per element (see half.ts).
import {
  DT_BF16,
  DT_F16,
  DT_F32,
  DT_F64,
  DT_I8,
  DT_I32,
  DT_I64,
  DT_U8,
  DT_U32,
  dtypeSize,
  OP_MAX,
  OP_MIN,
  OP_PROD,
  OP_SUM,
} from './codes';
import { BF16, F16, fromF32, toF32 } from './half';
import { halfBinary, halfFoldK, halfScale } from './halfloops';
import { Max, Min, Prod, Sum } from './lanes';
import { binary, foldK, scaleLoop, srcAt } from './loops';

/** dst[i] = dst[i] ⊕ src[i]. */
export function reduceInto(dtype: i32, op: i32, dst: usize, src: usize, count: usize): void {
  reduce2(dtype, op, dst, dst, src, count);
}

/** dst[i] = a[i] ⊕ b[i]; dst may be a or b. */
export function reduce2(dtype: i32, op: i32, dst: usize, a: usize, b: usize, count: usize): void {
  switch (dtype) {
    case DT_F32:
      bin<f32>(op, dst, a, b, count);
      break;
    case DT_F64:
      bin<f64>(op, dst, a, b, count);
      break;
    case DT_I32:
      bin<i32>(op, dst, a, b, count);
      break;
    case DT_U32:
      bin<u32>(op, dst, a, b, count);
      break;
    case DT_I8:
      bin<i8>(op, dst, a, b, count);
      break;
    case DT_U8:
      bin<u8>(op, dst, a, b, count);
      break;
    case DT_I64:
      bin<i64>(op, dst, a, b, count);
      break;
    case DT_BF16:
      halfBin<BF16>(op, dst, a, b, count);
      break;
    case DT_F16:
      halfBin<F16>(op, dst, a, b, count);
      break;
    default:
      unreachable();
  }
}

/**
 * One pass over k sources: dst[i] = ((s0[i] ⊕ s1[i]) ⊕ s2[i]) ⊕ … in table order. srcTable
 * holds k u32 byte addresses; dst may be any source; k = 1 copies s0. Halves fold in f32 and
 * round once.
 */
export function reduceK(dtype: i32, op: i32, dst: usize, srcTable: usize, k: i32, count: usize): void {
  if (<u32>dtype > <u32>DT_F16 || <u32>op > <u32>OP_MIN || k < 1) unreachable();
  if (k == 1) {
    memory.copy(dst, srcAt(srcTable, 0), count * dtypeSize(dtype));
    return;
  }
  if (k == 2) {
    reduce2(dtype, op, dst, srcAt(srcTable, 0), srcAt(srcTable, 1), count);
    return;
  }
  switch (dtype) {
    case DT_F32:
      fold<f32>(op, dst, srcTable, k, count);
      break;
    case DT_F64:
      fold<f64>(op, dst, srcTable, k, count);
      break;
    case DT_I32:
      fold<i32>(op, dst, srcTable, k, count);
      break;
    case DT_U32:
      fold<u32>(op, dst, srcTable, k, count);
      break;
    case DT_I8:
      fold<i8>(op, dst, srcTable, k, count);
      break;
    case DT_U8:
      fold<u8>(op, dst, srcTable, k, count);
      break;
    case DT_I64:
      fold<i64>(op, dst, srcTable, k, count);
      break;
    case DT_BF16:
      halfFold<BF16>(op, dst, srcTable, k, count);
      break;
    case DT_F16:
      halfFold<F16>(op, dst, srcTable, k, count);
      break;
  }
}

/** dst[i] = src[i] * factor for float dtypes (f32 and halves multiply by f32(factor)). */
export function scale(dtype: i32, dst: usize, src: usize, count: usize, factor: f64): void {
  switch (dtype) {
    case DT_F32:
      scaleLoop<f32>(dst, src, count, <f32>factor);
      break;
    case DT_F64:
      scaleLoop<f64>(dst, src, count, factor);
      break;
    case DT_BF16:
      halfScale<BF16>(dst, src, count, <f32>factor);
      break;
    case DT_F16:
      halfScale<F16>(dst, src, count, <f32>factor);
      break;
    default:
      unreachable();
  }
}

export function copyBytes(dst: usize, src: usize, bytes: usize): void {
  memory.copy(dst, src, bytes);
}

/** f32 -> f16 (round to nearest even; NaN -> 0x7e00). dst may equal src. */
export function f32ToF16(dst: usize, src: usize, count: usize): void {
  fromF32<F16>(dst, src, count);
}

/** f16 -> f32, exact. dst and src must not overlap. */
export function f16ToF32(dst: usize, src: usize, count: usize): void {
  toF32<F16>(dst, src, count);
}

/** f32 -> bf16 (round to nearest even; NaN -> 0x7fc0). dst may equal src. */
export function f32ToBf16(dst: usize, src: usize, count: usize): void {
  fromF32<BF16>(dst, src, count);
}

/** bf16 -> f32, exact. dst and src must not overlap. */
export function bf16ToF32(dst: usize, src: usize, count: usize): void {
  toF32<BF16>(dst, src, count);
}

@inline
function bin<T>(op: i32, dst: usize, a: usize, b: usize, n: usize): void {
  switch (op) {
    case OP_SUM:
      binary<T, Sum<T>>(dst, a, b, n);
      break;
    case OP_PROD:
      binary<T, Prod<T>>(dst, a, b, n);
      break;
    case OP_MAX:
      binary<T, Max<T>>(dst, a, b, n);
      break;
    case OP_MIN:
      binary<T, Min<T>>(dst, a, b, n);
      break;
    default:
      unreachable();
  }
}

@inline
function fold<T>(op: i32, dst: usize, table: usize, k: i32, n: usize): void {
  switch (op) {
    case OP_SUM:
      foldK<T, Sum<T>>(dst, table, k, n);
      break;
    case OP_PROD:
      foldK<T, Prod<T>>(dst, table, k, n);
      break;
    case OP_MAX:
      foldK<T, Max<T>>(dst, table, k, n);
      break;
    default:
      foldK<T, Min<T>>(dst, table, k, n);
      break;
  }
}

@inline
function halfBin<H>(op: i32, dst: usize, a: usize, b: usize, n: usize): void {
  switch (op) {
    case OP_SUM:
      halfBinary<H, Sum<f32>>(dst, a, b, n);
      break;
    case OP_PROD:
      halfBinary<H, Prod<f32>>(dst, a, b, n);
      break;
    case OP_MAX:
      halfBinary<H, Max<f32>>(dst, a, b, n);
      break;
    case OP_MIN:
      halfBinary<H, Min<f32>>(dst, a, b, n);
      break;
    default:
      unreachable();
  }
}

@inline
function halfFold<H>(op: i32, dst: usize, table: usize, k: i32, n: usize): void {
  switch (op) {
    case OP_SUM:
      halfFoldK<H, Sum<f32>>(dst, table, k, n);
      break;
    case OP_PROD:
      halfFoldK<H, Prod<f32>>(dst, table, k, n);
      break;
    case OP_MAX:
      halfFoldK<H, Max<f32>>(dst, table, k, n);
      break;
    default:
      halfFoldK<H, Min<f32>>(dst, table, k, n);
      break;
  }
}
