// What a communicator counts for stats(): its ops (the engine adds to the counters as they end),
// tensor layout conversions, and the setup barrier initCommGroup ends with, which is setup
// rather than the caller's work and so is left out of every count.

import type { Engine, OpCounters } from '../engine/engine.js';
import type { ConversionCounters } from '../layouts/plan.js';

/** The barrier initCommGroup ends with (a method under a symbol: no user calls it). */
export const SETUP_BARRIER = Symbol('webccl.setupBarrier');

/**
 * What {@link Communicator.stats} returns: counters since the communicator was made, of the
 * caller's ops only (the barrier that ends initCommGroup is setup, left out).
 */
export interface CommunicatorStats {
  /** Ops issued. */
  ops: number;
  /** Bytes of the ops issued: each op's count × element size, on this rank. */
  bytes: number;
  /** Ops that failed. */
  failed: number;
  /** The sum of completed ops' durationMs: waitMs + moveMs. */
  busyMs: number;
  /** Of busyMs, the time spent waiting until every rank an op needs had joined it. */
  waitMs: number;
  /** Of busyMs, the rest: moving and reducing data. */
  moveMs: number;
  /** Ops issued and not yet ended, sends and recvs included. */
  pending: number;
  /** Ops a progress thread ran for this rank (the node's, or across nodes the network one). */
  threadOps: number;
  /** Ops `auto` progress held unstarted at issue for the rank's next call. */
  heldOps: number;
  /** How many allReduces ran each algorithm, by name. */
  allReduceAlgorithms: Record<string, number>;
  /** Tensor layout conversions run by this communicator's ops (docs/buffers.md, tensor layouts). */
  conversions: number;
  /** Bytes those conversions read, padding included. */
  conversionBytes: number;
  /** Their time, in ms. */
  conversionMs: number;
}

export class CommTally {
  readonly counters: OpCounters = { ops: 0, bytes: 0, failed: 0, busyMs: 0, waitMs: 0, moveMs: 0 };
  readonly conversions: ConversionCounters = { conversions: 0, conversionBytes: 0, conversionMs: 0 };
  /** Of the progress thread's ops, the setup barrier's (0 or 1), which stats() leaves out too. */
  private setupThreadOps = 0;

  /** Runs `barrier` on `engine`, then puts every count back as it was before. */
  async leaveOut(engine: Engine, barrier: () => PromiseLike<unknown>): Promise<void> {
    const before = { ...this.counters };
    const threadBefore = engine.threadOps?.() ?? 0;
    await barrier();
    this.setupThreadOps = (engine.threadOps?.() ?? 0) - threadBefore;
    Object.assign(this.counters, before);
  }

  /** The counts as stats() reports them, with what `engine` says of its ops. */
  stats(engine: Engine): CommunicatorStats {
    return {
      ...this.counters,
      pending: engine.pending(),
      threadOps: (engine.threadOps?.() ?? 0) - this.setupThreadOps,
      heldOps: engine.heldOps?.() ?? 0,
      allReduceAlgorithms: engine.algorithms(),
      ...this.conversions,
    };
  }
}
