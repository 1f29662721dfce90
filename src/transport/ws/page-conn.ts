// One link over a page's own WebSocket (browser-safe, no node:): the link's byte stream cut into
// binary messages as by every WebSocket carrier (messages.ts), and the handshake's view of it.
// A page's WebSocket differs from Node's `ws` in three ways this file absorbs: it takes no view
// of shared memory (payloads from the node's memory are copied into an ArrayBuffer as they are
// sent), it has no drain event (the next write waits, polling bufferedAmount, while more than
// HIGH_WATER bytes are queued), and it cannot stop delivering messages (while the handshake
// computes its proofs, the frame reader holds what arrives).
import { WebcclError } from '../../core/errors.js';
import type { Pipe } from '../../wire/link-handshake.js';
import type { Conn } from '../mesh/carrier.js';
import { type FrameEnd, WriteTurns } from '../mesh/write-turns.js';
import type { Tag } from '../transport.js';
import { dataMessages, HIGH_WATER } from './messages.js';

/** What a link uses of a page's WebSocket (the WHATWG interface). */
export interface PageSocket {
  binaryType: string;
  readonly readyState: number;
  readonly bufferedAmount: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  send(data: ArrayBufferView | ArrayBuffer): void;
  close(code?: number, reason?: string): void;
}

export const OPEN = 1;
/** How often a write waiting for the queue to drain looks again. */
const DRAIN_POLL_MS = 2;

/** A WebSocket takes views of plain ArrayBuffers only. */
const sendable = (b: Uint8Array): Uint8Array => (b.buffer instanceof ArrayBuffer ? b : b.slice());

export class PageConn implements Conn {
  private readonly turns = new WriteTurns();

  /** `peer` is learnt from its HELLO on a connection this end did not open as connector. */
  constructor(
    readonly ws: PageSocket,
    public peer: number | undefined,
  ) {}

  get writable(): boolean {
    return this.ws.readyState === OPEN;
  }

  write(tag: Tag, payload: Uint8Array): Promise<void> {
    return this.turns.write(payload.length, (end) => this.put(tag, payload, end));
  }

  /** Sends the frame now, or, while more than HIGH_WATER bytes wait, once they have drained (returned). */
  private put(tag: Tag, payload: Uint8Array, end: FrameEnd): Promise<void> | undefined {
    const ws = this.ws;
    if (ws.readyState === OPEN && ws.bufferedAmount > HIGH_WATER)
      return (async () => {
        while (ws.readyState === OPEN && ws.bufferedAmount > HIGH_WATER)
          await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
        this.send(tag, payload, end);
      })();
    this.send(tag, payload, end);
    return undefined;
  }

  private send(tag: Tag, payload: Uint8Array, end: FrameEnd): void {
    const ws = this.ws;
    if (ws.readyState !== OPEN)
      return end.fail(new WebcclError('CONNECTION_CLOSED', `link to rank ${this.peer} is closed`));
    try {
      // All messages of the frame at once: an ABORT posted meanwhile never lands inside it.
      for (const m of dataMessages(tag, payload)) ws.send(sendable(m));
    } catch (e) {
      return end.fail(
        new WebcclError('CONNECTION_CLOSED', `write to rank ${this.peer} failed: ${(e as Error).message}`),
      );
    }
    end.ok();
  }

  post(frame: Uint8Array): void {
    this.ws.send(frame);
  }

  end(frame: Uint8Array): void {
    // Queued messages leave before the close frame.
    this.ws.send(frame);
    this.ws.close(1000);
  }
}

/** The handshake's view of a page's WebSocket. */
export function pagePipe(ws: PageSocket): Pipe {
  return {
    get destroyed() {
      return ws.readyState > OPEN;
    },
    write: (bytes) => ws.send(bytes),
    end: (bytes) => {
      ws.send(bytes);
      ws.close(1000);
    },
    destroy: () => ws.close(),
    pause: () => {},
    resume: () => {},
  };
}
