// What a Communicator hands a validated op to. Two engines: shared memory (every rank on one
// node, ops run by the wasm step loops) and network (ranks on several nodes, ops run by the
// algorithms of src/algorithms over a transport). Both complete collectives in issue order;
// send/recv (src/comm/p2p/) keep no place in that order.
import type { Dtype, ReduceOp } from '../core/dtypes.js';
import type { WebcclError } from '../core/errors.js';
import type { Kind } from '../core/shm-map.js';
import type { Buf } from './buffers.js';
import type { FlightRecorder } from './flight-recorder.js';
import type { InputCheck } from './input-check.js';
import type { Work } from './work.js';
import type { OpTrace } from '../core/trace.js';

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

/** Counters a communicator reports in stats(); engines add to them. */
export interface OpCounters {
  ops: number;
  bytes: number;
  failed: number;
  /** Sum of completed ops' durationMs = waitMs + moveMs. */
  busyMs: number;
  /** Of busyMs: waiting until every rank an op needs had joined it (Work.waitMs). */
  waitMs: number;
  /** Of busyMs: the rest, moving and reducing data (Work.moveMs). */
  moveMs: number;
}

/** `a`'s counts of each key with `b`'s added (engines that hand some ops to a progress thread report both). */
export function addCounts(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const all = { ...a };
  for (const [k, n] of Object.entries(b)) all[k] = (all[k] ?? 0) + n;
  return all;
}

/** Adds a completed op's time to the counters. */
export function countDone(c: OpCounters, w: Work): void {
  const wait = w.waitMs;
  c.busyMs += w.durationMs;
  c.waitMs += wait;
  c.moveMs += w.durationMs - wait;
}

export interface Engine {
  /** The last ops submitted, for comm.flightRecord() and the print on a TIMEOUT or ABORTED. */
  readonly flight: FlightRecorder;
  submit(spec: OpSpec): Work;
  /**
   * A send or recv with nothing but its buffer, peer, tag and deadline (no layout, check or
   * trace): submit() without an OpSpec to build and read, where the engine offers it (a
   * ping-pong pays every step per message).
   */
  sendRecv?(name: P2pKind, buf: Buf, peer: number, tag: number, timeoutMs: number | undefined): Work;
  /** Ops issued and not yet settled. */
  pending(): number;
  /** Who runs this communicator's collectives: 'auto' or 'thread' (engines that hand ops to the progress thread); absent: the rank ('caller'). */
  readonly progressMode?: 'auto' | 'thread';
  /** Ops the node's progress thread ran for this rank (engines that hand ops over). */
  threadOps?(): number;
  /** Ops held unstarted at issue for the rank's next call (auto mode: the rank waited for its last op at once). */
  heldOps?(): number;
  /** Completed allReduce ops per algorithm. */
  algorithms(): Record<string, number>;
  /** Fails every pending op here and on the other ranks. */
  abort(reason: string): void;
  /** No more ops: later submits fail. */
  close(): void;
  /** Why the engine can run no more ops (a peer failed, a deadline passed, abort()), if it cannot. */
  failure(): WebcclError | undefined;
}
