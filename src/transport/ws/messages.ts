// How a link's byte stream (wire/link-frames.ts) is cut into WebSocket messages, the same for
// every WebSocket carrier (Node's `ws`, a page's own WebSocket; browser-safe): a data frame of up
// to SMALL payload bytes leaves as one message; a larger one as its header, then its payload in
// messages of at most CHUNK bytes. The receiving end reads messages as pieces of one stream, so
// the cut is only about limits: every message is at most MAX_MESSAGE bytes, which a receiver
// refuses to exceed before it buffers a byte.
import { encodeDataHeader } from '../../wire/link-frames.js';
import type { Tag } from '../transport.js';

/** Payloads up to this size leave behind their header in one message. */
export const SMALL = 16 * 1024;
/** The largest message a payload is cut into. */
export const CHUNK = 1 << 20;
/**
 * The largest message either end sends (a chunk; a small frame, at most 21 + SMALL bytes, and a
 * handshake frame, about 1 KiB, are shorter).
 */
export const MAX_MESSAGE = CHUNK;
/** Buffered bytes above which the next write waits for the ones before it to leave. */
export const HIGH_WATER = 4 << 20;

/** The messages of one data frame, in order (views of `payload` where it is cut, not copies). */
export function dataMessages(tag: Tag, payload: Uint8Array): Uint8Array[] {
  if (payload.length <= SMALL) {
    const bytes = encodeDataHeader(tag, payload.length, payload.length);
    bytes.set(payload, bytes.length - payload.length);
    return [bytes];
  }
  const out = [encodeDataHeader(tag, payload.length)];
  for (let at = 0; at < payload.length; at += CHUNK) out.push(payload.subarray(at, at + CHUNK));
  return out;
}
