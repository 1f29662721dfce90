// Communicator: a group of ranks with its own op sequence. Validates every call before
// anything moves, queues ops so they complete in issue order, and hands each to the
// shared-memory step loops through its descriptor.
import { DTYPE_CODE, DTYPE_SIZE, type Dtype, OP_CODE, type ReduceOp, parseDtype, parseOp, ARRAY_OF } from '../core/dtypes.js';
import { WebcclError, fail } from '../core/errors.js';
import { ABORT_REASON, ALGO, D, KIND, type Algo, type Kind, descOffset } from '../core/layout.js';
import { envNumber } from '../core/config.js';
import type { NodeHeap } from '../core/heap.js';
import { chooseAllReduceAlgo, chunkElems } from '../tuner/tuner.js';
import { type Buf, type BufferArg, type TypedArray, overlaps, toBuf } from './buffers.js';
import { Work, type WorkDriver } from './work.js';
import { ShmRunner, type RunningOp } from './shm-runner.js';
import type { RankContext } from './context.js';

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
  work: Work;
  kind: Kind;
  started: boolean;
  buffers: Uint8Array[];
  write: (desc: number) => void;
}

export const DEFAULT_TIMEOUT_MS = 300_000;

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

  constructor(private readonly ctx: RankContext, private readonly opts: CommunicatorOptions = {}) {
    this.rank = ctx.rank;
    this.size = ctx.size;
    this.runner = new ShmRunner(ctx.core, ctx.comm, ctx.rank, ctx.size);
    this.desc = descOffset(ctx.comm, ctx.size, ctx.rank);
  }

  // ---------------------------------------------------------------- collectives

  allReduce(x: BufferArg, o: CollectiveOptions = {}): Work {
    const inp = this.buf(x, 'allReduce buffer');
    const out = o.out === undefined ? inp : this.buf(o.out, 'allReduce out');
    this.sameShape('allReduce', inp, out);
    const op = parseOp(o.op, inp.dtype);
    const algo = chooseAllReduceAlgo(inp.count * DTYPE_SIZE[inp.dtype], this.size, o.algo, this.opts.algo);
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

  stats(): { ops: number; bytes: number; failed: number; busyMs: number; pending: number } {
    return { ...this.counters, pending: this.queue.length };
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

  private buf(x: unknown, what: string): Buf {
    return toBuf(x, what, (b) => this.ctx.sharedBuffers.has(b) || b === this.ctx.core.memory.buffer);
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
    const buffers = [input, output].filter((b): b is Buf => b !== null).map((b) => b.bytes);
    for (const q of this.queue) {
      if (buffers.some((b) => q.buffers.some((c) => overlaps(b, c)))) {
        fail('BUFFER_BUSY', `${kind}: a buffer is still in use by ${q.name} #${q.seq}, which has not completed; wait for it first`);
      }
    }
    const es = DTYPE_SIZE[dtype];
    if (count > 0x7fffffff) fail('INVALID_ARGUMENT', `${kind}: count ${count} exceeds 2^31-1 elements`);
    const timeoutMs = o.timeoutMs ?? this.opts.timeoutMs ?? envNumber('WEBCCL_TIMEOUT_MS') ?? DEFAULT_TIMEOUT_MS;
    const seq = this.seq++;
    const work = new Work(kind, seq, this, this.ctx.canBlock);
    const chunk = kind === 'barrier' ? 0 : chunkElems(kind, this.ctx.slotBytes, es, this.size);
    const q: QueuedOp = {
      name: kind, seq, desc: this.desc, elemBytes: es, input, output, deadline: Infinity, timeoutMs,
      work, kind, started: false, buffers,
      write: (desc) => {
        const i32 = this.runner.views().i32;
        const set = (f: number, v: number) => (i32[(desc + f) >> 2] = v);
        set(D.KIND, KIND[kind]); set(D.ALGO, ALGO[algo]); set(D.DTYPE, DTYPE_CODE[dtype]); set(D.OP, OP_CODE[op]);
        set(D.COUNT, count); set(D.ROOT, root); set(D.RANK, this.rank); set(D.NRANKS, this.size);
        set(D.IN, input?.addr ?? 0); set(D.OUT, output?.addr ?? 0);
        set(D.CHUNK, chunk); set(D.NCHUNKS, chunk ? Math.max(1, Math.ceil(count / chunk)) : 1);
        set(D.STEP, 0); set(D.PHASE, 0); set(D.SUB, 0); set(D.MODE, 0); set(D.STEPS_USED, 0);
        set(D.BASE, this.stepBase); set(D.SEQ, seq); set(D.SPIN, this.ctx.spinPolls); set(D.COMM, this.ctx.comm);
      },
    };
    this.queue.push(q);
    this.counters.ops++;
    this.counters.bytes += count * es;
    this.progress(work, false);
    return work;
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
        const err = this.runner.abortError(`${q.name} #${q.seq}`);
        if (err) throw err;
        q.started = true;
        q.deadline = performance.now() + q.timeoutMs;
        q.work.timing.startedAt = performance.now();
        q.write(q.desc);
      }
      if (!this.runner.run(q, block)) return false;
      this.stepBase += this.runner.field(q.desc, D.STEPS_USED);
      this.queue.shift();
      this.counters.busyMs += performance.now() - q.work.timing.startedAt;
      q.work.settle();
      return true;
    } catch (e) {
      this.settleFailed(q, e);
      return true;
    }
  }

  private settleFailed(q: QueuedOp, e: unknown): void {
    const err = WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e));
    this.counters.failed++;
    if (err.code === 'MISMATCH') {
      // Every rank saw the same disagreement at the op's first step: the communicator stays usable.
      this.stepBase += 1;
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
