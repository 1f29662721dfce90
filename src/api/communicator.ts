// Communicator: a group of ranks with its own op sequence. Validates every call before
// anything moves, then hands the op to its engine: shared memory when every rank is on this
// node, the network algorithms when the group spans nodes.

import { type Dtype, type DtypeName, parseOp } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import type { BufferArg, TypedArray } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import type { CommParts, Engine } from '../engine/engine.js';
import type { FlightEntry } from '../engine/flight-recorder.js';
import type { Placement } from '../engine/placement.js';
import type { Work } from '../engine/work.js';
import { memberRank, peerRank, rootRank, worldRankArg } from './arguments.js';
import { allToAllBlocks, checkAllGatherCounts, checkReduceScatterCounts } from './block-counts.js';
import type { CommBuffers } from './call-buffers.js';
import { allReduceCoalesced, broadcastCoalesced, type CoalescedParts } from './coalesced.js';
import { CommTally, type CommunicatorStats, SETUP_BARRIER } from './comm-tally.js';
import { wireComm } from './comm-wiring.js';
import { GroupForming } from './forming.js';
import type { OpIssue } from './op-issue.js';
import {
  type AllGatherOptions,
  type AllReduceCoalescedOptions,
  type AllReduceOptions,
  type AllToAllOptions,
  type BarrierOptions,
  type BroadcastCoalescedOptions,
  type BroadcastOptions,
  type CommunicatorOptions,
  collectiveOptions,
  communicatorOptions,
  type P2pOptions,
  type ReduceOptions,
  type ReduceScatterOptions,
  type RootedOptions,
} from './options.js';
import { allocShared } from './shared-alloc.js';

/**
 * A group of ranks that run collectives and messages together, with its own op sequence (NCCL's
 * communicator, torch's process group): initCommGroup returns the world's, createGroup, split,
 * splitByNode and shrink form groups, and a program placing its own ranks makes one per rank with
 * `new Communicator(joinNode(node, rank))`. Each op checks its arguments before anything moves
 * (a WebcclError thrown then takes no place in the sequence) and returns a {@link Work}, which
 * resolves once the op has ended on this rank or rejects with its error. Every rank issues the
 * same collectives in the same order; they complete in that order.
 */
export class Communicator {
  /** This rank's number in the communicator, 0..size-1. */
  readonly rank: number;
  /** How many ranks the communicator has. */
  readonly size: number;
  /**
   * Whether the ranks span several nodes: ops the rank runs itself then complete on the event loop
   * (await them; waitSync() refuses them); those a network progress thread runs may be waitSync'd.
   */
  readonly acrossNodes: boolean;
  private readonly engine: Engine;
  /** What stats() reports (api/comm-tally.ts). */
  private readonly tally = new CommTally();
  /** Hands each checked call to the engine (op-issue.ts). */
  private readonly issue: OpIssue;
  /** The buffers its calls pass, checked and described (api/call-buffers.ts). */
  private readonly bufs: CommBuffers;
  private readonly groups: GroupForming<Communicator>;
  /** What the coalesced calls need of this communicator (api/coalesced.ts). */
  private readonly coalesced: CoalescedParts;
  private destroyed = false;
  /** @internal Where this communicator's ranks are (world ranks, nodes, tag space). */
  readonly placement: Placement;
  /** @internal The options it was made with (its groups inherit them). */
  readonly options: CommunicatorOptions;

  /**
   * A communicator over the ranks of the node this thread joined (`ctx`: what joinNode returned
   * here). Each rank makes its own; initCommGroup({ node, rank }) also waits for the node's
   * progress thread and ends with a barrier. Its groups inherit `options`.
   * @throws WebcclError `INVALID_ARGUMENT` for a bad option or WEBCCL_ALGO, WEBCCL_TIMEOUT_MS,
   *   WEBCCL_PROGRESS; `UNSUPPORTED` for progress 'thread' on a node without a progress thread.
   */
  constructor(ctx: RankContext, options?: CommunicatorOptions);
  /** @internal Over the ranks of several nodes: rank and size are the world's, `ctx` this rank's node. */
  constructor(ctx: RankContext, options: CommunicatorOptions | undefined, world: CommParts);
  constructor(
    private readonly ctx: RankContext,
    options?: CommunicatorOptions,
    world?: CommParts,
  ) {
    const opts = communicatorOptions(options);
    this.options = { ...opts };
    const w = wireComm(ctx, opts, world, this.tally);
    this.rank = w.rank;
    this.size = w.size;
    this.placement = w.placement;
    this.bufs = w.bufs;
    this.acrossNodes = w.acrossNodes;
    this.engine = w.engine;
    this.issue = w.issue;
    this.coalesced = { comm: this, bufs: w.bufs, inFlight: w.issue.inFlight, failure: () => this.engine.failure() };
    this.groups = new GroupForming({
      comm: this,
      ctx,
      options: this.options,
      make: (c, o, parts) => new Communicator(c, o, parts),
      unsettled: () => this.issue.inFlight.unsettled(),
      destroyed: () => this.destroyed,
      failure: () => this.engine.failure(),
    });
  }

  // ---------------------------------------------------------------- groups

  /** The world rank of this communicator's rank `r`. */
  worldRank(r: number): number {
    return this.placement.worldRanks[memberRank(r, this.size)];
  }

  /** This communicator's rank of world rank `w`, or -1 when it is not a member. */
  groupRank(w: number): number {
    return this.placement.worldRanks.indexOf(worldRankArg(w));
  }

  /**
   * A communicator over `ranks` (this communicator's ranks, as numbers or 'rankN'), in that
   * order. Every rank of this communicator calls it, in the same order (torch's new_group);
   * it resolves to the new communicator on members and to null on the others.
   */
  createGroup(ranks: readonly (number | string)[], options?: CommunicatorOptions): Promise<Communicator | null> {
    return this.groups.createGroup(ranks, options);
  }

  /**
   * NCCL's / MPI's split: ranks that pass the same color form a communicator, ordered by key
   * (then by rank here); a color of null or below 0 gives null.
   */
  split(color: number | null, key?: number, options?: CommunicatorOptions): Promise<Communicator | null> {
    return this.groups.split('split', color, key ?? this.rank, options);
  }

  /**
   * MPI's split by shared memory (MPI_COMM_TYPE_SHARED): the ranks of this communicator that
   * share this rank's node (a process's worker threads, a page's workers), in this
   * communicator's order. Every rank calls it; each gets its own node's communicator, which
   * never crosses a network.
   */
  splitByNode(options?: CommunicatorOptions): Promise<Communicator> {
    const node = this.placement.nodeOf[this.rank];
    return this.groups.split('splitByNode', node, this.rank, options) as Promise<Communicator>;
  }

  /**
   * After ranks died or left (or a failure aborted the communicator), the survivors' new
   * communicator without them (NCCL's ncclCommShrink, ULFM's MPI_Comm_shrink): every surviving
   * rank calls it once; ranks keep their order. Across nodes the members agree through the
   * job's rendezvous store (served by world rank 0, which must be among the survivors) and
   * connect anew.
   */
  shrink(options?: CommunicatorOptions): Promise<Communicator> {
    return this.groups.shrink(options);
  }

  // ---------------------------------------------------------------- collectives

  /**
   * Reduces `x` across the ranks, in place (torch's all_reduce): when the op ends, every rank's
   * `x` holds the reduction of all ranks' `x` by `op` (default sum). With `out`, `x` is left as it
   * is and `out` (same count and dtype) receives the result. Every rank calls it with the same
   * count, dtype and op.
   *
   * @param opts - `op` ('sum', 'prod', 'max', 'min', 'avg' on float dtypes), `out`, `algo`, `timeoutMs`, `wireLayout`.
   * @returns A Work that resolves once this rank's result is in place; it rejects with the op's error
   *   (`MISMATCH` when ranks disagree, `TIMEOUT`, `ABORTED`, `CONNECTION_CLOSED`).
   * @throws WebcclError at issue: `INVALID_ARGUMENT` (not a buffer, a bad option or algo, an `out`
   *   partly overlapping `x`), `INVALID_DTYPE`, `INVALID_OP`, `SIZE_MISMATCH`, `BUFFER_BUSY`.
   */
  allReduce(x: BufferArg, opts?: AllReduceOptions): Work {
    const o = collectiveOptions('allReduce', opts);
    const [inp, out] = this.bufs.inOut('allReduce', x, o.out);
    const op = parseOp(o.op, inp.dtype);
    return this.issue.enqueue({ name: 'allReduce', algo: o.algo, op, input: inp, output: out, options: o });
  }

  /** out (size × n elements) receives every rank's input (n elements), in rank order. */
  allGather(out: BufferArg, input: BufferArg, opts?: AllGatherOptions): Work {
    const o = collectiveOptions('allGather', opts);
    const [ob, ib] = this.bufs.outIn('allGather', out, input);
    checkAllGatherCounts(ob, ib, this.size);
    return this.issue.enqueue({ name: 'allGather', input: ib, output: ob, options: o });
  }

  /** out (n elements) receives the reduction over ranks of block `rank` of input (size × n). */
  reduceScatter(out: BufferArg, input: BufferArg, opts?: ReduceScatterOptions): Work {
    const o = collectiveOptions('reduceScatter', opts);
    const [ob, ib] = this.bufs.outIn('reduceScatter', out, input);
    checkReduceScatterCounts(ob, ib, this.size);
    const op = parseOp(o.op, ib.dtype);
    return this.issue.enqueue({ name: 'reduceScatter', op, count: ob.count, input: ib, output: ob, options: o });
  }

  /**
   * Copies the root's `x` (root `opts.root`, default 0) into every other rank's `x`, in place
   * (torch's broadcast); with `out`, `out` receives it on every rank, the root included, and `x`
   * is left as it is. Every rank passes the same root and a buffer of the same count and dtype.
   *
   * @returns A Work that resolves once this rank holds the root's data, or rejects with the op's error.
   * @throws WebcclError at issue: `INVALID_ARGUMENT` (a root outside 0..size-1, a bad option), and
   *   the buffer checks of {@link Communicator.allReduce}.
   */
  broadcast(x: BufferArg, opts?: BroadcastOptions): Work {
    const o = collectiveOptions('broadcast', opts);
    const [xb, out] = this.bufs.inOut('broadcast', x, o.out);
    const root = rootRank(o.root, 'broadcast', this.size);
    return this.issue.enqueue({ name: 'broadcast', root, input: xb, output: out, options: o });
  }

  /** Reduces every rank's x into the root's x (or o.out on the root). */
  reduce(x: BufferArg, opts?: ReduceOptions): Work {
    const o = collectiveOptions('reduce', opts);
    const [xb, out] = this.bufs.inOut('reduce', x, o.out);
    const op = parseOp(o.op, xb.dtype);
    const root = rootRank(o.root, 'reduce', this.size);
    return this.issue.enqueue({ name: 'reduce', op, root, input: xb, output: out, options: o });
  }

  /**
   * Rank i's block j of input goes to rank j's block i of out. Equal blocks (input and out hold
   * size × n elements), or per-peer counts with blocks packed in rank order.
   */
  allToAll(out: BufferArg, input: BufferArg, opts?: AllToAllOptions): Work {
    const o = collectiveOptions('allToAll', opts) as AllToAllOptions;
    const [ob, ib] = this.bufs.outIn('allToAll', out, input);
    const { count, counts } = allToAllBlocks(ob, ib, o, this);
    return this.issue.enqueue({ name: 'allToAll', count, input: ib, output: ob, options: o, counts });
  }

  /**
   * The root's out (size × n elements) receives every rank's input (n elements), in rank order; out may be null
   * elsewhere.
   */
  gather(out: BufferArg | null, input: BufferArg, opts?: RootedOptions): Work {
    const o = collectiveOptions('gather', opts) as RootedOptions;
    const ib = this.bufs.of(input, 'gather input');
    const root = rootRank(o.root, 'gather', this.size);
    const ob = this.bufs.root(out, root, 'gather output', ib, ib.count * this.size);
    return this.issue.enqueue({ name: 'gather', root, input: ib, output: ob, options: o });
  }

  /** Every rank's out (n elements) receives its block of the root's input (size × n); input may be null elsewhere. */
  scatter(out: BufferArg, input: BufferArg | null, opts?: RootedOptions): Work {
    const o = collectiveOptions('scatter', opts) as RootedOptions;
    const ob = this.bufs.of(out, 'scatter output');
    const root = rootRank(o.root, 'scatter', this.size);
    const ib = this.bufs.root(input, root, 'scatter input', ob, ob.count * this.size);
    return this.issue.enqueue({ name: 'scatter', count: ob.count, root, input: ib, output: ob, options: o });
  }

  /** Sends x to rank `peer`; completes once the peer's matching recv has taken it. */
  send(x: BufferArg, peer: number, opts?: P2pOptions): Work {
    const o = collectiveOptions('send', opts) as P2pOptions;
    const b = this.bufs.of(x, 'send buffer');
    return this.issue.p2p('send', b, peerRank(peer, 'send', this.rank, this.size), o);
  }

  /** Receives into x what rank `peer` sends with the same tag (the k-th recv takes the k-th send); sizes must match. */
  recv(x: BufferArg, peer: number, opts?: P2pOptions): Work {
    const o = collectiveOptions('recv', opts) as P2pOptions;
    const b = this.bufs.of(x, 'recv buffer');
    return this.issue.p2p('recv', b, peerRank(peer, 'recv', this.rank, this.size), o);
  }

  /**
   * Reduces every array of `list` across ranks, in place, as one call (torch's
   * all_reduce_coalesced, Horovod's grouped allreduce): the arrays are copied end to end into
   * buckets of the node memory of at most {@link COALESCED_BUCKET_BYTES} (64 MiB) each, one
   * allReduce runs per bucket, all issued at once, and the results are copied back into the
   * arrays when every bucket has ended. A list of many small arrays thus costs one op instead of
   * one each. Every rank passes arrays of the same lengths, in the same order.
   *
   * @param list - Arrays of one dtype (TypedArrays, or `{ data, dtype }` for the half types),
   *   any lengths, zero included; an empty list issues no op.
   * @param opts - `op` (default sum; avg on float dtypes only) and `timeoutMs`, as allReduce's.
   * @returns One Work for the whole call: it ends when every bucket has, and fails with the
   *   first bucket's error (the arrays then keep their inputs).
   * @throws WebcclError at issue, before any op is issued on this rank: `INVALID_ARGUMENT` for a
   *   list that is not an array, arrays of two dtypes (naming the first index that differs and
   *   both dtypes), an element that is no buffer, two arrays sharing bytes, or a bad option;
   *   `INVALID_DTYPE` for an element of an unknown dtype; `INVALID_OP`; `BUFFER_BUSY` for an
   *   array an op not yet waited for still holds.
   * @example
   * ```js
   * const grads = [new Float32Array(1000), new Float32Array(10), new Float32Array(3)];
   * await comm.allReduceCoalesced(grads, { op: 'avg' }); // one allReduce of 1013 floats
   * ```
   */
  allReduceCoalesced(list: readonly BufferArg[], opts?: AllReduceCoalescedOptions): Work {
    return allReduceCoalesced(this.coalesced, list, opts);
  }

  /**
   * Broadcasts every array of `list` from the root, in place, as one call: packed into buckets as
   * {@link Communicator.allReduceCoalesced} packs them, one broadcast per bucket, the results
   * copied back into the arrays of every rank but the root.
   *
   * @param list - Arrays of one dtype, any lengths (the same on every rank); an empty list issues no op.
   * @param opts - `root` (default 0) and `timeoutMs`, as broadcast's.
   * @returns One Work for the whole call, as allReduceCoalesced's.
   * @throws WebcclError at issue, before any op is issued: as allReduceCoalesced, and
   *   `INVALID_ARGUMENT` for a root out of range.
   * @example
   * ```js
   * const params = [new Float32Array(4096), new Float32Array(64), new Float32Array(1)];
   * await comm.broadcastCoalesced(params, { root: 0 }); // every rank now holds rank 0's values
   * ```
   */
  broadcastCoalesced(list: readonly BufferArg[], opts?: BroadcastCoalescedOptions): Work {
    return broadcastCoalesced(this.coalesced, list, opts);
  }

  /**
   * Synchronises the ranks (torch's barrier): the Work resolves once every rank of the communicator
   * has called barrier; it rejects with `TIMEOUT` naming the ranks that had not by the deadline.
   */
  barrier(opts?: BarrierOptions): Work {
    const o = collectiveOptions('barrier', opts);
    return this.issue.enqueue({ name: 'barrier', options: o });
  }

  /**
   * The barrier that ends initCommGroup: setup, not the caller's work, so stats() leaves it out
   * (a fresh communicator reports ops 0; a failed setup barrier throws, counted or not).
   */
  async [SETUP_BARRIER](): Promise<void> {
    await this.tally.leaveOut(this.engine, () => this.barrier());
  }

  // ---------------------------------------------------------------- memory and lifecycle

  /** A buffer in the node's shared memory: collectives use it in place, with no copy. */
  alloc(dtype: DtypeName, count: number): TypedArray | { data: Uint16Array; dtype: Dtype } {
    if (this.destroyed) fail('ABORTED', 'alloc: the communicator was destroyed');
    return allocShared(this.ctx, dtype, count);
  }

  /**
   * Returns a buffer {@link Communicator.alloc} made to the node's heap; wait for the ops that use
   * it first. `INVALID_ARGUMENT` for a buffer alloc() did not make, or one freed already.
   */
  free(x: BufferArg): void {
    const b = this.bufs.of(x, 'free');
    if (!b.addr) fail('INVALID_ARGUMENT', 'free: buffer was not allocated with comm.alloc()');
    this.ctx.heap.free(b.addr);
  }

  /**
   * Counters since creation: ops issued, bytes (per rank), failures, time busy (the sum of
   * completed ops' durationMs) split into waitMs (waiting until every rank an op needs had
   * joined it) and moveMs (the rest: moving and reducing data), allReduce algorithms used, and
   * tensor layout conversions (count, bytes read, time).
   */
  stats(): CommunicatorStats {
    return this.tally.stats(this.engine);
  }

  /**
   * Who runs this communicator's collectives (docs/progress.md): 'auto' or 'thread' when the
   * node's progress thread (or, across nodes, the network progress thread) takes them, 'caller'
   * when the rank runs them itself (WEBCCL_PROGRESS=caller, a node without a progress thread).
   */
  get progressMode(): 'auto' | 'thread' | 'caller' {
    return this.engine.progressMode ?? 'caller';
  }

  /**
   * The last ops of this communicator (WEBCCL_FLIGHT_RECORDER, default 64; 0: none), oldest
   * first: a copy, as plain objects. After a TIMEOUT or ABORTED it says what this rank was doing.
   */
  flightRecord(): FlightEntry[] {
    return this.engine.flight.record();
  }

  /** Fails every pending op here and on every other rank of the communicator. */
  abort(reason = 'abort() called'): void {
    // Destroyed, nothing: its block may be another group's by now, and a proxy engine would
    // hand its network thread a postbox over a freed node block (every engine's abort comes here).
    if (this.destroyed) return;
    this.engine.abort(reason);
  }

  /** Ends the communicator; a group's shared memory is freed once every member has destroyed it. */
  destroy(): void {
    const n = this.engine.pending();
    if (n) fail('INVALID_ARGUMENT', `destroy: ${n} op(s) still pending; wait for them first`);
    if (this.destroyed) return;
    this.destroyed = true;
    this.engine.close();
    // No op is checked after this: what unseen ops hold besides buffers (coalesced buckets) goes back.
    this.issue.inFlight.clear();
    this.placement.release?.();
  }
}
