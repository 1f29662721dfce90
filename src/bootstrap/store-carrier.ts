// What the rendezvous store's client session needs of the byte pipe that carries it (a TCP
// socket, a WebSocket), how that pipe delivers what it reads, and the loop that dials it again
// until the connect deadline, since a store may start after the ranks that look for it.
import { WebcclError } from '../core/errors.js';

/** What the client needs of a connection, whatever carries it (the carrier feeds it ConnEvents). */
export interface StoreConn {
  readonly destroyed: boolean;
  /** Sends one frame's parts in order; false when the carrier asks us to wait for `onceDrain`. */
  write(parts: Uint8Array[]): boolean;
  onceDrain(f: () => void): void;
  /** Stops and restarts delivery of incoming bytes (a carrier that cannot may ignore it). */
  pause(): void;
  resume(): void;
  destroy(): void;
  /** Resolves once the connection is closed. */
  whenClosed(): Promise<void>;
  /** Lets a Node process exit while the connection is open (absent where there is nothing to keep alive). */
  unref?(): void;
}

/** How the carrier delivers what it reads, and tells of the close. */
export interface ConnEvents {
  data(chunk: Uint8Array): void;
  close(): void;
}

/** A failure worth another attempt before the connect deadline (refused, reset, closed early). */
export class Retry extends Error {}

/**
 * Runs `attempt` until it connects, or fails with something other than Retry, or the deadline
 * passes (CONNECT_FAILED naming `where` and the last attempt's trouble).
 */
export async function retrying<T>(
  where: string,
  timeoutMs: number,
  details: Record<string, unknown>,
  attempt: (deadline: number) => Promise<T>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 20; ; delay = Math.min(delay * 2, 500)) {
    let last: string;
    try {
      return await attempt(deadline);
    } catch (e) {
      if (!(e instanceof Retry)) throw e;
      last = e.message;
    }
    const left = deadline - Date.now();
    if (left <= 0)
      throw new WebcclError(
        'CONNECT_FAILED',
        `no store reachable at ${where} within ${timeoutMs} ms (last attempt: ${last})`,
        details,
      );
    await new Promise((r) => setTimeout(r, Math.min(delay, left)));
  }
}
