// One error class with a stable `code`: callers and tests branch on the code, never on the text.

const BRAND = Symbol.for('webccl.error');

/**
 * What failed, as a {@link WebcclError}'s `code` says it: stable, so callers branch on it. What
 * raises each code, and what to do about it, is in docs/errors.md.
 */
export type ErrorCode =
  | 'INVALID_ARGUMENT' // a bad value at the API boundary (type, length, root, option)
  | 'INVALID_DTYPE' // a buffer type or dtype the library does not know
  | 'INVALID_OP' // an unknown reduction op, or avg on an integer dtype
  | 'SIZE_MISMATCH' // output/input lengths that do not fit the collective
  | 'BUFFER_BUSY' // a buffer used by an op not yet waited for, or written while in flight (WEBCCL_CHECK=1)
  | 'MISMATCH' // ranks disagree on a collective's count, dtype, op, root or kind
  | 'TIMEOUT' // a peer did not arrive before the deadline
  | 'ABORTED' // the communicator was aborted (by a failing peer, the launcher or abort())
  | 'NOT_INITIALIZED' // module-level API used before initCommGroup()
  | 'UNSUPPORTED' // the runtime lacks what the feature needs
  | 'INTERNAL' // a broken invariant inside webccl
  | 'AUTH_FAILED' // a peer did not prove the job's token or job id (or we could not prove ours)
  | 'CONNECT_FAILED' // no connection to host:port before the connect deadline
  | 'STORE_TIMEOUT' // a rendezvous-store get/wait passed its deadline with keys still missing
  | 'ADDRESS_IN_USE' // a listener could not bind: the address or port is taken
  | 'PROTOCOL_ERROR' // a peer broke the wire protocol (unknown frame, length over a limit)
  | 'CONNECTION_CLOSED'; // a connection closed (by close(), the peer or the network) with requests pending

/**
 * Every error webccl raises: a stable `code` to branch on (never the text) and `details`, the
 * fields docs/errors.md names for that code. The message ends with the code in brackets
 * (`... [TIMEOUT]`); `reason` is the message without it.
 *
 * @example
 * ```js
 * try {
 *   await comm.allReduce(x);
 * } catch (e) {
 *   if (WebcclError.is(e) && e.code === 'TIMEOUT') console.error('stalled on ranks', e.details.missing);
 *   else throw e;
 * }
 * ```
 */
export class WebcclError extends Error {
  /** What failed (docs/errors.md lists every code). */
  readonly code: ErrorCode;
  /** The failure's fields, e.g. `option`, `missing`, `peer` (which ones: docs/errors.md); `{}` when none. */
  readonly details: Record<string, unknown>;

  /** An error of `code`: its message is `message` followed by ` [code]`. */
  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(`${message} [${code}]`);
    this.name = 'WebcclError';
    this.code = code;
    this.details = details;
  }

  /** The message without its ` [CODE]` suffix. */
  get reason(): string {
    return this.message.slice(0, -(this.code.length + 3));
  }

  get [BRAND](): true {
    return true;
  }

  /**
   * Whether `e` is a WebcclError, also one from another copy of webccl (the ES module and the
   * CommonJS build, two bundles), which `instanceof` would miss.
   */
  static is(e: unknown): e is WebcclError {
    return typeof e === 'object' && e !== null && (e as Record<symbol, unknown>)[BRAND] === true;
  }
}

/** The same error seen from a wider context: `${context}: ${reason}`, same code and details. */
export function within(e: WebcclError, context: string): WebcclError {
  return new WebcclError(e.code, `${context}: ${e.reason}`, e.details);
}

export function fail(code: ErrorCode, message: string, details?: Record<string, unknown>): never {
  throw new WebcclError(code, message, details);
}
