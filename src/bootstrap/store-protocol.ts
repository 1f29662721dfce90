// The rendezvous store's wire protocol, as pure functions: encode(message) -> bytes,
// decode(kind, body) -> message, and FrameParser, the wire's frame splitter (src/wire/frames.ts)
// told each kind's limit, checked before it allocates a byte. Browser-safe (no node:), so a
// WebSocket client can reuse it; the proofs are wire/auth.ts's Challenge, shared with the
// transports.
//
// Every frame: u8 kind | u32 body length (little-endian) | body. Strings are UTF-8 with a u16
// length, values carry a u32 length, request ids are u32 and answers echo them (so a blocked
// get never holds up later requests on the same connection). Handshake, before any request:
//   server -> HELLO    magic "WCST", u16 version, u32 maxValueBytes, 32-byte server nonce
//   client -> AUTH     job id, 32-byte client nonce, HMAC(token, authPayload('client', sn, job, cn))
//   server -> AUTH_OK  HMAC(token, authPayload('server', cn, job, sn))   or AUTH_FAIL reason
// Either side may instead send PROTOCOL_ERROR (a message) and hang up: the server when a frame
// breaks the protocol, a client that will not go on (one that uses TLS meeting a plain store).

import { signedBytes } from '../wire/auth.js';
import { blob, Cursor, concat, frame, i64, protocolError, str, u8, u16, u32 } from '../wire/bytes.js';
import { FrameParser as WireFrameParser } from '../wire/frames.js';
import { clipText, MAC_BYTES, MAX_JOB_ID_BYTES, MAX_MESSAGE_BYTES, NONCE_BYTES } from '../wire/limits.js';

export { AUTH_FAIL_REASONS } from '../wire/auth.js';
export const MAGIC = 0x54534357; // "WCST" read as a little-endian u32
export const VERSION = 1;
/** What both ends sign before their role (see wire/auth.ts). */
export const AUTH_LABEL = `webccl-store/${VERSION}`;
export const MAX_KEY_BYTES = 4096;
export const MAX_KEYS_FRAME_BYTES = 1 << 20; // the largest WAIT request or TIMEOUT answer
export const MAX_VALUE_LIMIT = 1 << 30; // the largest maxValueBytes either side may configure
export const NO_DEADLINE = 0xffffffff; // a get/wait timeout meaning "no deadline"

export const Kind = {
  hello: 1,
  auth: 2,
  authOk: 3,
  authFail: 4,
  protocolError: 5,
  set: 16,
  get: 17,
  add: 18,
  wait: 19,
  compareSet: 20,
  delete: 21,
  numKeys: 22,
  ok: 32,
  value: 33,
  number: 34,
  timeout: 35,
  error: 36,
} as const;
const KIND_NAMES = Object.fromEntries(Object.entries(Kind).map(([name, k]) => [k, name]));

export type Message =
  | { type: 'hello'; version: number; maxValueBytes: number; nonce: Uint8Array }
  | { type: 'auth'; jobId: string; nonce: Uint8Array; mac: Uint8Array }
  | { type: 'authOk'; mac: Uint8Array }
  | { type: 'authFail'; reason: number }
  | { type: 'protocolError'; message: string }
  | { type: 'set'; id: number; key: string; value: Uint8Array }
  | { type: 'get'; id: number; key: string; timeoutMs: number }
  | { type: 'add'; id: number; key: string; delta: bigint }
  | { type: 'wait'; id: number; keys: string[]; timeoutMs: number }
  | { type: 'compareSet'; id: number; key: string; expected: Uint8Array | null; desired: Uint8Array }
  | { type: 'delete'; id: number; key: string }
  | { type: 'numKeys'; id: number }
  | { type: 'ok'; id: number }
  | { type: 'value'; id: number; value: Uint8Array | null }
  | { type: 'number'; id: number; value: bigint }
  | { type: 'timeout'; id: number; keys: string[] }
  | { type: 'error'; id: number; message: string };

/** The frames each side accepts in each phase; anything else ends the connection. */
export const ACCEPTS = {
  serverHandshake: [Kind.auth, Kind.protocolError],
  serverReady: [Kind.set, Kind.get, Kind.add, Kind.wait, Kind.compareSet, Kind.delete, Kind.numKeys],
  clientHandshake: [Kind.hello, Kind.authOk, Kind.authFail, Kind.protocolError],
  clientReady: [Kind.ok, Kind.value, Kind.number, Kind.timeout, Kind.error, Kind.protocolError],
} as const;

/** The largest body a frame of `kind` may carry, given the receiver's value limit. */
export function maxBodyBytes(kind: number, maxValue: number): number {
  const key = 2 + MAX_KEY_BYTES;
  switch (kind) {
    case Kind.hello:
      return 4 + 2 + 4 + NONCE_BYTES;
    case Kind.auth:
      return 2 + MAX_JOB_ID_BYTES + NONCE_BYTES + MAC_BYTES;
    case Kind.authOk:
      return MAC_BYTES;
    case Kind.authFail:
      return 1;
    case Kind.protocolError:
    case Kind.error:
      return 4 + 2 + MAX_MESSAGE_BYTES;
    case Kind.set:
      return 4 + key + 4 + maxValue;
    case Kind.get:
      return 4 + key + 4;
    case Kind.add:
      return 4 + key + 8;
    case Kind.wait:
    case Kind.timeout:
      return MAX_KEYS_FRAME_BYTES;
    case Kind.compareSet:
      return 4 + key + 1 + 4 + maxValue + 4 + maxValue;
    case Kind.delete:
      return 4 + key;
    case Kind.numKeys:
    case Kind.ok:
      return 4;
    case Kind.value:
      return 4 + 1 + 4 + maxValue;
    case Kind.number:
      return 4 + 8;
    default:
      return -1;
  }
}

export function encode(m: Message): Uint8Array[] {
  const k = Kind[m.type];
  switch (m.type) {
    case 'hello':
      return frame(k, [u32(MAGIC), u16(m.version), u32(m.maxValueBytes), m.nonce]);
    case 'auth':
      return frame(k, [...str(m.jobId), m.nonce, m.mac]);
    case 'authOk':
      return frame(k, [m.mac]);
    case 'authFail':
      return frame(k, [u8(m.reason)]);
    case 'protocolError':
      return frame(k, [...str(clipText(m.message))]);
    case 'set':
      return frame(k, [u32(m.id), ...str(m.key), ...blob(m.value)]);
    case 'get':
      return frame(k, [u32(m.id), ...str(m.key), u32(m.timeoutMs)]);
    case 'add':
      return frame(k, [u32(m.id), ...str(m.key), i64(m.delta)]);
    case 'wait':
      return frame(k, [u32(m.id), u32(m.timeoutMs), u16(m.keys.length), ...m.keys.flatMap(str)]);
    case 'compareSet': {
      const exp = m.expected === null ? [u8(0)] : [u8(1), ...blob(m.expected)];
      return frame(k, [u32(m.id), ...str(m.key), ...exp, ...blob(m.desired)]);
    }
    case 'delete':
      return frame(k, [u32(m.id), ...str(m.key)]);
    case 'numKeys':
    case 'ok':
      return frame(k, [u32(m.id)]);
    case 'value':
      return frame(k, [u32(m.id), ...(m.value === null ? [u8(0)] : [u8(1), ...blob(m.value)])]);
    case 'number':
      return frame(k, [u32(m.id), i64(m.value)]);
    case 'timeout':
      return frame(k, [u32(m.id), u16(m.keys.length), ...m.keys.flatMap(str)]);
    case 'error':
      return frame(k, [u32(m.id), ...str(clipText(m.message))]);
  }
}

/** The bytes a side signs: who signs, the peer's nonce first, the job, its own nonce last. */
export function authPayload(
  role: 'client' | 'server',
  first: Uint8Array,
  jobId: string,
  second: Uint8Array,
): Uint8Array {
  return signedBytes({ label: AUTH_LABEL, role, peerNonce: first, context: concat(str(jobId)), ownNonce: second });
}

/** A body reader that also knows the store's keys. */
class StoreCursor extends Cursor {
  key = () => {
    const k = this.text(MAX_KEY_BYTES, 'key');
    if (k === '') protocolError(`${this.what} with an empty key`);
    return k;
  };
  keys = () => Array.from({ length: this.u16() }, this.key);
}

/** Decodes one frame body; the parser has already checked kind and length. */
export function decode(kind: number, body: Uint8Array, maxValue: number): Message {
  const c = new StoreCursor(body, KIND_NAMES[kind] ?? `kind ${kind}`);
  switch (kind) {
    case Kind.hello: {
      if (c.u32() !== MAGIC) protocolError('not a webccl store (bad magic in HELLO)');
      const version = c.u16();
      if (version !== VERSION) return { type: 'hello', version, maxValueBytes: 0, nonce: new Uint8Array(0) };
      return c.end({ type: 'hello', version, maxValueBytes: c.u32(), nonce: c.bytes(NONCE_BYTES) });
    }
    case Kind.auth:
      return c.end({
        type: 'auth',
        jobId: c.text(MAX_JOB_ID_BYTES, 'job id'),
        nonce: c.bytes(NONCE_BYTES),
        mac: c.bytes(MAC_BYTES),
      });
    case Kind.authOk:
      return c.end({ type: 'authOk', mac: c.bytes(MAC_BYTES) });
    case Kind.authFail:
      return c.end({ type: 'authFail', reason: c.u8() });
    case Kind.protocolError:
      return c.end({ type: 'protocolError', message: c.text(MAX_MESSAGE_BYTES, 'message') });
    case Kind.set:
      return c.end({ type: 'set', id: c.u32(), key: c.key(), value: c.value(maxValue) });
    case Kind.get:
      return c.end({ type: 'get', id: c.u32(), key: c.key(), timeoutMs: c.u32() });
    case Kind.add:
      return c.end({ type: 'add', id: c.u32(), key: c.key(), delta: c.i64() });
    case Kind.wait:
      return c.end({ type: 'wait', id: c.u32(), timeoutMs: c.u32(), keys: c.keys() });
    case Kind.compareSet: {
      const [id, key] = [c.u32(), c.key()];
      const expected = c.flag('expected') ? c.value(maxValue) : null;
      return c.end({ type: 'compareSet', id, key, expected, desired: c.value(maxValue) });
    }
    case Kind.delete:
      return c.end({ type: 'delete', id: c.u32(), key: c.key() });
    case Kind.numKeys:
      return c.end({ type: 'numKeys', id: c.u32() });
    case Kind.ok:
      return c.end({ type: 'ok', id: c.u32() });
    case Kind.value:
      return c.end({ type: 'value', id: c.u32(), value: c.flag('value') ? c.value(maxValue) : null });
    case Kind.number:
      return c.end({ type: 'number', id: c.u32(), value: c.i64() });
    case Kind.timeout:
      return c.end({ type: 'timeout', id: c.u32(), keys: c.keys() });
    case Kind.error:
      return c.end({ type: 'error', id: c.u32(), message: c.text(MAX_MESSAGE_BYTES, 'message') });
    default:
      return protocolError(`unknown frame kind ${kind}`);
  }
}

/** The wire's frame splitter, told the store's limits and which kinds each phase accepts. */
export class FrameParser extends WireFrameParser {
  private readonly phase: { accepted: readonly number[] };

  constructor(maxValue: number, accepted: readonly number[], onFrame: (kind: number, body: Uint8Array) => void) {
    const phase = { accepted };
    super(
      {
        maxBody: (kind) => (phase.accepted.includes(kind) ? maxBodyBytes(kind, maxValue) : -1),
        name: (kind) => KIND_NAMES[kind] ?? `kind ${kind}`,
      },
      onFrame,
    );
    this.phase = phase;
  }

  /** Changes the accepted kinds (the handshake's end); applies to the next frame header. */
  accept(kinds: readonly number[]): void {
    this.phase.accepted = kinds;
  }
}
