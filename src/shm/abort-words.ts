// The abort words of a communicator and of its node in shared memory: the first rank to abort a
// communicator writes its code, detail and reason there before it publishes the abort, and every
// rank that finds a word set reads back why, to fail its op with the first cause.

import { WebcclError } from '../core/errors.js';
import { nodeAbortCause } from '../core/node.js';
import { readReasonText, writeReasonText } from '../core/reason-text.js';
import { ABORT_REASON, C } from '../core/shm-map.js';

/** What a communicator's abort says: its code (ABORT_REASON), the rank `detail` names, the reason abort() gave. */
export interface AbortNote {
  /** The communicator rank that aborts it. */
  by: number;
  code: number;
  detail: number;
  text: string;
}

/**
 * Aborts communicator `comm` unless another rank claimed its abort first: the claiming rank writes
 * its note, then publishes the abort word. (Ringing its doorbell is the caller's.)
 */
export function publishAbort(i32: Int32Array, memory: WebAssembly.Memory, comm: number, note: AbortNote): void {
  if (Atomics.compareExchange(i32, (comm + C.ABORT_CLAIM) >> 2, 0, 1) === 0) {
    Atomics.store(i32, (comm + C.ABORT_CODE) >> 2, note.code);
    Atomics.store(i32, (comm + C.ABORT_DETAIL) >> 2, note.detail);
    writeReasonText(memory, comm + C.REASON, String(note.text));
    Atomics.store(i32, (comm + C.ABORT) >> 2, note.by + 1);
  }
}

/**
 * Why communicator `comm` or its node is aborted, or null; `what` names the op that fails of it.
 * The communicator's abort comes first when both are set: it is published before the rank that
 * publishes it fails (a rank that timed out, then ends), and it names the first cause (the rank
 * it waited for).
 */
export function abortErrorOf(
  i32: Int32Array,
  memory: WebAssembly.Memory,
  comm: number,
  what: string,
): WebcclError | null {
  const by = Atomics.load(i32, (comm + C.ABORT) >> 2);
  if (by !== 0) {
    const code = Atomics.load(i32, (comm + C.ABORT_CODE) >> 2);
    const detail = Atomics.load(i32, (comm + C.ABORT_DETAIL) >> 2);
    const reason = readReasonText(memory, comm + C.REASON);
    const why =
      code === ABORT_REASON.TIMEOUT
        ? `rank ${by - 1} timed out waiting for rank ${detail}`
        : code === ABORT_REASON.USER
          ? `rank ${by - 1} called abort(${JSON.stringify(reason)})`
          : code === ABORT_REASON.PEER_ERROR
            ? `rank ${by - 1} failed${reason ? `: ${reason}` : ''}`
            : `rank ${by - 1} aborted it`;
    // `cause` says what `detail` means: for a timeout, the rank the aborting rank waited for.
    const cause = Object.keys(ABORT_REASON)
      .find((k) => ABORT_REASON[k as keyof typeof ABORT_REASON] === code)
      ?.toLowerCase();
    return new WebcclError('ABORTED', `${what}: communicator aborted (${why})`, {
      by: by - 1,
      reason,
      detail,
      cause,
      via: 'shm',
    });
  }
  const node = nodeAbortCause(memory);
  if (!node) return null;
  return new WebcclError('ABORTED', `${what}: ${node.text}; the job is being ended`, {
    by: node.by,
    reason: node.reason,
    via: 'shm',
  });
}

/**
 * The node rank whose death aborted the node, when `aborted` says so; else -1 (no abort, the
 * launcher's, or a communicator's, which carries a `cause`).
 */
export function deadRankOf(aborted: WebcclError | null): number {
  return aborted && !('cause' in aborted.details) ? (aborted.details.by as number) : -1;
}
