// Numeric codes shared with src/core/dtypes.ts. Keep both tables in the same order.
export const DT_F32: i32 = 0;
export const DT_F64: i32 = 1;
export const DT_I32: i32 = 2;
export const DT_U32: i32 = 3;
export const DT_I8: i32 = 4;
export const DT_U8: i32 = 5;
export const DT_I64: i32 = 6;
export const DT_BF16: i32 = 7;
export const DT_F16: i32 = 8;

export const OP_SUM: i32 = 0;
export const OP_PROD: i32 = 1;
export const OP_MAX: i32 = 2;
export const OP_MIN: i32 = 3;
/** Collectives only (never a kernel op): sum, then scale by 1/nranks. */
export const OP_AVG: i32 = 4;

/** Bytes per element of each dtype code. */
export function dtypeSize(dtype: i32): usize {
  switch (dtype) {
    case DT_F64:
    case DT_I64:
      return 8;
    case DT_I8:
    case DT_U8:
      return 1;
    case DT_BF16:
    case DT_F16:
      return 2;
    default:
      return 4;
  }
}
