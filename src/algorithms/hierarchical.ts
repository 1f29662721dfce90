// Hierarchical allreduce for several nodes of several ranks each: reduce-scatter inside the
// node over shared memory, then one inter-node allreduce per local rank over its shard (so the
// node's network links all work at once, each on 1/L of the data), then allgather inside the
// node. The network carries 1/L of what a flat ring over every rank would send per rank.
import type { Group, Mem, Span } from './group.js';

/** The ranks that share this rank's node memory, and their collectives over it. */
export interface NodeLocal {
  readonly rank: number;
  readonly size: number;
  /** out (c elements) = reduction of block `rank` of input (size × c elements) over the node. */
  reduceScatter(out: Span, input: Span): Promise<void>;
  /** out (size × c elements) = every local rank's input (c elements), in local rank order. */
  allGather(out: Span, input: Span): Promise<void>;
}

export type SpanAlgorithm = (g: Group, m: Mem, buf: Span) => Promise<void>;

export async function hierarchicalAllReduce(
  local: NodeLocal,
  inter: Group,
  m: Mem,
  buf: Span,
  across: SpanAlgorithm,
): Promise<void> {
  // A rank alone on its node (one rank per node, or a group with one member here) has no node
  // phase: its shard is the whole buffer.
  if (local.size === 1) return across(inter, m, buf);
  const shard = Math.ceil(buf.count / local.size);
  const padded = shard * local.size;
  // The node's ops need equal shards: a count that does not divide is padded in scratch (the
  // pad's values are reduced too, and dropped).
  const whole: Span = padded === buf.count ? buf : { addr: m.scratch(padded), count: padded };
  if (whole !== buf) m.copy(whole.addr, buf.addr, buf.count);
  const mine: Span = { addr: m.scratch(shard), count: shard };
  await local.reduceScatter(mine, whole);
  await across(inter, m, mine);
  await local.allGather(whole, mine);
  if (whole !== buf) m.copy(buf.addr, whole.addr, buf.count);
}
