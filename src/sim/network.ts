// The simulated network: nodes × ranks per node, one link between every two ranks of a node
// (shared memory or loopback: each pair its own), and one network interface per node whose
// outgoing and incoming directions each carry one message at a time. A message of b bytes
// takes b/β on each link it crosses, waits while a link is busy with earlier messages, and
// arrives α after it has crossed (α times 1 + jitter·u, u uniform in [0, 1) from the seed).
//
// A message between nodes is reserved in two halves: its sender's interface when it is sent
// (`leave`), the receiver's when every message that could reach that interface earlier is known
// (`enter`, at the end of a window of virtual time, in the order the messages left). That is
// what lets a simulation run split over threads, each owning some nodes' interfaces, and give
// the same result as one thread.
import { fail } from '../core/errors.js';
import { messageRandom } from './prng.js';

export interface LinkSpec {
  /** α, microseconds. */
  latencyUs: number;
  /** β, bytes per microsecond (= MB/s). */
  bytesPerUs: number;
}

export interface Topology {
  ranks: number;
  /** Nodes the ranks are spread over in order (ranks / nodes each; must divide). */
  nodes: number;
  /** Between nodes. */
  inter: LinkSpec;
  /** Inside a node. */
  intra: LinkSpec;
  /**
   * Software cost of one message at its sender, microseconds (LogP's o; default 0): a rank's
   * messages leave one after another, each this long after the one before (system calls, copies).
   */
  overheadUs?: number;
}

/** What goes wrong, and when (virtual microseconds from the op's start). */
export type Fault =
  /** The rank freezes: it sends and receives nothing more; the others meet their deadline. */
  | { kind: 'stop'; rank: number; atUs: number }
  /** The rank dies: its connections close, and every rank still in the op hears so. */
  | { kind: 'crash'; rank: number; atUs: number }
  /** The connection between two ranks closes; both ends fail, and tell the others. */
  | { kind: 'drop'; ranks: [number, number]; atUs: number }
  /** Messages between two ranks take `factor` times as long (both α and b/β). */
  | { kind: 'slow'; ranks: [number, number]; factor: number };

const finite = (x: unknown, min: number): x is number => typeof x === 'number' && Number.isFinite(x) && x >= min;

export function checkTopology(t: Topology): void {
  if (!Number.isSafeInteger(t.ranks) || t.ranks < 1)
    fail('INVALID_ARGUMENT', `simulate: ranks must be a positive integer, got ${t.ranks}`);
  if (!Number.isSafeInteger(t.nodes) || t.nodes < 1 || t.ranks % t.nodes) {
    fail('INVALID_ARGUMENT', `simulate: nodes must be a positive integer dividing ranks (${t.ranks}), got ${t.nodes}`);
  }
  if (t.overheadUs !== undefined && !finite(t.overheadUs, 0))
    fail('INVALID_ARGUMENT', `simulate: overhead must be a finite number ≥ 0 µs, got ${t.overheadUs}`);
  for (const [name, l] of [
    ['inter', t.inter],
    ['intra', t.intra],
  ] as const) {
    if (!l || !finite(l.latencyUs, 0))
      fail('INVALID_ARGUMENT', `simulate: ${name} latency must be a finite number ≥ 0 µs`, { link: name });
    if (!finite(l.bytesPerUs, 0) || l.bytesPerUs <= 0)
      fail('INVALID_ARGUMENT', `simulate: ${name} bandwidth must be a finite number > 0`, { link: name });
  }
}

/** A fault names ranks of the world, times ≥ 0 and a finite factor > 0. */
export function checkFault(f: Fault, ranks: number): void {
  const rank = (x: unknown) => Number.isInteger(x) && (x as number) >= 0 && (x as number) < ranks;
  const ok =
    f.kind === 'stop' || f.kind === 'crash'
      ? rank(f.rank) && f.atUs >= 0
      : f.kind === 'drop'
        ? rank(f.ranks[0]) && rank(f.ranks[1]) && f.ranks[0] !== f.ranks[1] && f.atUs >= 0
        : f.kind === 'slow'
          ? rank(f.ranks[0]) && rank(f.ranks[1]) && f.factor > 0 && Number.isFinite(f.factor)
          : false;
  if (!ok) fail('INVALID_ARGUMENT', `simulate: bad fault ${JSON.stringify(f)}`, { fault: f });
}

/** Intra-node links kept in an array up to this many (32 MiB of times). */
const MAX_LINK_ARRAY = 1 << 22;

export class Network {
  readonly perNode: number;
  private readonly nicOut: Float64Array;
  private readonly nicIn: Float64Array;
  /**
   * When each link inside a node is next free, at src * perNode + (dst's place in the node): an
   * array of n · perNode times (a Map boxes every time it stores); for nodes too large for one
   * (65,536 ranks in a node would need 32 GiB), a Map of the links used.
   */
  private readonly pairFree: Float64Array | Map<number, number>;
  private readonly slow = new Map<number, number>();
  private readonly seed: number;
  /** When each rank has finished handing its last message over (with overheadUs). */
  private readonly senderFree: Float64Array;
  private readonly overhead: number;

  constructor(
    readonly topo: Topology,
    private readonly jitter: number,
    seed: number,
    faults: readonly Fault[],
  ) {
    this.perNode = topo.ranks / topo.nodes;
    const links = topo.ranks * this.perNode;
    this.pairFree = links <= MAX_LINK_ARRAY ? new Float64Array(links) : new Map();
    this.nicOut = new Float64Array(topo.nodes);
    this.nicIn = new Float64Array(topo.nodes);
    this.seed = seed;
    this.overhead = topo.overheadUs ?? 0;
    this.senderFree = new Float64Array(this.overhead ? topo.ranks : 0);
    for (const f of faults) {
      if (f.kind !== 'slow') continue;
      const [a, b] = f.ranks;
      this.slow.set(a * topo.ranks + b, f.factor);
      this.slow.set(b * topo.ranks + a, f.factor);
    }
  }

  nodeOf(rank: number): number {
    return Math.floor(rank / this.perNode);
  }

  /** α from `src` to `dst` before jitter and slowness. */
  latency(src: number, dst: number): number {
    return (this.nodeOf(src) === this.nodeOf(dst) ? this.topo.intra : this.topo.inter).latencyUs;
  }

  /**
   * The least time any message between nodes takes from leaving its sender's interface to
   * arriving (α, or less over a link slowed by a factor below 1): how far a window of virtual
   * time may reach before a message sent in it could arrive in it.
   */
  lookahead(): number {
    let factor = 1;
    for (const f of this.slow.values()) factor = Math.min(factor, f);
    return this.topo.inter.latencyUs * factor;
  }

  /** When the message's sender hands it over, it starting at `sentAt` (after LogP's o, one message at a time). */
  private handOver(sentAt: number, src: number): number {
    if (!this.overhead) return sentAt;
    const now = Math.max(sentAt, this.senderFree[src]) + this.overhead;
    this.senderFree[src] = now;
    return now;
  }

  private factor(src: number, dst: number): number {
    return this.slow.size ? (this.slow.get(src * this.topo.ranks + dst) ?? 1) : 1;
  }

  /** α of message `seq` of `src` over `link`, jitter and slowness applied. */
  private alpha(link: LinkSpec, factor: number, src: number, seq: number): number {
    return link.latencyUs * factor * (this.jitter ? 1 + this.jitter * messageRandom(this.seed, src, seq) : 1);
  }

  /** A message inside a node (message `seq` of `src`): reserves its link, returns when it arrives. */
  inside(sentAt: number, src: number, dst: number, bytes: number, seq: number): number {
    const now = this.handOver(sentAt, src);
    const factor = this.factor(src, dst);
    const link = this.topo.intra;
    const wire = (bytes / link.bytesPerUs) * factor;
    const key = src * this.perNode + (dst % this.perNode);
    const free = this.pairFree;
    const start = Math.max(now, free instanceof Float64Array ? free[key] : (free.get(key) ?? 0));
    if (free instanceof Float64Array) free[key] = start + wire;
    else free.set(key, start + wire);
    return start + wire + this.alpha(link, factor, src, seq);
  }

  /** A message between nodes leaves: reserves its sender's interface and fills `c`'s out, wire and alpha. */
  leave(sentAt: number, c: Crossing): void {
    const now = this.handOver(sentAt, c.src);
    const factor = this.factor(c.src, c.dst);
    const link = this.topo.inter;
    const from = this.nodeOf(c.src);
    c.wire = (c.bytes / link.bytesPerUs) * factor;
    c.alpha = this.alpha(link, factor, c.src, c.seq);
    // Cut-through: the bytes cross the sender's interface and the receiver's at once, each
    // starting once it is free.
    c.out = Math.max(now, this.nicOut[from]);
    this.nicOut[from] = c.out + c.wire;
  }

  /** It enters the receiver's interface (in the order messages left): returns when it arrives. */
  enter(c: Crossing): number {
    const to = this.nodeOf(c.dst);
    const inn = Math.max(c.out, this.nicIn[to]);
    this.nicIn[to] = inn + c.wire;
    return inn + c.wire + c.alpha;
  }
}

/** A message between nodes, from its sender's interface to its receiver's. */
export interface Crossing {
  src: number;
  dst: number;
  bytes: number;
  /** The message's number among its sender's messages. */
  seq: number;
  sentAt: number;
  /** When it starts across the sender's interface, how long it takes across, its α. */
  out: number;
  wire: number;
  alpha: number;
  /** Its mailbox key at the receiver, and its bytes (data mode). */
  key: number;
  payload: Uint8Array | null;
}

export function crossing(src: number, dst: number, bytes: number, seq: number): Crossing {
  return { src, dst, bytes, seq, sentAt: 0, out: 0, wire: 0, alpha: 0, key: 0, payload: null };
}

/** The order messages enter receivers' interfaces: as they left, ties by sender and its order. */
export function leftBefore(a: Crossing, b: Crossing): number {
  return a.out - b.out || a.src - b.src || a.seq - b.seq;
}
