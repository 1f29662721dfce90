// How a rank's postbox meets its node's shared-memory progress thread (hosts/shm-host.ts), for
// the postbox client (postbox-client.ts): opened in the node's postbox table, rung only when the
// thread is not looking anyway, let go of when the communicator closes. Its network twin is
// net-postbox.ts.

import { freshI32 } from '../core/fresh-buffer.js';
import type { ProgressMode } from '../core/progress-mode.js';
import { N, NODE_BASE } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';
import type { ThreadOp } from './held-slot.js';
import type { PostboxThread } from './postbox-client.js';
import { closePostbox, openPostbox } from './postbox-life.js';
import { HOLD_MS, ringProgress } from './postboxes.js';

/** How long closing waits for the progress thread to let go of the postbox. */
const DETACH_MS = 10_000;

/** The node's progress thread as the postbox client of a rank in `mode` sees it (`timeoutMs`: the comm's deadline). */
export function nodeProgressThread(
  ctx: RankContext,
  mode: Exclude<ProgressMode, 'caller'>,
  timeoutMs: number,
): PostboxThread<ThreadOp> {
  return {
    open: () => openPostbox(ctx),
    // Auto mode: left alone for HOLD_MS, in which a wait takes it back (a rank may wait at once after all).
    graceUntil: () => (mode === 'auto' ? performance.timeOrigin + performance.now() + HOLD_MS : 0),
    ring: (grace) => {
      // A thread that looks every HOLD_MS anyway needs no ring for an op it may not take sooner.
      const i32 = freshI32(ctx.core.memory);
      if (!grace || Atomics.load(i32, (NODE_BASE + N.PROGRESS_LOOK) >> 2) === 0) ringProgress(ctx.core.memory, i32);
    },
    postedAlgo: (t) => t.algo,
    timeoutMs,
    letGo: (postbox) => closePostbox(ctx, postbox, DETACH_MS),
  };
}
