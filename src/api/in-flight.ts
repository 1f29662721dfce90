// Which buffers a communicator's ops still hold, decided only from what the caller has done, so
// that every rank running the same program decides alike (a decision taken from how far each
// rank's ops have progressed split the ranks: one refused an op that another accepted).
//
// An op holds its buffers from issue until the caller has seen it end: wait() or await settled,
// waitSync() returned or threw, or isCompleted() answered true. Collectives complete in issue
// order, so seeing one end also releases every collective issued before it; a send or recv
// keeps no place in that order and is released only by seeing it end itself.

import { KeepList } from '../core/keep-list.js';
import type { Kind } from '../core/shm-map.js';
import { type Buf, overlaps } from '../engine/buffers.js';
import { isP2p } from '../engine/engine.js';
import type { SeenListener, Work } from '../engine/work.js';

/**
 * What an op may hold besides its input and output: more buffers it reads or writes (a coalesced
 * op's arrays, copied in at issue and out when it ends: coalesced.ts), and what to do once the
 * record lets it go (seen to end, released by a later collective seen to end, or cleared).
 */
export interface HeldMore {
  bufs: readonly Buf[];
  letGo(): void;
}

interface Held {
  work: Work;
  input: Buf | null;
  output: Buf | null;
  /** A collective (completes in issue order), not a send or recv. */
  ordered: boolean;
  more: HeldMore | undefined;
}

export class BuffersInFlight implements SeenListener {
  private readonly held = new KeepList<Held>();
  /**
   * Held buffers counted by the memory they view: a buffer over memory no held op views needs
   * no search. Pairs of arrays, not a Map: a program holds one or two memories at a time, and a
   * look through two entries costs less than hashing the key (a ping-pong pays it per message).
   */
  private readonly memories: (ArrayBufferLike | undefined)[] = [];
  private readonly counts: number[] = [];
  /** Entries of `memories` in use (the arrays keep their slots: a ping-pong empties and refills them every message). */
  private nMemories = 0;
  /** Recorded ops the caller has not yet seen end: none, and the record holds nothing. */
  private unseen = 0;
  /** Recorded ops seen to end since the list was last looked through: none, nothing to release. */
  private seenSince = 0;

  /**
   * The send or recv added last, kept out of the list until the next call here: a program that
   * waits for each message before the next (a ping-pong) has seen it end by then, and it is
   * never recorded at all (a search, a push and counting its memory, per message).
   */
  private lastWork: Work | undefined = undefined;
  private lastIn: Buf | null = null;
  private lastOut: Buf | null = null;

  /** The ops issued and not ended yet, in issue order. */
  unsettled(): Work[] {
    this.recordLast();
    const out: Work[] = [];
    for (const h of this.held) if (!h.work.settled) out.push(h.work);
    return out;
  }

  add(work: Work, input: Buf | null, output: Buf | null, more?: HeldMore): void {
    this.recordLast();
    if (more) {
      this.record(work, input, output, true, more);
      return;
    }
    if (isP2p(work.name as Kind)) {
      // (a collective seen to end releases the collectives before it: it is recorded at once)
      this.lastWork = work;
      this.lastIn = input;
      this.lastOut = output;
      return;
    }
    this.record(work, input, output, true, undefined);
  }

  /** Records the send or recv added last, unless the caller has seen it end meanwhile. */
  private recordLast(): void {
    const w = this.lastWork;
    if (w === undefined) return;
    this.lastWork = undefined;
    if (!w.observed) this.record(w, this.lastIn, this.lastOut, false, undefined);
    this.lastIn = this.lastOut = null;
  }

  private record(
    work: Work,
    input: Buf | null,
    output: Buf | null,
    ordered: boolean,
    more: HeldMore | undefined,
  ): void {
    // Released here too, not only when a buffer is checked: a program issuing only ops without
    // buffers (a loop of barriers) would otherwise keep a record of every op it ever issued.
    this.release();
    this.held.push({ work, input, output, ordered, more });
    // (a collective is added as issued, a send or recv only while unseen: see recordLast)
    // An op with more to let go is let go the moment it is seen, not at the next look here: a
    // program may see it end and issue nothing more on this communicator.
    work.holder = more
      ? {
          opSeen: () => {
            this.opSeen();
            more.letGo();
          },
        }
      : this;
    this.unseen++;
    this.count(input, 1);
    this.count(output, 1);
    if (more) for (const b of more.bufs) this.count(b, 1);
  }

  /** A recorded op was seen to end (Work tells its holder). */
  opSeen(): void {
    this.unseen--;
    this.seenSince++;
  }

  /** Ops still recorded (the caller has not yet seen them end). */
  get size(): number {
    this.recordLast();
    return this.held.length;
  }

  /** `name #seq` of an op the caller has not yet seen end that reads or writes any byte of `b`. */
  heldBy(b: Buf): string | undefined {
    this.recordLast();
    this.release();
    if (this.held.length === 0 || this.memoryAt(b.memory) < 0) return undefined;
    // Loops, not find/filter: every op issued runs this (a ping-pong pays it per message).
    const held = this.held;
    for (let i = 0; i < held.length; i++) {
      const h = held.at(i);
      if (
        (h.input !== null && overlaps(b, h.input)) ||
        (h.output !== null && overlaps(b, h.output)) ||
        h.more?.bufs.some((m) => overlaps(b, m))
      )
        return `${h.work.name} #${h.work.seq}`;
    }
    return undefined;
  }

  /**
   * Lets every op go (the communicator is destroyed: no op will be checked again), so that what
   * an op holds besides its buffers is given back even if the caller never saw it end.
   */
  clear(): void {
    this.recordLast();
    const held = this.held;
    for (let i = 0; i < held.length; i++) {
      const h = held.at(i);
      if (!h.work.observed) h.work.holder = undefined;
      if (h.more !== undefined && !h.work.observed) h.more.letGo();
    }
    held.truncate(0);
    for (let i = 0; i < this.nMemories; i++) this.memories[i] = undefined;
    this.nMemories = 0;
    this.unseen = this.seenSince = 0;
  }

  private memoryAt(m: ArrayBufferLike): number {
    for (let i = 0; i < this.nMemories; i++) if (this.memories[i] === m) return i;
    return -1;
  }

  private count(b: Buf | null, by: number): void {
    if (b === null) return;
    const m = b.memory;
    const i = this.memoryAt(m);
    if (i < 0) {
      if (by <= 0) return;
      this.memories[this.nMemories] = m;
      this.counts[this.nMemories++] = by;
    } else if ((this.counts[i] += by) <= 0) {
      // The last entry takes the emptied one's place; its slot keeps nothing alive.
      const last = --this.nMemories;
      this.memories[i] = this.memories[last];
      this.counts[i] = this.counts[last];
      this.memories[last] = undefined;
    }
  }

  /**
   * Drops every op the caller has seen end, and every collective issued before the last such
   * collective. Looks only when some op has been seen to end since it last looked, so a burst
   * of ops issued without waiting costs nothing here per op, and a program that has seen every
   * op end (a ping-pong) empties the record without looking through it.
   */
  private release(): void {
    if (this.seenSince === 0) return;
    this.seenSince = 0;
    const held = this.held;
    if (this.unseen === 0) {
      held.truncate(0);
      for (let i = 0; i < this.nMemories; i++) this.memories[i] = undefined;
      this.nMemories = 0;
      return;
    }
    let last = -1;
    for (let i = 0; i < held.length; i++) if (held.at(i).ordered && held.at(i).work.observed) last = i;
    let kept = 0;
    for (let i = 0; i < held.length; i++) {
      const h = held.at(i);
      if (!h.work.observed && !(h.ordered && i < last)) {
        held.set(kept++, h);
        continue;
      }
      if (!h.work.observed) {
        // Released unseen (a later collective was seen to end): its own end no longer counts here.
        h.work.holder = undefined;
        this.unseen--;
        h.more?.letGo();
      }
      this.count(h.input, -1);
      this.count(h.output, -1);
      if (h.more !== undefined) for (const m of h.more.bufs) this.count(m, -1);
    }
    held.truncate(kept);
  }
}
