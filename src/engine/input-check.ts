// WEBCCL_CHECK=1: catches a program that writes to a buffer while an op on it is in flight (the
// rule: from issue until wait/await, neither read nor write the op's buffers). Such writes give
// a torn mix of old and new values on one node and one or the other across nodes; here the op
// fails instead, with BUFFER_BUSY naming the op and the buffer.
//
// The input is hashed at issue and compared when the op starts (it may wait behind earlier
// ops) and, when the op does not write it, when the op completes. On one node the op also runs
// in slices between which the caller's code runs: only the caller can change the op's buffers
// then (peers and the step loops write them only while this rank runs its slice), so both
// buffers are hashed when a slice ends and compared when the next begins.

import { envString } from '../core/config.js';
import { fail, WebcclError } from '../core/errors.js';
import { type Buf, overlaps } from './buffers.js';

/** FNV-1a over 32-bit words (bytes where the view is not word-aligned). */
export function hashBytes(b: Uint8Array): number {
  let h = 0x811c9dc5;
  let i = 0;
  if (b.byteOffset % 4 === 0) {
    const words = new Int32Array(b.buffer, b.byteOffset, b.byteLength >> 2);
    for (let w = 0; w < words.length; w++) h = Math.imul(h ^ words[w], 0x01000193);
    i = words.length << 2;
  }
  for (; i < b.byteLength; i++) h = Math.imul(h ^ b[i], 0x01000193);
  return h >>> 0;
}

/** The hash, or NaN when the buffer can no longer be read (its ArrayBuffer was transferred). */
function hashOrNaN(b: Buf | null): number {
  if (!b) return 0;
  try {
    return hashBytes(b.bytes);
  } catch {
    return NaN;
  }
}

export class InputCheck {
  private readonly atIssue: number;
  private readonly writesInput: boolean;
  private sliceEnd: [number, number] | undefined;

  constructor(
    private readonly name: string,
    private readonly input: Buf,
    private readonly output: Buf | null,
  ) {
    this.atIssue = hashOrNaN(input);
    this.writesInput = output !== null && (output === input || overlaps(input, output));
  }

  /** The op begins: its input must be as it was at issue. */
  atStart(seq: number): void {
    if (hashOrNaN(this.input) !== this.atIssue)
      throw this.changed(seq, 'input', 'between issue and the start of the op');
  }

  /** A slice of the op ends and the caller's code runs: remember both buffers. */
  suspend(): void {
    this.sliceEnd = [hashOrNaN(this.input), hashOrNaN(this.output)];
  }

  /** The next slice begins: nothing but the caller can have changed the buffers meanwhile. */
  resume(seq: number): void {
    if (!this.sliceEnd) return;
    const [i, o] = this.sliceEnd;
    this.sliceEnd = undefined;
    if (hashOrNaN(this.input) !== i) throw this.changed(seq, 'input', 'while the op was in flight');
    if (this.output !== this.input && hashOrNaN(this.output) !== o)
      throw this.changed(seq, 'output', 'while the op was in flight');
  }

  /** The op completed: an input it does not write must still be as it was at issue. */
  atEnd(seq: number): void {
    if (!this.writesInput && hashOrNaN(this.input) !== this.atIssue)
      throw this.changed(seq, 'input', 'while the op was in flight');
  }

  private changed(seq: number, buffer: 'input' | 'output', when: string): WebcclError {
    return new WebcclError(
      'BUFFER_BUSY',
      `${this.name} #${seq}: its ${buffer} buffer was written ${when} (WEBCCL_CHECK=1); wait for an op before touching its buffers`,
      {
        op: this.name,
        seq,
        buffer,
        modified: true,
      },
    );
  }
}

/** WEBCCL_CHECK: 1 turns the in-flight buffer check on, 0 (or unset) off. */
export function checkMode(): boolean {
  const v = envString('WEBCCL_CHECK');
  if (v === undefined || v === '0') return false;
  if (v === '1') return true;
  return fail('INVALID_ARGUMENT', `WEBCCL_CHECK=${JSON.stringify(v)}: expected 1 or 0`);
}
