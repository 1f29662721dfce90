// The rendezvous store over WebSocket (Node only): an HTTP server's upgrades on one path become
// connections of a StoreServer, served from the same table as its TCP ones, with the same
// handshake, limits and refusals. Each binary message is a chunk of the store's byte stream
// (the frames are store-protocol.ts's, unchanged). An upgrade on any other path gets a 404
// (upgrade-routes.ts: serve's relay shares the HTTP server's upgrades through the same router).
//
// `ws` checks a message's announced length against maxPayload before it buffers the message,
// so a page cannot make the server allocate by announcing a huge message either: maxPayload is
// the largest store frame, which the frame parser then checks again by kind.
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import { concat, HEADER_BYTES } from '../../wire/bytes.js';
import { routeUpgrades, type UpgradeHandler } from '../../wire/nodejs/upgrade-routes.js';
import { hostPort } from '../../wire/secrets.js';
import { Kind, maxBodyBytes } from '../store-protocol.js';
import type { ServedConn } from './store-connection.js';
import type { StoreServer } from './store-server.js';

/** Above this many unsent bytes a connection stops reading requests until its answers leave. */
const HIGH_WATER = 1 << 20;

/** The largest WebSocket message a store client sends: one frame of the largest kind. */
export function maxStoreMessage(maxValueBytes: number): number {
  return HEADER_BYTES + Math.max(...Object.values(Kind).map((k) => maxBodyBytes(k, maxValueBytes)));
}

export interface StoreWebSocket {
  close(): void;
}

/**
 * The store's upgrade handler, for a router that owns an HTTP server's upgrades (see
 * upgrade-routes.ts): each upgrade it is given becomes a connection of `store`.
 */
export function storeUpgrades(store: StoreServer): StoreWebSocket & { handle: UpgradeHandler } {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: maxStoreMessage(store.maxValueBytes),
    perMessageDeflate: false,
  });
  return {
    handle: (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => serveWebSocket(store, ws, req, socket)),
    close: () => {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
    },
  };
}

/** Serves `store` to WebSocket upgrades of `http` on `path` (default /store); other paths get 404. */
export function attachStoreWebSocket(http: Server, store: StoreServer | undefined, path = '/store'): StoreWebSocket {
  const served = store && storeUpgrades(store);
  const routes = routeUpgrades(http, new Map(served ? [[path, served.handle]] : []));
  return {
    close: () => {
      routes.close();
      served?.close();
    },
  };
}

function serveWebSocket(store: StoreServer, ws: WebSocket, req: IncomingMessage, socket: Duplex): void {
  const remote = `ws ${hostPort(req.socket.remoteAddress ?? '?', req.socket.remotePort ?? 0)}`;
  let drains: (() => void)[] = [];
  const sent = () => {
    if (ws.bufferedAmount >= HIGH_WATER || drains.length === 0) return;
    const waiting = drains;
    drains = [];
    for (const f of waiting) f();
  };
  const conn: ServedConn = {
    remote,
    get ended() {
      return ws.readyState !== ws.OPEN;
    },
    write: (parts) => {
      ws.send(concat(parts), { binary: true }, sent);
      return ws.bufferedAmount < HIGH_WATER;
    },
    onceDrain: (f) => void drains.push(f),
    pause: () => ws.pause(),
    resume: () => ws.resume(),
    end: () => {
      ws.close(1000);
      setTimeout(() => ws.terminate(), 1000).unref();
    },
    destroy: () => ws.terminate(),
    unref: () => void (socket as { unref?: () => void }).unref?.(),
  };
  const events = store.serve(conn);
  ws.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
    if (!isBinary) {
      store.refuse(remote, 'a text WebSocket message (the store speaks binary messages only)');
      return void ws.close(1003, 'binary messages only');
    }
    const chunk = Array.isArray(data) ? concat(data) : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    events.data(chunk);
  });
  // ws refuses a message over maxPayload (before buffering it) with an error, then closes.
  ws.on('error', (e: Error & { code?: string }) =>
    store.refuse(
      remote,
      e.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'
        ? `a WebSocket message over the limit of ${maxStoreMessage(store.maxValueBytes)} bytes`
        : e.message,
    ),
  );
  ws.on('close', () => events.close());
}
