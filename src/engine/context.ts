// What one rank holds after joining its node: the wasm core on the node's memory, the heap,
// its place in the world communicator, and the calibrated spin budget.

import { envNumber } from '../core/config.js';
import { fail } from '../core/errors.js';
import { freshBuffer, freshI32 } from '../core/fresh-buffer.js';
import { NodeHeap } from '../core/heap.js';
import { log, setLogRank } from '../core/log.js';
import { checkNodeHandle, type NodeHandle } from '../core/node.js';
import { boolean, checkOptions, integer, number, type OptionSpec, showValue } from '../core/options.js';
import { D, descOffset, LAYOUT_VERSION, NODE_BASE, NODE_MAGIC_VALUE } from '../core/shm-map.js';
import { loadWasm, preferSimd, type WasmCore } from '../core/wasm.js';

/**
 * A thread's place in its node, as {@link joinNode} returns it: what `new Communicator(ctx)` takes.
 * Opaque but for its rank and the node's size, and of use only on the thread that joined.
 */
export interface RankContext {
  /** @internal */
  core: WasmCore;
  /** @internal */
  heap: NodeHeap;
  /** @internal Address of the communicator block this context's ops run in (the node's world block, or a group's). */
  comm: number;
  /** This thread's rank in the node, 0..size-1. */
  rank: number;
  /** How many ranks the node has. */
  size: number;
  /** @internal The node rank of each rank of `comm` (for the node header's per-rank LEFT words). */
  localOf: readonly number[];
  /** @internal */
  slotBytes: number;
  /** @internal Polls before blocking, when a caller waits for an op. */
  spinPolls: number;
  /** @internal Polls before giving up, when a call only tries to move its op along (it must return soon). */
  tryPolls: number;
  /** @internal Microseconds a waiting JS loop (point-to-point) spins before blocking. */
  spinUs: number;
  /** @internal Flag polls this thread makes per microsecond (measured once, when it joins). */
  pollsPerUs: number;
  /** @internal The spin budget was given (option or WEBCCL_SPIN_US) rather than chosen from ranks and cores. */
  spinGiven: boolean;
  /** @internal */
  canBlock: boolean;
  /** @internal */
  cores: number;
  /**
   * @internal This thread's rank in a job across nodes (its trace track's number); absent on one node, where node
   * ranks are world ranks.
   */
  worldRank?: number;
  /** @internal Every SharedArrayBuffer object seen for the node memory (one per growth). */
  sharedBuffers: Set<ArrayBufferLike>;
}

/** The options of joinNode (initCommGroup takes them too): this rank's cores, WebAssembly build and spin. */
export interface JoinOptions {
  /** Cores available to the node's ranks (the launcher passes os.availableParallelism()). */
  cores?: number;
  /** false forces the scalar WebAssembly core (default: SIMD where supported, unless WEBCCL_WASM=scalar). */
  simd?: boolean;
  /** Microseconds to spin on a flag before blocking (WEBCCL_SPIN_US). */
  spinUs?: number;
}

/** What each key of JoinOptions may hold (initCommGroup takes them too). */
export const JOIN_OPTIONS = {
  cores: integer(1, 1 << 16),
  simd: boolean,
  spinUs: number(0, 1_000_000),
} as const satisfies OptionSpec;

/**
 * Spin budgets (µs) before blocking: a core per rank, more ranks than cores, a call's own try.
 * With more ranks than cores a peer that shares the core cannot post while this rank spins, and
 * a spin of even 1 µs (and the call's own try, as long) cost a 4-rank barrier on 2 cores 3-5 µs
 * of its ~30 (bench/RESULTS.md, 2026-12-04 (evening), "Ranks that outnumber cores no longer spin"): they sleep at once.
 */
export const DEDICATED_SPIN_US = 20;
export const OVERSUBSCRIBED_SPIN_US = 0;
export const TRY_SPIN_US = 2;

let blockAllowed: boolean | undefined;
/** Whether this thread may block in Atomics.wait (not a browser's main thread). */
export function threadCanBlock(): boolean {
  if (blockAllowed === undefined) {
    try {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
      blockAllowed = true;
    } catch {
      blockAllowed = false;
    }
  }
  return blockAllowed;
}

/**
 * Joins the calling thread to a node as its rank `rank`, returning its place there for
 * `new Communicator(ctx)`. Each of the node's threads calls it with the handle createNode
 * returned (initCommGroup({ node, rank }) calls it for you).
 *
 * @param rank - This thread's rank in the node, 0..nranks-1.
 * @throws WebcclError `INVALID_ARGUMENT` for a handle createNode did not make, a rank outside the
 *   node, or a bad option.
 * @example
 * ```js
 * // on the thread of node rank `rank`, given the handle createNode returned
 * const comm = new Communicator(joinNode(node, rank), { timeoutMs: 60_000 });
 * await comm.allReduce(x);
 * ```
 */
export function joinNode(node: NodeHandle, rank: number, options?: JoinOptions): RankContext {
  return joinNodeAs(node, rank, options);
}

/**
 * joinNode; given `world` (a rank of a job across nodes), its log lines name its world rank,
 * which no node rank tells (every process of `webccl run --procs` is node rank 0 of 1).
 */
export function joinNodeAs(
  node: NodeHandle,
  rank: number,
  options?: JoinOptions,
  world?: { rank: number; size: number },
): RankContext {
  const opts = checkOptions<JoinOptions>('joinNode', options, JOIN_OPTIONS, '{ cores: 4 }');
  checkNodeHandle('joinNode', node);
  if (!Number.isInteger(rank) || rank < 0 || rank >= node.nranks) {
    fail('INVALID_ARGUMENT', `joinNode: rank ${showValue(rank)} is outside the node's 0..${node.nranks - 1} range`, {
      rank,
    });
  }
  const header = new Int32Array(freshBuffer(node.memory), NODE_BASE, 2);
  if (header[0] !== NODE_MAGIC_VALUE || header[1] !== LAYOUT_VERSION) {
    fail(
      'INVALID_ARGUMENT',
      `joinNode: this memory holds no webccl node of layout ${LAYOUT_VERSION} (make it with createNode)`,
    );
  }
  const core = loadWasm(node.memory, preferSimd(opts.simd));
  const cores =
    opts.cores ?? (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency ?? 1;
  const canBlock = threadCanBlock();
  const ctx: RankContext = {
    core,
    heap: new NodeHeap(node.memory, { canBlock, rank }),
    comm: node.world,
    rank,
    size: node.nranks,
    slotBytes: node.slotBytes,
    localOf: Array.from({ length: node.nranks }, (_, r) => r),
    spinPolls: 0,
    tryPolls: 0,
    spinUs: 0,
    pollsPerUs: 1,
    spinGiven: false,
    canBlock,
    cores,
    sharedBuffers: new Set([freshBuffer(node.memory)]),
  };
  // Spin in time, not in polls: measure how fast this thread polls a flag.
  // With a core per rank, spinning costs nobody anything and a sleeping rank takes ~40 us to
  // wake; with more ranks than cores, a spinning rank steals the CPU from the one it waits for.
  const given = opts.spinUs ?? envNumber('WEBCCL_SPIN_US');
  ctx.spinGiven = given !== undefined;
  ctx.pollsPerUs = pollsPerMicrosecond(ctx.core, ctx.comm, ctx.size, ctx.rank);
  setSpin(ctx, given ?? defaultSpinUs(node.nranks, cores));
  const spinUs = ctx.spinUs;
  setLogRank(world?.rank ?? rank);
  const who = world
    ? `rank ${world.rank}/${world.size} (node rank ${rank}/${node.nranks})`
    : `rank ${rank}/${node.nranks}`;
  log(
    'INFO',
    `${who}: ${core.simd ? 'simd' : 'scalar'} wasm, ${cores} cores, spin ${spinUs} us = ${ctx.spinPolls} polls, slot ${node.slotBytes} B, ${ctx.canBlock ? 'blocking' : 'async'} waits`,
  );
  return ctx;
}

/**
 * The world rank of the thread `ctx` is: given across nodes; on one node, its node rank (a group's rank maps to it
 * through localOf).
 */
export function worldRankOf(ctx: RankContext): number {
  return ctx.worldRank ?? ctx.localOf[ctx.rank];
}

/** The spin budget for `nranks` ranks of a communicator sharing `cores` cores. */
export const defaultSpinUs = (nranks: number, cores: number): number =>
  nranks > cores ? OVERSUBSCRIBED_SPIN_US : DEDICATED_SPIN_US;

/** Sets the context's spin budget (µs) and the polls it takes. */
export function setSpin(ctx: RankContext, spinUs: number): void {
  ctx.spinUs = spinUs;
  ctx.spinPolls = Math.round(spinUs * ctx.pollsPerUs);
  ctx.tryPolls = Math.round(Math.min(spinUs, TRY_SPIN_US) * ctx.pollsPerUs);
}

/** Flag polls per microsecond of this thread, probing rank `rank`'s flag of the block `comm` (read only). */
export function pollsPerMicrosecond(core: WasmCore, comm: number, nranks: number, rank: number): number {
  const desc = descOffset(comm, nranks, rank);
  const i32 = freshI32(core.memory);
  i32[(desc + D.COMM) >> 2] = comm;
  i32[(desc + D.RANK) >> 2] = rank;
  const probe = core.exports.spinProbe as (desc: number, polls: number) => number;
  probe(desc, 20000); // warm-up: let the engine compile the loop
  const polls = 200000;
  const t0 = performance.now();
  probe(desc, polls);
  const us = (performance.now() - t0) * 1000;
  return Math.max(1, polls / Math.max(us, 1));
}
