// The rendezvous store's wire protocol, as pure functions: encode(message) -> bytes,
// decode(kind, body) -> message, and FrameParser, a named-state loop that checks each frame's
// kind and length against hard limits before it allocates a byte. Browser-safe (no node:), so a
// WebSocket client can reuse it; HMAC itself is computed by the caller.
//
// Every frame: u8 kind | u32 body length (little-endian) | body. Strings are UTF-8 with a u16
// length, values carry a u32 length, request ids are u32 and answers echo them (so a blocked
// get never holds up later requests on the same connection). Handshake, before any request:
//   server -> HELLO    magic "WCST", u16 version, u32 maxValueBytes, 32-byte server nonce
//   client -> AUTH     job id, 32-byte client nonce, HMAC(token, authPayload('client', sn, job, cn))
//   server -> AUTH_OK  HMAC(token, authPayload('server', cn, job, sn))   or AUTH_FAIL reason
// Either side may instead send PROTOCOL_ERROR (a message) and hang up: the server when a frame
// breaks the protocol, a client that will not go on (one that uses TLS meeting a plain store).
import { WebcclError } from '../core/errors.js';

export const MAGIC = 0x54534357; // "WCST" read as a little-endian u32
export const VERSION = 1;
export const HEADER_BYTES = 5;
export const NONCE_BYTES = 32;
export const MAC_BYTES = 32;
export const MAX_KEY_BYTES = 4096;
export const MAX_JOB_ID_BYTES = 256;
export const MAX_MESSAGE_BYTES = 1024;
export const MAX_KEYS_FRAME_BYTES = 1 << 20; // the largest WAIT request or TIMEOUT answer
export const MAX_VALUE_LIMIT = 1 << 30; // the largest maxValueBytes either side may configure
export const NO_DEADLINE = 0xffffffff; // a get/wait timeout meaning "no deadline"

export const Kind = {
  hello: 1, auth: 2, authOk: 3, authFail: 4, protocolError: 5,
  set: 16, get: 17, add: 18, wait: 19, compareSet: 20, delete: 21, numKeys: 22,
  ok: 32, value: 33, number: 34, timeout: 35, error: 36,
} as const;
const KIND_NAMES = Object.fromEntries(Object.entries(Kind).map(([name, k]) => [k, name]));

export const AUTH_FAIL_REASONS: Record<number, string> = {
  1: 'job id mismatch',
  2: 'token mismatch (the HMAC proof did not verify)',
};

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
    case Kind.hello: return 4 + 2 + 4 + NONCE_BYTES;
    case Kind.auth: return 2 + MAX_JOB_ID_BYTES + NONCE_BYTES + MAC_BYTES;
    case Kind.authOk: return MAC_BYTES;
    case Kind.authFail: return 1;
    case Kind.protocolError: case Kind.error: return 4 + 2 + MAX_MESSAGE_BYTES;
    case Kind.set: return 4 + key + 4 + maxValue;
    case Kind.get: return 4 + key + 4;
    case Kind.add: return 4 + key + 8;
    case Kind.wait: case Kind.timeout: return MAX_KEYS_FRAME_BYTES;
    case Kind.compareSet: return 4 + key + 1 + 4 + maxValue + 4 + maxValue;
    case Kind.delete: return 4 + key;
    case Kind.numKeys: case Kind.ok: return 4;
    case Kind.value: return 4 + 1 + 4 + maxValue;
    case Kind.number: return 4 + 8;
    default: return -1;
  }
}

export function protocolError(message: string): never {
  throw new WebcclError('PROTOCOL_ERROR', message);
}

const utf8 = new TextEncoder();
// ignoreBOM keeps a leading U+FEFF in the text: by default the decoder drops it, and a key that
// starts with one would be stored under another key (its bytes would not be what was sent).
const utf8Strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
export const textBytes = (s: string): Uint8Array => utf8.encode(s);

/** Fields shorter than this are copied into one buffer with the header; longer ones are sent as is. */
const COPY_LIMIT = 16 * 1024;

export function num(bytes: number, write: (v: DataView) => void): Uint8Array {
  const b = new Uint8Array(bytes);
  write(new DataView(b.buffer));
  return b;
}
export const u8 = (n: number) => Uint8Array.of(n);
export const u16 = (n: number) => num(2, (v) => v.setUint16(0, n, true));
export const u32 = (n: number) => num(4, (v) => v.setUint32(0, n, true));
const i64 = (n: bigint) => num(8, (v) => v.setBigInt64(0, n, true));
export const str = (s: string | Uint8Array) => { const b = typeof s === 'string' ? textBytes(s) : s; return [u16(b.length), b]; };
const blob = (b: Uint8Array) => [u32(b.length), b];

export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

/** A frame as a list of buffers to write in order (large values are not copied). */
export function frame(kind: number, fields: Uint8Array[]): Uint8Array[] {
  const len = fields.reduce((n, f) => n + f.length, 0);
  const out: Uint8Array[] = [];
  let run: Uint8Array[] = [concat([u8(kind), u32(len)])];
  for (const f of fields) {
    if (f.length < COPY_LIMIT) { run.push(f); continue; }
    if (run.length) out.push(concat(run));
    out.push(f);
    run = [];
  }
  if (run.length) out.push(concat(run));
  return out;
}

export function encode(m: Message): Uint8Array[] {
  const k = Kind[m.type];
  switch (m.type) {
    case 'hello': return frame(k, [u32(MAGIC), u16(m.version), u32(m.maxValueBytes), m.nonce]);
    case 'auth': return frame(k, [...str(m.jobId), m.nonce, m.mac]);
    case 'authOk': return frame(k, [m.mac]);
    case 'authFail': return frame(k, [u8(m.reason)]);
    case 'protocolError': return frame(k, [...str(clip(m.message))]);
    case 'set': return frame(k, [u32(m.id), ...str(m.key), ...blob(m.value)]);
    case 'get': return frame(k, [u32(m.id), ...str(m.key), u32(m.timeoutMs)]);
    case 'add': return frame(k, [u32(m.id), ...str(m.key), i64(m.delta)]);
    case 'wait': return frame(k, [u32(m.id), u32(m.timeoutMs), u16(m.keys.length), ...m.keys.flatMap(str)]);
    case 'compareSet': {
      const exp = m.expected === null ? [u8(0)] : [u8(1), ...blob(m.expected)];
      return frame(k, [u32(m.id), ...str(m.key), ...exp, ...blob(m.desired)]);
    }
    case 'delete': return frame(k, [u32(m.id), ...str(m.key)]);
    case 'numKeys': case 'ok': return frame(k, [u32(m.id)]);
    case 'value': return frame(k, [u32(m.id), ...(m.value === null ? [u8(0)] : [u8(1), ...blob(m.value)])]);
    case 'number': return frame(k, [u32(m.id), i64(m.value)]);
    case 'timeout': return frame(k, [u32(m.id), u16(m.keys.length), ...m.keys.flatMap(str)]);
    case 'error': return frame(k, [u32(m.id), ...str(clip(m.message))]);
  }
}

function clip(message: string): Uint8Array {
  const b = textBytes(message);
  return b.length <= MAX_MESSAGE_BYTES ? b : textBytes(message.slice(0, MAX_MESSAGE_BYTES / 4));
}

/** The bytes a side signs: who signs, the peer's nonce first, the job, its own nonce last. */
export function authPayload(role: 'client' | 'server', first: Uint8Array, jobId: string, second: Uint8Array): Uint8Array {
  return concat([textBytes(`webccl-store/${VERSION} ${role}`), first, ...str(jobId), second]);
}

/** Reads fields from one frame body; every read is bounds-checked. */
export class Cursor {
  private at = 0;
  private readonly view: DataView;
  constructor(private readonly b: Uint8Array, private readonly what: string) {
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  private take(n: number): number {
    if (this.at + n > this.b.length) protocolError(`${this.what} frame truncated`);
    this.at += n;
    return this.at - n;
  }
  u8 = () => this.view.getUint8(this.take(1));
  u16 = () => this.view.getUint16(this.take(2), true);
  u32 = () => this.view.getUint32(this.take(4), true);
  i64 = () => this.view.getBigInt64(this.take(8), true);
  bytes = (n: number) => { const s = this.take(n); return this.b.subarray(s, s + n); };
  text(max: number, field: string): string {
    const n = this.u16();
    if (n > max) protocolError(`${this.what} ${field} of ${n} bytes exceeds ${max}`);
    try { return utf8Strict.decode(this.bytes(n)); } catch { return protocolError(`${this.what} ${field} is not UTF-8`); }
  }
  key = () => { const k = this.text(MAX_KEY_BYTES, 'key'); if (k === '') protocolError(`${this.what} with an empty key`); return k; };
  keys = () => Array.from({ length: this.u16() }, this.key);
  /** A presence flag: 0 or 1, nothing else (one meaning, one encoding). */
  flag(field: string): boolean {
    const f = this.u8();
    if (f > 1) protocolError(`${this.what} ${field} flag is ${f}, not 0 or 1`);
    return f === 1;
  }
  value(max: number): Uint8Array {
    const n = this.u32();
    if (n > max) protocolError(`${this.what} value of ${n} bytes exceeds the limit of ${max}`);
    return this.bytes(n);
  }
  end<T>(m: T): T {
    if (this.at !== this.b.length) protocolError(`${this.what} frame has ${this.b.length - this.at} trailing bytes`);
    return m;
  }
}

/** Decodes one frame body; the parser has already checked kind and length. */
export function decode(kind: number, body: Uint8Array, maxValue: number): Message {
  const c = new Cursor(body, KIND_NAMES[kind] ?? `kind ${kind}`);
  switch (kind) {
    case Kind.hello: {
      if (c.u32() !== MAGIC) protocolError('not a webccl store (bad magic in HELLO)');
      const version = c.u16();
      if (version !== VERSION) return { type: 'hello', version, maxValueBytes: 0, nonce: new Uint8Array(0) };
      return c.end({ type: 'hello', version, maxValueBytes: c.u32(), nonce: c.bytes(NONCE_BYTES) });
    }
    case Kind.auth: return c.end({ type: 'auth', jobId: c.text(MAX_JOB_ID_BYTES, 'job id'), nonce: c.bytes(NONCE_BYTES), mac: c.bytes(MAC_BYTES) });
    case Kind.authOk: return c.end({ type: 'authOk', mac: c.bytes(MAC_BYTES) });
    case Kind.authFail: return c.end({ type: 'authFail', reason: c.u8() });
    case Kind.protocolError: return c.end({ type: 'protocolError', message: c.text(MAX_MESSAGE_BYTES, 'message') });
    case Kind.set: return c.end({ type: 'set', id: c.u32(), key: c.key(), value: c.value(maxValue) });
    case Kind.get: return c.end({ type: 'get', id: c.u32(), key: c.key(), timeoutMs: c.u32() });
    case Kind.add: return c.end({ type: 'add', id: c.u32(), key: c.key(), delta: c.i64() });
    case Kind.wait: return c.end({ type: 'wait', id: c.u32(), timeoutMs: c.u32(), keys: c.keys() });
    case Kind.compareSet: {
      const [id, key] = [c.u32(), c.key()];
      const expected = c.flag('expected') ? c.value(maxValue) : null;
      return c.end({ type: 'compareSet', id, key, expected, desired: c.value(maxValue) });
    }
    case Kind.delete: return c.end({ type: 'delete', id: c.u32(), key: c.key() });
    case Kind.numKeys: return c.end({ type: 'numKeys', id: c.u32() });
    case Kind.ok: return c.end({ type: 'ok', id: c.u32() });
    case Kind.value: return c.end({ type: 'value', id: c.u32(), value: c.flag('value') ? c.value(maxValue) : null });
    case Kind.number: return c.end({ type: 'number', id: c.u32(), value: c.i64() });
    case Kind.timeout: return c.end({ type: 'timeout', id: c.u32(), keys: c.keys() });
    case Kind.error: return c.end({ type: 'error', id: c.u32(), message: c.text(MAX_MESSAGE_BYTES, 'message') });
    default: return protocolError(`unknown frame kind ${kind}`);
  }
}

/**
 * Splits a byte stream into frames. Named states: `header` gathers 5 bytes, then checks the
 * kind against the accepted set and the length against maxBodyBytes before allocating the body;
 * `body` fills it; `closed` ignores everything (after a violation, or once the owner closes).
 */
export class FrameParser {
  private state: 'header' | 'body' | 'closed' = 'header';
  private readonly header = new Uint8Array(HEADER_BYTES);
  private have = 0;
  private kind = 0;
  private body = new Uint8Array(0);

  constructor(
    private readonly maxValue: number,
    private accepted: readonly number[],
    private readonly onFrame: (kind: number, body: Uint8Array) => void,
  ) {}

  /** Changes the accepted kinds (the handshake's end); applies to the next frame header. */
  accept(kinds: readonly number[]): void {
    this.accepted = kinds;
  }

  close(): void {
    this.state = 'closed';
  }

  /** Feeds bytes; throws PROTOCOL_ERROR (and closes) on a frame that breaks a limit. */
  push(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length && this.state !== 'closed') {
      const into = this.state === 'header' ? this.header : this.body;
      const n = Math.min(into.length - this.have, chunk.length - at);
      into.set(chunk.subarray(at, at + n), this.have);
      this.have += n;
      at += n;
      if (this.state === 'header' && this.have === HEADER_BYTES) this.startBody();
      if (this.state === 'body' && this.have === this.body.length) {
        this.state = 'header';
        this.have = 0;
        this.onFrame(this.kind, this.body);
      }
    }
  }

  private startBody(): void {
    const kind = this.header[0];
    const len = new DataView(this.header.buffer).getUint32(1, true);
    const name = KIND_NAMES[kind] ?? `kind ${kind}`;
    if (!this.accepted.includes(kind)) this.violation(`a ${name} frame is not expected here`);
    const max = maxBodyBytes(kind, this.maxValue);
    if (len > max) this.violation(`a ${name} frame announces ${len} bytes, over its limit of ${max}`);
    this.kind = kind;
    this.body = new Uint8Array(len);
    this.have = 0;
    this.state = 'body';
  }

  private violation(message: string): never {
    this.state = 'closed';
    return protocolError(message);
  }
}
