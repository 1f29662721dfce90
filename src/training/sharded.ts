// A sharded optimizer step (ZeRO stage 1, torch's ZeroRedundancyOptimizer): the parameters are
// flattened into one vector padded to a multiple of the rank count, each rank owns one block of
// it, the gradients are reduce-scattered so each rank receives the reduced gradient of its
// block only, each rank updates its block and its block's optimizer state, and an allGather
// hands every rank the whole updated vector. Optimizer state per rank is 1/size of an unsharded
// optimizer's; docs/training.md has the memory figures.

import { fail } from '../core/errors.js';
import { boolean, checkOptions, func, integer, type OptionSpec, timeoutMs } from '../core/options.js';
import type { Work } from '../engine/work.js';
import { checkComm, checkGradList, checkParams, settle, type TrainingComm } from './comm.js';
import { type OptimizerState, stateBytes, type UpdateFn } from './optimizers.js';

/** Options of `createShardedOptimizer`. */
export interface ShardedOptimizerOptions {
  /** Divide the reduced gradients by the number of ranks (default true): the mean over ranks. */
  average?: boolean;
  /** The rank whose parameters `broadcastParameters()` sends (default 0). */
  root?: number;
  /** Deadline of every collective issued, ms (default: the communicator's). */
  timeoutMs?: number;
}

/** What a rank of a sharded optimizer holds, in bytes. */
export interface ShardMemory {
  /** The optimizer state of this rank's shard (the typed arrays the update keeps). */
  stateBytes: number;
  /** The flat parameter and gradient buffers in the node's shared memory (each the padded length). */
  bufferBytes: number;
  /** stateBytes + bufferBytes. */
  totalBytes: number;
  /** Elements this rank updates (its block, without the padding). */
  shardElements: number;
  /** Elements of all parameters together. */
  totalElements: number;
}

/** What `createShardedOptimizer` returns. */
export interface ShardedOptimizer {
  /** This rank's block of the flattened parameters: elements [start, end) (end excludes padding). */
  readonly shard: { readonly start: number; readonly end: number };
  /** The optimizer state of this rank's block (what the update function keeps). */
  readonly state: OptimizerState;
  /** Steps taken. */
  readonly steps: number;
  /** Sends the root's parameters to every rank, into each rank's own arrays (before training). */
  broadcastParameters(): Promise<void>;
  /**
   * One optimizer step from this rank's gradients (one Float32Array per parameter): the
   * reduced gradient of this rank's block, the update of that block, and every rank's arrays
   * updated from every block.
   */
  step(grads: Float32Array[]): Promise<void>;
  /** Bytes this rank holds: optimizer state (1/size of the unsharded optimizer's) and buffers. */
  memoryPerRank(): ShardMemory;
  /** Frees the flat buffers; refused while a step is under way. */
  destroy(): void;
}

const OPTIONS = { average: boolean, root: integer(0, 0x7fffffff), timeoutMs } as const satisfies OptionSpec;

/**
 * A ZeRO-1 optimizer over `comm` for `params` (one Float32Array per parameter tensor, owned by
 * the caller, the same list on every rank): `update` (such as `sgd(...)` or `adam(...)`) is applied
 * by each rank to its block of the flattened parameters only.
 */
export function createShardedOptimizer(
  comm: TrainingComm,
  params: Float32Array[],
  update: UpdateFn,
  options?: ShardedOptimizerOptions,
): ShardedOptimizer {
  const where = 'createShardedOptimizer';
  const c = checkComm(where, comm);
  const ps = checkParams(where, params);
  if (func(update))
    fail(
      'INVALID_ARGUMENT',
      `${where}: update must be a function (param, grad, state, step) => void, such as sgd({ lr: 0.1 }) or adam()`,
      { option: 'update' },
    );
  const o = checkOptions<ShardedOptimizerOptions>(where, options, OPTIONS, '{ average: true }');
  if (o.root !== undefined && o.root >= c.size)
    fail('INVALID_ARGUMENT', `${where}: root ${o.root} is outside the communicator's 0..${c.size - 1} range`, {
      option: 'root',
      value: o.root,
    });
  return new Sharded(c, ps, update, o);
}

class Sharded implements ShardedOptimizer {
  readonly shard: { readonly start: number; readonly end: number };
  readonly state: OptimizerState = {};
  steps = 0;
  private readonly sizes: number[];
  private readonly offsets: number[];
  private readonly total: number;
  /** Elements per rank's block (the padded length over size). */
  private readonly block: number;
  private readonly flat: Float32Array;
  private readonly grads: Float32Array;
  private busy = false;
  private destroyed = false;

  constructor(
    private readonly comm: TrainingComm,
    private readonly params: Float32Array[],
    private readonly update: UpdateFn,
    private readonly o: ShardedOptimizerOptions,
  ) {
    this.sizes = params.map((p) => p.length);
    this.offsets = [];
    let t = 0;
    for (const n of this.sizes) {
      this.offsets.push(t);
      t += n;
    }
    this.total = t;
    this.block = Math.max(1, Math.ceil(t / comm.size));
    const start = Math.min(t, comm.rank * this.block);
    this.shard = { start, end: Math.min(t, start + this.block) };
    this.flat = comm.alloc('f32', this.block * comm.size) as Float32Array;
    try {
      this.grads = comm.alloc('f32', this.block * comm.size) as Float32Array;
    } catch (e) {
      comm.free(this.flat);
      throw e;
    }
    this.grads.fill(0); // the padding stays zero: its reduced gradient is zero on every rank
  }

  async broadcastParameters(): Promise<void> {
    this.usable('broadcastParameters');
    this.busy = true;
    try {
      this.pack(0, this.total);
      await this.run([() => this.comm.broadcast(this.flat, { root: this.o.root ?? 0, timeoutMs: this.o.timeoutMs })]);
      this.unpack();
    } finally {
      this.busy = false;
    }
  }

  async step(grads: Float32Array[]): Promise<void> {
    this.usable('step');
    const gs = checkGradList('step', grads, this.sizes);
    this.busy = true;
    try {
      gs.forEach((g, i) => this.grads.set(g, this.offsets[i]));
      const r = this.comm.rank;
      const mine = (x: Float32Array) => x.subarray(r * this.block, (r + 1) * this.block);
      const op = this.o.average === false ? 'sum' : 'avg';
      // In place: this rank's block of the gradient vector receives the reduction of that block.
      await this.run([
        () => this.comm.reduceScatter(mine(this.grads), this.grads, { op, timeoutMs: this.o.timeoutMs }),
      ]);
      const { start, end } = this.shard;
      this.pack(start, end); // the caller may have changed its parameters since the last step
      this.steps++;
      this.update(this.flat.subarray(start, end), this.grads.subarray(start, end), this.state, this.steps);
      await this.run([() => this.comm.allGather(this.flat, mine(this.flat), { timeoutMs: this.o.timeoutMs })]);
      this.unpack();
    } finally {
      this.busy = false;
    }
  }

  memoryPerRank(): ShardMemory {
    const s = stateBytes(this.state);
    const b = this.flat.byteLength + this.grads.byteLength;
    return {
      stateBytes: s,
      bufferBytes: b,
      totalBytes: s + b,
      shardElements: this.shard.end - this.shard.start,
      totalElements: this.total,
    };
  }

  destroy(): void {
    if (this.destroyed) return;
    if (this.busy) fail('INVALID_ARGUMENT', 'destroy: a step is under way: await it first');
    this.destroyed = true;
    this.comm.free(this.flat);
    this.comm.free(this.grads);
  }

  /** Issues the ops, waits for all of them, throws the first failure. */
  private async run(issue: (() => Work)[]): Promise<void> {
    const works: Work[] = [];
    let failure: unknown;
    try {
      for (const f of issue) works.push(f());
    } catch (e) {
      failure = e;
    }
    failure = (await settle(works)) ?? failure;
    if (failure) throw failure;
  }

  /** The caller's parameters over elements [from, to) of the flat vector. */
  private pack(from: number, to: number): void {
    this.params.forEach((p, i) => {
      const a = Math.max(from, this.offsets[i]);
      const b = Math.min(to, this.offsets[i] + p.length);
      if (a < b) this.flat.set(p.subarray(a - this.offsets[i], b - this.offsets[i]), a);
    });
  }

  /** The flat vector back into the caller's arrays. */
  private unpack(): void {
    this.params.forEach((p, i) => p.set(this.flat.subarray(this.offsets[i], this.offsets[i] + p.length)));
  }

  private usable(where: string): void {
    if (this.destroyed) fail('ABORTED', `${where}: this sharded optimizer was destroyed`);
    if (this.busy) fail('INVALID_ARGUMENT', `${where}: a step or broadcastParameters() is in progress: await it first`);
  }
}
