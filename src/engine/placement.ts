// Where a communicator's ranks are: the world rank, node and node rank of each, and, across
// nodes, the tag space its messages use on the job's connections. Groups are formed from it.
import { WebcclError } from '../core/errors.js';
import type { JobStore } from '../engine/job.js';
import type { TransportSpaces } from '../transport/spaces.js';
import type { Transport } from '../transport/transport.js';

export interface Placement {
  /** World rank of each rank of the communicator. */
  worldRanks: readonly number[];
  /** Node index of each rank: ranks with the same index share memory. */
  nodeOf: readonly number[];
  /** Node rank of each rank (its index among its node's ranks). */
  localOf: readonly number[];
  /** Tag space on the job's connections (0: the world). */
  space: number;
  /** A group (created from another communicator) rather than the world. */
  group: boolean;
  /** Names the communicator uniquely in the job (its store keys use it): 'w' for the world. */
  id: string;
  /** Across nodes: the job's connections, and its rendezvous store. */
  net?: NetPlacement;
  /**
   * Across nodes: each rank's number on the connections of `net`. Its world rank, except in a
   * communicator shrunk across nodes (and its groups): the survivors connect anew and are
   * numbered 0..m−1 there, while their world ranks still name them in messages.
   */
  netRanks?: readonly number[];
  /** Called once when the communicator is destroyed: frees what it holds in the node memory. */
  release?: () => void;
}

export interface NetPlacement {
  spaces: TransportSpaces;
  store?: JobStore;
  /** Connects `size` ranks of the job anew (this one is `rank`), meeting under store key `prefix`. */
  remesh?: (prefix: string, rank: number, size: number) => Promise<Transport>;
  /** Every rank of the job runs on this machine (a loopback rendezvous): the tuner counts them as sharing its cores. */
  oneHost?: boolean;
  /**
   * The job's nodes run network progress threads (one rank per node, every rank agreed): the
   * collectives on these connections' tag spaces run there, on the threads' own connections.
   */
  viaThread?: boolean;
  /**
   * With viaThread: the largest collective a rank runs itself all the same (the job's 'auto' mode, net-route.ts); 0 or
   * absent: none.
   */
  rankRunsMax?: number;
  /** With viaThread: the state block of this rank's network progress thread (net-hub.ts). */
  hub?: number;
}

const iota = (n: number) => Array.from({ length: n }, (_, i) => i);

/** The world of one node: every rank shares its memory. */
export function nodeWorld(size: number): Placement {
  return {
    worldRanks: iota(size),
    nodeOf: new Array<number>(size).fill(0),
    localOf: iota(size),
    space: 0,
    group: false,
    id: 'w',
  };
}

/** The world of a job across nodes (`nodeOf` from rendezvous; a node's ranks are numbered in world order). */
export function netWorld(nodeOf: readonly number[], net: NetPlacement): Placement {
  const seen = new Map<number, number>();
  const localOf = nodeOf.map((n) => {
    const i = seen.get(n) ?? 0;
    seen.set(n, i + 1);
    return i;
  });
  return {
    worldRanks: iota(nodeOf.length),
    nodeOf,
    localOf,
    space: 0,
    group: false,
    id: 'w',
    net,
    netRanks: iota(nodeOf.length),
  };
}

/** Whether the communicator's ranks are on several nodes. */
export const spansNodes = (p: Placement): boolean => p.nodeOf.some((n) => n !== p.nodeOf[0]);

/** How messages of a group name it: its members' world ranks (the first 16). */
export function groupText(p: Placement, rank: number): string {
  const w = p.worldRanks;
  const list = w.length > 16 ? `${w.slice(0, 16).join(', ')}, ... (${w.length} ranks)` : w.join(', ');
  return `group of world ranks ${list}; rank ${rank} here is world rank ${w[rank]}`;
}

/** The error an op of a group fails with: the same, saying which group, and its ranks in world ranks. */
export function inGroup(e: WebcclError, p: Placement, rank: number): WebcclError {
  return new WebcclError(e.code, `${e.reason} (in the ${groupText(p, rank)})`, {
    ...e.details,
    worldRanks: [...p.worldRanks],
    worldRank: p.worldRanks[rank],
  });
}
