// The rank's side of a postbox, shared by the two engines that hand ops to a progress thread
// (thread-engine.ts: the node's shared-memory thread; net-proxy-engine.ts: a network progress
// thread). Both keep the ops handed over in issue order, post them as slots free up, read their
// outcomes back in order, sleep on the postbox's DONE word, drop what they handed over when the
// thread ends, and let go of the postbox when the communicator closes. What differs — which
// thread serves the postbox, how it is opened and rung, what an op's slot names as its
// algorithm — the engine says through a PostboxThread.

import { WebcclError } from '../core/errors.js';
import { freshI32 } from '../core/fresh-buffer.js';
import type { RankContext } from '../engine/context.js';
import { countDone, type OpCounters } from '../engine/engine.js';
import { type PostboxOp, readBack, unstage } from './postbox-outcomes.js';
import { L, type OpOutcome, POSTBOX_SLOTS, postedOp, slotAt } from './postboxes.js';
import { type SlotViews, slotViews, writePosted } from './slot-codec.js';

/** An op handed to a progress thread, with the algorithm its engine counts it under. */
export interface HandedOp extends PostboxOp {
  algo: string;
}

/** What a postbox client needs of the thread that serves its postbox. */
export interface PostboxThread<T extends HandedOp> {
  /** Opens the postbox (when the first op is handed over, or an abort is asked); its address. */
  open(): number;
  /** Wakes the thread for an op just posted, which it may take from `grace` on (0: at once). */
  ring(grace: number): void;
  /** When an op posted now may be taken (0: at once; auto mode leaves it to a wait for a while). */
  graceUntil(): number;
  /** The algorithm `t`'s slot names (the thread's engine runs it with that). */
  postedAlgo(t: T): unknown;
  /** The deadline of ops whose call set none. */
  readonly timeoutMs: number;
  /** Asks the thread to let go of `postbox`: true once it has (its memory may be freed). */
  letGo(postbox: number): boolean;
}

export class PostboxClient<T extends HandedOp> {
  /** The postbox's address in the node heap (0: not opened yet). */
  postbox = 0;
  /** Ops handed over and not yet read back, in issue order: the first `posted - read` are in slots. */
  readonly ops: T[] = [];
  /** Ops written into slots, and read back, since the postbox opened (slot n is n % POSTBOX_SLOTS). */
  posted = 0;
  read = 0;
  /** Ops the thread has ended for this rank, and its allReduces by algorithm. */
  ended = 0;
  readonly algos: Record<string, number> = {};
  /** Views made once the postbox was allocated (they reach its slots however the memory grows). */
  views: SlotViews | undefined;

  constructor(
    private readonly ctx: RankContext,
    private readonly thread: PostboxThread<T>,
  ) {}

  openOnce(): void {
    if (this.postbox) return;
    this.postbox = this.thread.open();
    this.views = slotViews(this.ctx.core.memory); // (after the postbox's allocation)
  }

  /**
   * The postbox's words: a view kept since it opened (a new view per look cost every waited op a typed array or two).
   * Not for words allocated after it (a communicator's doorbell), which the kept view may not reach.
   */
  words(): Int32Array {
    return this.views?.i32 ?? freshI32(this.ctx.core.memory);
  }

  /** The index of a word of the postbox (`L.*`). */
  at(word: number): number {
    return (this.postbox + word) >> 2;
  }

  /** How many ops the thread has ended (the DONE word). */
  done(): number {
    return Atomics.load(this.words(), this.at(L.DONE));
  }

  /** The slot of the `n`th op posted. */
  slot(n: number): number {
    return slotAt(this.postbox, n);
  }

  /** Hands `t` over: posted at once when a slot is free, else when one frees up. */
  hand(t: T): void {
    this.ops.push(t);
    this.postWaiting();
  }

  /** Posts the ops that wait for a free slot, as far as slots allow. */
  postWaiting(): void {
    const mem = this.ctx.core.memory;
    while (this.posted < this.read + this.ops.length && this.posted - this.read < POSTBOX_SLOTS) {
      const t = this.ops[this.posted - this.read];
      const s = t.spec;
      const grace = this.thread.graceUntil();
      const p = postedOp(
        s,
        t.seq,
        this.thread.postedAlgo(t) as never,
        s.timeoutMs ?? this.thread.timeoutMs,
        grace,
        t.inPlace,
      );
      const inAddr = t.stagedIn || s.input?.addr || 0;
      const outAddr = t.stagedOut || s.output?.addr || 0;
      if (!writePosted(mem, this.views!, this.slot(this.posted), inAddr, outAddr, p)) {
        throw new WebcclError(
          'INTERNAL',
          `${s.name} #${t.seq}: the op's description does not fit a progress-thread slot`,
        );
      }
      this.posted++;
      Atomics.store(this.words(), this.at(L.POSTED), this.posted);
      this.thread.ring(grace);
    }
  }

  /**
   * Reads back, in order, the ops the thread has ended (results copied out, copies freed) and
   * hands each to `end`, except those `skip` says ended elsewhere; then posts what waited for a slot.
   */
  collect(end: (t: T, o: OpOutcome, err: WebcclError | undefined) => void, skip?: (t: T) => boolean): void {
    if (!this.postbox) return;
    const done = this.done();
    for (; this.read < done; this.read++) {
      const t = this.ops.shift()!;
      if (skip?.(t)) continue;
      const { o, err } = readBack(this.ctx, this.views!, this.slot(this.read), t);
      this.ended++;
      end(t, o, err);
    }
    this.postWaiting();
  }

  /** Counts `t`, ended well, in the rank's counters and the thread's algorithms. */
  count(counters: OpCounters, t: T): void {
    countDone(counters, t.work);
    if (t.spec.name === 'allReduce') this.algos[t.algo] = (this.algos[t.algo] ?? 0) + 1;
  }

  /** Sleeps until the thread ends an op past `seen` (the DONE word moves), at most `ms`. */
  sleep(seen: number, ms: number): void {
    Atomics.wait(this.words(), this.at(L.DONE), seen, ms);
  }

  /** The same without blocking the rank's thread. */
  async sleepAsync(seen: number, ms: number): Promise<void> {
    const r = Atomics.waitAsync(this.words(), this.at(L.DONE), seen, ms);
    if (r.async) await r.value;
  }

  /** The thread has ended: every op handed over is taken back, its copies freed; returned for its engine to fail. */
  dropAll(): T[] {
    const dropped = this.ops.splice(0);
    for (const t of dropped) unstage(this.ctx, t);
    this.posted = this.read;
    return dropped;
  }

  /**
   * The communicator closes: the thread lets go of the postbox, which is then freed with the
   * ops' copies (left in place if the thread does not answer); false in that case.
   */
  detach(): boolean {
    const postbox = this.postbox;
    if (!postbox) return true;
    this.postbox = 0;
    if (!this.thread.letGo(postbox)) return false;
    for (const t of this.ops.splice(0)) unstage(this.ctx, t);
    this.ctx.heap.free(postbox);
    return true;
  }
}
