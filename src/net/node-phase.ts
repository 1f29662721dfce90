// The node phase of a hierarchical op across nodes: this node's ranks meet over shared memory
// through the node communicator, and what that communicator reports is said in world ranks.

import type { Span } from '../algorithms/group.js';
import type { NodeLocal } from '../algorithms/hierarchical.js';
import { ARRAY_OF, type Dtype } from '../core/dtypes.js';
import { WebcclError } from '../core/errors.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import type { TypedArray } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import { loopMovable } from '../engine/loop-ops.js';
import type { NodeMates, NodePhaseOptions } from '../engine/node-mates.js';
import { settledWithoutBlocking, type Work } from '../engine/work.js';
import { WIRE_SIGNATURE } from '../layouts/plan.js';

/**
 * Whether the asking op is the only one of this thread's network ops that can move: ops queued
 * behind it on its own communicator wait for it anyway; the head op of another communicator,
 * or a send or recv, may be what a node mate waits for.
 */
function aloneOnThread(): boolean {
  return loopMovable() <= 1;
}

/**
 * The NodeLocal of a rank with no node mate in its communicator: the hierarchical schedule skips
 * the node phase for it (its shard is its whole buffer), so neither method is ever called.
 */
const ALONE: NodeLocal = {
  rank: 0,
  size: 1,
  reduceScatter: () => Promise.reject(new WebcclError('INTERNAL', 'a node phase for a rank alone on its node')),
  allGather: () => Promise.reject(new WebcclError('INTERNAL', 'a node phase for a rank alone on its node')),
};

/** An op's node phase: where it runs, and what of the op the node's ranks must agree on. */
export interface NodePhaseOf {
  /**
   * The node's ranks of the communicator: undefined where the rank has no node mate in it (a
   * network progress thread keeps none then; a group keeps none for one member).
   */
  local: NodeMates | undefined;
  /** Their world ranks, by local rank. */
  nodeRanks: number[];
  ctx: RankContext;
  dtype: Dtype;
  op: string;
  /** The op's deadline, which holds for its node phase too. */
  timeoutMs: number;
  /** The op's wire layout signature (0: none). */
  layout?: number;
}

/** This node's ranks as the schedule's NodeLocal, under the op's deadline. */
export function nodePhase(n: NodePhaseOf): NodeLocal {
  const { local, nodeRanks, ctx, dtype, op, timeoutMs, layout = 0 } = n;
  if (local === undefined || local.size === 1) return ALONE;
  const memory = ctx.core.memory;
  const arr = (s: Span) => {
    const data = new ARRAY_OF[dtype](freshBuffer(memory), s.addr, s.count);
    return dtype === 'bf16' || dtype === 'f16' ? { data: data as Uint16Array, dtype } : (data as TypedArray);
  };
  const reduceOp = op === 'avg' ? 'sum' : (op as 'sum');
  // The node phase blocks the thread where it may: no message of this op can arrive for this
  // rank meanwhile (the network phase comes after), and a blocking wait wakes in a few µs
  // where an event-loop turn per chunk costs tens. A failing peer still wakes it (abort word).
  // Not while another network op of this thread is in flight (another communicator's, or a
  // send or recv): a node mate may be waiting, in that op's own node phase, for this rank to
  // get there, which takes this thread's event loop; blocking here deadlocked the two until
  // the deadline. Then it polls, yielding to the event loop.
  // (a throw of waitSync becomes a rejection, so that the mapping below sees it)
  const settle = (w: Work) =>
    !ctx.canBlock
      ? w.wait()
      : aloneOnThread()
        ? new Promise<void>((resolve) => resolve(w.waitSync()))
        : settledWithoutBlocking(w, 1);
  const done = (w: Work) =>
    settle(w).catch((e: unknown) => {
      if (!WebcclError.is(e)) throw e;
      if (e.code === 'MISMATCH') throw worldMismatch(e, nodeRanks);
      // A node mate that left: named by its rank in the communicator, not in the node.
      if (e.code === 'CONNECTION_CLOSED' && Number.isInteger(e.details.peer)) {
        const peer = nodeRanks[e.details.peer as number];
        throw new WebcclError(e.code, e.reason.replace(/\brank (\d+) (died|has left)/, `rank ${peer} $2`), {
          ...e.details,
          rank: peer,
          peer,
        });
      }
      throw e;
    });
  return {
    rank: local.rank,
    size: local.size,
    // The op's own deadline holds for its node phase too, and its wire layout joins the node ops'
    // signatures (layouts/plan.ts WIRE_SIGNATURE).
    reduceScatter: (out, input) =>
      done(
        local.reduceScatter(arr(out), arr(input), {
          op: reduceOp,
          timeoutMs,
          [WIRE_SIGNATURE]: layout,
        } as NodePhaseOptions),
      ),
    allGather: (out, input) =>
      done(local.allGather(arr(out), arr(input), { timeoutMs, [WIRE_SIGNATURE]: layout } as NodePhaseOptions)),
  };
}

/**
 * A disagreement the node phase found names local ranks: the same, in world ranks (so that it
 * means the same on every node it is sent to).
 */
export function worldMismatch(e: WebcclError, nodeRanks: number[]): WebcclError {
  const { field, values } = e.details as { field?: string; values?: unknown[] };
  const ranks = ((e.details.ranks as number[] | undefined) ?? []).map((l) => nodeRanks[l] ?? l);
  if (typeof field !== 'string' || ranks.length !== 2 || !Array.isArray(values)) return e;
  return new WebcclError(
    'MISMATCH',
    `ranks disagree on the ${field}: rank ${ranks[0]} has ${String(values[0])}, rank ${ranks[1]} has ${String(values[1])}`,
    { field, ranks, values },
  );
}
