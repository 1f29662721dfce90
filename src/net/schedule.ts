// What a communicator across nodes decides for each op before it runs, from the shape of the
// job alone: its topology (the ranks of each node, the group of ranks at this rank's place on
// every node), the schedule an op runs, the ring's piece size and how many connections per
// pair it spreads over. Every rank decides alone, so each decision reads only what every rank
// sees alike (ranks that decide differently fail with MISMATCH).
import { DTYPE_SIZE } from '../core/dtypes.js';
import type { OpSpec } from '../engine/engine.js';
import {
  chooseNetAllReduce,
  flatAlgo,
  type NetAlgo,
  type NetTopology,
  netTuningBasis,
  resolveNetAlgo,
  ringPiece,
  ringWays,
  type TuningBasis,
} from '../tuner/net-tuner.js';
import { forcedPieceBytes } from '../tuner/ring-pieces.js';

/** The ranks of each node, in world-rank order; nodes in order of their first rank. */
function nodesOf(nodeOf: readonly number[]): number[][] {
  const byNode = new Map<number, number[]>();
  nodeOf.forEach((n, r) => (byNode.get(n) ?? byNode.set(n, []).get(n)!).push(r));
  return [...byNode.values()];
}

/** The schedules an op across nodes runs. */
export type NetOpAlgo = NetAlgo | 'chain' | 'dissemination' | 'pairwise' | 'direct';

/** `world`: this rank, the node of every rank, whether they all share one machine, connections per pair. */
export interface ScheduleWorld {
  rank: number;
  size: number;
  nodeOf: readonly number[];
  oneHost?: boolean;
  channels?: number;
}

export class NetSchedule {
  readonly topo: NetTopology;
  /** Every world rank, and those at this rank's place on every node (its hierarchical group). */
  readonly worldRanks: number[];
  readonly interRanks: number[];
  /** The world ranks of this node, by local rank. */
  readonly nodeRanks: number[];
  /** The communicator's algorithm option, resolved. */
  private readonly standing: NetAlgo | undefined;
  /** WEBCCL_PIECE_BYTES, read once: the ring allReduce's piece size when forced. */
  private readonly forcedPiece: number | undefined;

  constructor(
    private readonly world: ScheduleWorld,
    commAlgo: unknown,
  ) {
    const nodes = nodesOf(world.nodeOf);
    const perNode = nodes.every((n) => n.length === nodes[0].length) ? nodes[0].length : 0;
    this.nodeRanks = nodes.find((n) => n.includes(world.rank))!;
    // What the tuner decides from must be the same on every rank: with nodes of unequal counts
    // (a group, a shrunk communicator), the most ranks any machine holds, not this rank's node's count.
    this.topo = {
      nodes: nodes.length,
      perNode,
      sharing: world.oneHost ? world.size : Math.max(...nodes.map((n) => n.length)),
      channels: world.channels ?? 1,
    };
    const at = this.nodeRanks.indexOf(world.rank);
    this.interRanks = perNode ? nodes.map((n) => n[at]) : [world.rank];
    this.worldRanks = world.nodeOf.map((_, r) => r);
    this.standing = resolveNetAlgo(commAlgo, this.topo);
    this.forcedPiece = forcedPieceBytes();
  }

  /**
   * The model's choices by message size, each made once: an op's choices cost more than its
   * own JavaScript (13 µs an op on a network progress thread whose caches its sends keep cold),
   * and a program sends a few sizes over and over. Each holds at most MEMO_SIZES sizes.
   */
  private readonly flatAlgos = new Map<number, NetAlgo>();
  private readonly pieces = new Map<number, number>();
  private readonly ways = new Map<string, number | undefined>();
  /** The model they were made with: another (a job's agreed model, a test's) starts them afresh. */
  private basis: TuningBasis | undefined;

  /** The memos, emptied if the model in force changed since they were filled. */
  private memos(): this {
    const b = netTuningBasis();
    if (b !== this.basis) {
      this.basis = b;
      this.flatAlgos.clear();
      this.pieces.clear();
      this.ways.clear();
    }
    return this;
  }

  /** The schedule a collective runs (a call's algorithm option that does not suit is refused here). */
  algorithmOf(spec: OpSpec): NetOpAlgo {
    return spec.name === 'allReduce'
      ? spec.algo === undefined
        ? memo(this.memos().flatAlgos, spec.count * DTYPE_SIZE[spec.dtype], (bytes) =>
            chooseNetAllReduce(bytes, this.world.size, this.topo, this.standing),
          )
        : chooseNetAllReduce(spec.count * DTYPE_SIZE[spec.dtype], this.world.size, this.topo, this.standing, spec.algo)
      : spec.name === 'barrier'
        ? 'dissemination'
        : spec.name === 'broadcast' || spec.name === 'reduce'
          ? 'chain'
          : spec.name === 'allToAll'
            ? 'pairwise'
            : spec.name === 'gather' || spec.name === 'scatter'
              ? 'direct'
              : 'ring';
  }

  /** The ring allReduce's piece size for `bytes` over `size` ranks. */
  piece(bytes: number, size = this.world.size): number {
    if (size !== this.world.size) return ringPiece(bytes, size, this.topo.sharing, this.forcedPiece);
    return memo(this.memos().pieces, bytes, () => ringPiece(bytes, size, this.topo.sharing, this.forcedPiece));
  }

  /**
   * The connections per pair an allReduce's ring spreads over (the model's choice, channels.ts):
   * the flat ring's, or the ring across nodes of a hierarchical op (on each node's shard).
   * Undefined for the schedules that send one message per peer and step (they use them all).
   */
  ringWaysOf(algo: string, bytes: number, piece: number): number | undefined {
    if ((this.topo.channels ?? 1) <= 1) return undefined;
    return memo(this.memos().ways, `${algo}/${bytes}/${piece}`, () => this.ringWaysOfNew(algo, bytes, piece));
  }

  private ringWaysOfNew(algo: string, bytes: number, piece: number): number | undefined {
    const { channels = 1, sharing = this.world.size, nodes, perNode } = this.topo;
    if (algo === 'ring') return ringWays(bytes, this.world.size, sharing, piece, channels);
    if (algo !== 'hierarchical') return undefined;
    const shard = bytes / perNode;
    if (flatAlgo(shard, nodes, sharing, channels) !== 'ring') return undefined;
    return ringWays(shard, nodes, sharing, this.piece(shard, nodes), channels);
  }
}

/** Sizes a memo of NetSchedule keeps (a program of more sizes starts it afresh). */
const MEMO_SIZES = 256;

/** `of(key)`, made once per key while `m` holds fewer than MEMO_SIZES keys. */
function memo<K, V>(m: Map<K, V>, key: K, of: (key: K) => V): V {
  if (m.has(key)) return m.get(key) as V;
  const v = of(key);
  if (m.size >= MEMO_SIZES) m.clear();
  m.set(key, v);
  return v;
}
