// What a communicator is made of, from its rank's context and, across nodes, its world's parts:
// its rank and size, where its ranks are, the engine that runs its ops (shared memory when every
// rank is on this node, the network algorithms when they span nodes), and the hand-off to it.

import { rankTrack, TRACING } from '../core/trace.js';
import type { RankContext } from '../engine/context.js';
import type { CommParts, Engine } from '../engine/engine.js';
import { nodeWorld, type Placement, spansNodes } from '../engine/placement.js';
import { nodeEngine } from '../progress/node-engine.js';
import { CommBuffers } from './call-buffers.js';
import type { CommTally } from './comm-tally.js';
import { OpIssue } from './op-issue.js';
import { type CommunicatorOptions, envTimeoutMs } from './options.js';

export const DEFAULT_TIMEOUT_MS = 300_000;

/** The ops' deadline of a communicator made with `opts`: its timeoutMs, else WEBCCL_TIMEOUT_MS, else the default. */
export function commTimeoutMs(opts: CommunicatorOptions): number {
  return opts.timeoutMs ?? envTimeoutMs() ?? DEFAULT_TIMEOUT_MS;
}

export interface CommWiring {
  rank: number;
  size: number;
  placement: Placement;
  acrossNodes: boolean;
  engine: Engine;
  /** The buffers its calls pass, checked and described (api/call-buffers.ts). */
  bufs: CommBuffers;
  /** Hands each checked call to the engine (op-issue.ts). */
  issue: OpIssue;
}

/**
 * A communicator over the ranks of `ctx`'s node; with `world`, over the ranks of several nodes
 * (rank and size are then the world's, and `ctx` is this rank's node). Its engine counts into `tally`.
 */
export function wireComm(
  ctx: RankContext,
  opts: CommunicatorOptions,
  world: CommParts | undefined,
  tally: CommTally,
): CommWiring {
  const rank = world?.rank ?? ctx.rank;
  const size = world?.size ?? ctx.size;
  const placement = world?.placement ?? nodeWorld(ctx.size);
  const bufs = new CommBuffers(ctx, rank, size);
  const acrossNodes = spansNodes(placement);
  const timeoutMs = commTimeoutMs(opts);
  const engine = world
    ? world.engine(tally.counters, opts.algo, timeoutMs)
    : nodeEngine(ctx, tally.counters, { algo: opts.algo, timeoutMs, progress: opts.progress });
  // WEBCCL_TRACE: this rank's track (by world rank), where its ops are drawn.
  const track = TRACING
    ? (world?.track ??
      rankTrack(ctx.worldRank ?? placement.worldRanks[rank], placement.group ? placement.id : undefined))
    : undefined;
  const issue = new OpIssue({
    ctx,
    engine,
    rank,
    size,
    acrossNodes,
    placement,
    counters: tally.counters,
    conversions: tally.conversions,
    track,
  });
  return { rank, size, placement, acrossNodes, engine, bufs, issue };
}
