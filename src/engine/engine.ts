// What a Communicator hands a validated op to. Two engines: shared memory (every rank on one
// node, ops run by the wasm step loops) and network (ranks on several nodes, ops run by the
// algorithms of src/algorithms over a transport). Both complete collectives in issue order;
// send/recv (shm/p2p.ts, net/p2p.ts) keep no place in that order. The op itself: op-spec.ts.
import type { WebcclError } from '../core/errors.js';
import type { TraceTrack } from '../core/trace.js';
import type { Buf } from './buffers.js';
import type { FlightRecorder } from './flight-recorder.js';
import type { OpSpec, P2pKind } from './op-spec.js';
import type { Placement } from './placement.js';
import type { Work } from './work.js';

export { isP2p, type OpSpec, type P2pKind, type Relayout } from './op-spec.js';

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
  /**
   * Who runs this communicator's collectives: 'auto' or 'thread' (engines that hand ops to the progress thread);
   * absent: the rank ('caller').
   */
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

/** What runs a communicator's ops, given the options every engine shares. */
export type EngineFactory = (counters: OpCounters, commAlgo: unknown, timeoutMs: number) => Engine;

/** How a communicator other than a node's world is made: its rank, size, engine and where its ranks are. */
export interface CommParts {
  rank: number;
  size: number;
  engine: EngineFactory;
  placement: Placement;
  /**
   * WEBCCL_TRACE: the track its ops are drawn on (default: its rank's); a progress thread's node communicator draws on
   * the thread's.
   */
  track?: TraceTrack;
}
