// A rank's place in a job of several nodes: what a launcher hands a worker thread, and what
// rendezvous starts from. Browser-safe.

/**
 * A rank's place in a job across nodes, as a launcher hands it to a thread rank: its world rank
 * and the world size, where world rank 0 serves the rendezvous store, and the job's token and id.
 */
export interface WorldInit {
  /** World rank of this rank, and the world size. */
  rank: number;
  size: number;
  /** Where world rank 0 serves the rendezvous store. */
  masterAddr: string;
  masterPort: number;
  /** The job's token (WEBCCL_TOKEN), the same on every rank. */
  token: string;
  /** The job's id (WEBCCL_JOB_ID), the same on every rank. */
  jobId: string;
  /** World rank 0 only: a socket already listening on masterPort, handed over by the launcher (Node: a descriptor). */
  storeFd?: number;
  /** The store is served by another process (webccl serve): rank 0 joins it as a client. */
  storeServed?: boolean;
}

/** torchrun's default rendezvous port, taken when a launcher gives none. */
export const DEFAULT_MASTER_PORT = 29500;
