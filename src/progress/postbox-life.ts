// A postbox's life: opened in the node heap and listed in the node's postbox table by the first op a
// rank hands to the progress thread, closed (the thread lets go first) when its communicator is
// destroyed; and the heap copies of plain buffers that the ops it carries run on.

import { WebcclError } from '../core/errors.js';
import { freshBuffer, freshI32 } from '../core/fresh-buffer.js';
import { log } from '../core/log.js';
import { N, NODE_BASE } from '../core/shm-map.js';
import { WAIT_SLICE_MS } from '../core/waits.js';
import type { Buf } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import {
  ENTRY_RESERVED,
  L,
  MAX_POSTBOXES,
  POSTBOX_BYTES,
  POSTBOX_CLOSING,
  POSTBOX_DETACHED,
  POSTBOX_OPEN,
  PROGRESS_GONE,
  postboxTable,
  progressState,
  ringProgress,
  T,
  TABLE_BYTES,
} from './postboxes.js';

/**
 * A postbox in the node heap, listed in the node's postbox table (made by the first rank that needs
 * it). `fill` writes what else its thread must know before the postbox is listed (net-postbox.ts);
 * `ring` wakes the thread that serves it.
 */
export function openPostbox(
  ctx: RankContext,
  fill?: (i32: Int32Array, postbox: number) => void,
  ring = () => ringProgress(ctx.core.memory),
  owner = 0,
): number {
  const { heap, core } = ctx;
  let table = postboxTable(freshI32(ctx.core.memory));
  if (!table) {
    const t = heap.alloc(TABLE_BYTES);
    const buffer = freshBuffer(core.memory); // (after the alloc, which may have grown the memory)
    new Uint8Array(buffer, t, TABLE_BYTES).fill(0);
    const was = Atomics.compareExchange(new Int32Array(buffer), (NODE_BASE + N.POSTBOXES) >> 2, 0, t);
    if (was === 0) table = t;
    else {
      heap.free(t);
      table = was;
    }
  }
  const postbox = heap.alloc(POSTBOX_BYTES);
  const buffer = freshBuffer(core.memory);
  const u8 = new Uint8Array(buffer, postbox, L.SLOTS);
  u8.fill(0);
  const i32 = new Int32Array(buffer);
  i32[(postbox + L.COMM) >> 2] = ctx.comm;
  i32[(postbox + L.RANK) >> 2] = ctx.rank;
  i32[(postbox + L.SIZE) >> 2] = ctx.size;
  i32[(postbox + L.SIMD) >> 2] = core.simd ? 1 : 0;
  u8.set(ctx.localOf, L.LOCAL_OF);
  fill?.(i32, postbox);
  Atomics.store(i32, (postbox + L.STATE) >> 2, POSTBOX_OPEN);
  for (let k = 0; k < MAX_POSTBOXES; k++) {
    // Claimed, then its owner written, then listed: a reader never sees a postbox with another's owner.
    if (Atomics.compareExchange(i32, (table + T.ENTRIES + 4 * k) >> 2, 0, ENTRY_RESERVED) !== 0) continue;
    Atomics.store(i32, (table + T.OWNERS + 4 * k) >> 2, owner);
    Atomics.store(i32, (table + T.ENTRIES + 4 * k) >> 2, postbox);
    Atomics.add(i32, (table + T.TURNS + 4 * k) >> 2, 1);
    for (;;) {
      const high = Atomics.load(i32, (table + T.HIGH) >> 2);
      if (high > k || Atomics.compareExchange(i32, (table + T.HIGH) >> 2, high, k + 1) === high) break;
    }
    ring();
    return postbox;
  }
  heap.free(postbox);
  throw new WebcclError(
    'UNSUPPORTED',
    `the node's progress thread serves at most ${MAX_POSTBOXES} communicator ranks at once; destroy communicators no longer used, or set WEBCCL_PROGRESS=caller`,
    { limit: MAX_POSTBOXES },
  );
}

/**
 * Asks the progress thread to let go of `postbox` (`ring` wakes it) and takes it off the table: true
 * once the thread has let go (or ended: `gone`), so that the caller may free the postbox and its ops' copies;
 * false if it did not answer within `limitMs` (the memory is then left in place).
 */
export function closePostbox(
  ctx: RankContext,
  postbox: number,
  limitMs: number,
  gone = () => progressState(freshI32(ctx.core.memory)) === PROGRESS_GONE,
  ring = () => ringProgress(ctx.core.memory),
): boolean {
  const i32 = () => freshI32(ctx.core.memory);
  Atomics.store(i32(), (postbox + L.STATE) >> 2, POSTBOX_CLOSING);
  ring();
  const until = performance.now() + limitMs;
  while (Atomics.load(i32(), (postbox + L.STATE) >> 2) !== POSTBOX_DETACHED) {
    if (gone()) break;
    const left = until - performance.now();
    if (left <= 0 || !ctx.canBlock) {
      log(
        'WARN',
        `rank ${ctx.rank}: the progress thread did not let go of a closed communicator's postbox; its memory is left in place`,
      );
      return false;
    }
    Atomics.wait(i32(), (postbox + L.STATE) >> 2, POSTBOX_CLOSING, Math.min(left, WAIT_SLICE_MS));
  }
  const table = postboxTable(i32());
  for (let k = 0; k < MAX_POSTBOXES; k++) {
    if (Atomics.compareExchange(i32(), (table + T.ENTRIES + 4 * k) >> 2, postbox, 0) !== postbox) continue;
    // Counted before the caller frees the postbox: a thread reading it meanwhile sees the count move.
    Atomics.add(i32(), (table + T.TURNS + 4 * k) >> 2, 1);
    break;
  }
  return true;
}

/**
 * A heap block holding a copy of plain buffer `b` (its bytes copied in when `copyIn`), for an
 * op the progress thread runs; 0 when `b` is absent or already in the node memory (used in place).
 */
export function stageCopy(ctx: RankContext, b: Buf | null, copyIn: boolean): number {
  if (!b || b.addr) return 0;
  const addr = ctx.heap.alloc(b.bytes.byteLength);
  if (copyIn) new Uint8Array(freshBuffer(ctx.core.memory), addr, b.bytes.byteLength).set(b.bytes);
  return addr;
}
