// Picks the allReduce schedule of a communicator whose ranks span nodes, from the message size
// and the topology, unless the call, the communicator or WEBCCL_ALGO says otherwise. Names of
// the shared-memory algorithms in WEBCCL_ALGO are left to the node phase (see tuner.ts).
import { envString } from '../core/config.js';
import { fail } from '../core/errors.js';

// tree (double binary tree, src/algorithms/tree.ts) is chosen only when named: its log n
// latency pays at rank counts beyond what this tuner has measured.
export const NET_ALGORITHMS = ['ring', 'doubling', 'hierarchical', 'tree'] as const;
export type NetAlgo = (typeof NET_ALGORITHMS)[number];

export const isNetAlgo = (a: unknown): a is NetAlgo => (NET_ALGORITHMS as readonly unknown[]).includes(a);

/**
 * Largest allReduce (bytes) that runs recursive doubling rather than the ring, by group size:
 * doubling takes log2(n) exchanges of the whole buffer, the ring 2(n-1) of 1/n of it in
 * pipelined pieces, and on loopback each message costs a system call of ~50 µs. Measured on
 * comm.alloc() buffers, processes over TCP loopback, one sitting (README, algorithm table):
 * 2 ranks, doubling against ring: 1 MiB 611 against 1405 µs, 2 MiB 1125 against 1143 µs;
 * 4 ranks: 256 KiB 1659 against 2874 µs, 1 MiB 5222 against 4688 µs.
 */
export function doublingMaxBytes(size: number): number {
  return size <= 2 ? 1024 * 1024 : 256 * 1024;
}

export interface NetTopology {
  nodes: number;
  /** Ranks on every node when all nodes have the same count, else 0. */
  perNode: number;
}

export function parseNetAlgo(a: unknown, from: string): NetAlgo {
  if (isNetAlgo(a)) return a;
  return fail('INVALID_ARGUMENT', `${from}: unknown algorithm ${JSON.stringify(a)} for a communicator across nodes (expected ${NET_ALGORITHMS.join(', ')})`);
}

/** The communicator's standing choice: its option, else WEBCCL_ALGO when that names a network algorithm. */
export function resolveNetAlgo(commAlgo: unknown, topo: NetTopology): NetAlgo | undefined {
  const env = envString('WEBCCL_ALGO');
  const algo = commAlgo !== undefined ? parseNetAlgo(commAlgo, 'communicator algo option') : isNetAlgo(env) ? env : undefined;
  if (algo === 'hierarchical' && topo.perNode === 0) {
    fail('INVALID_ARGUMENT', 'hierarchical allReduce needs the same number of ranks on every node');
  }
  return algo;
}

export function chooseNetAllReduce(bytes: number, size: number, topo: NetTopology, standing: NetAlgo | undefined, callAlgo?: unknown): NetAlgo {
  if (callAlgo !== undefined) {
    const a = parseNetAlgo(callAlgo, 'algo option');
    if (a === 'hierarchical' && topo.perNode === 0) fail('INVALID_ARGUMENT', 'hierarchical allReduce needs the same number of ranks on every node');
    return a;
  }
  if (standing) return standing;
  if (topo.nodes > 1 && topo.perNode > 1) return 'hierarchical';
  return flatAlgo(bytes, size);
}

/** The flat schedule for `bytes` over a network group of `size` ranks. */
export const flatAlgo = (bytes: number, size: number): 'ring' | 'doubling' => (bytes <= doublingMaxBytes(size) ? 'doubling' : 'ring');
