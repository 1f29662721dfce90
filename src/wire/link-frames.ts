// The frames of a connection between two ranks, as pure functions (browser-safe, no node:):
// encode and decode the handshake and data frames (link-reader.ts splits a stream into them,
// landing each data payload straight in the buffer the matching receive posted). The TCP
// transport speaks them; they sit here, below the transports, so that any other carries the
// same frames (its label still says "webccl-tcp": those bytes are signed, and kept as they were). The proofs are
// wire/auth.ts's Challenge over the bytes authPayload() lays out.
//
// Every frame: u8 kind | u32 body length (little-endian) | body. Connector C, acceptor A:
//   C -> A  HELLO   magic "WCTP", u16 version, job id, u32 rank, u32 size, u16 channel, u16 nchannels, nonce
//   A -> C  HELLO   the same fields for A (or REFUSE)
//   C -> A  PROOF   HMAC(token, authPayload('connect', ...))   A checks it (or REFUSE)
//   A -> C  PROOF   HMAC(token, authPayload('accept', ...))    C checks it
// then DATA frames (body = u32 comm | u32 seq | u32 step | u32 space | payload), and at most one ABORT each way
// (a rank that fails tells its peers why before it closes: u16 length | message).
import { WebcclError } from '../core/errors.js';
import { AuthFail, signedBytes } from './auth.js';
import { Cursor, concat, frame, HEADER_BYTES, protocolError, str, textBytes, u8, u16, u32 } from './bytes.js';
import {
  clipText,
  MAC_BYTES,
  MAX_ABORT_TEXT_BYTES,
  MAX_JOB_ID_BYTES,
  MAX_MESSAGE_BYTES,
  NONCE_BYTES,
} from './limits.js';

/** What a data frame carries before its payload: the op's signature, sequence, step and tag space. */
export interface FrameTag {
  comm: number;
  seq: number;
  step: number;
  space?: number;
}

export const MAGIC = 0x50544357; // "WCTP" read as a little-endian u32
export const VERSION = 2;
export const TAG_BYTES = 16;
export const MAX_PAYLOAD_BYTES = 0xffffffff - TAG_BYTES;

export const Kind = { hello: 1, proof: 2, refuse: 3, abort: 4, data: 16 } as const;
export const KIND_NAMES: Record<number, string> = { 1: 'HELLO', 2: 'PROOF', 3: 'REFUSE', 4: 'ABORT', 16: 'DATA' };

/** Why a handshake was refused; each maps to the error code both sides raise. */
export const Refusal = {
  jobId: AuthFail.jobId,
  token: AuthFail.token,
  rank: 3,
  duplicate: 4,
  version: 5,
  world: 6,
  /** Not sent as a refusal: the frame a secure end sends before TLS, which a plain peer shows. */
  tls: 7,
} as const;
export type RefusalReason = (typeof Refusal)[keyof typeof Refusal];
export const refusalCode = (r: number) =>
  r === Refusal.jobId || r === Refusal.token ? 'AUTH_FAILED' : 'PROTOCOL_ERROR';

export interface Hello {
  version: number;
  jobId: string;
  rank: number;
  size: number;
  channel: number;
  nchannels: number;
  nonce: Uint8Array;
}

export type Handshake =
  | ({ type: 'hello' } & Hello)
  | { type: 'proof'; mac: Uint8Array }
  | { type: 'refuse'; reason: number; message: string }
  | { type: 'abort'; message: string };

export { MAX_ABORT_TEXT_BYTES };
/** What both ends sign before their role (see wire/auth.ts). */
export const AUTH_LABEL = `webccl-tcp/${VERSION}`;

export function encodeHandshake(m: Handshake): Uint8Array {
  switch (m.type) {
    case 'hello':
      return concat(
        frame(Kind.hello, [
          u32(MAGIC),
          u16(m.version),
          ...str(textBytes(m.jobId)),
          u32(m.rank),
          u32(m.size),
          u16(m.channel),
          u16(m.nchannels),
          m.nonce,
        ]),
      );
    case 'proof':
      return concat(frame(Kind.proof, [m.mac]));
    case 'refuse': {
      const text = textBytes(m.message.slice(0, MAX_MESSAGE_BYTES / 4));
      return concat(frame(Kind.refuse, [u8(m.reason), ...str(text)]));
    }
    case 'abort': {
      // Whole when it fits (an ASCII text of up to MAX_ABORT_TEXT_BYTES), else cut to a safe length.
      return concat(frame(Kind.abort, str(clipText(m.message))));
    }
  }
}

/** Bytes of a data frame's header (kind, length, tag) before its payload. */
export const DATA_HEADER_BYTES = HEADER_BYTES + TAG_BYTES;

/**
 * A data frame's header (kind, length, tag) at the start of a new array with `room` bytes after
 * it: 0 where the payload follows on the wire uncopied, the payload's length where a small one
 * is copied in behind its header and written once (one array per frame, not three).
 */
export function encodeDataHeader(tag: FrameTag, length: number, room = 0): Uint8Array {
  const b = new Uint8Array(DATA_HEADER_BYTES + room);
  writeDataHeader(b, tag, length);
  return b;
}

/** Writes a data frame's header at the start of `b` (an array of the caller's: Node's pooled Buffers). */
export function writeDataHeader(b: Uint8Array, tag: FrameTag, length: number): void {
  if (length > MAX_PAYLOAD_BYTES)
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `a payload of ${length} bytes is over the frame limit of ${MAX_PAYLOAD_BYTES}`,
    );
  b[0] = Kind.data;
  putU32(b, 1, TAG_BYTES + length);
  putU32(b, 5, tag.comm);
  putU32(b, 9, tag.seq);
  putU32(b, 13, tag.step);
  putU32(b, 17, tag.space ?? 0);
}

/** Writes `v` little-endian at `at` (no DataView per frame on the data path). */
function putU32(b: Uint8Array, at: number, v: number): void {
  b[at] = v;
  b[at + 1] = v >>> 8;
  b[at + 2] = v >>> 16;
  b[at + 3] = v >>> 24;
}

/** The bytes each side signs: its role, the peer's nonce, job, ranks, channel, its own nonce. */
export function authPayload(
  role: 'connect' | 'accept',
  peerNonce: Uint8Array,
  jobId: string,
  connector: number,
  acceptor: number,
  channel: number,
  ownNonce: Uint8Array,
): Uint8Array {
  return signedBytes({
    label: AUTH_LABEL,
    role,
    peerNonce,
    context: concat([...str(jobId), ...authContext(connector, acceptor, channel)]),
    ownNonce,
  });
}

/** What a link's proofs bind after the job id: which rank dialled, which accepted, the channel. */
export function authContext(connector: number, acceptor: number, channel: number): Uint8Array[] {
  return [u32(connector), u32(acceptor), u16(channel)];
}

/** The largest body a handshake (or ABORT) frame of `kind` may announce; -1 for other kinds. */
export function maxHandshakeBody(kind: number): number {
  switch (kind) {
    case Kind.hello:
      return 4 + 2 + 2 + MAX_JOB_ID_BYTES + 4 + 4 + 2 + 2 + NONCE_BYTES;
    case Kind.proof:
      return MAC_BYTES;
    case Kind.refuse:
      return 1 + 2 + MAX_MESSAGE_BYTES;
    case Kind.abort:
      return 2 + MAX_MESSAGE_BYTES;
    default:
      return -1;
  }
}

export function decodeHandshake(kind: number, body: Uint8Array): Handshake {
  const c = new Cursor(body, KIND_NAMES[kind] ?? `kind ${kind}`);
  switch (kind) {
    case Kind.hello: {
      if (c.u32() !== MAGIC) protocolError('not a webccl transport peer (bad magic in HELLO)');
      const version = c.u16();
      if (version !== VERSION)
        return {
          type: 'hello',
          version,
          jobId: '',
          rank: 0,
          size: 0,
          channel: 0,
          nchannels: 0,
          nonce: new Uint8Array(0),
        };
      return c.end({
        type: 'hello',
        version,
        jobId: c.text(MAX_JOB_ID_BYTES, 'job id'),
        rank: c.u32(),
        size: c.u32(),
        channel: c.u16(),
        nchannels: c.u16(),
        nonce: c.bytes(NONCE_BYTES),
      });
    }
    case Kind.proof:
      return c.end({ type: 'proof', mac: c.bytes(MAC_BYTES) });
    case Kind.refuse:
      return c.end({ type: 'refuse', reason: c.u8(), message: c.text(MAX_MESSAGE_BYTES, 'message') });
    case Kind.abort:
      return c.end({ type: 'abort', message: c.text(MAX_MESSAGE_BYTES, 'message') });
    default:
      return protocolError(`unknown frame kind ${kind}`);
  }
}
