// The engine of a communicator across nodes: the rank's own NetEngine, or — when the job's nodes
// run network progress threads (net-world.ts) — a proxy that posts its collectives to the
// node's thread, with the rank's NetEngine kept for send and recv (and, in the job's 'auto'
// mode, small collectives: net-route.ts).
import { NetProxyEngine } from '../progress/net-proxy-engine.js';
import type { Communicator } from './communicator.js';
import type { RankContext } from './context.js';
import type { Engine, OpCounters } from './engine.js';
import { NetEngine, type NetWorld } from './net-engine.js';
import type { NetPlacement } from './placement.js';

/** `space` and `members`: the communicator's tag space and its ranks as the job's connections number them. */
export function netEngineFor(ctx: RankContext, net: NetPlacement, world: NetWorld, space: number, members: readonly number[], local: Communicator | undefined,
                             counters: OpCounters, algo: unknown, timeoutMs: number): Engine {
  const direct = new NetEngine(ctx, world, local, counters, algo, timeoutMs);
  if (!net.viaThread) return direct;
  return new NetProxyEngine(ctx, { space, members: [...members], rank: world.rank, commAlgo: algo, timeoutMs }, direct, counters, net.rankRunsMax ?? 0);
}
