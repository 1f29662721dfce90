// WebSocket upgrades of one HTTP server routed by path (Node only). Node emits every upgrade
// to every 'upgrade' listener, so two services each listening (the store at /store, the relay
// at /webccl-relay) would both answer each request, one of them with a 404 written over the
// other's 101. Here one listener owns the event: a path is served by exactly one handler, and
// any other path (or an unparsable URL) is refused once, in plain HTTP, before any upgrade.
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';

/** Serves one upgrade request on its path; `url` is the request's parsed URL (for its query). */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => void;

export interface UpgradeRoutes {
  /** Stops routing; upgrades then go unanswered by us (the HTTP server is the caller's to close). */
  close(): void;
}

/** Refuses an upgrade in plain HTTP (`status`: "404 Not Found") and drops the socket. */
export function refuseUpgrade(socket: Duplex, status: string): void {
  socket.on('error', () => {});
  socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
}

/** Routes `http`'s upgrades by exact path to `routes`; every other path gets a 404. */
export function routeUpgrades(http: Server, routes: ReadonlyMap<string, UpgradeHandler>): UpgradeRoutes {
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://x');
    } catch {
      return refuseUpgrade(socket, '400 Bad Request');
    }
    const handler = routes.get(url.pathname);
    if (!handler) return refuseUpgrade(socket, '404 Not Found');
    handler(req, socket, head, url);
  };
  http.on('upgrade', onUpgrade);
  return { close: () => void http.off('upgrade', onUpgrade) };
}
