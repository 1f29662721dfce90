// One WebSocket of the mesh (Node only, the `ws` package): the byte stream of wire/link-frames.ts
// cut into binary messages. A data frame of up to SMALL payload bytes leaves as one message;
// a larger one as its header, then its payload in messages of at most CHUNK bytes, all handed to
// `ws` at once (so that an ABORT posted meanwhile never lands inside a frame). Backpressure: a
// write resolves when `ws` has handed its last message to the socket, and the next write waits
// for that while more than HIGH_WATER bytes are buffered.
import type { WebSocket } from 'ws';
import { WebcclError } from '../../../core/errors.js';
import { type Identity, type LinkHooks, openLink, type Pipe } from '../../../wire/link-handshake.js';
import { encodeDataHeader } from '../../../wire/link-frames.js';
import type { Tag } from '../../transport.js';
import { type Conn, Link } from '../../mesh/carrier.js';

/** Payloads up to this size leave behind their header in one message. */
const SMALL = 16 * 1024;
/** The largest message a payload is cut into. */
export const CHUNK = 1 << 20;
/**
 * The largest message either end sends (a chunk; a small frame, at most 21 + SMALL bytes, and a
 * handshake frame, about 1 KiB, are shorter): `ws` refuses a longer one from its announced
 * length, before it buffers a byte of it, and the frame reader then checks every frame's length
 * against its kind's limit as over TCP.
 */
export const MAX_MESSAGE = CHUNK;
/** Buffered bytes above which the next write waits for the last one to reach the socket. */
const HIGH_WATER = 4 << 20;

const OPEN = 1;

export class WsConn implements Conn {
  private queue: Promise<void> = Promise.resolve();

  /** `peer` is learnt from its HELLO on an accepted connection. */
  constructor(readonly ws: WebSocket, public peer: number | undefined) {}

  get writable(): boolean {
    return this.ws.readyState === OPEN;
  }

  write(tag: Tag, payload: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue = this.queue.then(async () => {
        const ws = this.ws;
        if (ws.readyState !== OPEN) return reject(new WebcclError('CONNECTION_CLOSED', `link to rank ${this.peer} is closed`));
        const header = encodeDataHeader(tag, payload.length);
        let left = 0;
        const sent = new Promise<void>((ok) => {
          const done = (err?: Error) => {
            if (err) {
              reject(new WebcclError('CONNECTION_CLOSED', `write to rank ${this.peer} failed: ${err.message}`));
              return ok();
            }
            if (--left === 0) {
              resolve();
              ok();
            }
          };
          if (payload.length <= SMALL) {
            const bytes = new Uint8Array(header.length + payload.length);
            bytes.set(header);
            bytes.set(payload, header.length);
            left = 1;
            ws.send(bytes, { binary: true }, done);
          } else {
            left = 1 + Math.ceil(payload.length / CHUNK);
            ws.send(header, { binary: true }, done);
            for (let at = 0; at < payload.length; at += CHUNK) ws.send(payload.subarray(at, at + CHUNK), { binary: true }, done);
          }
        });
        if (ws.bufferedAmount > HIGH_WATER) await sent;
      });
    });
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
    get destroyed() { return ws.readyState > OPEN; },
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
export function wsHandshake(ws: WebSocket, id: Identity, expect: { peer: number; channel: number } | undefined, hooks: LinkHooks<Link>, timeoutMs: number): Promise<Link> {
  const conn = new WsConn(ws, expect?.peer);
  const opening = openLink(pipeOf(ws), id, expect, hooks, timeoutMs, (peer, channel, reader) => {
    conn.peer = peer;
    return new Link(conn, reader, peer, channel, expect !== undefined);
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
    if (e.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') opening.violated(`a WebSocket message over the limit of ${MAX_MESSAGE} bytes`);
  });
  return opening.linked;
}
