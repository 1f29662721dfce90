// The sizes every webccl connection holds its peer to (browser-safe). A length read from the
// wire is checked against these before anything is allocated for it, so a peer (or a stranger
// on the port) cannot make a rank reserve memory by announcing a large frame.
import { textBytes } from './bytes.js';

export const NONCE_BYTES = 32;
/** An HMAC-SHA-256 proof. */
export const MAC_BYTES = 32;
export const MAX_JOB_ID_BYTES = 256;
/** The longest text a refusal, a protocol error or an error answer carries. */
export const MAX_MESSAGE_BYTES = 1024;
/** The longest text an ABORT frame carries whole. */
export const MAX_ABORT_TEXT_BYTES = MAX_MESSAGE_BYTES;

/**
 * A text as bytes that fit MAX_MESSAGE_BYTES: whole when it fits, else cut to MAX_MESSAGE_BYTES / 4
 * UTF-16 units (no unit takes more than 3 UTF-8 bytes, so the cut always fits).
 */
export function clipText(message: string): Uint8Array {
  const b = textBytes(message);
  return b.length <= MAX_MESSAGE_BYTES ? b : textBytes(message.slice(0, MAX_MESSAGE_BYTES / 4));
}

/** The PROTOCOL_ERROR text of a frame that announces more than its kind may carry. */
export const overLimit = (name: string, length: number, max: number) =>
  `a ${name} frame announces ${length} bytes, over its limit of ${max}`;
