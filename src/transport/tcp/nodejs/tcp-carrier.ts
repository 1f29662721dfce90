// The TCP carrier of the mesh (Node only): a listener on the rank's port (TLS when WEBCCL_TLS),
// dials whose reads land straight in the posted receive (dialDirect, plain TCP), the link
// handshake on each new socket, and the sockets' lingering close after an ABORT.
import type * as net from 'node:net';
import type { WebcclError } from '../../../core/errors.js';
import { listenCoded } from '../../../wire/nodejs/listen.js';
import { createListener, secureDialled, type WireTls } from '../../../wire/nodejs/secure-socket.js';
import { hostPort } from '../../../wire/secrets.js';
import type { Address, Carrier, Conn, Link, MeshSide } from '../../mesh/carrier.js';
import { dialDirect, handshake, LINK_TLS_NOTICE, type TcpConn } from './link.js';

/** How long an aborting rank keeps its links open so that its ABORT is read before the close. */
const ABORT_LINGER_MS = 2000;
/** The longest a link waits for its ABORT to leave behind the data queued before it. */
const ABORT_FLUSH_MS = 30_000;

export class TcpCarrier implements Carrier {
  readonly name = 'tcp';
  /** Every socket, dialled or accepted, proven or still in its handshake. */
  readonly sockets = new Set<net.Socket>();
  private server?: net.Server;
  private unrefd = false;

  constructor(
    private readonly rank: number,
    private readonly tls: WireTls | undefined,
  ) {}

  async listen(host: string, port: number, side: MeshSide): Promise<Address> {
    const server = createListener(this.tls, {
      notice: LINK_TLS_NOTICE,
      timeoutMs: side.handshakeMs,
      onSocket: (s) => this.accept(s, side),
      onRefused: (e, remote) => side.refused(e, remote),
    });
    this.server = server;
    return listenCoded(server, host, port, `rank ${this.rank}`);
  }

  async dial(
    a: Address,
    expect: { peer: number; channel: number },
    deadline: number,
    side: MeshSide,
  ): Promise<Link | string> {
    const { socket, attach } = dialDirect(a.host, a.port, !this.tls);
    this.track(socket);
    socket.setNoDelay(true);
    const up = await new Promise<string | undefined>((resolve) => {
      socket.once('connect', () => resolve(undefined));
      socket.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    });
    if (up !== undefined) {
      socket.destroy();
      return up;
    }
    const where = `rank ${expect.peer} at ${hostPort(a.host, a.port)}`;
    const ready = this.track(
      await secureDialled(this.tls, socket, { notice: LINK_TLS_NOTICE, where, timeoutMs: deadline - Date.now() }),
    );
    return handshake(ready, side.id, expect, side.hooks, Math.max(1, deadline - Date.now()), attach);
  }

  drop(conn: Conn): void {
    (conn as TcpConn).socket.destroy();
  }

  unref(): void {
    this.unrefd = true;
    this.server?.unref();
    for (const s of this.sockets) s.unref();
  }

  shutdown(lingering: ReadonlySet<Conn> | 'all'): void {
    const linger = (s: net.Socket) => lingering === 'all' || [...lingering].some((c) => (c as TcpConn).socket === s);
    for (const s of this.sockets) {
      if (!linger(s)) s.destroy();
      else if (s.writableEnded && !s.writableFinished) {
        // The ABORT is queued behind data still being written: linger from when it has left.
        s.once('finish', () => setTimeout(() => s.destroy(), ABORT_LINGER_MS).unref());
        setTimeout(() => s.destroy(), ABORT_FLUSH_MS).unref();
      } else setTimeout(() => s.destroy(), ABORT_LINGER_MS).unref();
    }
    this.server?.close();
  }

  private accept(socket: net.Socket, side: MeshSide): void {
    if (side.failed()) return void socket.destroy();
    this.track(socket);
    socket.setNoDelay(true);
    const remote = hostPort(socket.remoteAddress ?? '?', socket.remotePort ?? 0);
    handshake(socket, side.id, undefined, side.hooks, side.handshakeMs).then(
      (link) => side.attach(link),
      (e: WebcclError) => side.refused(e, remote),
    );
  }

  private track(socket: net.Socket): net.Socket {
    this.sockets.add(socket);
    if (this.unrefd) socket.unref();
    socket.once('close', () => this.sockets.delete(socket));
    return socket;
  }
}
