// The calls that form groups from a communicator (createGroup, split, splitByNode, shrink): their
// options checked, then laid over the communicator's own, which its groups inherit. Such a call
// returns a promise, and rejects it rather than throw, bad arguments included.

import { fail, type WebcclError } from '../core/errors.js';
import { checkOptions } from '../core/options.js';
import { createGroup, type Former, type GroupMember, splitGroups } from '../groups/form.js';
import { shrinkComm } from '../groups/shrink.js';
import { commTimeoutMs } from './comm-wiring.js';
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

/** What a communicator lends the calls that form groups of it (the Communicator class is C). */
export interface FormingParts<C extends GroupMember> extends Former<C, CommunicatorOptions> {
  /** The communicator's own options, which its groups inherit. */
  options: CommunicatorOptions;
  /** Whether the communicator was destroyed (it then forms no groups). */
  destroyed(): boolean;
  /** The failure that broke the communicator, if one did (what shrink() starts from). */
  failure(): WebcclError | undefined;
}

/** createGroup, split, splitByNode and shrink of one communicator. */
export class GroupForming<C extends GroupMember> {
  private shrunk = false;

  constructor(private readonly f: FormingParts<C>) {}

  createGroup(ranks: readonly (number | string)[], options: unknown): Promise<C | null> {
    return this.forming('createGroup', options, (o) => createGroup(this.f, ranks, o));
  }

  split(what: string, color: number | null, key: number, options: unknown): Promise<C | null> {
    return this.forming(what, options, (o) => splitGroups(this.f, color, key, o));
  }

  shrink(options: unknown): Promise<C> {
    return rejecting(() => {
      const opts = groupOptions('shrink', options, this.f.options);
      if (this.shrunk)
        fail(
          'INVALID_ARGUMENT',
          'shrink: this communicator was shrunk already; shrink the communicator that call returned',
        );
      this.shrunk = true;
      return shrinkComm(this.f, this.f.failure(), opts, commTimeoutMs(opts));
    });
  }

  private forming(
    what: string,
    options: unknown,
    form: (o: CommunicatorOptions) => Promise<C | null>,
  ): Promise<C | null> {
    return rejecting(() => {
      if (this.f.destroyed()) fail('ABORTED', `${what}: the communicator was destroyed`);
      return form(groupOptions(what, options, this.f.options));
    });
  }
}
