// The node's progress thread (NCCL's proxy thread is the model): it runs the shared-memory step
// loops of the ops ranks hand it, so that an op goes on while its rank computes without calling
// webccl. For each postbox (one communicator rank, see postboxes.ts) it keeps the same ShmEngine a rank
// keeps for itself, on the same descriptor, so an op runs the same steps whichever thread runs
// it. It moves every postbox a little in turn (never blocking on one), and sleeps on the node's
// progress bell only when a whole round moved nothing: at once when no postbox has an op, in short
// slices while one waits for a rank that runs its op itself (that rank's posts do not ring it).

import { DTYPE_SIZE } from '../core/dtypes.js';
import { freshI32 } from '../core/fresh-buffer.js';
import { NodeHeap } from '../core/heap.js';
import { LEFT_DIED } from '../core/node.js';
import { C, D, descOffset, flagOffset, N, NODE_BASE } from '../core/shm-map.js';
import { OpTrace, TRACING, traceFlush, traceTrack } from '../core/trace.js';
import { Work } from '../engine/work.js';
import {
  claimSlot,
  HOLD_MS,
  L,
  POSTBOX_BYTES,
  POSTBOX_CLOSING,
  POSTBOX_DETACHED,
  PROGRESS_NONE,
  PROGRESS_RUNNING,
  PROGRESS_STARTING,
  PROGRESS_STOPPING,
  SLOT_POSTED,
  SLOT_RECLAIMED,
  SLOT_TAKEN,
  slotAt,
  slotState,
} from '../progress/postboxes.js';
import { readPosted, type SlotViews, viewsReaching, writeOutcome } from '../progress/slot-codec.js';
import { progressEnded } from '../progress/start.js';
import { Doorbell } from '../shm/doorbell.js';
import { hostedSpec, outcomeOf, REFUSED, refusedWork } from './hosted-ops.js';
import { type Hosted, PostboxHosting } from './hosted-postbox.js';

/** What an op its rank took back ends as: settled, with no outcome to write. */
const RECLAIMED = new Work('allReduce', -1, REFUSED, true);
RECLAIMED.settle();

/** Longest sleep while some postbox has an op (its peer may be a rank that runs its own op). */
const BUSY_SLICE_MS = 1;
/** Longest sleep on a communicator's doorbell (every step it waits for rings it; deadlines are looked at between). */
const DOORBELL_SLICE_MS = 20;
/** Longest sleep with no postbox open: how often it looks whether every rank has left. */
const IDLE_SLICE_MS = 200;
/**
 * How long after it last saw an op within its grace (held, or posted with one) it keeps looking
 * at every postbox each HOLD_MS without being rung: a rank that waits for its ops at once holds
 * one after another, and a ring for each would cost it a wake-up call apiece. Short: on a
 * machine whose every core runs a rank, each look takes a core from a rank for a while.
 */
const LINGER_MS = 0.6;

export interface HostOptions {
  cores: number;
}

/** Runs the progress thread of the node in `memory` until every rank has left. */
export function hostProgress(memory: WebAssembly.Memory, o: HostOptions): void {
  const host = new ProgressHost(memory, o);
  try {
    host.run();
  } catch (e) {
    host.die(e);
    throw e;
  }
}

class ProgressHost {
  private readonly postboxes = new Map<number, Hosted>();
  /** Finds new postboxes and makes each its engine (hosted-postbox.ts). */
  private readonly hosting: PostboxHosting;
  private readonly nranks: number;
  private readonly track = traceTrack('progress thread');
  /** The soonest an op within its grace may be taken (ms from now; Infinity: none waits). */
  private nextGrace = Infinity;
  /** When it last saw an op within its grace (this thread's ms): it lingers for LINGER_MS after. */
  private graceSeenAt = -Infinity;
  private slots: SlotViews | undefined;

  constructor(
    private readonly memory: WebAssembly.Memory,
    o: HostOptions,
  ) {
    this.hosting = new PostboxHosting(memory, new NodeHeap(memory, { canBlock: true }), o.cores);
    this.nranks = this.i32()[(NODE_BASE + N.NRANKS) >> 2];
    // Where its start was announced as pending (a page's worker), ranks wait for this word to move.
    Atomics.compareExchange(this.i32(), (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_STARTING, PROGRESS_RUNNING);
    Atomics.notify(this.i32(), (NODE_BASE + N.PROGRESS) >> 2);
  }

  private i32(): Int32Array {
    return freshI32(this.memory);
  }

  /** Views that reach `h`'s postbox (renewed when the postbox lies past the last ones: the memory grew for it). */
  private views(h: Hosted): SlotViews {
    return (this.slots = viewsReaching(this.memory, this.slots, h.addr + POSTBOX_BYTES));
  }

  run(): void {
    // Stopped, or given up on (progressNotStarted), before its script ran: its ranks run their own ops.
    if (Atomics.load(this.i32(), (NODE_BASE + N.PROGRESS) >> 2) === PROGRESS_NONE) return;
    for (;;) {
      const i32 = this.i32();
      const bell = Atomics.load(i32, (NODE_BASE + N.PROGRESS_BELL) >> 2);
      this.hosting.attach(i32, this.postboxes);
      let moved = false;
      let busy = false;
      this.nextGrace = Infinity;
      for (const h of this.postboxes.values()) {
        const r = this.serve(h);
        moved ||= r.moved;
        busy ||= h.works.length > 0;
      }
      if (moved) continue;
      if (!busy && this.nextGrace === Infinity && this.postboxes.size === 0 && this.everyRankLeft(i32)) break;
      if (Atomics.load(i32, (NODE_BASE + N.PROGRESS) >> 2) === PROGRESS_STOPPING) break;
      this.sleep(bell, busy);
    }
    Atomics.store(this.i32(), (NODE_BASE + N.PROGRESS_LOOK) >> 2, 0);
    const stopped = Atomics.load(this.i32(), (NODE_BASE + N.PROGRESS) >> 2) === PROGRESS_STOPPING;
    traceFlush();
    progressEnded(
      this.memory,
      stopped && [...this.postboxes.values()].some((h) => h.works.length)
        ? 'stopped by the one that started it, with ops in hand'
        : '',
    );
  }

  /**
   * Sleeps until a rank posts (the progress bell moves past `bell`) or a slice ends. When every
   * op it holds is of one communicator, it sleeps on that communicator's doorbell instead, as a
   * rank would: a rank that runs its own op rings it when it posts the step awaited.
   */
  private sleep(bell: number, busy: boolean): void {
    const bellAt = (NODE_BASE + N.PROGRESS_BELL) >> 2;
    const cap = this.lookCap();
    if (cap === 0) return;
    const held = [...this.postboxes.values()].filter((h) => h.works.length);
    const comm = held.length && held.every((h) => h.comm === held[0].comm) ? held[0].comm : 0;
    if (!comm) {
      Atomics.wait(this.i32(), bellAt, bell, Math.min(this.nextGrace, cap, busy ? BUSY_SLICE_MS : IDLE_SLICE_MS));
      return;
    }
    const i32 = this.i32();
    Atomics.store(i32, (NODE_BASE + N.PROGRESS_SLEEP) >> 2, comm + C.DOORBELL);
    try {
      new Doorbell(i32, comm).sleep(() => {
        // The last look, once registered: a post, or a step reached meanwhile, means no sleep.
        if (Atomics.load(this.i32(), bellAt) !== bell) return null;
        for (const h of held) {
          const desc = descOffset(h.comm, h.size, h.rank);
          const step = this.i32()[(desc + D.WAIT_VAL) >> 2];
          if (h.engine.stepReached(desc, step)) return null;
        }
        return Math.min(this.nextGrace, cap, DOORBELL_SLICE_MS);
      });
    } finally {
      Atomics.store(this.i32(), (NODE_BASE + N.PROGRESS_SLEEP) >> 2, 0);
    }
  }

  /**
   * The longest it may sleep unrung: HOLD_MS while it lingers (ranks then hold ops without
   * ringing: PROGRESS_LOOK is 1), else no bound, once it has said so and found no op held or
   * posted meanwhile (0: one was; look again). A rank stores its hold, then reads the word; this
   * thread stores the word, then reads the holds: one of the two sees the other's store.
   */
  private lookCap(): number {
    const i32 = this.i32();
    const lookAt = (NODE_BASE + N.PROGRESS_LOOK) >> 2;
    if (performance.now() - this.graceSeenAt < LINGER_MS) {
      Atomics.store(i32, lookAt, 1);
      return HOLD_MS;
    }
    if (Atomics.load(i32, lookAt) === 0) return Infinity;
    Atomics.store(i32, lookAt, 0);
    for (const h of this.postboxes.values()) {
      if (Atomics.load(i32, (h.addr + L.HOLD) >> 2) !== 0 || Atomics.load(i32, (h.addr + L.POSTED) >> 2) !== h.taken)
        return 0;
    }
    return Infinity;
  }

  /** Fails every op it holds (its thread is failing) and says so to every rank. */
  die(e: unknown): void {
    traceFlush();
    progressEnded(this.memory, e instanceof Error ? e.message : String(e));
  }

  private everyRankLeft(i32: Int32Array): boolean {
    for (let r = 0; r < this.nranks; r++) if (Atomics.load(i32, (NODE_BASE + N.LEFT + 4 * r) >> 2) === 0) return false;
    return true;
  }

  /** Takes the postbox's new ops, moves its head along, hands back those that ended. */
  private serve(h: Hosted): { moved: boolean } {
    const i32 = this.i32();
    const state = Atomics.load(i32, (h.addr + L.STATE) >> 2);
    if (state === POSTBOX_CLOSING || Atomics.load(i32, (NODE_BASE + N.LEFT + 4 * h.local) >> 2) === LEFT_DIED) {
      // Its rank closed the communicator, or died: nobody will read these ops' outcomes.
      h.engine.close();
      this.postboxes.delete(h.addr);
      Atomics.store(i32, (h.addr + L.STATE) >> 2, POSTBOX_DETACHED);
      Atomics.notify(i32, (h.addr + L.STATE) >> 2);
      return { moved: true };
    }
    let moved = false;
    let posted = Atomics.load(i32, (h.addr + L.POSTED) >> 2);
    if (h.taken === posted) posted = this.takeHold(h, i32, posted);
    for (; h.taken < posted; h.taken++) {
      const w = this.take(h, slotAt(h.addr, h.taken));
      if (!w) break; // within its grace: its rank may still take it back
      h.works.push(w);
      moved = true;
    }
    if (!h.works.length) return { moved };
    const flag = flagOffset(h.comm, h.rank) >> 2;
    const before = Atomics.load(i32, flag);
    h.works[0].isCompleted(); // runs the engine's queue until an op would wait
    while (h.works.length && h.works[0].settled) {
      this.end(h, h.works.shift()!);
      moved = true;
    }
    return { moved: moved || Atomics.load(this.i32(), flag) !== before };
  }

  /**
   * The op a rank holds (written in slot `posted`, not counted) once it has been held HOLD_MS
   * since this thread first saw it: this thread counts it posted, unless its rank took it first (both move the tag to
   * 0; whoever
   * does owns it). Returns the count of posted ops.
   */
  private takeHold(h: Hosted, i32: Int32Array, posted: number): number {
    const holds = Atomics.load(i32, (h.addr + L.HOLDS) >> 2);
    const at = (h.addr + L.HOLD) >> 2;
    const tag = Atomics.load(i32, at);
    if (holds !== h.holds) {
      h.holds = holds; // its rank held ops since the last look, whether or not one is held now
      this.graceSeenAt = performance.now();
    }
    if (tag === 0) return posted;
    const now = performance.now();
    this.graceSeenAt = now;
    // Timed by this thread's clock from when it first saw the hold: nothing per op for its rank to write.
    if (tag !== h.holdTag) {
      h.holdTag = tag;
      h.holdSeenAt = now;
    }
    const early = h.holdSeenAt + HOLD_MS - now;
    if (early > 0) {
      this.nextGrace = Math.min(this.nextGrace, early);
      return posted;
    }
    if (Atomics.compareExchange(i32, at, tag, 0) !== tag) return Atomics.load(i32, (h.addr + L.POSTED) >> 2);
    // Its rank counts it too when it finds the tag gone (whichever is first).
    Atomics.compareExchange(i32, (h.addr + L.POSTED) >> 2, posted, posted + 1);
    return posted + 1;
  }

  /**
   * The op in `slot`, submitted to the postbox's engine (or ended at once: its rank took it back to
   * run it itself); null while the op is within its grace (see PostedOp.graceUntil).
   */
  private take(h: Hosted, slot: number): Work | null {
    // Taken back already (a rank that waits at once): ends with nothing to read or write.
    if (slotState(this.memory, slot) === SLOT_RECLAIMED) return RECLAIMED;
    const posted = readPosted(this.memory, this.views(h), slot);
    const p = posted.value;
    const now = performance.now();
    const early = p.graceUntil - (performance.timeOrigin + now);
    if (early > 0 && slotState(this.memory, slot) === SLOT_POSTED) {
      this.nextGrace = Math.min(this.nextGrace, early);
      this.graceSeenAt = now;
      return null;
    }
    if (!claimSlot(this.memory, slot, SLOT_TAKEN)) return refusedWork(p.name, p.seq);
    // WEBCCL_TRACE: the op's steps (sleeps, copies) on this thread's own track.
    const trace = TRACING
      ? new OpTrace(this.track, {
          collective: p.name,
          bytes: p.count * DTYPE_SIZE[p.dtype],
          dtype: p.dtype,
          rank: h.rank,
          communicator: `block ${h.comm}`,
          ranks: h.size,
        })
      : undefined;
    try {
      return h.engine.submit(hostedSpec(this.memory, posted, trace));
    } catch (e) {
      // The engine refuses ops once its communicator has failed: this one fails the same way.
      return refusedWork(p.name, p.seq, e);
    }
  }

  private end(h: Hosted, w: Work): void {
    if (w !== RECLAIMED) writeOutcome(this.memory, this.views(h), slotAt(h.addr, h.ended), outcomeOf(w));
    h.ended++;
    const i32 = this.i32();
    Atomics.store(i32, (h.addr + L.DONE) >> 2, h.ended);
    Atomics.notify(i32, (h.addr + L.DONE) >> 2);
  }
}
