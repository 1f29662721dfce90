// Where one thread's share of a simulation meets the others' (src/launch/simulate/threads.ts
// implements it over shared memory): at the end of every window of virtual time it hands over
// the messages bound for their ranks and the failures their ranks must hear, and they agree on
// when the next window starts and whether any rank still runs. One meeting per window.
import type { Crossing } from './network.js';
import type { Failure } from './types.js';

export interface Border {
  /** Whether this thread runs rank `r` (whole nodes run on one thread). */
  owns(r: number): boolean;
  /**
   * Sends what is bound for the other threads, with the earliest time anything of this
   * thread's may happen next (`next`, a lower bound) and how many of its ranks still run;
   * returns what the others sent here, the earliest `next` and the sum of `running`.
   */
  meet(crossings: readonly Crossing[], failures: readonly Failure[], next: number, running: number): Met;
}

export interface Met {
  crossings: Crossing[];
  failures: Failure[];
  next: number;
  running: number;
}
