// webccl: collective communication for JavaScript ranks (worker threads, processes, browser
// workers). Two faces over one implementation: the Communicator class, and module-level
// functions on the default world group for scripts.
import { unknownEnvNames } from './core/config.js';
import { WebcclError, fail } from './core/errors.js';
import { type NodeHandle, createNode } from './core/node.js';
import { Communicator, type CollectiveOptions, type CommunicatorOptions } from './comm/communicator.js';
import { type JoinOptions, joinNode } from './comm/context.js';
import type { BufferArg } from './comm/buffers.js';
import type { Work } from './comm/work.js';
import type { WorldInit } from './bootstrap/world.js';
import type { TlsFiles } from './core/config.js';

export { Communicator, type CollectiveOptions, type CommunicatorOptions } from './comm/communicator.js';
export { Work, type WorkTiming } from './comm/work.js';
export { WebcclError, type ErrorCode } from './core/errors.js';
export { createNode, abortNode, type NodeHandle, type NodeOptions } from './core/node.js';
export { joinNode, type JoinOptions } from './comm/context.js';
export { Sum, Prod, Max, Min, Avg, DTYPES, REDUCE_OPS, type Dtype, type ReduceOp } from './core/dtypes.js';
export { ENV_VARS } from './core/config.js';
export type { BufferArg, TensorLike, TypedArray } from './comm/buffers.js';

/** Where a launcher leaves a rank's identity before the rank's script starts. */
export const RANK_INIT = Symbol.for('webccl.rankInit');
export interface RankInit {
  node: NodeHandle;
  /** This thread's rank within its node (the ranks sharing `node`'s memory). */
  rank: number;
  cores?: number;
  simd?: boolean;
  /** Set when the job spans several nodes (processes or machines). */
  world?: WorldInit;
}

export type { WorldInit } from './bootstrap/world.js';

let world: Communicator | undefined;

export interface InitOptions extends CommunicatorOptions, JoinOptions {
  /** Join this node as `rank` instead of the identity a launcher left. */
  node?: NodeHandle;
  rank?: number;
  /** A job across nodes: encrypt its connections with TLS, keyed by the job token (true) or by
   *  these certificate files (mutual TLS); overrides WEBCCL_TLS and WEBCCL_TLS_CERT/KEY/CA. */
  tls?: boolean | TlsFiles;
}

/** Joins a job across nodes; the Node entry leaves it here (a page has no sockets). */
export const JOIN_WORLD = Symbol.for('webccl.joinWorld');
type WorldJoiner = (i: { node?: NodeHandle; localRank?: number; world?: WorldInit; opts: InitOptions }) => Promise<Communicator | undefined>;

/**
 * Joins the default world group and waits until every rank has joined. The identity comes from
 * the options, else from the launcher (worker data, or the environment torchrun, mpirun, srun
 * or `webccl run --procs` leave); a plain `node script.mjs` is a world of one rank.
 */
export async function initCommGroup(opts: InitOptions = {}): Promise<Communicator> {
  if (world) return world;
  const init = opts.node ? { node: opts.node, rank: opts.rank ?? 0 } : (globalThis as Record<symbol, RankInit | undefined>)[RANK_INIT];
  const joiner = (globalThis as Record<symbol, WorldJoiner | undefined>)[JOIN_WORLD];
  if ((init?.world || !init) && joiner) {
    const c = await joiner({ node: init?.node, localRank: init?.rank, world: init?.world, opts: { cores: init?.cores, simd: init?.simd, ...opts } });
    if (c) {
      if (c.rank === 0) unknownEnvNames();
      await c.barrier();
      return (world = c);
    }
  } else if (init?.world) {
    fail('UNSUPPORTED', 'this rank belongs to a job across nodes, which needs the Node.js build of webccl (sockets)');
  }
  const { node, rank } = init ?? { node: createNode({ nranks: 1 }), rank: 0 };
  if (rank === 0) unknownEnvNames(); // once per job, not once per rank
  const ctx = joinNode(node, rank, { cores: opts.cores ?? init?.cores, simd: opts.simd ?? init?.simd });
  const comm = new Communicator(ctx, opts);
  await comm.barrier();
  world = comm;
  return comm;
}

function requireWorld(what: string): Communicator {
  return world ?? fail('NOT_INITIALIZED', `${what}: call await initCommGroup() first`);
}

export const getCommunicator = (): Communicator => requireWorld('getCommunicator');
export const getRank = (): number => requireWorld('getRank').rank;
export const getWorldSize = (): number => requireWorld('getWorldSize').size;

/** Runs a collective; every error, argument checks included, arrives as a rejection. */
function promised(issue: () => Work): Promise<void> {
  try {
    return issue().wait();
  } catch (e) {
    return Promise.reject(e);
  }
}

export const allReduce = (x: BufferArg, o?: CollectiveOptions): Promise<void> => promised(() => requireWorld('allReduce').allReduce(x, o));
export const allReduceAsync = (x: BufferArg, o?: CollectiveOptions): Work => requireWorld('allReduceAsync').allReduce(x, o);
export const allGather = (out: BufferArg, input: BufferArg, o?: CollectiveOptions): Promise<void> => promised(() => requireWorld('allGather').allGather(out, input, o));
export const reduceScatter = (out: BufferArg, input: BufferArg, o?: CollectiveOptions): Promise<void> => promised(() => requireWorld('reduceScatter').reduceScatter(out, input, o));
export const broadcast = (x: BufferArg, o?: CollectiveOptions): Promise<void> => promised(() => requireWorld('broadcast').broadcast(x, o));
export const reduce = (x: BufferArg, o?: CollectiveOptions): Promise<void> => promised(() => requireWorld('reduce').reduce(x, o));
export const barrier = (): Promise<void> => promised(() => requireWorld('barrier').barrier());

/** Completes a handle from an *Async call. */
export function wait(handle: Work): Promise<void> {
  if (!handle || typeof (handle as Work).wait !== 'function') {
    throw new WebcclError('INVALID_ARGUMENT', 'wait: expected the Work handle an *Async call returned');
  }
  return handle.wait();
}
