// Auto mode's hold, on the postbox side. An op held for its rank's next call (thread-engine.ts
// decides which, and who runs it) lies written in the postbox's next slot, uncounted, under a
// tag in L.HOLD: a rank that computes instead of calling leaves it to the progress thread, which
// takes it HOLD_MS after it first sees it (hosts/shm-host.ts takeHold). This file writes it there,
// takes it back, or follows it to the thread; and takes back a posted op that its rank waits for
// before the thread took it.

import { freshI32 } from '../core/fresh-buffer.js';
import type { Algo } from '../core/shm-map.js';
import { N, NODE_BASE } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';
import type { OpSpec } from '../engine/engine.js';
import type { Work } from '../engine/work.js';
import { type Held, HOLD_COPY_MAX, plainBytes, sameOp } from './auto-choice.js';
import type { HandedOp, PostboxClient } from './postbox-client.js';
import { stageOp, unstage } from './postbox-outcomes.js';
import {
  claimSlot,
  L,
  POSTBOX_SLOTS,
  PROGRESS_RUNNING,
  postedOp,
  progressState,
  ringProgress,
  SLOT_RECLAIMED,
} from './postboxes.js';
import { renewPosted, specFitsWords, writePosted } from './slot-codec.js';

/** An op handed to the node's progress thread. */
export interface ThreadOp extends HandedOp {
  algo: Algo;
  /** Taken back by this rank before the progress thread took it (the local engine runs it). */
  reclaimed: boolean;
}

/**
 * The spec without its trace, for an op whose handle already drew its issue (it ends the
 * op's slice): copied only when traced, since a spread makes a slow dictionary object.
 */
export function untraced(s: OpSpec): OpSpec {
  return s.trace ? { ...s, trace: undefined } : s;
}

export class HeldSlot {
  /** Ops held so far (statistics, and the thread lingers by it). */
  count = 0;
  /** The op a hold last wrote into slot `rewritten` (the postbox's next): a hold of the same op renews it. */
  private lastHeld: { spec: OpSpec; algo: Algo } | undefined;
  private rewritten = -1;

  constructor(
    private readonly ctx: RankContext,
    private readonly box: PostboxClient<ThreadOp>,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Writes `h` into the postbox's next slot and tags it there (`h.tag`; it stays 0 when the op
   * cannot go there: it is then held unwritten). A ring wakes the thread only when it is not
   * looking at the postboxes every HOLD_MS already (PROGRESS_LOOK), which it keeps doing while
   * ranks hold.
   */
  place(h: Held): void {
    const box = this.box;
    this.count++;
    const last = this.lastHeld;
    if (last && this.rewritten === box.posted && sameOp(last, h.spec, h.algo)) {
      // The op held last, taken back by its rank (a loop of one op waited at once): its slot
      // holds this one already, but for its number. Every op pays for this path.
      renewPosted(box.views!, box.slot(box.posted), h.seq);
    } else if (!this.write(h)) {
      return;
    }
    h.tag = (h.seq % 0x3fffffff) + 1;
    const i32 = box.views!.i32;
    Atomics.store(i32, box.at(L.HOLD), h.tag);
    i32[box.at(L.HOLDS)] = this.count; // (the thread only lingers by it)
    // The kept view reaches the node header; the ring renews it for a doorbell past its end.
    if (Atomics.load(i32, (NODE_BASE + N.PROGRESS_LOOK) >> 2) === 0) ringProgress(this.ctx.core.memory, i32);
  }

  /** Writes the held op into the postbox's next slot; false when it cannot go there. */
  private write(h: Held): boolean {
    const { spec: s, seq, algo } = h;
    const box = this.box;
    this.lastHeld = undefined;
    const room = box.posted === box.read + box.ops.length && box.posted - box.read < POSTBOX_SLOTS;
    const plain = plainBytes(s);
    if (!room || !specFitsWords(s, algo) || plain > HOLD_COPY_MAX) return false;
    box.openOnce();
    if (progressState(box.words()) !== PROGRESS_RUNNING) return false;
    if (plain) h.staged = stageOp(this.ctx, s);
    const inPlace = h.staged.inPlace || (plain === 0 && s.input !== null && s.input === s.output);
    const p = postedOp(s, seq, algo, s.timeoutMs ?? this.timeoutMs, 0, inPlace);
    const inAddr = h.staged.stagedIn || s.input?.addr || 0;
    const outAddr = h.staged.stagedOut || s.output?.addr || 0;
    writePosted(this.ctx.core.memory, box.views!, box.slot(box.posted), inAddr, outAddr, p);
    // Only an op on node-memory buffers is written again as it was (a copy is made per op).
    if (!plain) this.lastHeld = { spec: s, algo };
    this.rewritten = box.posted;
    return true;
  }

  /**
   * Takes the held op back from its slot: true when it is still this rank's; false when the
   * progress thread took it (it is then counted posted, and this rank follows it there).
   */
  takeBack(h: Held): boolean {
    if (!h.tag) return true;
    const box = this.box;
    const i32 = box.words();
    if (Atomics.compareExchange(i32, box.at(L.HOLD), h.tag, 0) === h.tag) return true;
    Atomics.compareExchange(i32, box.at(L.POSTED), box.posted, box.posted + 1);
    box.posted++;
    this.follow(h);
    return false;
  }

  /** The held op, written in its slot and taken back, goes to the thread at once: counted posted now, and rung. */
  post(h: Held): void {
    const box = this.box;
    this.follow(h);
    box.posted++;
    const i32 = freshI32(this.ctx.core.memory);
    Atomics.store(i32, box.at(L.POSTED), box.posted);
    ringProgress(this.ctx.core.memory, i32);
  }

  /**
   * Takes back from its slot the op `w` waits for, when the thread has not taken it yet and
   * nothing of this communicator is ahead of it in the thread's hands (ops taken back earlier
   * ran on the rank): the op, its copies freed, for the rank to run; undefined when it stays.
   */
  reclaim(w: Work): ThreadOp | undefined {
    const box = this.box;
    const i = box.ops.length ? box.ops.findIndex((t) => t.work === w) : -1;
    if (i < 0 || box.read + i >= box.posted || box.ops.some((t, k) => k !== i && !t.reclaimed)) return undefined;
    if (!claimSlot(this.ctx.core.memory, box.slot(box.read + i), SLOT_RECLAIMED)) return undefined;
    const t = box.ops[i];
    t.reclaimed = true;
    unstage(this.ctx, t);
    return t;
  }

  /** The held op, written in its slot, is the thread's now: this rank reads its outcome as any other's. */
  private follow(h: Held): void {
    h.spec.check?.atStart(h.seq);
    this.box.ops.push({
      spec: untraced(h.spec),
      work: h.work,
      seq: h.seq,
      algo: h.algo,
      ...h.staged,
      reclaimed: false,
    });
  }
}
