// An op's deadline across nodes. When it passes, the TIMEOUT names the ranks this one waits for
// and, through the job's store, the rank at the root of the stall (blame.ts stallRoot): the ranks
// awaited may themselves wait for another. A TIMEOUT of the node phase is followed the same way.

import { WebcclError } from '../core/errors.js';
import type { JobStore } from '../engine/job.js';
import { stallGraceMs, stallRoot, stallText } from './blame.js';

/** An op that waits: this rank, the op's number and deadline, and the store that follows the stall. */
export interface Waiting {
  store: JobStore | undefined;
  rank: number;
  seq: number;
  timeoutMs: number;
}

/**
 * `running`, failed with a TIMEOUT when the deadline passes first, naming the ranks `awaited`
 * then returns and the rank at the root of the stall.
 */
export function withDeadline(running: Promise<void>, at: Waiting, awaited: () => number[]): Promise<void> {
  const ms = at.timeoutMs;
  // Whichever settles first decides: the op, or the TIMEOUT (raised once the stall's root is
  // known). One promise and one timer an op: a race of two promises and a finally cost more.
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      const waitingFor = awaited();
      void stallRoot(at.store, at.rank, at.seq, waitingFor, stallGraceMs(ms)).then((stall) => {
        const direct = waitingFor.length
          ? ` waiting for rank${waitingFor.length > 1 ? 's' : ''} ${waitingFor.join(', ')}`
          : '';
        reject(
          new WebcclError('TIMEOUT', `timed out after ${ms} ms${direct}${stallText(stall)}`, {
            missing: stall.missing,
            awaited: waitingFor,
          }),
        );
      });
    }, ms);
    running.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/**
 * `nodeErr` is a TIMEOUT of the node phase naming node mates (by local rank, `nodeRanks` gives
 * their world ranks) that did not arrive: a mate may itself wait on the network, so the stall is
 * followed from it.
 */
export async function nodeStall(nodeErr: WebcclError, at: Waiting, nodeRanks: readonly number[]): Promise<WebcclError> {
  const mates = ((nodeErr.details.missing as number[] | undefined) ?? [])
    .map((l) => nodeRanks[l])
    .filter((r) => r !== undefined);
  const stall = await stallRoot(at.store, at.rank, at.seq, mates, stallGraceMs(at.timeoutMs));
  return new WebcclError('TIMEOUT', `${nodeErr.reason}${stallText(stall)}`, {
    ...nodeErr.details,
    missing: stall.missing,
    awaited: mates,
  });
}
