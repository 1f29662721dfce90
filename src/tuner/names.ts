// The network allReduce algorithms, by name (in a file of their own so that both tuners and the
// WEBCCL_ALGO parser can use them without importing each other).

// tree (double binary tree, src/algorithms/tree.ts) is chosen only when named: its log n
// latency pays at rank counts beyond what this tuner has measured.
export const NET_ALGORITHMS = ['ring', 'doubling', 'hierarchical', 'tree'] as const;
export type NetAlgo = (typeof NET_ALGORITHMS)[number];

export const isNetAlgo = (a: unknown): a is NetAlgo => (NET_ALGORITHMS as readonly unknown[]).includes(a);
