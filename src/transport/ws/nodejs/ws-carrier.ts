// The WebSocket carrier of the mesh (Node only): a `ws` WebSocketServer on the rank's own port
// (an HTTP server answering upgrades on LINK_PATH, 404 elsewhere), a `ws` client to dial, and the
// link handshake on each new WebSocket (ws-conn.ts). `ws` is loaded on first use, so that Node
// ranks over TCP never load it. Plain ws:// only: WEBCCL_TLS is refused before this is built.
import * as http from 'node:http';
import type * as net from 'node:net';
import type { WebSocket, WebSocketServer } from 'ws';
import type { WebcclError } from '../../../core/errors.js';
import { listenCoded } from '../../../wire/nodejs/listen.js';
import { hostPort } from '../../../wire/secrets.js';
import type { Address, Carrier, Conn, Link, MeshSide } from '../../mesh/carrier.js';
import { MAX_MESSAGE, type WsConn, wsHandshake } from './ws-conn.js';

/** The path a rank's port answers WebSocket links on. */
export const LINK_PATH = '/webccl-link';
/** How long an aborting rank keeps its links open so that its ABORT is read before the close. */
const ABORT_LINGER_MS = 2000;
/** The longest a link waits for its ABORT to leave behind the data queued before it. */
const ABORT_FLUSH_MS = 30_000;

type WsModule = typeof import('ws');

/** `ws` keeps its socket private; unref() needs it so that an idle mesh lets the process exit. */
const socketOf = (ws: WebSocket) => (ws as unknown as { _socket?: net.Socket })._socket;

export class WsCarrier implements Carrier {
  readonly name = 'ws';
  /** Every WebSocket, dialled or accepted, proven or still in its handshake. */
  readonly sockets = new Set<WebSocket>();
  private server?: http.Server;
  private wss?: WebSocketServer;
  private lib?: WsModule;
  private unrefd = false;

  constructor(private readonly rank: number) {}

  private async load(): Promise<WsModule> {
    this.lib ??= await import('ws');
    return this.lib;
  }

  async listen(host: string, port: number, side: MeshSide): Promise<Address> {
    const { WebSocketServer } = await this.load();
    const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE, perMessageDeflate: false });
    const server = http.createServer((_req, res) => res.writeHead(404).end());
    this.wss = wss;
    this.server = server;
    server.on('upgrade', (req, socket, head) => {
      const path = (req.url ?? '').split('?')[0];
      if (path !== LINK_PATH || side.failed()) {
        socket.end(
          `HTTP/1.1 ${side.failed() ? 503 : 404} ${side.failed() ? 'Service Unavailable' : 'Not Found'}\r\nConnection: close\r\n\r\n`,
        );
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) =>
        this.accept(ws, side, hostPort(req.socket.remoteAddress ?? '?', req.socket.remotePort ?? 0)),
      );
    });
    // A stranger that never finishes its HTTP request is closed with the handshake's deadline.
    server.headersTimeout = side.handshakeMs;
    server.requestTimeout = side.handshakeMs;
    return listenCoded(server, host, port, `rank ${this.rank}`);
  }

  async dial(
    a: Address,
    expect: { peer: number; channel: number },
    deadline: number,
    side: MeshSide,
  ): Promise<Link | string> {
    const { WebSocket } = await this.load();
    const ws = new WebSocket(`ws://${hostPort(a.host, a.port)}${LINK_PATH}`, {
      maxPayload: MAX_MESSAGE,
      perMessageDeflate: false,
      handshakeTimeout: Math.max(1, deadline - Date.now()),
    });
    this.track(ws);
    ws.on('error', () => {}); // reported through 'close' (or the handshake), as over TCP
    const up = await new Promise<string | undefined>((resolve) => {
      ws.once('open', () => resolve(undefined));
      ws.once('unexpected-response', (_req, res) =>
        resolve(`HTTP ${res.statusCode} on ${LINK_PATH} (not a webccl ws rank?)`),
      );
      ws.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    });
    if (up !== undefined) {
      ws.terminate();
      return up;
    }
    if (this.unrefd) socketOf(ws)?.unref();
    return wsHandshake(ws, side.id, expect, side.hooks, Math.max(1, deadline - Date.now()));
  }

  drop(conn: Conn): void {
    (conn as WsConn).ws.terminate();
  }

  unref(): void {
    this.unrefd = true;
    this.server?.unref();
    for (const ws of this.sockets) socketOf(ws)?.unref();
  }

  shutdown(lingering: ReadonlySet<Conn> | 'all'): void {
    const linger = (ws: WebSocket) => lingering === 'all' || [...lingering].some((c) => (c as WsConn).ws === ws);
    const flushBy = Date.now() + ABORT_FLUSH_MS;
    for (const ws of this.sockets) {
      if (!linger(ws)) {
        ws.terminate();
        continue;
      }
      // The ABORT may be queued behind data still being written: linger from when it has left.
      const wait = () => {
        if (ws.bufferedAmount > 0 && Date.now() < flushBy) return void setTimeout(wait, 20).unref();
        setTimeout(() => ws.terminate(), ABORT_LINGER_MS).unref();
      };
      wait();
    }
    this.wss?.close();
    this.server?.close();
  }

  private accept(ws: WebSocket, side: MeshSide, remote: string): void {
    if (side.failed()) return void ws.terminate();
    this.track(ws);
    if (this.unrefd) socketOf(ws)?.unref();
    wsHandshake(ws, side.id, undefined, side.hooks, side.handshakeMs).then(
      (link) => side.attach(link),
      (e: WebcclError) => side.refused(e, `ws ${remote}`),
    );
  }

  private track(ws: WebSocket): void {
    this.sockets.add(ws);
    ws.once('close', () => this.sockets.delete(ws));
  }
}
