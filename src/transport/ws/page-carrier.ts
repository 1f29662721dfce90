// The carrier of a rank that lives in a page (browser-safe, no node:): the page's own WebSocket,
// which can dial but never listen. The mesh publishes this rank as DIAL_ONLY; it dials the ranks
// that listen (Node ranks on WEBCCL_TRANSPORT=ws, at ws://HOST:PORT/webccl-link) and meets
// other pages' ranks through the relay of the serving process (`webccl serve`, /webccl-relay),
// which pairs two WebSockets and forwards their messages without reading them: the link
// handshake, with the job token's proof, runs end to end through it.
import { WebcclError } from '../../core/errors.js';
import { openLink } from '../../wire/link-handshake.js';
import { hostPort } from '../../wire/secrets.js';
import { unrefSocket } from '../../wire/unref-socket.js';
import { type Address, type Carrier, type Conn, Link, type MeshSide } from '../mesh/carrier.js';
import { PageConn, type PageSocket, pagePipe } from './page-conn.js';

/** The path a listening rank answers WebSocket links on (the Node carrier's LINK_PATH). */
export const LINK_PATH = '/webccl-link';
/** The path of the relay on the serving process's HTTP port. */
export const RELAY_PATH = '/webccl-relay';
/** How long an aborting rank keeps its links open so that its ABORT is read before the close. */
const ABORT_LINGER_MS = 2000;

export type PageSocketClass = new (url: string) => PageSocket;

export interface PageCarrierOptions {
  /** The relay's URL (ws://HOST:P/webccl-relay); without it, two pages' ranks cannot meet. */
  relay?: string;
  /** The WebSocket class (default: the page's own). */
  WebSocket?: PageSocketClass;
  /** Which mesh of the job this is (a shrunk communicator's has its own), so that the relay pairs its links apart. */
  mesh?: string;
}

export class PageCarrier implements Carrier {
  readonly name = 'ws';
  private readonly sockets = new Set<PageSocket>();
  private readonly Ws: PageSocketClass;
  readonly relay?: Carrier['relay'];

  private readonly mesh?: string;
  private unrefd = false;

  constructor(
    private readonly rank: number,
    private readonly jobId: string,
    o: PageCarrierOptions = {},
  ) {
    this.mesh = o.mesh;
    const Ws = o.WebSocket ?? (globalThis as { WebSocket?: PageSocketClass }).WebSocket;
    if (!Ws)
      throw new WebcclError(
        'UNSUPPORTED',
        "no WebSocket in this runtime: a rank in a page needs the browser's WebSocket",
      );
    this.Ws = Ws;
    const relayUrl = o.relay;
    if (relayUrl)
      this.relay = (expect, connector, deadline, side) => this.meet(expect, connector, deadline, side, relayUrl);
  }

  listen(): Promise<Address> {
    return Promise.reject(
      new WebcclError(
        'UNSUPPORTED',
        `rank ${this.rank}: a page cannot listen for connections (it dials, and meets other pages through the relay)`,
      ),
    );
  }

  dial(
    a: Address,
    expect: { peer: number; channel: number },
    deadline: number,
    side: MeshSide,
  ): Promise<Link | string> {
    return this.open(`ws://${hostPort(a.host, a.port)}${LINK_PATH}`, expect, true, deadline, side);
  }

  private meet(
    expect: { peer: number; channel: number },
    connector: boolean,
    deadline: number,
    side: MeshSide,
    relayUrl: string,
  ): Promise<Link | string> {
    const q = new URLSearchParams({
      job: this.jobId,
      from: String(this.rank),
      to: String(expect.peer),
      channel: String(expect.channel),
      ...(this.mesh !== undefined && { mesh: this.mesh }),
    });
    return this.open(`${relayUrl}?${q}`, expect, connector, deadline, side);
  }

  drop(conn: Conn): void {
    (conn as PageConn).ws.close();
  }

  unref(): void {
    this.unrefd = true;
    for (const ws of this.sockets) unrefSocket(ws);
  }

  shutdown(lingering: ReadonlySet<Conn> | 'all'): void {
    const linger = (ws: PageSocket) => lingering === 'all' || [...lingering].some((c) => (c as PageConn).ws === ws);
    for (const ws of this.sockets) {
      if (!linger(ws)) ws.close();
      else setTimeout(() => ws.close(), ABORT_LINGER_MS);
    }
  }

  /**
   * Opens a WebSocket to `url` and runs the link handshake over it, this end as `connector` or
   * acceptor. A socket that closes before the peer said a word (refused, or no partner at the
   * relay yet) is a string: the mesh tries again until its deadline.
   */
  private open(
    url: string,
    expect: { peer: number; channel: number },
    connector: boolean,
    deadline: number,
    side: MeshSide,
  ): Promise<Link | string> {
    return new Promise((resolve, reject) => {
      let ws: PageSocket;
      try {
        ws = new this.Ws(url);
      } catch (e) {
        return reject(
          new WebcclError(
            'INVALID_ARGUMENT',
            `rank ${this.rank}: cannot open a WebSocket to ${url}: ${(e as Error).message}`,
            { url },
          ),
        );
      }
      ws.binaryType = 'arraybuffer';
      this.sockets.add(ws);
      if (this.unrefd) unrefSocket(ws);
      let heard = false;
      let opening: ReturnType<typeof openLink<Link>> | undefined;
      const timer = setTimeout(
        () => {
          if (opening) return;
          ws.close();
          resolve(`no WebSocket to ${url} within the deadline`);
        },
        Math.min(Math.max(1, deadline - Date.now()), 0x7fffffff),
      );
      ws.onclose = (ev) => {
        this.sockets.delete(ws);
        clearTimeout(timer);
        if (opening) opening.closed();
        else
          resolve(
            `the WebSocket to ${url} closed before opening (code ${ev.code}${ev.reason ? `: ${ev.reason}` : ''})`,
          );
      };
      ws.onerror = () => {}; // a close follows, and says what it can
      ws.onopen = () => {
        clearTimeout(timer);
        const conn = new PageConn(ws, expect.peer);
        const o = openLink(
          pagePipe(ws),
          side.id,
          connector ? expect : undefined,
          side.hooks,
          Math.max(1, deadline - Date.now()),
          (peer, channel, reader) => {
            conn.peer = peer;
            return new Link(conn, reader, { peer, channel, dialled: connector });
          },
        );
        opening = o;
        ws.onmessage = (ev) => {
          if (!(ev.data instanceof ArrayBuffer))
            return o.violated('a text WebSocket message (links speak binary messages only)');
          heard = true;
          const b = new Uint8Array(ev.data);
          o.received(b, b.length);
        };
        o.linked.then(resolve, (e: WebcclError) => {
          // Closed before the peer said anything: nobody there yet (the relay found no partner), not a refusal.
          if (!heard && e.code === 'CONNECTION_CLOSED') resolve(e.reason);
          else reject(e);
        });
      };
    });
  }
}
