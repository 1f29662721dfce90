// This rank's descriptor in shared memory, filled when its op starts: from there on the op's
// state lives there, where the wasm step loop (assembly/engine) reads it, and where whichever
// thread runs the rank's next op (the rank, or the node's progress thread) continues its count.

import { DTYPE_CODE, OP_CODE } from '../core/dtypes.js';
import { ALGO, D, KIND } from '../core/shm-map.js';
import { sameView } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import { keepsInput } from '../tuner/tuner.js';
import { descriptorCount, writeCounts } from './counts.js';
import type { QueuedOp } from './queued-op.js';

/**
 * Fills the descriptor of `q` (at q.desc) for rank `ctx`; inputs up to `keepMaxBytes` are
 * staged rather than read in place by peers (tuner.ts keepInputMaxBytes).
 */
export function writeDescriptor(i32: Int32Array, q: QueuedOp, ctx: RankContext, keepMaxBytes: number): void {
  const d = q.desc >> 2;
  // The op starts where the last one on this descriptor ended: its (possibly advanced) base plus
  // the steps it used. Kept in the descriptor, so that whichever thread runs the next op (this
  // rank, or the node's progress thread) continues the count; a fresh block holds zeros.
  i32[d + D.BASE / 4] = i32[d + D.BASE / 4] + i32[d + D.STEPS_USED / 4];
  i32[d + D.KIND / 4] = KIND[q.name];
  i32[d + D.ALGO / 4] = ALGO[q.algo];
  i32[d + D.DTYPE / 4] = DTYPE_CODE[q.dtype];
  i32[d + D.OP / 4] = OP_CODE[q.op];
  i32[d + D.COUNT / 4] = descriptorCount(q);
  if (q.counts) writeCounts(i32, q.counts, ctx);
  i32[d + D.ROOT / 4] = q.root;
  i32[d + D.LAYOUT / 4] = q.layout;
  i32[d + D.SHAPE / 4] = q.shape;
  i32[d + D.RANK / 4] = ctx.rank;
  i32[d + D.NRANKS / 4] = ctx.size;
  i32[d + D.IN / 4] = q.input?.addr ?? 0;
  i32[d + D.KEEP_IN / 4] = q.input?.addr && keepsInput(q.name, q.input.bytes.byteLength, keepMaxBytes) ? 1 : 0;
  i32[d + D.OUT / 4] = q.output?.addr ?? 0;
  i32[d + D.IN_PLACE / 4] =
    q.input !== null && (q.input === q.output || (q.output !== null && sameView(q.input, q.output))) ? 1 : 0;
  i32[d + D.CHUNK / 4] = q.chunk;
  i32[d + D.NCHUNKS / 4] = q.chunk && !q.counts ? Math.max(1, Math.ceil(q.count / q.chunk)) : 1;
  i32[d + D.STEP / 4] = 0;
  i32[d + D.PHASE / 4] = 0;
  i32[d + D.SUB / 4] = 0;
  i32[d + D.MODE / 4] = 0;
  i32[d + D.STEPS_USED / 4] = 0;
  i32[d + D.SEQ / 4] = q.seq + i32[d + D.SIG_SHIFT / 4];
  i32[d + D.COMM / 4] = ctx.comm;
}

/**
 * The op in descriptor `desc` signs its next run in the other signature record (D.SIG_SHIFT):
 * a slower rank may still be reading the first run's. Kept in the descriptor, as the step
 * base is: whichever thread runs the next op signs alike.
 */
export function signAgain(i32: Int32Array, desc: number): void {
  i32[(desc + D.SIG_SHIFT) >> 2]++;
}
