// The options of a call that forms groups from a communicator (createGroup, split, splitByNode,
// shrink): checked, then laid over the communicator's own, which its groups inherit. Such a call
// returns a promise, and rejects it rather than throw, bad arguments included.

import { checkOptions } from '../core/options.js';
import { COMMUNICATOR_OPTIONS, type CommunicatorOptions } from './options.js';

/** The options `what` was called with, checked, over `base`. */
export function groupOptions(what: string, options: unknown, base: CommunicatorOptions): CommunicatorOptions {
  const o = checkOptions<CommunicatorOptions>(what, options, COMMUNICATOR_OPTIONS, '{ timeoutMs: 60000 }');
  return { ...base, ...o };
}

/** `run()`'s promise, or a rejected one when it throws. */
export function rejecting<T>(run: () => Promise<T>): Promise<T> {
  try {
    return run();
  } catch (e) {
    return Promise.reject(e);
  }
}
