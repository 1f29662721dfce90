// Mailbox: the browser-safe matching of incoming payloads to posted receives that every
// byte-stream transport shares. A receive gets exactly its tag's payload whatever order frames
// arrive in; payloads that come first are held within hard limits, and one whose receive is
// posted while it arrives moves into it on the way.
import { WebcclError } from '../core/errors.js';
import type { Sink } from '../wire/link-reader.js';
import { HoldBuffers } from './hold-buffers.js';
import { commSpace, P2P_SPACE_BIT, type Tag, tagKey } from './transport.js';

export interface HoldLimits {
  /** Most payloads held (arrived before their receive) per peer. */
  maxHeldMessages: number;
  /** Most bytes held per peer. */
  maxHeldBytes: number;
}

export const DEFAULT_HOLD_LIMITS: HoldLimits = { maxHeldMessages: 1024, maxHeldBytes: 256 * 1024 * 1024 };

/** A tag without its communicator field: two tags in one slot with different `comm` disagree. */
const slotKey = (t: Tag): string => `${t.space ?? 0}:${t.seq}:${t.step}`;
const tagText = (t: Tag): string =>
  `(${t.space ? `space ${t.space}, ` : ''}comm ${t.comm}, seq ${t.seq}, step ${t.step})`;

interface Posted {
  /** The communicator's tag space (see commSpace). */
  space: number;
  into: Uint8Array;
  resolve: () => void;
  reject: (e: WebcclError) => void;
}

/** Where an arriving payload goes: `into` (then call done), or nowhere (skip its bytes). */
export type { Sink };

/** A payload arriving into a hold buffer under tag `key`; `to`: the receive posted for it meanwhile. */
type HoldSink = Exclude<Sink, { skip: true }> & { key: string; to?: Posted };

/** Matches one peer's payloads to receives by tag. */
export class Mailbox {
  private readonly posted = new Map<string, Posted[]>();
  private readonly held = new Map<string, Uint8Array[]>();
  /** The `comm` of the posted receives and held payloads in each slot (see slotKey). */
  private readonly postedSlots = new Map<string, number>();
  private readonly heldSlots = new Map<string, number>();
  /**
   * Receives whose payload is arriving, with the sink the reader fills: a peer that goes away
   * mid-payload must fail them too, and a receive failed mid-payload cancels its sink so that no
   * later byte lands in its buffer (the op's memory is reused once the op has failed).
   */
  private readonly filling = new Map<Posted, { cancelled?: boolean } | HoldSink>();
  /**
   * Payloads arriving into hold buffers, by tag: a receive posted for one meanwhile takes the
   * rest of its bytes straight into its buffer (Sink.moveTo).
   */
  private readonly arriving = new Map<string, HoldSink[]>();
  private heldMessages = 0;
  private heldBytes = 0;
  private failure?: WebcclError;
  /** Communicators (by tag space) that failed: their receives fail, their payloads are dropped. */
  private readonly failedSpaces = new Map<number, WebcclError>();

  /** Asked before a payload is held: true drops it (no receive of this rank can want it). */
  unexpected?: (tag: Tag) => boolean;

  /** `buffers`: where early payloads are held (shared by a transport's peers; hold-buffers.ts). */
  constructor(
    private readonly peer: number,
    private readonly limits: HoldLimits = DEFAULT_HOLD_LIMITS,
    private readonly buffers = new HoldBuffers(),
  ) {}

  /** The tags of the payloads held. */
  heldTags(): Tag[] {
    if (this.held.size === 0) return []; // (asked at every op's issue and end: mostly none)
    return [...this.held.keys()].map((k) => {
      const [space, comm, seq, step] = k.split(':').map(Number);
      return { comm, seq, step, space };
    });
  }

  /** Posts a receive: served at once from a held payload, else when the payload arrives. */
  post(tag: Tag, into: Uint8Array): Promise<void> {
    // After fail() nothing is held; after ended() what is held still serves its receive.
    if (this.failure && this.held.size === 0) return Promise.reject(this.failure);
    const spaceFailure = this.failedSpaces.get(commSpace(tag));
    if (spaceFailure) return Promise.reject(spaceFailure);
    const key = tagKey(tag);
    const early = this.take(this.held, this.heldSlots, tag);
    if (early)
      return new Promise((resolve, reject) =>
        this.release(tag, early, { space: commSpace(tag), into, resolve, reject }),
      );
    if (this.failure) return Promise.reject(this.failure);
    const coming = this.arriving.get(key)?.find((h) => !h.to && h.into.length === into.length);
    if (coming)
      return new Promise((resolve, reject) => {
        const p = { space: commSpace(tag), into, resolve, reject };
        coming.to = p;
        coming.moveTo = into;
        this.filling.set(p, coming);
      });
    const other = this.heldSlots.get(slotKey(tag));
    if (other !== undefined) return Promise.reject(this.disagree(tag, other));
    this.postedSlots.set(slotKey(tag), tag.comm);
    return new Promise((resolve, reject) => push(this.posted, key, { space: commSpace(tag), into, resolve, reject }));
  }

  /**
   * A payload of `length` bytes for `tag` has begun to arrive: names where to write it. A
   * length that differs from the posted receive fails that receive (and the bytes are skipped);
   * a payload beyond the hold limits throws PROTOCOL_ERROR, which ends the link.
   */
  claim(tag: Tag, length: number): Sink {
    // a failed peer's (or communicator's) bytes go nowhere
    if (this.failure || this.failedSpaces.has(commSpace(tag))) return { skip: true };
    const key = tagKey(tag);
    const p = this.take(this.posted, this.postedSlots, tag);
    if (p) {
      if (p.into.length === length) {
        const sink = {
          into: p.into,
          done: () => {
            this.filling.delete(p);
            p.resolve();
          },
          cancelled: false,
        };
        this.filling.set(p, sink);
        return sink;
      }
      p.reject(this.mismatch(tag, length, p.into.length));
      return { skip: true };
    }
    const other = this.postedSlots.get(slotKey(tag));
    if (other !== undefined) {
      this.take(this.posted, this.postedSlots, { ...tag, comm: other })?.reject(
        this.disagree({ ...tag, comm: other }, tag.comm),
      );
      return { skip: true };
    }
    if (this.unexpected?.(tag)) return { skip: true };
    const { maxHeldMessages, maxHeldBytes } = this.limits;
    if (this.heldMessages + 1 > maxHeldMessages || this.heldBytes + length > maxHeldBytes) {
      throw new WebcclError(
        'PROTOCOL_ERROR',
        `rank ${this.peer} sent ${length} bytes for ${tagText(tag)} with no receive posted, beyond the hold limits of ${maxHeldMessages} messages / ${maxHeldBytes} bytes`,
      );
    }
    this.heldMessages++;
    this.heldBytes += length;
    const into = this.buffers.take(length);
    const sink: HoldSink = {
      key,
      into,
      cancelled: false,
      done: () => {
        drop(this.arriving, key, sink);
        const to = sink.to;
        if (to) {
          // Its receive was posted on the way: the reader moved the bytes there (see Sink.moveTo).
          this.filling.delete(to);
          if (sink.moveTo) to.into.set(into); // (posted after the last read: not moved yet)
          return this.release(tag, into, to, false);
        }
        const late = this.take(this.posted, this.postedSlots, tag); // posted while the payload was on its way
        if (late) return this.release(tag, into, late);
        this.heldSlots.set(slotKey(tag), tag.comm);
        push(this.held, key, into);
      },
    };
    push(this.arriving, key, sink);
    return sink;
  }

  /** Fails every posted receive, and every later one, with `e`; drops held payloads. */
  fail(e: WebcclError): void {
    if (this.failure) return;
    this.ended(e);
    for (const list of [...this.arriving.values()]) for (const h of [...list]) this.endHold(h);
    this.heldSlots.clear();
    this.held.clear();
    this.heldMessages = this.heldBytes = 0;
  }

  /**
   * The peer ended (closed every connection): nothing more will arrive, but what arrived before
   * its receive was posted is still its payload, sent by a peer that finished its part (its
   * last op done, it exited; the receiver of its last message may not have posted yet). Later
   * receives take those payloads; any other fails with `e`, as do those posted now.
   */
  ended(e: WebcclError): void {
    if (this.failure) return;
    this.failure = e;
    for (const list of this.posted.values()) for (const p of list) p.reject(e);
    for (const p of [...this.filling.keys()]) this.cancelFilling(p, e);
    this.posted.clear();
    this.filling.clear();
    this.postedSlots.clear();
  }

  /**
   * Fails the receives of communicator `space` (and its point-to-point messages), now and later; drops what it held.
   */
  failSpace(space: number, e: WebcclError): void {
    if (this.failure || this.failedSpaces.has(space)) return;
    this.failedSpaces.set(space, e);
    const inSpace = (key: string) => (Number(key.split(':')[0]) & (P2P_SPACE_BIT - 1)) === space;
    for (const [key, list] of [...this.posted]) {
      if (!inSpace(key)) continue;
      this.posted.delete(key);
      for (const p of list) p.reject(e);
    }
    for (const p of [...this.filling.keys()]) if (p.space === space) this.cancelFilling(p, e);
    // A payload of the space still arriving into a hold would stay held for no receive: it ends now.
    for (const [key, list] of [...this.arriving]) if (inSpace(key)) for (const h of [...list]) this.endHold(h);
    for (const [key, list] of [...this.held]) {
      if (!inSpace(key)) continue;
      this.held.delete(key);
      for (const payload of list) {
        this.heldMessages--;
        this.heldBytes -= payload.length;
      }
    }
    for (const slots of [this.postedSlots, this.heldSlots])
      for (const k of [...slots.keys()]) if (inSpace(k)) slots.delete(k);
  }

  /** Fails a receive whose payload is arriving: the reader skips the rest of it. */
  private cancelFilling(p: Posted, e: WebcclError): void {
    const sink = this.filling.get(p)!;
    sink.cancelled = true;
    this.filling.delete(p);
    // A held payload moving into `p`: it will never be done, so its hold ends here.
    if ('to' in sink && sink.to === p) this.endHold(sink);
    p.reject(e);
  }

  /** A payload arriving into a hold buffer is given up: the reader skips the rest, its hold budget frees. */
  private endHold(h: HoldSink): void {
    h.cancelled = true;
    drop(this.arriving, h.key, h);
    this.heldMessages--;
    this.heldBytes -= h.into.length;
    this.buffers.give(h.into); // (no byte is written to it once cancelled)
  }

  /**
   * Hands a held payload to a receive: its hold budget frees, and the lengths must match.
   * `copy` false: the payload is in the receive already (moved on its way in).
   */
  private release(tag: Tag, payload: Uint8Array, r: Posted, copy = true): void {
    this.heldMessages--;
    this.heldBytes -= payload.length;
    if (payload.length !== r.into.length) return r.reject(this.mismatch(tag, payload.length, r.into.length));
    if (copy) r.into.set(payload);
    this.buffers.give(payload); // copied out: nothing else refers to it
    r.resolve();
  }

  /** The first entry for `tag` in `m`, keeping `slots` in step. */
  private take<T>(m: Map<string, T[]>, slots: Map<string, number>, tag: Tag): T | undefined {
    const key = tagKey(tag);
    const v = shift(m, key);
    if (v !== undefined && !m.has(key)) slots.delete(slotKey(tag));
    return v;
  }

  /** A receive posted for `want` met a payload in the same slot from communicator field `got`. */
  private disagree(want: Tag, got: number): WebcclError {
    return new WebcclError(
      'MISMATCH',
      `rank ${this.peer} sent seq ${want.seq} step ${want.step} with communicator field ${got}, where this rank expects ${want.comm}`,
      { peer: this.peer, got, want: want.comm, seq: want.seq },
    );
  }

  private mismatch(tag: Tag, got: number, want: number): WebcclError {
    return new WebcclError(
      'SIZE_MISMATCH',
      `rank ${this.peer} sent ${got} bytes for ${tagText(tag)}; the receive posted expects ${want}`,
      { peer: this.peer, got, want },
    );
  }
}

function shift<T>(m: Map<string, T[]>, key: string): T | undefined {
  const list = m.get(key);
  if (!list) return undefined;
  const v = list.shift();
  if (list.length === 0) m.delete(key);
  return v;
}

/** Takes `v` out of `m`'s list at `key`. */
function drop<T>(m: Map<string, T[]>, key: string, v: T): void {
  const list = m.get(key);
  const i = list ? list.indexOf(v) : -1;
  if (i < 0) return;
  list!.splice(i, 1);
  if (list!.length === 0) m.delete(key);
}

function push<T>(m: Map<string, T[]>, key: string, v: T): void {
  const list = m.get(key);
  if (list) list.push(v);
  else m.set(key, [v]);
}
