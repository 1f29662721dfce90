// The byte-level vocabulary every webccl connection shares (browser-safe, no node:): the frame
// layout, little-endian integer and length-prefixed string encoders, and Cursor, a bounds-checked
// reader of one frame body. The store protocol and every transport build their frames from these,
// so a length or a string is laid out the same way on each connection.
//
// Every frame: u8 kind | u32 body length (little-endian) | body.
import { WebcclError } from '../core/errors.js';

export const HEADER_BYTES = 5;

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
export const i64 = (n: bigint) => num(8, (v) => v.setBigInt64(0, n, true));
/** A string (or its bytes) with a u16 length before it. */
export const str = (s: string | Uint8Array) => {
  const b = typeof s === 'string' ? textBytes(s) : s;
  return [u16(b.length), b];
};
/** A value with a u32 length before it. */
export const blob = (b: Uint8Array) => [u32(b.length), b];

export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A frame as a list of buffers to write in order (large fields are not copied). */
export function frame(kind: number, fields: Uint8Array[]): Uint8Array[] {
  const len = fields.reduce((n, f) => n + f.length, 0);
  const out: Uint8Array[] = [];
  let run: Uint8Array[] = [concat([u8(kind), u32(len)])];
  for (const f of fields) {
    if (f.length < COPY_LIMIT) {
      run.push(f);
      continue;
    }
    if (run.length) out.push(concat(run));
    out.push(f);
    run = [];
  }
  if (run.length) out.push(concat(run));
  return out;
}

/** A frame header's kind and announced body length. */
export function readHeader(header: Uint8Array): { kind: number; length: number } {
  return { kind: header[0], length: new DataView(header.buffer, header.byteOffset, HEADER_BYTES).getUint32(1, true) };
}

/** Reads fields from one frame body; every read is bounds-checked. */
export class Cursor {
  private at = 0;
  private readonly view: DataView;
  constructor(
    private readonly b: Uint8Array,
    protected readonly what: string,
  ) {
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
  bytes = (n: number) => {
    const s = this.take(n);
    return this.b.subarray(s, s + n);
  };
  text(max: number, field: string): string {
    const n = this.u16();
    if (n > max) protocolError(`${this.what} ${field} of ${n} bytes exceeds ${max}`);
    try {
      return utf8Strict.decode(this.bytes(n));
    } catch {
      return protocolError(`${this.what} ${field} is not UTF-8`);
    }
  }
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
