// Communicator: a group of ranks with its own op sequence. Validates every call before
// anything moves, queues ops so they complete in issue order, and hands each to the
// shared-memory step loops through its descriptor.
import { DTYPE_CODE, DTYPE_SIZE, type Dtype, OP_CODE, type ReduceOp, parseDtype, parseOp, ARRAY_OF } from '../core/dtypes.js';
import { WebcclError, fail } from '../core/errors.js';
import { ABORT_REASON, ALGO, D, KIND, type Algo, type Kind, descOffset } from '../core/layout.js';
import { envNumber } from '../core/config.js';
import { type Tuning, chooseAllReduceAlgo, chunkElems, resolveTuning } from '../tuner/tuner.js';
import { type Buf, type BufferArg, type TypedArray, overlaps, sameView, toBuf } from './buffers.js';
import { Work, type WorkDriver } from './work.js';
import { ShmRunner, type RunningOp } from './shm-runner.js';
import type { RankContext } from './context.js';
import { enabled, log } from '../core/log.js';

export interface CollectiveOptions {
  op?: ReduceOp;
  root?: number;
  algo?: Algo;
  /** Output buffer for an out-of-place allReduce, broadcast or reduce. */
  out?: BufferArg;
  timeoutMs?: number;
}

export interface CommunicatorOptions {
  algo?: Algo;
  timeoutMs?: number;
}

interface QueuedOp extends RunningOp {
  name: Kind;
  work: Work;
  algo: Algo;
  dtype: Dtype;
  op: ReduceOp;
  count: number;
  root: number;
  chunk: number;
  started: boolean;
}

export const DEFAULT_TIMEOUT_MS = 300_000;
const trace = enabled('TRACE');

/** Whether a queued op reads or writes any byte of `b`. */
function touches(q: QueuedOp, b: Buf | null): boolean {
  return b !== null && ((q.input !== null && overlaps(b.bytes, q.input.bytes)) || (q.output !== null && overlaps(b.bytes, q.output.bytes)));
}

export class Communicator implements WorkDriver {
  readonly rank: number;
  readonly size: number;
  private readonly runner: ShmRunner;
  private readonly desc: number;
  private readonly queue: QueuedOp[] = [];
  private seq = 0;
  private stepBase = 0;
  private broken: WebcclError | undefined;
  private readonly counters = { ops: 0, bytes: 0, failed: 0, busyMs: 0 };
  /** Completed allReduce ops per algorithm (what the tuner or an override chose). */
  private readonly byAlgorithm: Record<Algo, number> = { direct: 0, twoshot: 0 };
  private readonly tuning: Tuning;
  private readonly timeoutMs: number;

  constructor(private readonly ctx: RankContext, opts: CommunicatorOptions = {}) {
    this.rank = ctx.rank;
    this.size = ctx.size;
    this.runner = new ShmRunner(ctx.core, ctx.comm, ctx.rank, ctx.size);
    this.desc = descOffset(ctx.comm, ctx.size, ctx.rank);
    this.tuning = resolveTuning(ctx.size, opts.algo);
    this.timeoutMs = opts.timeoutMs ?? envNumber('WEBCCL_TIMEOUT_MS') ?? DEFAULT_TIMEOUT_MS;
  }

  // ---------------------------------------------------------------- collectives

  allReduce(x: BufferArg, o: CollectiveOptions = {}): Work {
    const inp = this.buf(x, 'allReduce buffer');
    const out = o.out === undefined ? inp : this.buf(o.out, 'allReduce out');
    this.sameShape('allReduce', inp, out);
    const op = parseOp(o.op, inp.dtype);
    const algo = chooseAllReduceAlgo(inp.count * DTYPE_SIZE[inp.dtype], this.tuning, o.algo);
    return this.enqueue('allReduce', algo, inp.dtype, op, inp.count, 0, inp, out, o);
  }

  /** out (size × n elements) receives every rank's input (n elements), in rank order. */
  allGather(out: BufferArg, input: BufferArg, o: CollectiveOptions = {}): Work {
    const ob = this.buf(out, 'allGather output');
    const ib = this.buf(input, 'allGather input');
    this.sameDtype('allGather', ob, ib);
    if (ob.count !== ib.count * this.size) {
      fail('SIZE_MISMATCH', `allGather: output holds ${ob.count} elements; it must hold size × input count = ${this.size} × ${ib.count} = ${this.size * ib.count} (every rank contributes the same count, as in NCCL)`);
    }
    return this.enqueue('allGather', 'direct', ib.dtype, 'sum', ib.count, 0, ib, ob, o);
  }

  /** out (n elements) receives the reduction over ranks of block `rank` of input (size × n). */
  reduceScatter(out: BufferArg, input: BufferArg, o: CollectiveOptions = {}): Work {
    const ob = this.buf(out, 'reduceScatter output');
    const ib = this.buf(input, 'reduceScatter input');
    this.sameDtype('reduceScatter', ob, ib);
    if (ib.count !== ob.count * this.size) {
      fail('SIZE_MISMATCH', `reduceScatter: input holds ${ib.count} elements; it must hold size × output count = ${this.size} × ${ob.count} = ${this.size * ob.count} (equal per-rank counts, as in NCCL)`);
    }
    const op = parseOp(o.op, ib.dtype);
    return this.enqueue('reduceScatter', 'direct', ib.dtype, op, ob.count, 0, ib, ob, o);
  }

  broadcast(x: BufferArg, o: CollectiveOptions = {}): Work {
    const xb = this.buf(x, 'broadcast buffer');
    const out = o.out === undefined ? xb : this.buf(o.out, 'broadcast out');
    this.sameShape('broadcast', xb, out);
    const root = this.root(o.root, 'broadcast');
    return this.enqueue('broadcast', 'direct', xb.dtype, 'sum', xb.count, root, xb, out, o);
  }

  /** Reduces every rank's x into the root's x (or o.out on the root). */
  reduce(x: BufferArg, o: CollectiveOptions = {}): Work {
    const xb = this.buf(x, 'reduce buffer');
    const out = o.out === undefined ? xb : this.buf(o.out, 'reduce out');
    this.sameShape('reduce', xb, out);
    const op = parseOp(o.op, xb.dtype);
    const root = this.root(o.root, 'reduce');
    return this.enqueue('reduce', 'direct', xb.dtype, op, xb.count, root, xb, out, o);
  }

  barrier(o: { timeoutMs?: number } = {}): Work {
    return this.enqueue('barrier', 'direct', 'u8', 'sum', 0, 0, null, null, o);
  }

  // ---------------------------------------------------------------- memory and lifecycle

  /** A buffer in the node's shared memory: collectives use it in place, with no copy. */
  alloc(dtype: Dtype, count: number): TypedArray | { data: Uint16Array; dtype: Dtype } {
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
  stats(): { ops: number; bytes: number; failed: number; busyMs: number; pending: number; allReduceAlgorithms: Record<Algo, number> } {
    return { ...this.counters, pending: this.queue.length, allReduceAlgorithms: { ...this.byAlgorithm } };
  }

  /** Fails every pending op here and on every other rank of the communicator. */
  abort(reason = 'abort() called'): void {
    this.runner.abort(ABORT_REASON.USER, this.rank);
    this.fail(new WebcclError('ABORTED', `communicator aborted on rank ${this.rank}: ${reason}`));
  }

  destroy(): void {
    if (this.queue.length) fail('INVALID_ARGUMENT', `destroy: ${this.queue.length} op(s) still pending; wait for them first`);
    this.broken ??= new WebcclError('ABORTED', 'communicator destroyed');
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
    const r = root ?? 0;
    if (!Number.isInteger(r) || (r as number) < 0 || (r as number) >= this.size) {
      fail('INVALID_ARGUMENT', `${what}: invalid root ${String(r)} (root should be in the 0..${this.size - 1} range)`);
    }
    return r as number;
  }

  // ---------------------------------------------------------------- queue and progress

  private enqueue(kind: Kind, algo: Algo, dtype: Dtype, op: ReduceOp, count: number, root: number,
                  input: Buf | null, output: Buf | null, o: { timeoutMs?: number }): Work {
    if (this.broken) throw this.broken;
    for (const q of this.queue) {
      if (touches(q, input) || touches(q, output)) {
        fail('BUFFER_BUSY', `${kind}: a buffer is still in use by ${q.name} #${q.seq}, which has not completed; wait for it first`);
      }
    }
    if (count > 0x7fffffff) fail('INVALID_ARGUMENT', `${kind}: count ${count} exceeds 2^31-1 elements`);
    const es = DTYPE_SIZE[dtype];
    const seq = this.seq++;
    const q: QueuedOp = {
      name: kind, seq, desc: this.desc, elemBytes: es, input, output, deadline: Infinity, timeoutMs: o.timeoutMs ?? this.timeoutMs,
      work: new Work(kind, seq, this, this.ctx.canBlock), algo, dtype, op, count, root,
      chunk: kind === 'barrier' ? 0 : chunkElems(kind, this.ctx.slotBytes, es, this.size), started: false,
    };
    // An op that starts at once takes its start time as its issue time (one clock read fewer).
    if (this.queue.length) q.work.timing.issuedAt = performance.now();
    this.queue.push(q);
    this.counters.ops++;
    this.counters.bytes += count * es;
    this.progress(q.work, false);
    return q.work;
  }

  /** Fills this rank's descriptor in shared memory: from here on the op's state lives there. */
  private writeDescriptor(q: QueuedOp): void {
    const i32 = this.runner.views().i32;
    const d = q.desc >> 2;
    i32[d + D.KIND / 4] = KIND[q.name];
    i32[d + D.ALGO / 4] = ALGO[q.algo];
    i32[d + D.DTYPE / 4] = DTYPE_CODE[q.dtype];
    i32[d + D.OP / 4] = OP_CODE[q.op];
    i32[d + D.COUNT / 4] = q.count;
    i32[d + D.ROOT / 4] = q.root;
    i32[d + D.RANK / 4] = this.rank;
    i32[d + D.NRANKS / 4] = this.size;
    i32[d + D.IN / 4] = q.input?.addr ?? 0;
    i32[d + D.OUT / 4] = q.output?.addr ?? 0;
    i32[d + D.IN_PLACE / 4] = q.input !== null && q.output !== null && sameView(q.input.bytes, q.output.bytes) ? 1 : 0;
    i32[d + D.CHUNK / 4] = q.chunk;
    i32[d + D.NCHUNKS / 4] = q.chunk ? Math.max(1, Math.ceil(q.count / q.chunk)) : 1;
    i32[d + D.STEP / 4] = 0;
    i32[d + D.PHASE / 4] = 0;
    i32[d + D.SUB / 4] = 0;
    i32[d + D.MODE / 4] = 0;
    i32[d + D.STEPS_USED / 4] = 0;
    i32[d + D.BASE / 4] = this.stepBase;
    i32[d + D.SEQ / 4] = q.seq;
    i32[d + D.COMM / 4] = this.ctx.comm;
  }

  /** WorkDriver: runs queued ops in order until `w` completes (or, without block, until one would wait). */
  progress(w: Work, block: boolean): void {
    while (this.queue.length && !w.settled) {
      const q = this.queue[0];
      if (!this.step(q, block)) return;
    }
  }

  async progressAsync(w: Work): Promise<void> {
    while (this.queue.length && !w.settled) {
      const q = this.queue[0];
      if (!this.step(q, false)) await this.runner.sleepAsync(q).catch((e) => this.settleFailed(q, e));
    }
  }

  /** Starts/advances the head op; true when it settled. */
  private step(q: QueuedOp, block: boolean): boolean {
    try {
      if (this.broken) throw this.broken;
      if (!q.started) {
        if (this.runner.aborted()) throw this.runner.abortError(`${q.name} #${q.seq}`);
        q.started = true;
        const now = performance.now();
        q.deadline = now + q.timeoutMs;
        q.work.timing.startedAt = now;
        if (Number.isNaN(q.work.timing.issuedAt)) q.work.timing.issuedAt = now;
        this.writeDescriptor(q);
      }
      if (!this.runner.run(q, block, block ? this.ctx.spinPolls : this.ctx.tryPolls)) return false;
      this.endSteps(q);
      this.queue.shift();
      q.work.settle();
      this.counters.busyMs += q.work.durationMs;
      if (q.name === 'allReduce') this.byAlgorithm[q.algo]++;
      if (trace) log('TRACE', `rank ${this.rank}: ${q.name} #${q.seq} ${q.algo} ${q.dtype} ${q.op} count ${q.count} done in ${(q.work.durationMs * 1000).toFixed(1)} us`);
      return true;
    } catch (e) {
      this.settleFailed(q, e);
      return true;
    }
  }

  /** The next op starts where this one's steps ended: its (possibly advanced) base plus the steps it used. */
  private endSteps(q: QueuedOp): void {
    this.stepBase = this.runner.field(q.desc, D.BASE) + this.runner.field(q.desc, D.STEPS_USED);
  }

  private settleFailed(q: QueuedOp, e: unknown): void {
    const err = WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e));
    this.counters.failed++;
    if (err.code === 'MISMATCH') {
      // Every rank saw the same disagreement at the op's first step: the communicator stays usable.
      this.endSteps(q);
      this.queue.shift();
      q.work.settle(err);
      return;
    }
    this.fail(err);
  }

  /** The communicator is unusable: fail every queued op with the same error. */
  private fail(err: WebcclError): void {
    this.broken ??= err;
    for (const q of this.queue.splice(0)) q.work.settle(err);
  }
}
