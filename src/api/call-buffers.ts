// A communicator's view of the buffers its calls pass: the record of each TypedArray
// (buffers.ts), whether it is a view of the node memory (then it must lie in a live block of
// this rank's), and the root's side buffer of gather and scatter.

import { fail } from '../core/errors.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import { type Buf, BufRecords } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import { sameDtype, sameShape } from './arguments.js';

export class CommBuffers {
  /** The record of each TypedArray passed (buffers.ts). */
  private readonly records = new BufRecords((b) => this.isShared(b));

  constructor(
    private readonly ctx: RankContext,
    private readonly rank: number,
    private readonly size: number,
  ) {}

  /** Whether a buffer is (a view of) the node memory; asks the memory only for unknown SABs. */
  private readonly isShared = (b: ArrayBufferLike): boolean => {
    if (this.ctx.sharedBuffers.has(b)) return true;
    if (
      typeof SharedArrayBuffer === 'undefined' ||
      !(b instanceof SharedArrayBuffer) ||
      b !== (freshBuffer(this.ctx.core.memory) as ArrayBufferLike)
    )
      return false;
    this.ctx.sharedBuffers.add(b);
    return true;
  };

  /** `x` checked and described (`what` names it in errors). */
  of(x: unknown, what: string): Buf {
    const b = this.records.of(x, what);
    // A view of the node memory must lie in a live block of this rank's (not a freed one).
    if (b.addr) this.ctx.heap.checkLive(b.addr, b.bytes.byteLength, what);
    return b;
  }

  /** A call's buffer and its output: `out` when given, else the buffer itself (in place); one dtype and count. */
  inOut(name: string, x: unknown, out: unknown): [Buf, Buf] {
    const b = this.of(x, `${name} buffer`);
    const o = out === undefined ? b : this.of(out, `${name} out`);
    sameShape(name, b, o, this.size);
    return [b, o];
  }

  /** A call's output and input, checked, of one dtype. */
  outIn(name: string, out: unknown, input: unknown): [Buf, Buf] {
    const ob = this.of(out, `${name} output`);
    const ib = this.of(input, `${name} input`);
    sameDtype(name, ob, ib, this.size);
    return [ob, ib];
  }

  /** The root's side buffer of gather/scatter: checked on the root; elsewhere null, or any buffer (unused). */
  root(x: unknown, root: number, what: string, other: Buf, count: number): Buf | null {
    if (this.rank !== root) {
      if (x !== null && x !== undefined) this.of(x, what); // checked, though unused off the root
      return null;
    }
    const b = this.of(x, what);
    // gather's root buffer is its output, scatter's its input: layoutsFit takes (input, output).
    const gathers = what.startsWith('gather');
    sameDtype(gathers ? 'gather' : 'scatter', gathers ? b : other, gathers ? other : b, this.size);
    if (b.count !== count)
      fail(
        'SIZE_MISMATCH',
        `${what} on the root holds ${b.count} elements; it must hold size × ${other.count} = ${count}`,
      );
    return b;
  }
}
