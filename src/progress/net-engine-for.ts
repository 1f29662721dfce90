// The engine of a communicator across nodes: the rank's own NetEngine, or — when the job's nodes
// run network progress threads (net-world.ts) — a proxy that posts its collectives to the
// node's thread, with the rank's NetEngine kept for send and recv (and, in the job's 'auto'
// mode, small collectives: net-route.ts).
import { WebcclError } from '../core/errors.js';
import type { RankContext } from '../engine/context.js';
import type { Engine, OpCounters } from '../engine/engine.js';
import type { NetWorld } from '../engine/job.js';
import type { NodeMates } from '../engine/node-mates.js';
import type { NetPlacement } from '../engine/placement.js';
import { NetEngine } from '../net/engine.js';
import type { NetPostboxConfig } from './net-postbox.js';
import { NetProxyEngine } from './net-proxy-engine.js';

/**
 * `space` and `members`: the communicator's tag space and its ranks as the job's connections
 * number them. `threadNode`: where the node's network threads meet for the node phase (when
 * this node holds several of its members; see NetPostboxConfig.node).
 */
export function netEngineFor(
  ctx: RankContext,
  net: NetPlacement,
  world: NetWorld,
  space: number,
  members: readonly number[],
  local: NodeMates | undefined,
  counters: OpCounters,
  algo: unknown,
  timeoutMs: number,
  threadNode?: NetPostboxConfig['node'],
): Engine {
  const direct = new NetEngine(ctx, world, local, counters, algo, timeoutMs);
  if (!net.viaThread || net.hub === undefined) return direct;
  if (local && local.size > 1 && !threadNode)
    throw new WebcclError('INTERNAL', 'a communicator with node mates, without a block for their network threads');
  const config = {
    space,
    members: [...members],
    rank: world.rank,
    nodeOf: [...world.nodeOf],
    ...(threadNode && { node: threadNode }),
    commAlgo: algo,
    timeoutMs,
  };
  return new NetProxyEngine(ctx, config, direct, counters, net.hub, net.rankRunsMax ?? 0);
}
