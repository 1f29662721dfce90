// webccl: collective communication for JavaScript ranks (worker threads, processes, browser
// workers). Two faces over one implementation: the Communicator class, and module-level
// functions on the default world group for scripts.

import { SETUP_BARRIER } from './api/comm-tally.js';
import { Communicator } from './api/communicator.js';
import { COMMUNICATOR_OPTIONS, type CommunicatorOptions } from './api/options.js';
import { type MasterOptions, pageJob } from './bootstrap/page-job.js';
import type { WorldInit } from './bootstrap/world.js';
import type { TlsFiles } from './core/config.js';
import { unknownEnvNames } from './core/config.js';
import { fail } from './core/errors.js';
import { checkNodeHandle, type NodeHandle } from './core/node.js';
import { anything, checkOptions, integer, type OptionSpec, string } from './core/options.js';
import { JOIN_WORLD, PAGE_WEBSOCKET, RANK_INIT } from './core/wiring.js';
import { currentWorld, setWorld } from './default-group.js';
import { JOIN_OPTIONS, type JoinOptions, joinNode } from './engine/context.js';
import { joinPageWorld } from './join/page-join.js';
import { createNode } from './progress/create-node.js';
import { START_WAIT_MS } from './progress/node-engine.js';
import { progressSettled } from './progress/start.js';
import type { PageSocketClass } from './transport/ws/page-carrier.js';

export { COALESCED_BUCKET_BYTES } from './api/coalesced.js';
export type { CommunicatorStats } from './api/comm-tally.js';
export { Communicator } from './api/communicator.js';
export type {
  AllGatherOptions,
  AllReduceCoalescedOptions,
  AllReduceOptions,
  AllToAllOptions,
  BarrierOptions,
  BroadcastCoalescedOptions,
  BroadcastOptions,
  CollectiveOptions,
  CommunicatorOptions,
  DeadlineOption,
  P2pOptions,
  ReduceOptions,
  ReduceScatterOptions,
  RootedOptions,
  WireLayoutOption,
} from './api/options.js';
export type { StoreValue } from './bootstrap/store-session.js';
// The job's rendezvous store over WebSocket (`webccl serve --token`): the page's own WebSocket here.
export { type ConnectStoreOptions, connectStore, type WebSocketStore } from './bootstrap/store-websocket-client.js';
export { ENV_VARS, type TlsFiles } from './core/config.js';
export {
  Avg,
  DTYPE_ALIASES,
  DTYPES,
  type Dtype,
  type DtypeName,
  Max,
  Min,
  Prod,
  REDUCE_OPS,
  type ReduceOp,
  Sum,
} from './core/dtypes.js';
export { type ErrorCode, WebcclError } from './core/errors.js';
export { abortNode, leaveNode, type NodeHandle } from './core/node.js';
export { LAYOUTS, type Layout } from './core/tensor-layout.js';
export { type TraceArgs, type TraceTrack, traceFlush, traceSpan, traceTrack } from './core/trace.js';
export type {
  BufferArg,
  Float16ArrayLike,
  LayoutTensorArg,
  OrtTensorLike,
  TensorLike,
  TypedArray,
} from './engine/buffers.js';
export { type JoinOptions, joinNode, type RankContext } from './engine/context.js';
export type { FlightEntry, FlightState } from './engine/flight-recorder.js';
export { Work, type WorkTiming } from './engine/work.js';
export { convertDtype, convertLayout, type LayoutTensor } from './layouts/convert.js';
export { createNode, type NodeOptions } from './progress/create-node.js';
export { stopProgressThread } from './progress/start.js';
export type { BucketPlan } from './training/buckets.js';
export type { TrainingComm } from './training/comm.js';
export {
  createDataParallel,
  type DataParallel,
  type DataParallelOptions,
  type DataParallelStats,
  type WireDtype,
} from './training/data-parallel.js';
export {
  type AdamOptions,
  adam,
  type OptimizerState,
  type SgdOptions,
  sgd,
  type UpdateFn,
} from './training/optimizers.js';
export {
  createShardedOptimizer,
  type ShardedOptimizer,
  type ShardedOptimizerOptions,
  type ShardMemory,
} from './training/sharded.js';
export {
  type TfGradMap,
  type TfjsDataParallel,
  type TfNamespaceLike,
  type TfTensorLike,
  type TfVariableLike,
  tfjsDataParallel,
} from './training/tfjs.js';

/**
 * What a launcher leaves under RANK_INIT (core/wiring.ts) for a rank's script.
 * @internal
 */
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

/**
 * The options of initCommGroup: the world communicator's (`algo`, `timeoutMs`, `progress`),
 * joinNode's (`cores`, `simd`, `spinUs`), an identity instead of the launcher's (`node` and
 * `rank`, or `master` and `rank` with the job's `worldSize`, `token`, `jobId`), and `tls`.
 */
export interface InitOptions extends CommunicatorOptions, JoinOptions, MasterOptions {
  /** Join this node as `rank` instead of the identity a launcher left. */
  node?: NodeHandle;
  /** With `node`: this rank's place in the node; with `master` alone: its world rank. */
  rank?: number;
  /** A job across nodes: encrypt its connections with TLS, keyed by the job token (true) or by
   *  these certificate files (mutual TLS); overrides WEBCCL_TLS and WEBCCL_TLS_CERT/KEY/CA. */
  tls?: boolean | TlsFiles;
}

/** `tls`: true, false or certificate files (their fields are checked where the job joins). */
const tlsOption = (v: unknown) =>
  typeof v === 'boolean' || (typeof v === 'object' && v !== null && !Array.isArray(v))
    ? undefined
    : 'true, false or { cert, key, ca }';

/** Every key initCommGroup knows: the communicator's, joinNode's, an explicit identity, and TLS. */
const INIT_OPTIONS = {
  ...COMMUNICATOR_OPTIONS,
  ...JOIN_OPTIONS,
  node: anything,
  rank: integer(0, 0x7fffffff),
  tls: tlsOption,
  master: string,
  worldSize: integer(1, 0x7fffffff),
  token: string,
  jobId: string,
} as const satisfies OptionSpec;

type WorldJoiner = (i: {
  node?: NodeHandle;
  localRank?: number;
  world?: WorldInit;
  opts: InitOptions;
}) => Promise<Communicator | undefined>;
type SocketLoader = () => Promise<PageSocketClass>;

/**
 * Joins the default world group and waits until every rank has joined. The identity comes from
 * the options, else from the launcher (worker data, or the environment torchrun, mpirun, srun
 * or `webccl run --procs` leave); a plain `node script.mjs` is a world of one rank.
 *
 * A second call returns the same communicator. It rejects, never throws: `INVALID_ARGUMENT` for a
 * bad option or launcher variable; when a rank never comes, `TIMEOUT` on one node and
 * `CONNECT_FAILED` across nodes (at the connect deadline); `AUTH_FAILED` for a wrong token.
 *
 * @example
 * ```js
 * import { initCommGroup, allReduce } from 'webccl';
 * const comm = await initCommGroup();        // e.g. under webccl run -n 4 train.mjs
 * const x = new Float32Array(8).fill(comm.rank);
 * await allReduce(x);                         // every element: 0 + 1 + 2 + 3 = 6
 * ```
 */
export async function initCommGroup(options?: InitOptions): Promise<Communicator> {
  const opts = checkOptions<InitOptions>('initCommGroup', options, INIT_OPTIONS, '{ timeoutMs: 60000 }');
  if (opts.node !== undefined) checkNodeHandle('initCommGroup', opts.node);
  else if (opts.rank !== undefined && opts.master === undefined)
    fail(
      'INVALID_ARGUMENT',
      'initCommGroup: option rank needs option node (the handle createNode returned) or master; without either the rank comes from the launcher',
      { option: 'rank' },
    );
  const already = currentWorld();
  if (already) return already;
  const dialling = dialOnlyJoin(opts);
  if (dialling) {
    // Node's ws package where the entry provides it (Node 22 and later also have a global
    // WebSocket, undici's, on which dialling ranks hung); a page's own elsewhere.
    const Ws =
      (await (globalThis as Record<symbol, SocketLoader | undefined>)[PAGE_WEBSOCKET]?.()) ??
      (globalThis as { WebSocket?: PageSocketClass }).WebSocket;
    const c = await joinPageWorld({ ...dialling, opts, WebSocket: Ws });
    if (c.rank === 0) unknownEnvNames();
    await c[SETUP_BARRIER]();
    return setWorld(c);
  }
  const init = opts.node
    ? { node: opts.node, rank: opts.rank ?? 0 }
    : (globalThis as Record<symbol, RankInit | undefined>)[RANK_INIT];
  const joiner = (globalThis as Record<symbol, WorldJoiner | undefined>)[JOIN_WORLD];
  if ((init?.world || !init) && joiner) {
    const c = await joiner({
      node: init?.node,
      localRank: init?.rank,
      world: init?.world,
      opts: { cores: init?.cores, simd: init?.simd, ...opts },
    });
    if (c) {
      if (c.rank === 0) unknownEnvNames();
      await c[SETUP_BARRIER]();
      return setWorld(c);
    }
  } else if (init?.world) {
    fail('UNSUPPORTED', 'this rank belongs to a job across nodes, which needs the Node.js build of webccl (sockets)');
  }
  const { node, rank } = init ?? { node: createNode({ nranks: 1 }), rank: 0 };
  if (rank === 0) unknownEnvNames(); // once per job, not once per rank
  // A page's progress thread may still be loading: wait here, where waiting blocks no thread.
  await progressSettled(node.memory, START_WAIT_MS);
  const ctx = joinNode(node, rank, { cores: opts.cores ?? init?.cores, simd: opts.simd ?? init?.simd });
  const comm = new Communicator(ctx, { algo: opts.algo, timeoutMs: opts.timeoutMs, progress: opts.progress });
  await comm[SETUP_BARRIER]();
  return setWorld(comm);
}

/**
 * A rank that joins its job by dialling (a page's): `master` in the options (a node of one rank,
 * whose world rank is `rank`), or a node createNode made with `master`. Undefined otherwise.
 */
function dialOnlyJoin(
  opts: InitOptions,
): { node: NodeHandle; localRank: number; job: ReturnType<typeof pageJob> } | undefined {
  if (opts.master !== undefined) {
    if (opts.node !== undefined)
      fail(
        'INVALID_ARGUMENT',
        'initCommGroup: give master either to createNode (a node of several ranks: its workers call initCommGroup({ node, rank })) or here (a rank alone), not both',
        { option: 'master' },
      );
    if (opts.rank === undefined)
      fail('INVALID_ARGUMENT', "initCommGroup: option rank (this rank's world rank) is required with master", {
        option: 'rank',
      });
    const job = pageJob('initCommGroup', opts, opts.rank, 1);
    return { node: createNode({ nranks: 1 }), localRank: 0, job };
  }
  const stray = (['worldSize', 'token', 'jobId'] as const).find((k) => opts[k] !== undefined);
  if (stray)
    fail(
      'INVALID_ARGUMENT',
      `initCommGroup: option ${stray} names a job to join by its master, which needs option master (ws://HOST:P of webccl serve)`,
      { option: stray },
    );
  if (opts.node?.job) return { node: opts.node, localRank: opts.rank ?? 0, job: opts.node.job };
  return undefined;
}

export {
  allGather,
  allReduce,
  allReduceAsync,
  allToAll,
  barrier,
  broadcast,
  createGroup,
  type GroupOption,
  gather,
  getCommunicator,
  getRank,
  getWorldSize,
  recv,
  reduce,
  reduceScatter,
  scatter,
  send,
  type WithGroup,
  wait,
} from './default-group.js';
