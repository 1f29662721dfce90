// Communicator: a group of ranks with its own op sequence. Validates every call before
// anything moves, then hands the op to its engine: shared memory when every rank is on this
// node, the network algorithms when the group spans nodes.
import { DTYPE_SIZE, type Dtype, type DtypeName, type ReduceOp, parseDtype, parseOp, ARRAY_OF } from '../core/dtypes.js';
import { WebcclError, fail } from '../core/errors.js';
import type { Kind } from '../core/layout.js';
import { type Buf, type BufferArg, type TypedArray, toBuf } from './buffers.js';
import type { Work } from './work.js';
import type { Engine, OpCounters } from './engine.js';
import type { FlightEntry } from './flight-recorder.js';
import { ShmEngine } from './shm-engine.js';
import type { RankContext } from './context.js';
import { collectiveOptions, communicatorOptions, envTimeoutMs } from './options.js';
import { showValue } from '../core/options.js';

export interface CollectiveOptions {
  op?: ReduceOp;
  root?: number;
  /** An algorithm of the README's table that suits the communicator (direct, twoshot on one node; ring, doubling, hierarchical across nodes). */
  algo?: string;
  /** Output buffer for an out-of-place allReduce, broadcast or reduce. */
  out?: BufferArg;
  timeoutMs?: number;
}

export interface CommunicatorOptions {
  algo?: string;
  timeoutMs?: number;
}

export const DEFAULT_TIMEOUT_MS = 300_000;

/** What runs a communicator's ops, given the options every engine shares. */
export type EngineFactory = (counters: OpCounters, commAlgo: unknown, timeoutMs: number) => Engine;

export class Communicator {
  readonly rank: number;
  readonly size: number;
  /** Whether the ranks span several nodes: ops then complete on the event loop (await them; waitSync() is refused). */
  readonly acrossNodes: boolean;
  private readonly engine: Engine;
  private readonly counters: OpCounters = { ops: 0, bytes: 0, failed: 0, busyMs: 0 };

  /**
   * A communicator over the ranks of `ctx`'s node; with `world`, over the ranks of several
   * nodes (rank and size are then the world's, and `ctx` is this rank's node).
   */
  constructor(private readonly ctx: RankContext, options?: CommunicatorOptions, world?: { rank: number; size: number; engine: EngineFactory }) {
    const opts = communicatorOptions(options);
    this.rank = world?.rank ?? ctx.rank;
    this.size = world?.size ?? ctx.size;
    this.acrossNodes = world !== undefined;
    const timeoutMs = opts.timeoutMs ?? envTimeoutMs() ?? DEFAULT_TIMEOUT_MS;
    this.engine = world ? world.engine(this.counters, opts.algo, timeoutMs) : new ShmEngine(ctx, this.counters, opts.algo, timeoutMs);
  }

  // ---------------------------------------------------------------- collectives

  allReduce(x: BufferArg, opts?: CollectiveOptions): Work {
    const o = collectiveOptions('allReduce', opts);
    const inp = this.buf(x, 'allReduce buffer');
    const out = o.out === undefined ? inp : this.buf(o.out, 'allReduce out');
    this.sameShape('allReduce', inp, out);
    const op = parseOp(o.op, inp.dtype);
    return this.enqueue('allReduce', o.algo, inp.dtype, op, inp.count, 0, inp, out, o);
  }

  /** out (size × n elements) receives every rank's input (n elements), in rank order. */
  allGather(out: BufferArg, input: BufferArg, opts?: CollectiveOptions): Work {
    const o = collectiveOptions('allGather', opts);
    const ob = this.buf(out, 'allGather output');
    const ib = this.buf(input, 'allGather input');
    this.sameDtype('allGather', ob, ib);
    if (ob.count !== ib.count * this.size) {
      fail('SIZE_MISMATCH', `allGather: output holds ${ob.count} elements; it must hold size × input count = ${this.size} × ${ib.count} = ${this.size * ib.count} (every rank contributes the same count, as in NCCL)`);
    }
    return this.enqueue('allGather', undefined, ib.dtype, 'sum', ib.count, 0, ib, ob, o);
  }

  /** out (n elements) receives the reduction over ranks of block `rank` of input (size × n). */
  reduceScatter(out: BufferArg, input: BufferArg, opts?: CollectiveOptions): Work {
    const o = collectiveOptions('reduceScatter', opts);
    const ob = this.buf(out, 'reduceScatter output');
    const ib = this.buf(input, 'reduceScatter input');
    this.sameDtype('reduceScatter', ob, ib);
    if (ib.count !== ob.count * this.size) {
      fail('SIZE_MISMATCH', `reduceScatter: input holds ${ib.count} elements; it must hold size × output count = ${this.size} × ${ob.count} = ${this.size * ob.count} (equal per-rank counts, as in NCCL)`);
    }
    const op = parseOp(o.op, ib.dtype);
    return this.enqueue('reduceScatter', undefined, ib.dtype, op, ob.count, 0, ib, ob, o);
  }

  broadcast(x: BufferArg, opts?: CollectiveOptions): Work {
    const o = collectiveOptions('broadcast', opts);
    const xb = this.buf(x, 'broadcast buffer');
    const out = o.out === undefined ? xb : this.buf(o.out, 'broadcast out');
    this.sameShape('broadcast', xb, out);
    const root = this.root(o.root, 'broadcast');
    return this.enqueue('broadcast', undefined, xb.dtype, 'sum', xb.count, root, xb, out, o);
  }

  /** Reduces every rank's x into the root's x (or o.out on the root). */
  reduce(x: BufferArg, opts?: CollectiveOptions): Work {
    const o = collectiveOptions('reduce', opts);
    const xb = this.buf(x, 'reduce buffer');
    const out = o.out === undefined ? xb : this.buf(o.out, 'reduce out');
    this.sameShape('reduce', xb, out);
    const op = parseOp(o.op, xb.dtype);
    const root = this.root(o.root, 'reduce');
    return this.enqueue('reduce', undefined, xb.dtype, op, xb.count, root, xb, out, o);
  }

  barrier(opts?: { timeoutMs?: number }): Work {
    const o = collectiveOptions('barrier', opts);
    return this.enqueue('barrier', undefined, 'u8', 'sum', 0, 0, null, null, o);
  }

  // ---------------------------------------------------------------- memory and lifecycle

  /** A buffer in the node's shared memory: collectives use it in place, with no copy. */
  alloc(dtype: DtypeName, count: number): TypedArray | { data: Uint16Array; dtype: Dtype } {
    const d = parseDtype(dtype);
    if (!Number.isInteger(count) || count < 0) fail('INVALID_ARGUMENT', `alloc: count must be a non-negative integer, got ${count}`);
    const addr = this.ctx.heap.alloc(count * DTYPE_SIZE[d]);
    const buffer = this.ctx.core.memory.buffer;
    this.ctx.sharedBuffers.add(buffer);
    const data = new ARRAY_OF[d](buffer, addr, count) as TypedArray;
    return d === 'bf16' || d === 'f16' ? { data: data as Uint16Array, dtype: d } : data;
  }

  free(x: BufferArg): void {
    const b = this.buf(x, 'free');
    if (!b.addr) fail('INVALID_ARGUMENT', 'free: buffer was not allocated with comm.alloc()');
    this.ctx.heap.free(b.addr);
  }

  /** Counters since creation: ops issued, bytes (per rank), failures, time busy, allReduce algorithms used. */
  stats(): { ops: number; bytes: number; failed: number; busyMs: number; pending: number; allReduceAlgorithms: Record<string, number> } {
    return { ...this.counters, pending: this.engine.pending(), allReduceAlgorithms: this.engine.algorithms() };
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
    this.engine.abort(reason);
  }

  destroy(): void {
    const n = this.engine.pending();
    if (n) fail('INVALID_ARGUMENT', `destroy: ${n} op(s) still pending; wait for them first`);
    this.engine.close();
  }

  // ---------------------------------------------------------------- argument checks

  /** Whether a buffer is (a view of) the node memory; asks the memory only for unknown SABs. */
  private readonly isShared = (b: ArrayBufferLike): boolean => {
    if (this.ctx.sharedBuffers.has(b)) return true;
    if (!(b instanceof SharedArrayBuffer) || b !== (this.ctx.core.memory.buffer as ArrayBufferLike)) return false;
    this.ctx.sharedBuffers.add(b);
    return true;
  };

  private buf(x: unknown, what: string): Buf {
    return toBuf(x, what, this.isShared);
  }

  private sameDtype(what: string, a: Buf, b: Buf): void {
    if (a.dtype !== b.dtype) fail('INVALID_DTYPE', `${what}: output is ${a.dtype} but input is ${b.dtype}`);
  }

  private sameShape(what: string, a: Buf, b: Buf): void {
    this.sameDtype(what, b, a);
    if (a.count !== b.count) fail('SIZE_MISMATCH', `${what}: out holds ${b.count} elements, input ${a.count}; they must match`);
  }

  private root(root: unknown, what: string): number {
    const r = root === undefined ? 0 : root; // null is no root: refused, not taken as 0
    if (!Number.isInteger(r) || (r as number) < 0 || (r as number) >= this.size) {
      fail('INVALID_ARGUMENT', `${what}: invalid root ${showValue(r)} (root should be in the 0..${this.size - 1} range)`, { option: 'root', value: r });
    }
    return r as number;
  }

  // ---------------------------------------------------------------- hand-off

  private enqueue(name: Kind, algo: unknown, dtype: Dtype, op: ReduceOp, count: number, root: number,
                  input: Buf | null, output: Buf | null, o: { timeoutMs?: number }): Work {
    for (const b of [input, output]) {
      const busy = b && this.engine.busyWith(b);
      if (busy) fail('BUFFER_BUSY', `${name}: a buffer is still in use by ${busy}, which has not completed; wait for it first`);
    }
    if (count > 0x7fffffff) fail('INVALID_ARGUMENT', `${name}: count ${count} exceeds 2^31-1 elements`);
    const work = this.engine.submit({ name, algo, dtype, op, count, root, input, output, timeoutMs: o.timeoutMs });
    this.counters.ops++;
    this.counters.bytes += count * DTYPE_SIZE[dtype];
    return work;
  }
}
