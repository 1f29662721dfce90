// An op as an engine receives it, once the Communicator has checked the call: what to run, on
// which buffers, and the hooks the op carries (input check, trace, relayout). The flight
// recorder, the progress postboxes and both engines read it; engine.ts says what takes it.
import type { Dtype, ReduceOp } from '../core/dtypes.js';
import type { Kind } from '../core/shm-map.js';
import type { OpTrace } from '../core/trace.js';
import type { Buf } from './buffers.js';
import type { InputCheck } from './input-check.js';

/** Point-to-point ops: not collectives, so they keep no place in the collective order. */
export type P2pKind = Extract<Kind, 'send' | 'recv'>;
export const isP2p = (k: Kind): k is P2pKind => k === 'send' || k === 'recv';

export interface OpSpec {
  name: Kind;
  /** The call's algorithm option, unchecked (the engine knows which it accepts). */
  algo?: unknown;
  dtype: Dtype;
  op: ReduceOp;
  /**
   * Elements per rank: the whole buffer (allReduce, broadcast, reduce), the input (allGather,
   * gather), the output (reduceScatter, scatter), one block (allToAll with equal blocks; 0 with
   * `counts`).
   */
  count: number;
  root: number;
  /** send/recv: the other rank (root holds it too, for the flight record) and the message tag. */
  peer?: number;
  tag?: number;
  /** allToAll with per-peer counts: elements this rank sends to / receives from each rank. */
  counts?: { send: number[]; recv: number[] };
  input: Buf | null;
  output: Buf | null;
  timeoutMs?: number;
  /** WEBCCL_CHECK=1: the engine calls atStart when the op begins and atEnd when it completes. */
  check?: InputCheck;
  /**
   * The op's number in its communicator's collective order, when whoever issues it numbers the
   * ops (a rank that hands some ops to the progress thread and runs others itself).
   */
  seq?: number;
  /** The layout the data crosses in (tensor-layout.ts layoutSignature; 0: row-major or none): ranks must agree. */
  layout?: number;
  /** WEBCCL_TRACE: the op's events; the engine calls issue() when it takes the op. */
  trace?: OpTrace;
  /** Tensors: the logical shape behind `count` (tensor-layout.ts shapeClass; 0 or absent: a plain buffer). */
  shape?: number;
  /**
   * Tensors on one node: when the signature check finds ranks holding one shape in different
   * layouts, the engine calls this and runs the op again on what it returns (row-major copies).
   */
  relayout?: () => Relayout;
}

/** The buffers and count an op runs on once its tensors are converted to row-major. */
export interface Relayout {
  input: Buf | null;
  output: Buf | null;
  count: number;
}
