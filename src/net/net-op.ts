// An op as the network engine keeps it from submit to its end: the schedule it runs, the ring's
// piece size and ways, and the signature each of its messages carries, by which a rank that
// receives one tells whether the sender agrees on the op.

import { DTYPE_SIZE } from '../core/dtypes.js';
import type { OpSpec } from '../engine/engine.js';
import type { Work } from '../engine/work.js';
import { type PairSignatures, pairSignatures, signatureOf } from './blame.js';
import type { NetOpAlgo, NetSchedule } from './schedule.js';

export interface NetOp {
  spec: OpSpec;
  work: Work;
  seq: number;
  algo: NetOpAlgo;
  /** The ring allReduce's piece size (0 for the other schedules). */
  piece: number;
  /**
   * An allReduce's ring (flat, or across nodes): the connections per pair its messages go on (undefined: all of them).
   */
  ways?: number;
  /** Hash of what every rank must agree on; it rides in every message's tag. */
  signature: number;
  /** allToAll: each message's signature also says what its two ranks exchange (see pairSignatures). */
  pairs?: PairSignatures;
  done: Promise<void>;
}

/** The op `spec` run as `work` (its number is the work's) by schedule `algo` of `schedule`. */
export function netOp(spec: OpSpec, work: Work, algo: NetOpAlgo, schedule: NetSchedule): NetOp {
  const bytes = spec.count * DTYPE_SIZE[spec.dtype];
  // The ring's pieces are part of its schedule (tags count them): in the signature, so ranks
  // whose models or WEBCCL_PIECE_BYTES disagree fail with MISMATCH.
  const piece = algo === 'ring' ? schedule.piece(bytes) : 0;
  const signature = signatureOf(spec, algo, piece);
  return {
    spec,
    work,
    seq: work.seq,
    algo,
    piece,
    ways: spec.name === 'allReduce' ? schedule.ringWaysOf(algo, bytes, piece) : undefined,
    signature,
    pairs: pairSignatures(spec, signature),
    done: Promise.resolve(),
  };
}

/** The signature of the messages `op` expects from world rank `peer`. */
export function expectedFrom(op: NetOp, peer: number): number {
  return op.pairs?.from(peer) ?? op.signature;
}
