// What a network engine needs of its node mates for the node phase of a hierarchical op: the
// node-local collectives over shared memory, and an abort that fails what they have pending.
// A Communicator over the node's ranks is one; the engine needs nothing else of it.
import type { ReduceOp } from '../core/dtypes.js';
import type { BufferArg } from './buffers.js';
import type { Work } from './work.js';

/** The options a node phase passes its collectives (and a key the layouts add: layouts/plan.ts WIRE_SIGNATURE). */
export interface NodePhaseOptions {
  op?: ReduceOp;
  timeoutMs?: number;
}

export interface NodeMates {
  readonly rank: number;
  readonly size: number;
  reduceScatter(out: BufferArg, input: BufferArg, opts?: NodePhaseOptions): Work;
  allGather(out: BufferArg, input: BufferArg, opts?: NodePhaseOptions): Work;
  /** Fails every pending op of the node mates, here and on each of them. */
  abort(reason: string): void;
}
