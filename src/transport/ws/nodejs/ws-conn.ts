// One WebSocket of the mesh (Node only, the `ws` package): the byte stream of wire/link-frames.ts
// cut into binary messages (../messages.ts), all of a frame handed to `ws` at once (so that an
// ABORT posted meanwhile never lands inside a frame). Backpressure: a
// write resolves when `ws` has handed its last message to the socket, and the next write waits
// for that while more than HIGH_WATER bytes are buffered.
import type { WebSocket } from 'ws';
import { WebcclError } from '../../../core/errors.js';
import { type Identity, type LinkHooks, openLink, type Pipe } from '../../../wire/link-handshake.js';
import { type Conn, Link } from '../../mesh/carrier.js';
import { type FrameEnd, WriteTurns } from '../../mesh/write-turns.js';
import type { Tag } from '../../transport.js';
import { dataMessages, HIGH_WATER, MAX_MESSAGE } from '../messages.js';

export { MAX_MESSAGE }; // ws-carrier.ts sets maxPayload to it

const OPEN = 1;

export class WsConn implements Conn {
  private readonly turns = new WriteTurns();

  /** `peer` is learnt from its HELLO on an accepted connection. */
  constructor(
    readonly ws: WebSocket,
    public peer: number | undefined,
  ) {}

  get writable(): boolean {
    return this.ws.readyState === OPEN;
  }

  write(tag: Tag, payload: Uint8Array): Promise<void> {
    return this.turns.write(payload.length, (end) => this.put(tag, payload, end));
  }

  /** Hands the frame's messages to `ws`; above HIGH_WATER buffered, what the next frame waits for. */
  private put(tag: Tag, payload: Uint8Array, end: FrameEnd): Promise<void> | undefined {
    const ws = this.ws;
    if (ws.readyState !== OPEN) {
      end.fail(new WebcclError('CONNECTION_CLOSED', `link to rank ${this.peer} is closed`));
      return undefined;
    }
    const messages = dataMessages(tag, payload);
    let left = messages.length;
    const sent = new Promise<void>((ok) => {
      const done = (err?: Error) => {
        if (err) {
          end.fail(new WebcclError('CONNECTION_CLOSED', `write to rank ${this.peer} failed: ${err.message}`));
          return ok();
        }
        if (--left === 0) {
          end.ok();
          ok();
        }
      };
      for (const m of messages) ws.send(m, { binary: true }, done);
    });
    return ws.bufferedAmount > HIGH_WATER ? sent : undefined;
  }

  post(frame: Uint8Array): void {
    this.ws.send(frame, { binary: true });
  }

  end(frame: Uint8Array): void {
    this.ws.send(frame, { binary: true });
    this.ws.close(1000);
  }
}

/** The handshake's view of a WebSocket. */
function pipeOf(ws: WebSocket): Pipe {
  return {
    get destroyed() {
      return ws.readyState > OPEN;
    },
    write: (bytes) => ws.send(bytes, { binary: true }),
    end: (bytes) => {
      ws.send(bytes, { binary: true });
      ws.close(1000);
    },
    destroy: () => ws.terminate(),
    pause: () => ws.pause(),
    resume: () => ws.resume(),
  };
}

/**
 * Runs the link handshake (wire/link-handshake.ts) over an open WebSocket; see the TCP carrier's
 * `handshake`. Each binary message is the next piece of the byte stream; a text message breaks
 * the connection (the link speaks binary only).
 */
export function wsHandshake(
  ws: WebSocket,
  id: Identity,
  expect: { peer: number; channel: number } | undefined,
  hooks: LinkHooks<Link>,
  timeoutMs: number,
): Promise<Link> {
  const conn = new WsConn(ws, expect?.peer);
  const opening = openLink(pipeOf(ws), id, expect, hooks, timeoutMs, (peer, channel, reader) => {
    conn.peer = peer;
    return new Link(conn, reader, { peer, channel, dialled: expect !== undefined });
  });
  ws.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
    if (!isBinary) return opening.violated('a text WebSocket message (links speak binary messages only)');
    const chunk = Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    opening.received(chunk, chunk.length);
  });
  ws.on('close', () => opening.closed());
  // `ws` refuses a message over maxPayload from its announced length (before buffering it) with
  // an error, then closes; other errors are the socket's, and 'close' follows.
  ws.on('error', (e: Error & { code?: string }) => {
    if (e.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH')
      opening.violated(`a WebSocket message over the limit of ${MAX_MESSAGE} bytes`);
  });
  return opening.linked;
}
