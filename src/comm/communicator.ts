// Communicator: a group of ranks with its own op sequence. Validates every call before
// anything moves, then hands the op to its engine: shared memory when every rank is on this
// node, the network algorithms when the group spans nodes.
import { DTYPE_SIZE, type Dtype, type DtypeName, type ReduceOp, parseDtype, parseOp, ARRAY_OF } from '../core/dtypes.js';
import { WebcclError, fail } from '../core/errors.js';
import type { Kind } from '../core/layout.js';
import { envString } from '../core/config.js';
import { type Buf, type BufferArg, type TypedArray, overlaps, sameView, toBuf } from './buffers.js';
import { type ConversionCounters, WIRE_SIGNATURE, layoutsFit, planLayouts } from './layout-plan.js';
import type { Layout } from './tensor-layout.js';
import { BuffersInFlight } from './in-flight.js';
import { InputCheck } from './input-check.js';
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
  /** The layout tensors cross in (every rank passes the same); each rank converts its own to it and back. */
  wireLayout?: Layout;
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
  private readonly conversions: ConversionCounters = { conversions: 0, conversionBytes: 0, conversionMs: 0 };
  private readonly inFlight = new BuffersInFlight();
  /** WEBCCL_CHECK=1: fail an op whose buffers the caller writes while it is in flight. */
  private readonly checkInputs: boolean;
  private destroyed = false;

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
    this.checkInputs = checkMode();
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
    if (this.destroyed) fail('ABORTED', 'alloc: the communicator was destroyed');
    const d = parseDtype(dtype);
    if (!Number.isSafeInteger(count) || count < 0) fail('INVALID_ARGUMENT', `alloc: count must be a non-negative integer, got ${count}`);
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

  /**
   * Counters since creation: ops issued, bytes (per rank), failures, time busy, allReduce
   * algorithms used, and tensor layout conversions (count, bytes read, time).
   */
  stats(): { ops: number; bytes: number; failed: number; busyMs: number; pending: number; allReduceAlgorithms: Record<string, number> } & ConversionCounters {
    return { ...this.counters, pending: this.engine.pending(), allReduceAlgorithms: this.engine.algorithms(), ...this.conversions };
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
    this.destroyed = true;
    this.engine.close();
  }

  // ---------------------------------------------------------------- argument checks

  /** Whether a buffer is (a view of) the node memory; asks the memory only for unknown SABs. */
  private readonly isShared = (b: ArrayBufferLike): boolean => {
    if (this.ctx.sharedBuffers.has(b)) return true;
    if (typeof SharedArrayBuffer === 'undefined' || !(b instanceof SharedArrayBuffer) || b !== (this.ctx.core.memory.buffer as ArrayBufferLike)) return false;
    this.ctx.sharedBuffers.add(b);
    return true;
  };

  private buf(x: unknown, what: string): Buf {
    const b = toBuf(x, what, this.isShared);
    // A view of the node memory must lie in a live block of this rank's (not a freed one).
    if (b.addr) this.ctx.heap.checkLive(b.addr, b.bytes.byteLength, what);
    return b;
  }

  private sameDtype(what: string, a: Buf, b: Buf): void {
    if (a.dtype !== b.dtype) fail('INVALID_DTYPE', `${what}: output is ${a.dtype} but input is ${b.dtype}`);
    if (a.layout || b.layout) layoutsFit(what as Kind, b, a, this.size);
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

  /**
   * Input and output may be the same view (in place) or apart; allGather's input may also be
   * exactly this rank's block of its output, and reduceScatter's output this rank's block of
   * its input (NCCL's in-place forms). Any other overlap would let the op read what it has
   * already overwritten.
   */
  private noPartialOverlap(name: Kind, input: Buf, output: Buf): void {
    if (!overlaps(input.bytes, output.bytes) || sameView(input.bytes, output.bytes)) return;
    const [small, large] = input.bytes.byteLength < output.bytes.byteLength ? [input.bytes, output.bytes] : [output.bytes, input.bytes];
    const blockForm = (name === 'allGather' && small === input.bytes) || (name === 'reduceScatter' && small === output.bytes);
    const ownBlock = small.byteLength * this.size === large.byteLength && small.byteOffset === large.byteOffset + this.rank * small.byteLength;
    if (blockForm && ownBlock) return;
    const span = (b: Uint8Array) => `bytes ${b.byteOffset}..${b.byteOffset + b.byteLength}`;
    fail('INVALID_ARGUMENT', `${name}: output (${span(output.bytes)}) and input (${span(input.bytes)}) of one ArrayBuffer overlap without being the same view; pass the same view for in place, or buffers apart`, {
      overlap: 'partial',
    });
  }

  // ---------------------------------------------------------------- hand-off

  private enqueue(name: Kind, algo: unknown, dtype: Dtype, op: ReduceOp, count: number, root: number,
                  input: Buf | null, output: Buf | null, o: { timeoutMs?: number; wireLayout?: unknown; [WIRE_SIGNATURE]?: number }): Work {
    if (input && output) this.noPartialOverlap(name, input, output);
    for (const b of [input, output]) {
      const busy = b && this.inFlight.heldBy(b);
      if (busy) fail('BUFFER_BUSY', `${name}: a buffer is still in use by ${busy}, which has not been waited for; wait for it (or a later op) first`);
    }
    if (count > 0x7fffffff) fail('INVALID_ARGUMENT', `${name}: count ${count} exceeds 2^31-1 elements`);
    const check = this.checkInputs && input ? new InputCheck(name, input, output) : undefined;
    // Tensors with layouts may run on converted copies (layout-plan.ts); plain buffers as they are.
    const plan = planLayouts({ core: this.ctx.core, heap: this.ctx.heap, rank: this.rank, size: this.size, counters: this.conversions }, name, input, output, o.wireLayout, o[WIRE_SIGNATURE]);
    let work: Work;
    try {
      work = this.engine.submit({
        name, algo, dtype, op, count: plan?.count ?? count, root, input: plan ? plan.input : input, output: plan ? plan.output : output,
        timeoutMs: o.timeoutMs, check, layout: plan?.layout,
      });
    } catch (e) {
      plan?.finish(e);
      throw e;
    }
    if (plan) work.beforeSettle((e) => plan.finish(e));
    this.inFlight.add(work, input, output);
    this.counters.ops++;
    this.counters.bytes += count * DTYPE_SIZE[dtype];
    return work;
  }
}

/** WEBCCL_CHECK: 1 turns the in-flight buffer check on, 0 (or unset) off. */
function checkMode(): boolean {
  const v = envString('WEBCCL_CHECK');
  if (v === undefined || v === '0') return false;
  if (v === '1') return true;
  return fail('INVALID_ARGUMENT', `WEBCCL_CHECK=${JSON.stringify(v)}: expected 1 or 0`);
}
