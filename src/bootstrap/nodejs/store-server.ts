// The rendezvous store's server (Node only): an in-memory key-value map served over TCP, like
// torch's TCPStore, started by rank 0 or the launcher at MASTER_ADDR:MASTER_PORT, and to any
// other carrier of the same byte stream through serve() (WebSockets: store-websocket.ts). Each
// connection must pass the HMAC challenge-response (store-connection.ts) before any request
// reaches the table (store-table.ts); a peer that fails it, or breaks a frame limit, is told why
// and disconnected, and the rejection is counted (stats()) and reported here (onReject, else a
// WARN log line).
import type * as net from 'node:net';
import { WebcclError } from '../../core/errors.js';
import { log } from '../../core/log.js';
import { RateLimitedLog } from '../../core/rate-log.js';
import { AUTH_FAIL_REASONS, AuthFail } from '../../wire/auth.js';
import { concat, textBytes } from '../../wire/bytes.js';
import { createListener, TLS_NOTICE, type WireTls } from '../../wire/nodejs/secure-socket.js';
import { checkSecrets, hostPort } from '../../wire/secrets.js';
import { WRONG_TOKEN_KEY } from '../meet.js';
import type { ConnEvents } from '../store-carrier.js';
import { encode, MAX_VALUE_LIMIT } from '../store-protocol.js';
import { socketFlow } from './socket-flow.js';
import { type ServedConn, serveStoreConnection } from './store-connection.js';
import { Table } from './store-table.js';

/** What a secure end sends before TLS: a plain peer shows it as the store's parting error. */
export const STORE_TLS_NOTICE = concat(encode({ type: 'protocolError', message: TLS_NOTICE }));

/** The log line of a refused connection: what it did, and the code its end was told. */
export function refusalLine(store: string, r: { remote: string; kind: 'auth' | 'protocol'; reason: string }): string {
  return `store ${store}: refused ${r.remote}: ${r.reason} [${r.kind === 'auth' ? 'AUTH_FAILED' : 'PROTOCOL_ERROR'}]`;
}

export interface StoreServerOptions {
  /** Interface to listen on; loopback unless the job spans machines. */
  host?: string;
  /** 0 picks any free port. */
  port?: number;
  /** A socket already listening (a launcher's, see store-handoff.ts): served instead of binding host:port. */
  fd?: number;
  token: string | Uint8Array;
  jobId: string;
  maxValueBytes?: number;
  /** How long a new connection may take to authenticate (default 10 s). */
  authTimeoutMs?: number;
  /** Run every connection over TLS (WEBCCL_TLS); plain when absent. */
  tls?: WireTls;
  /** Called for each refused peer; without it, refusals are logged at WARN. */
  onReject?: (info: { remote: string; kind: 'auth' | 'protocol'; reason: string }) => void;
  /**
   * Empty the table when its last connection (of any carrier) closes, so that each run of a
   * job starts from no keys: for a store that outlives its jobs (`webccl serve`), where a rerun
   * would otherwise read the previous run's cards, world size and abort key. Default false: a
   * job's own store (rank 0's, a launcher's) lives exactly as long as the job.
   */
  resetWhenIdle?: boolean;
  /**
   * Record a peer refused for the token under WRONG_TOKEN_KEY (its address), so that the ranks
   * waiting at the rendezvous fail at once naming the ranks that have not joined: for a store
   * served apart from the ranks (`webccl serve`), where no rank sees its refusals.
   */
  publishTokenRefusals?: boolean;
}

export interface StoreServerStats {
  connections: number;
  authenticated: number;
  authFailures: number;
  protocolErrors: number;
  keys: number;
}

export interface StoreServer {
  port: number;
  address: string;
  /** The largest value a client may store. */
  maxValueBytes: number;
  stats(): StoreServerStats;
  /** Serves a connection of another carrier (a WebSocket) from the same table, with the same checks. */
  serve(conn: ServedConn): ConnEvents;
  /**
   * Counts and reports a peer refused by its carrier before the store protocol saw it (a WebSocket message over the
   * size limit).
   */
  refuse(remote: string, reason: string): void;
  /** Lets the process exit while the store still serves (a rank's script may end first). */
  unref(): void;
  close(): Promise<void>;
}

function checkOptions(o: StoreServerOptions): { host: string; port: number; maxValue: number; token: Uint8Array } {
  const token = checkSecrets(o.token, o.jobId);
  const host = o.host ?? '127.0.0.1';
  const port = o.port ?? 0;
  const maxValue = o.maxValueBytes ?? 64 * 1024 * 1024;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new WebcclError('INVALID_ARGUMENT', `store port ${port} is not in 0..65535`);
  if (!Number.isInteger(maxValue) || maxValue < 1 || maxValue > MAX_VALUE_LIMIT) {
    throw new WebcclError('INVALID_ARGUMENT', `maxValueBytes ${maxValue} is not in 1..${MAX_VALUE_LIMIT}`);
  }
  return { host, port, maxValue, token };
}

/** Starts a store server; resolves once it listens. */
export async function startStoreServer(options: StoreServerOptions): Promise<StoreServer> {
  const { host, port, maxValue, token } = checkOptions(options);
  const table = new Table();
  const conns = new Set<ServedConn>();
  let unrefd = false;
  const counts = { authenticated: 0, authFailures: 0, protocolErrors: 0 };
  let label = hostPort(host, port); // the bound port once listening
  let refusals: RateLimitedLog | undefined; // made once the label has the bound port
  const reject = (remote: string, kind: 'auth' | 'protocol', reason: string) => {
    counts[kind === 'auth' ? 'authFailures' : 'protocolErrors']++;
    if (options.publishTokenRefusals && kind === 'auth' && reason === AUTH_FAIL_REASONS[2])
      table.put(WRONG_TOKEN_KEY, textBytes(remote));
    if (options.onReject) options.onReject({ remote, kind, reason });
    else
      (refusals ??= new RateLimitedLog(`store ${label}: refused connections`)).warn(
        refusalLine(label, { remote, kind, reason }),
      );
  };

  function serveConnection(conn: ServedConn): ConnEvents {
    conns.add(conn);
    if (unrefd) conn.unref();
    return serveStoreConnection(conn, {
      table,
      token,
      jobId: options.jobId,
      maxValue,
      authTimeoutMs: options.authTimeoutMs ?? 10_000,
      reject,
      authenticated: () => void counts.authenticated++,
      closed: (c) => {
        conns.delete(c);
        if (options.resetWhenIdle && conns.size === 0) table.clear();
      },
    });
  }

  /** A TCP (or TLS) socket as a served connection. */
  function serveSocket(socket: net.Socket): void {
    socket.setNoDelay(true);
    const conn: ServedConn = {
      ...socketFlow(socket),
      remote: hostPort(socket.remoteAddress ?? '?', socket.remotePort ?? 0),
      get ended() {
        return socket.destroyed || socket.writableEnded;
      },
      end: () => {
        socket.end();
        setTimeout(() => socket.destroy(), 1000).unref();
      },
      unref: () => void socket.unref(),
    };
    const events = serveConnection(conn);
    socket.on('data', (chunk: Buffer) => events.data(chunk));
    socket.on('error', () => {}); // 'close' follows and cleans up
    socket.on('close', () => events.close());
  }

  const server = createListener(options.tls, {
    notice: STORE_TLS_NOTICE,
    timeoutMs: options.authTimeoutMs ?? 10_000,
    onSocket: serveSocket,
    // A dialler that claimed this job and failed the TLS proof of the token is refused as the
    // plain store refuses a wrong HMAC proof, so that rank 0 learns of it the same way.
    onRefused: (e, remote) =>
      e.details.claimedJob
        ? reject(remote, 'auth', AUTH_FAIL_REASONS[AuthFail.token])
        : reject(remote, e.code === 'AUTH_FAILED' ? 'auth' : 'protocol', e.reason),
  });
  await new Promise<void>((resolve, rejectListen) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      const where = hostPort(host, port);
      if (e.code === 'EADDRINUSE')
        rejectListen(
          new WebcclError('ADDRESS_IN_USE', `store cannot listen on ${where}: address already in use`, { host, port }),
        );
      else
        rejectListen(
          new WebcclError('INVALID_ARGUMENT', `store cannot listen on ${where}: ${e.code ?? e.message}`, {
            host,
            port,
          }),
        );
    });
    if (options.fd !== undefined) server.listen({ fd: options.fd }, () => resolve());
    else server.listen({ host, port, exclusive: true }, () => resolve());
  });
  const bound = server.address() as net.AddressInfo;
  label = hostPort(bound.address, bound.port);
  server.on('error', (e) => log('WARN', `store ${label}: ${e.message}`));
  return {
    port: bound.port,
    address: bound.address,
    maxValueBytes: maxValue,
    stats: () => ({ connections: conns.size, ...counts, keys: table.data.size }),
    serve: serveConnection,
    refuse: (remote, reason) => reject(remote, 'protocol', reason),
    unref: () => {
      unrefd = true;
      server.unref();
      for (const c of conns) c.unref();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const c of conns) c.destroy();
      }),
  };
}
