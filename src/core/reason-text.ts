// The reason text of an abort, kept in shared memory beside the numeric abort words so that
// every rank of the node can say why (abort(reason) on one rank, a thread's error in the
// launcher). An area of REASON_BYTES holds a u32 byte length, then that many bytes of UTF-8;
// longer text is cut at a character boundary. The writer holds the abort's claim word and
// writes the text before it publishes the abort word; readers read it only after they saw
// that word, so the text they read is whole.
import { freshBuffer } from './fresh-buffer.js';
import { REASON_BYTES } from './shm-map.js';

const MAX_TEXT = REASON_BYTES - 4;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The UTF-8 of `text`, at most `max` bytes, never ending inside a character. */
export function boundedUtf8(text: string, max = MAX_TEXT): Uint8Array {
  const all = encoder.encode(text);
  if (all.length <= max) return all;
  let end = max;
  while (end > 0 && (all[end] & 0xc0) === 0x80) end--; // all[end] continues a character: cut before it starts
  return all.subarray(0, end);
}

/** Writes `text` into the area at byte address `at` (copied: encoders may refuse shared views). */
export function writeReasonText(memory: WebAssembly.Memory, at: number, text: string): void {
  const bytes = boundedUtf8(text);
  const buffer = freshBuffer(memory);
  new Uint8Array(buffer, at + 4, bytes.length).set(bytes);
  new Uint32Array(buffer, at, 1)[0] = bytes.length;
}

/** The text in the area at `at` ('' when none was written). */
export function readReasonText(memory: WebAssembly.Memory, at: number): string {
  const buffer = freshBuffer(memory);
  const len = Math.min(new Uint32Array(buffer, at, 1)[0], MAX_TEXT);
  // slice() copies into an unshared buffer, which every TextDecoder accepts.
  return decoder.decode(new Uint8Array(buffer, at + 4, len).slice());
}
