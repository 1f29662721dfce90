// The one interface algorithms use to move bytes between ranks, whatever carries them (shm,
// tcp, ws), and Mailbox, the browser-safe matching of incoming payloads to posted receives that
// every byte-stream transport shares. A message is named by a Tag (communicator, op sequence,
// step), so many collectives can be in flight at once; a receive gets exactly its tag's payload
// whatever order frames arrive in, and payloads that come first are held within hard limits.
import { type ErrorCode, WebcclError } from '../core/errors.js';
import type { Sink } from '../wire/link-reader.js';
import { HoldBuffers } from './hold-buffers.js';

export interface Tag {
  /**
   * What the ranks of the op must agree on (the op's signature): a payload with another in its slot means they
   * disagree.
   */
  comm: number;
  seq: number;
  step: number;
  /**
   * The tag space (0 when absent): the world communicator's collectives use 0; each group, and
   * each communicator's point-to-point messages, have their own, so that their seq and step
   * numbers never meet.
   */
  space?: number;
  /**
   * Of a transport's connections per pair, how many the op's messages go on (its first `ways`;
   * absent: all). Local to the sender: a message is matched by its tag, not by its connection,
   * so the receiver need not know it (and it is not sent).
   */
  ways?: number;
}

export interface Transport {
  readonly rank: number;
  readonly size: number;
  /** Connections per pair of ranks that messages may spread over (1 when absent). */
  readonly channels?: number;
  /** Resolves once `data` is handed to the wire; do not modify it before then. */
  send(peer: number, tag: Tag, data: Uint8Array): Promise<void>;
  /** Resolves once `into` holds the payload `peer` sent with `tag`; its length must match. */
  recv(peer: number, tag: Tag, into: Uint8Array): Promise<void>;
  /** Ends every link; pending and later operations fail with CONNECTION_CLOSED. */
  close(): void;
  /**
   * Tells every peer why this rank fails, then ends every link: their operations fail with the
   * code of `why` (ABORTED for a reason text), details.by naming this rank and details.reason
   * its text.
   */
  abort(why: string | AbortInfo): void;
  /**
   * Tells every peer that the communicator using tag space `space` (> 0) fails: its pending and
   * later receives, here and on the peers, fail with the info's code; the links stay up for the
   * other spaces. (abort() ends everything.) `peers`: the ranks to tell (default every rank).
   */
  abortSpace?(space: number, why: AbortInfo, peers?: readonly number[]): void;
  /** Lets the layer above judge payloads that arrive before their receive, and hear of a peer's ABORT. */
  watch?(w: TransportWatcher): void;
  /** The tags of payloads held (arrived before their receive), by peer. */
  held?(): { peer: number; tag: Tag }[];
  /**
   * Peers that closed every connection without an ABORT: they ended or died (a rank that fails
   * sends its ABORT first), so they are no survivors for shrink() to wait for.
   */
  departed?(): number[];
}

/** What a failing rank tells its peers (carried by the ABORT frame). */
export interface AbortInfo {
  code: ErrorCode;
  /** The failing rank's own account, without its ` [CODE]` suffix. */
  reason: string;
  /** abort() was called (rather than an op failing). */
  user?: boolean;
  details?: Record<string, unknown>;
  /** Set when only the communicator of this tag space fails (see abortSpace). */
  space?: number;
}

/**
 * Spaces below this bit are communicators'; a communicator's point-to-point messages use its
 * space with this bit set, so they never meet its collectives either.
 */
export const P2P_SPACE_BIT = 0x80000000;
/** The communicator a tag's space belongs to (its collectives' and its point-to-point messages' alike). */
export const commSpace = (t: Tag): number => (t.space ?? 0) & (P2P_SPACE_BIT - 1);

export interface TransportWatcher {
  /**
   * A payload for `tag` arrived from `peer` with no receive posted: true when no receive of
   * this rank can ever want it (its bytes are skipped; the watcher fails the layer above).
   */
  unexpected(peer: number, tag: Tag): boolean;
  /** A peer's ABORT arrived (the transport has failed with `e`). */
  aborted(e: WebcclError): void;
}

/** JSON with every non-ASCII character escaped, so that its length is its UTF-8 length. */
const asciiJson = (v: unknown) =>
  JSON.stringify(v).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** The ABORT frame's text: the info as ASCII JSON of at most `maxBytes` bytes. */
export function encodeAbortInfo(info: AbortInfo, maxBytes: number): string {
  const reason = info.reason.length > maxBytes / 2 ? `${info.reason.slice(0, maxBytes / 2)}...` : info.reason;
  const text = asciiJson({ ...info, reason });
  return text.length <= maxBytes ? text : asciiJson({ ...info, reason: reason.slice(0, maxBytes / 4), details: {} });
}

/** The error an ABORT from peer `by` raises here: its code, its text, details.by/.reason (and .user after abort()). */
export function abortError(by: number, message: string): WebcclError {
  let info: AbortInfo = { code: 'ABORTED', reason: message, user: false };
  try {
    const v = JSON.parse(message) as AbortInfo;
    // Only the codes a peer may hand on; details stay data (they name ranks and fields).
    if (v && (v.code === 'ABORTED' || v.code === 'MISMATCH') && typeof v.reason === 'string')
      info = { ...v, details: v.details && typeof v.details === 'object' ? v.details : {} };
  } catch {
    // a plain text reason
  }
  // A rank that relays another's ABORT names that rank (details.by), the first cause.
  const origin = Number.isInteger(info.details?.by) ? (info.details!.by as number) : by;
  const what = info.user
    ? `rank ${origin} aborted the communicator: ${info.reason}`
    : `rank ${origin} failed: ${info.reason}`;
  const space = Number.isInteger(info.space) && (info.space as number) > 0 ? { space: info.space } : {};
  return new WebcclError(info.code, what, {
    ...(info.details ?? {}),
    by: origin,
    reason: info.reason,
    peer: by,
    ...(info.user ? { user: true } : {}),
    ...space,
  });
}

export interface HoldLimits {
  /** Most payloads held (arrived before their receive) per peer. */
  maxHeldMessages: number;
  /** Most bytes held per peer. */
  maxHeldBytes: number;
}

export const DEFAULT_HOLD_LIMITS: HoldLimits = { maxHeldMessages: 1024, maxHeldBytes: 256 * 1024 * 1024 };

const U32 = 0xffffffff;

export function checkTag(tag: Tag): Tag {
  for (const f of ['comm', 'seq', 'step', 'space'] as const) {
    if (f === 'space' && tag?.space === undefined) continue;
    const v = tag?.[f] as number;
    if (!Number.isInteger(v) || v < 0 || v > U32)
      throw new WebcclError('INVALID_ARGUMENT', `tag.${f} must be an integer in 0..2^32-1, got ${v}`);
  }
  if (tag.ways !== undefined && !(Number.isInteger(tag.ways) && tag.ways >= 1))
    throw new WebcclError('INVALID_ARGUMENT', `tag.ways must be a positive integer, got ${tag.ways}`);
  return tag;
}

export const tagKey = (t: Tag): string => `${t.space ?? 0}:${t.comm}:${t.seq}:${t.step}`;
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
  private readonly filling = new Map<Posted, { cancelled?: boolean }>();
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
    return {
      into,
      done: () => {
        const late = this.take(this.posted, this.postedSlots, tag); // posted while the payload was on its way
        if (late) return this.release(tag, into, late);
        this.heldSlots.set(slotKey(tag), tag.comm);
        push(this.held, key, into);
      },
    };
  }

  /** Fails every posted receive, and every later one, with `e`; drops held payloads. */
  fail(e: WebcclError): void {
    if (this.failure) return;
    this.ended(e);
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
    this.filling.get(p)!.cancelled = true;
    this.filling.delete(p);
    p.reject(e);
  }

  /** Hands a held payload to a receive: its hold budget frees, and the lengths must match. */
  private release(tag: Tag, payload: Uint8Array, r: Posted): void {
    this.heldMessages--;
    this.heldBytes -= payload.length;
    if (payload.length !== r.into.length) return r.reject(this.mismatch(tag, payload.length, r.into.length));
    r.into.set(payload);
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

function push<T>(m: Map<string, T[]>, key: string, v: T): void {
  const list = m.get(key);
  if (list) list.push(v);
  else m.set(key, [v]);
}
