// What a rank does with the ops it posts through its postbox, whichever thread runs them (the
// node's progress thread, thread-engine.ts, or its network progress thread, net-proxy-engine.ts):
// copies of plain buffers made at issue, and each op's outcome read back from its slot — the
// result copied out, the copies freed, WEBCCL_CHECK's end run, the handle stamped and settled.

import { WebcclError } from '../core/errors.js';
import { freshI32 } from '../core/fresh-buffer.js';
import { readReasonText } from '../core/reason-text.js';
import { sameView } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import type { OpSpec } from '../engine/engine.js';
import type { Work } from '../engine/work.js';
import { stageCopy } from './postbox-life.js';
import { type OpOutcome, postboxTable, T } from './postboxes.js';
import { readOutcome, type SlotViews } from './slot-codec.js';

/** An op posted through a postbox, with the heap blocks holding copies of its plain buffers (0: used in place). */
export interface PostboxOp {
  spec: OpSpec;
  work: Work;
  seq: number;
  stagedIn: number;
  stagedOut: number;
  /** The output is the input (one copy, when staged). */
  inPlace: boolean;
}

/** Copies of `s`'s plain buffers in the node heap (the input's bytes copied in), for an op another thread runs. */
export function stageOp(ctx: RankContext, s: OpSpec): Pick<PostboxOp, 'stagedIn' | 'stagedOut' | 'inPlace'> {
  const inPlace = s.input !== null && s.output !== null && sameView(s.input, s.output);
  const stagedIn = stageCopy(ctx, s.input, true);
  return { stagedIn, stagedOut: inPlace ? stagedIn : stageCopy(ctx, s.output, false), inPlace };
}

/** Frees an op's copies. */
export function unstage(ctx: RankContext, t: Pick<PostboxOp, 'stagedIn' | 'stagedOut'>): void {
  if (t.stagedIn) ctx.heap.free(t.stagedIn);
  if (t.stagedOut && t.stagedOut !== t.stagedIn) ctx.heap.free(t.stagedOut);
  if (t.stagedIn || t.stagedOut) t.stagedIn = t.stagedOut = 0; // (UNSTAGED, frozen, is never written)
}

/**
 * Reads `t`'s outcome from `slot` (`v`: views that reach it): its result copied out of its copy, the copies freed; the
 * error it ends with, if any.
 */
export function readBack(
  ctx: RankContext,
  v: SlotViews,
  slot: number,
  t: PostboxOp,
): { o: OpOutcome; err: WebcclError | undefined } {
  const mem = ctx.core.memory;
  const o = readOutcome(mem, v, slot);
  let err = o.error && new WebcclError(o.error.code, o.error.message, o.error.details);
  if (!err && t.stagedOut && t.spec.output) {
    try {
      t.spec.output.bytes.set(new Uint8Array(mem.buffer, t.stagedOut, t.spec.output.bytes.byteLength));
    } catch {
      err = new WebcclError(
        'INVALID_ARGUMENT',
        `${t.spec.name} #${t.seq}: its output buffer was detached (transferred) while the op was in flight`,
        { detached: true },
      );
    }
  }
  unstage(ctx, t);
  if (!err) {
    try {
      t.spec.check?.atEnd(t.seq);
    } catch (e) {
      err = WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e));
    }
  }
  return { o, err };
}

/**
 * Stamps the thread's timing on `t`'s handle and settles it, as ended no sooner than
 * `notBefore` (this thread's ms: an op ends after those issued before it); false when it had
 * settled already (an abort here).
 */
export function settleFrom(t: PostboxOp, o: OpOutcome, err: WebcclError | undefined, notBefore = -Infinity): boolean {
  if (t.work.settled) return false;
  t.work.timing.startedAt = o.startedAt - performance.timeOrigin;
  t.work.timing.joinedAt = o.joinedAt - performance.timeOrigin;
  t.work.settle(err, Math.max(o.completedAt - performance.timeOrigin, notBefore));
  return true;
}

/**
 * The error of ops whose thread (`which`: "progress thread", ...) ended with them in hand, with
 * the reason it left (`why`; default: the node's progress thread's, in the postbox table).
 */
export function threadEnded(ctx: RankContext, which: string, why = nodeThreadReason(ctx)): WebcclError {
  return new WebcclError('ABORTED', `the node's ${which} ended with this rank's ops in hand${why ? ` (${why})` : ''}`, {
    progressThread: true,
    reason: why,
  });
}

/** Why the node's shared-memory progress thread ended ('' while it runs). */
function nodeThreadReason(ctx: RankContext): string {
  const table = postboxTable(freshI32(ctx.core.memory));
  return table ? readReasonText(ctx.core.memory, table + T.REASON) : '';
}
