// One TCP connection of the mesh (Node only): a socket, dialled or accepted, opened by the
// handshake of wire/link-handshake.ts (mutual proof of the job's token before any data frame is
// accepted), then ordered writes that honour backpressure (a write that returns false waits for
// 'drain' before the next).
import * as net from 'node:net';
import { WebcclError } from '../../../core/errors.js';
import {
  DATA_HEADER_BYTES,
  encodeDataHeader,
  encodeHandshake,
  Refusal,
  writeDataHeader,
} from '../../../wire/link-frames.js';
import { type Identity, openLink } from '../../../wire/link-handshake.js';
import { TLS_NOTICE } from '../../../wire/nodejs/secure-socket.js';
import { type Conn, type Hooks, Link } from '../../mesh/carrier.js';
import { type FrameEnd, WriteTurns } from '../../mesh/write-turns.js';
import type { Tag } from '../../transport.js';

export type { Hooks, Identity };
export { Link };

/** What a secure end sends before TLS: a plain peer takes it for a REFUSE and shows why. */
export const LINK_TLS_NOTICE = encodeHandshake({ type: 'refuse', reason: Refusal.tls, message: TLS_NOTICE });

/** Payloads up to this size are copied behind their header and written once. */
const SMALL = 16 * 1024;

/** Bytes a dialled socket reads while no payload is being filled (headers, handshake). */
const SPARE_BYTES = 64 * 1024;

/** Where a dialled socket's reads go, once its handshake has a FrameReader. */
interface Feed {
  /** Where the next read goes; `spare` when no payload is being filled. */
  target(spare: Uint8Array): Uint8Array;
  received(buf: Uint8Array, n: number): void;
}

/**
 * Dials `host:port` with reads that land where the link's FrameReader says (Node's `onread`):
 * a payload goes from the kernel straight into the receive posted for it, with no Buffer per
 * read and no copy in JS. Only a dialled socket can read this way, which is why the mesh
 * carries data from the accepting end to the dialling end (see TcpTransport). TLS decrypts in
 * Node, so a secure link (`direct` false) reads through 'data' events and `attach` is undefined.
 */
export function dialDirect(host: string, port: number, direct = true): { socket: net.Socket; attach?(f: Feed): void } {
  if (!direct) return { socket: net.connect({ host, port }) };
  let feed: Feed | undefined;
  const spare = new Uint8Array(SPARE_BYTES);
  const socket = net.connect({
    host,
    port,
    onread: {
      buffer: () => feed?.target(spare) ?? spare,
      callback: (n: number, buf: Uint8Array) => {
        feed?.received(buf, n);
        return true;
      },
    },
  });
  return { socket, attach: (f) => (feed = f) };
}

/** A TCP socket as the mesh writes to it. */
export class TcpConn implements Conn {
  private readonly turns = new WriteTurns();

  constructor(
    readonly socket: net.Socket,
    private readonly peer: number,
  ) {}

  get writable(): boolean {
    return this.socket.writable;
  }

  post(frame: Uint8Array): void {
    this.socket.write(frame);
  }

  end(frame: Uint8Array): void {
    this.socket.end(frame);
  }

  /** Writes one data frame after those before it; resolves once the socket has taken it. */
  write(tag: Tag, payload: Uint8Array): Promise<void> {
    return this.turns.write(payload.length, (end) => this.put(tag, payload, end));
  }

  /** Hands the frame to the socket; while the socket is full, what the next frame waits for. */
  private put(tag: Tag, payload: Uint8Array, end: FrameEnd): Promise<void> | undefined {
    const s = this.socket;
    if (s.destroyed) {
      end.fail(new WebcclError('CONNECTION_CLOSED', `link to rank ${this.peer} is closed`));
      return undefined;
    }
    const done = (err?: Error | null) =>
      err
        ? end.fail(new WebcclError('CONNECTION_CLOSED', `write to rank ${this.peer} failed: ${err.message}`))
        : end.ok();
    let ok: boolean;
    try {
      ok = this.writeFrame(tag, payload, done);
    } catch (e) {
      done(e as Error);
      return undefined;
    }
    if (ok || s.destroyed) return undefined;
    return new Promise<void>((r) => {
      const go = () => {
        s.off('drain', go);
        s.off('close', go);
        r();
      };
      s.on('drain', go);
      s.on('close', go);
    });
  }

  /** The frame to the socket; false when the socket is full. */
  private writeFrame(tag: Tag, payload: Uint8Array, done: (err?: Error | null) => void): boolean {
    const s = this.socket;
    if (payload.length <= SMALL) {
      // One write for a small frame, from a pooled Buffer (a plain array would be wrapped in one per write).
      const bytes = Buffer.allocUnsafe(DATA_HEADER_BYTES + payload.length);
      writeDataHeader(bytes, tag, payload.length);
      bytes.set(payload, DATA_HEADER_BYTES);
      return s.write(bytes, done);
    }
    const header = encodeDataHeader(tag, payload.length);
    // Header and payload leave in one writev: a header written alone (Nagle is off) is a
    // segment, a system call and a wake-up of the reader of its own, for 21 bytes.
    s.cork();
    s.write(header);
    const ok = s.write(payload, done);
    s.uncork();
    return ok;
  }
}

/**
 * Runs the handshake (wire/link-handshake.ts) on a fresh socket. `expect` is the peer we dialled
 * (connector) or undefined (acceptor). Resolves with the Link, whose data then flows to
 * hooks.sink and whose failure goes to hooks.broken; rejects with AUTH_FAILED / PROTOCOL_ERROR /
 * CONNECTION_CLOSED / CONNECT_FAILED, after telling the peer why. `direct` hands a dialled
 * socket's reads to the handshake's reader (see dialDirect).
 */
export function handshake(
  socket: net.Socket,
  id: Identity,
  expect: { peer: number; channel: number } | undefined,
  hooks: Hooks,
  timeoutMs: number,
  direct?: (f: Feed) => void,
): Promise<Link> {
  const opening = openLink(
    socket,
    id,
    expect,
    hooks,
    timeoutMs,
    (peer, channel, reader) =>
      new Link(new TcpConn(socket, peer), reader, { peer, channel, dialled: expect !== undefined }),
  );
  if (direct) direct(opening);
  else socket.on('data', (chunk: Buffer) => opening.received(chunk, chunk.length));
  socket.on('close', () => opening.closed());
  socket.on('error', () => {}); // 'close' follows
  return opening.linked;
}
