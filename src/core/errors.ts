// One error class with a stable `code`: callers and tests branch on the code, never on the text.

const BRAND = Symbol.for('webccl.error');

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

export class WebcclError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;

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
