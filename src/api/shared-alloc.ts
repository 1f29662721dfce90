// Buffers in the node's shared memory (comm.alloc()): a block of the node heap seen as a typed
// array over the memory's current buffer, which the communicator then knows as shared, so its
// collectives use the buffer in place, with no copy in or out.

import { ARRAY_OF, DTYPE_SIZE, type Dtype, type DtypeName, parseDtype } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import type { TypedArray } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';

/** `count` elements of `dtype` from the node heap of `ctx` (16-bit floats as their bits, tagged with the dtype). */
export function allocShared(
  ctx: RankContext,
  dtype: DtypeName,
  count: number,
): TypedArray | { data: Uint16Array; dtype: Dtype } {
  const d = parseDtype(dtype);
  if (!Number.isSafeInteger(count) || count < 0)
    fail('INVALID_ARGUMENT', `alloc: count must be a non-negative integer, got ${count}`);
  const addr = ctx.heap.alloc(count * DTYPE_SIZE[d]);
  const buffer = freshBuffer(ctx.core.memory);
  ctx.sharedBuffers.add(buffer);
  const data = new ARRAY_OF[d](buffer, addr, count) as TypedArray;
  return d === 'bf16' || d === 'f16' ? { data: data as Uint16Array, dtype: d } : data;
}
