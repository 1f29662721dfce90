// The one interface algorithms use to move bytes between ranks, whatever carries them (shm,
// tcp, ws). A message is named by a Tag (communicator, op sequence, step), so many collectives
// can be in flight at once; mailbox.ts matches each byte-stream transport's incoming payloads
// to the receives posted for them.
import { type ErrorCode, WebcclError } from '../core/errors.js';

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
