// The checks a Communicator makes of its arguments before anything moves: ranks (root, peer),
// per-rank counts, dtypes and shapes that fit, and buffers that overlap only in the forms the
// collective allows. Pure: they throw a WebcclError, or return the checked value.
import { fail } from '../core/errors.js';
import { showValue } from '../core/options.js';
import type { Kind } from '../core/shm-map.js';
import { type Buf, overlaps, sameView } from '../engine/buffers.js';
import { layoutsFit } from '../layouts/plan.js';

/** Output and input of one dtype (and, for tensors, layouts and shapes that fit the collective). */
export function sameDtype(what: string, a: Buf, b: Buf, size: number): void {
  if (a.dtype !== b.dtype) fail('INVALID_DTYPE', `${what}: output is ${a.dtype} but input is ${b.dtype}`);
  if (a.layout || b.layout) layoutsFit(what as Kind, b, a, size);
}

/** As sameDtype, and the same element count. */
export function sameShape(what: string, a: Buf, b: Buf, size: number): void {
  sameDtype(what, b, a, size);
  if (a.count !== b.count)
    fail('SIZE_MISMATCH', `${what}: out holds ${b.count} elements, input ${a.count}; they must match`);
}

/** A count per rank: non-negative integers summing to the buffer's element count. */
export function perRank(v: unknown, option: string, b: Buf, which: string, size: number): number[] {
  if (!Array.isArray(v) || v.length !== size || !v.every((c) => Number.isSafeInteger(c) && c >= 0)) {
    fail(
      'INVALID_ARGUMENT',
      `allToAll: ${option} must be an array of ${size} non-negative integers (one per rank), got ${showValue(v)}`,
      { option, value: v },
    );
  }
  const total = (v as number[]).reduce((a, c) => a + c, 0);
  if (total !== b.count)
    fail('SIZE_MISMATCH', `allToAll: ${option} add up to ${total} elements but the ${which} holds ${b.count}`, {
      option,
      total,
      count: b.count,
    });
  return [...(v as number[])];
}

/** A rank of the communicator other than this one. */
export function peerRank(peer: unknown, what: string, rank: number, size: number): number {
  if (!Number.isInteger(peer) || (peer as number) < 0 || (peer as number) >= size || peer === rank) {
    fail(
      'INVALID_ARGUMENT',
      `${what}: invalid peer ${showValue(peer)} (a rank in 0..${size - 1} other than this rank, ${rank})`,
      { peer },
    );
  }
  return peer as number;
}

/** Rank `r` of a communicator of `size` ranks (worldRank's argument), checked. */
export function memberRank(r: unknown, size: number): number {
  if (!Number.isInteger(r) || (r as number) < 0 || (r as number) >= size)
    fail('INVALID_ARGUMENT', `worldRank: ${showValue(r)} is not a rank of this communicator (0..${size - 1})`, {
      rank: r,
    });
  return r as number;
}

/** A world rank (groupRank's argument), checked. */
export function worldRankArg(w: unknown): number {
  if (!Number.isInteger(w) || (w as number) < 0)
    fail('INVALID_ARGUMENT', `groupRank: ${showValue(w)} is not a world rank`, { worldRank: w });
  return w as number;
}

/** A rank of the communicator; absent means 0 (null is refused, not taken as 0). */
export function rootRank(root: unknown, what: string, size: number): number {
  const r = root === undefined ? 0 : root; // null is no root: refused, not taken as 0
  if (!Number.isInteger(r) || (r as number) < 0 || (r as number) >= size) {
    fail('INVALID_ARGUMENT', `${what}: invalid root ${showValue(r)} (root should be in the 0..${size - 1} range)`, {
      option: 'root',
      value: r,
    });
  }
  return r as number;
}

/**
 * Input and output may be the same view (in place) or apart; allGather's input may also be
 * exactly this rank's block of its output, and reduceScatter's output this rank's block of
 * its input (NCCL's in-place forms). Any other overlap would let the op read what it has
 * already overwritten.
 */
export function noPartialOverlap(name: string, input: Buf, output: Buf, rank: number, size: number): void {
  if (input === output || !overlaps(input, output) || sameView(input, output)) return;
  const [small, large] =
    input.bytes.byteLength < output.bytes.byteLength ? [input.bytes, output.bytes] : [output.bytes, input.bytes];
  const gathering = name === 'allGather' || name === 'gather',
    scattering = name === 'reduceScatter' || name === 'scatter';
  const blockForm = (gathering && small === input.bytes) || (scattering && small === output.bytes);
  const ownBlock =
    small.byteLength * size === large.byteLength && small.byteOffset === large.byteOffset + rank * small.byteLength;
  if (blockForm && ownBlock) return;
  const span = (b: Uint8Array) => `bytes ${b.byteOffset}..${b.byteOffset + b.byteLength}`;
  fail(
    'INVALID_ARGUMENT',
    `${name}: output (${span(output.bytes)}) and input (${span(input.bytes)}) of one ArrayBuffer overlap without being the same view; pass the same view for in place, or buffers apart`,
    {
      overlap: 'partial',
    },
  );
}
