// The engine of a communicator across nodes: the rank's own NetEngine, or — when the job's nodes
// run network progress threads (net-world.ts) — a proxy that posts its collectives to the
// node's thread, with the rank's NetEngine kept for send and recv (and, in the job's 'auto'
// mode, small collectives: net-route.ts).
import { WebcclError } from '../core/errors.js';
import type { Engine } from '../engine/engine.js';
import type { NetPlacement } from '../engine/placement.js';
import { NetEngine, type NetEngineParts } from '../net/engine.js';
import type { NetPostboxConfig } from './net-postbox.js';
import { NetProxyEngine } from './net-proxy-engine.js';

/** What the engine of a communicator across nodes is made of: its own NetEngine's parts, and where it runs. */
export interface NetEngineChoice extends NetEngineParts {
  net: NetPlacement;
  /** The communicator's tag space. */
  space: number;
  /** Its ranks as the job's connections number them. */
  members: readonly number[];
  /**
   * Where the node's network threads meet for the node phase (when this node holds several of its members; see
   * NetPostboxConfig.node).
   */
  threadNode?: NetPostboxConfig['node'];
}

export function netEngineFor(c: NetEngineChoice): Engine {
  const { ctx, net, world, space, members, local, counters, algo, timeoutMs, threadNode } = c;
  const direct = new NetEngine(c);
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
