// What a communicator counts for stats(): its ops (the engine adds to the counters as they end),
// tensor layout conversions, and the setup barrier initCommGroup ends with, which is setup
// rather than the caller's work and so is left out of every count.

import type { Engine, OpCounters } from '../engine/engine.js';
import type { ConversionCounters } from '../layouts/plan.js';

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
  stats(engine: Engine) {
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
