// The world communicator of a job across nodes, once its rendezvous is done (browser-safe): the
// node's ranks checked against the world's numbering, the job's connections shared by every
// communicator in its own tag space, and the engine that runs ops across nodes. Node ranks
// (launch/join-world.ts) and pages' ranks (page-join.ts) build it the same way.

import { Communicator } from '../api/communicator.js';
import type { CommunicatorOptions } from '../api/options.js';
import type { Met } from '../bootstrap/meet.js';
import type { StoreSession } from '../bootstrap/store-session.js';
import { WebcclError } from '../core/errors.js';
import type { NodeHandle } from '../core/node.js';
import { resolveProgressMode } from '../core/progress-mode.js';
import type { RankContext } from '../engine/context.js';
import { checkMode } from '../engine/input-check.js';
import { netWorld } from '../engine/placement.js';
import { settledWithoutBlocking } from '../engine/work.js';
import { netEngineFor } from '../progress/net-engine-for.js';
import type { NetProgress } from '../progress/net-hub.js';
import type { NetPostboxConfig } from '../progress/net-postbox.js';
import { RANK_RUNS_MAX_BYTES } from '../progress/net-route.js';
import { allocCommBlock } from '../shm/block.js';
import type { Mesh } from '../transport/mesh/mesh.js';
import { TransportSpaces } from '../transport/spaces.js';
import type { Transport } from '../transport/transport.js';
import { checkModel } from '../tuner/cost-model.js';
import { adoptJobModel, modelCosts, netTuningBasis } from '../tuner/net-tuner.js';

/** Connections per pair of ranks across nodes (WEBCCL_NCHANNELS for Node ranks). */
export const DEFAULT_NCHANNELS = 2;
/** Deadline for every rank to reach the rendezvous and connect (WEBCCL_CONNECT_TIMEOUT_MS for Node ranks). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 120_000;

export interface MetWorld {
  transport: Mesh;
  /** Node index of every world rank. */
  nodeOf: number[];
  store: StoreSession;
  /**
   * Every rank offered to run its collectives on a network progress thread (see
   * NetWorldInput.startNetProgress): 'thread' when every rank asked for it for every op, 'auto'
   * when some left the choice to the job (small collectives then stay on the ranks).
   */
  progress?: Met['progress'];
}

/**
 * What this rank offers at the rendezvous for a network progress thread of its own: its progress
 * mode, unless 'caller' or WEBCCL_CHECK (which hashes buffers between an op's own start and end,
 * so the rank must run them); undefined offers none. The platform must also be able to start one.
 */
export function netThreadOffer(progress: unknown): 'auto' | 'thread' | undefined {
  const mode = resolveProgressMode(progress);
  return mode !== 'caller' && !checkMode() ? mode : undefined;
}

export interface NetWorldInput {
  ctx: RankContext;
  /** The communicator of this rank's node alone. */
  local: Communicator;
  node: NodeHandle;
  localRank: number;
  world: { rank: number; size: number };
  met: MetWorld;
  opts: CommunicatorOptions;
  /** Connects `size` ranks of the job anew under store key `prefix` (a shrunk communicator). */
  remesh: (prefix: string, rank: number, size: number) => Promise<Transport>;
  /** Every rank runs on this machine, sharing its cores (the tuner's cost model counts them). */
  oneHost: boolean;
  /**
   * Starts this node's network progress thread (Node, a node of one rank, progress mode not
   * 'caller'): present when the rank offered one at the rendezvous. Used when every rank did.
   */
  startNetProgress?: () => Promise<NetProgress>;
}

export async function netWorldCommunicator(i: NetWorldInput): Promise<Communicator> {
  const { ctx, local, node, localRank, world, met, opts } = i;
  const mates = met.nodeOf.flatMap((n, r) => (n === met.nodeOf[world.rank] ? [r] : []));
  if (mates.length !== node.nranks || mates[localRank] !== world.rank) {
    met.transport.close();
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `rank ${world.rank}: world ranks ${mates.join(', ')} share this node, but the node has ${node.nranks} rank(s) and this is its rank ${localRank} (a launcher must number a node's ranks consecutively)`,
    );
  }
  if (node.nranks > 1) await local.barrier(); // the node's ranks have all joined
  await agreeOnTuning(met.store, world.rank).catch((e: unknown) => {
    met.transport.close();
    throw e;
  });
  // Collectives go to the rank's network progress thread when every rank offered one: each
  // rank's choice must be the job's, since the threads talk over connections of their own.
  const viaThread = met.progress !== false && i.startNetProgress !== undefined;
  // The node's threads meet in a communicator block of their own for the node phase of a
  // hierarchical op (the ranks keep theirs for the ops they run): the node's first rank makes it.
  const threadNode =
    viaThread && node.nranks > 1
      ? await threadNodeBlock(ctx, local, localRank).catch((e: unknown) => {
          met.transport.close();
          throw e;
        })
      : undefined;
  const thread = viaThread
    ? await i.startNetProgress!().catch((e: unknown) => {
        met.transport.close();
        throw e;
      })
    : undefined;
  // Every communicator of the job (the world, its groups) shares these connections, each in its own tag space.
  const spaces = new TransportSpaces(met.transport);
  const net = {
    spaces,
    store: met.store,
    remesh: i.remesh,
    oneHost: i.oneHost,
    viaThread: thread !== undefined,
    rankRunsMax: met.progress === 'auto' ? RANK_RUNS_MAX_BYTES : 0,
    hub: thread?.hub,
  };
  const placement = netWorld(met.nodeOf, net);
  if (thread) placement.release = () => void thread.stop();
  const transport = spaces.open(0, placement.worldRanks, world.rank);
  return new Communicator(
    ctx,
    { algo: opts.algo, timeoutMs: opts.timeoutMs },
    {
      rank: world.rank,
      size: world.size,
      placement,
      engine: (counters, algo, timeoutMs) =>
        netEngineFor({
          ctx,
          net,
          world: {
            rank: world.rank,
            size: world.size,
            transport,
            nodeOf: met.nodeOf,
            store: met.store,
            oneHost: i.oneHost,
          },
          space: 0,
          members: placement.worldRanks,
          local,
          counters,
          algo,
          timeoutMs,
          threadNode,
        }),
    },
  );
}

/**
 * A communicator block for the node's network progress threads (NetPostboxConfig.node): allocated
 * by the node's first rank, its address given to the others over the node's own communicator.
 */
async function threadNodeBlock(
  ctx: RankContext,
  local: Communicator,
  localRank: number,
): Promise<NonNullable<NetPostboxConfig['node']>> {
  const at = new Float64Array([localRank === 0 ? allocCommBlock(ctx, local.size) : 0]);
  // Waited for without blocking: this thread may serve the job's store, which node mates need meanwhile.
  await settledWithoutBlocking(local.broadcast(at, { root: 0 }), 1);
  return { block: at[0], rank: localRank, localOf: Array.from({ length: local.size }, (_, r) => r) };
}

/** Store key of the cost model and cores a job's ranks tune with. */
const JOB_MODEL_KEY = 'tuner_model';

/**
 * The job's ranks agree on one cost model and core count for the network tuner: the first rank
 * to get here sets it in the store and every rank takes what the store holds (adoptJobModel).
 * Without it, ranks on machines of other core counts, or with another WEBCCL_MODEL or tuned
 * model file, could pick different schedules or piece sizes for the same op (MISMATCH).
 */
export async function agreeOnTuning(store: StoreSession, rank: number): Promise<void> {
  const own = netTuningBasis();
  const mine = JSON.stringify({
    model: modelCosts(own.model),
    cores: own.cores,
    from: `rank ${rank}'s ${own.from === 'built-in' ? 'built-in model' : own.from}`,
  });
  // The store's connection no longer keeps the process alive (the rendezvous unref'd it): a
  // ref'd timer does while the answer comes, so that a rank does not end with its init pending.
  const alive = setTimeout(() => undefined, 1 << 30);
  const held = await store.compareSet(JOB_MODEL_KEY, null, mine).finally(() => clearTimeout(alive));
  const agreed = JSON.parse(held === null ? mine : new TextDecoder().decode(held)) as {
    model: unknown;
    cores: unknown;
    from: unknown;
  };
  const cores = agreed.cores;
  if (!(Number.isInteger(cores) && (cores as number) >= 1) || typeof agreed.from !== 'string') {
    throw new WebcclError(
      'INTERNAL',
      `rank ${rank}: the job's cost model in the store is malformed (cores ${String(cores)})`,
    );
  }
  adoptJobModel(
    { model: checkModel(agreed.model, "the job's cost model"), cores: cores as number, from: agreed.from },
    rank,
  );
}
