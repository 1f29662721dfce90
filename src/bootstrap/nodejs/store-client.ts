// The rendezvous store's client over TCP (Node only): connect (retrying until the deadline,
// since the server may start later), then run the store session (../store-session.ts, the same
// state machine a WebSocket carries) on the socket, under TLS when the job asks for it.
import * as net from 'node:net';
import { WebcclError } from '../../core/errors.js';
import { secureDialled, type WireTls } from '../../wire/nodejs/secure-socket.js';
import { checkSecrets, hostPort } from '../../wire/secrets.js';
import { clientLimits } from '../store-arguments.js';
import { Retry, retrying, type StoreConn } from '../store-carrier.js';
import type { SessionOptions } from '../store-client-handshake.js';
import type { FrameParser } from '../store-protocol.js';
import { StoreSession } from '../store-session.js';
import { askServedJob, ServedElsewhere, SILENCE_MS } from './served-store.js';
import { socketFlow } from './socket-flow.js';
import { STORE_TLS_NOTICE } from './store-server.js';

export type { StoreValue } from '../store-session.js';

export interface StoreClientOptions {
  host: string;
  port: number;
  token: string | Uint8Array;
  jobId: string;
  /** Connect deadline, and the default deadline of get and wait (default 300 s; Infinity waits forever). */
  timeoutMs?: number;
  /** Largest value this client accepts from the server (default 64 MiB). */
  maxValueBytes?: number;
  /** Speak TLS to the store (WEBCCL_TLS); plain when absent. */
  tls?: WireTls;
}

/** A TCP socket as the session's byte pipe. */
function socketConn(socket: net.Socket): StoreConn {
  return {
    ...socketFlow(socket),
    get destroyed() {
      return socket.destroyed;
    },
    whenClosed: () => new Promise((resolve) => (socket.closed ? resolve() : socket.once('close', () => resolve()))),
    unref: () => socket.unref(),
  };
}

export class StoreClient extends StoreSession {
  private constructor(
    private readonly socket: net.Socket,
    conn: StoreConn,
    parser: FrameParser,
    where: string,
    timeoutMs: number,
    maxValue: number,
  ) {
    super(conn, parser, where, timeoutMs, maxValue);
  }

  /** Connects and authenticates, retrying refused connections until `timeoutMs`. */
  static async connect(o: StoreClientOptions): Promise<StoreClient> {
    const token = checkSecrets(o.token, o.jobId);
    const { timeoutMs, maxValue } = clientLimits(o);
    if (!Number.isInteger(o.port) || o.port < 1 || o.port > 65535)
      throw new WebcclError('INVALID_ARGUMENT', `store port ${o.port} is not in 1..65535`);
    const where = hostPort(o.host, o.port);
    return retrying(where, timeoutMs, { host: o.host, port: o.port }, (deadline) =>
      attempt({ ...o, token, timeoutMs, maxValue, where }, deadline),
    );
  }

  /** This end's address: the interface that reaches the store. */
  get localAddress(): string {
    return this.socket.localAddress ?? '';
  }

  /** One connection attempt over a connected socket: the session, or Retry / AUTH_FAILED / PROTOCOL_ERROR. */
  static handshake(socket: net.Socket, o: SessionOptions): Promise<StoreClient> {
    const conn = socketConn(socket);
    const { events, session } = StoreSession.open(
      conn,
      o,
      (c, parser, where, timeoutMs, maxValue) => new StoreClient(socket, c, parser, where, timeoutMs, maxValue),
    );
    socket.on('data', (chunk: Buffer) => events.data(chunk));
    socket.on('close', () => events.close());
    return session;
  }
}

function attempt(
  o: {
    host: string;
    port: number;
    token: Uint8Array;
    jobId: string;
    where: string;
    maxValue: number;
    timeoutMs: number;
    tls?: WireTls;
  },
  deadline: number,
): Promise<StoreClient> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: o.host, port: o.port });
    socket.setNoDelay(true);
    let connected = false;
    let heard = false;
    const timer = setTimeout(
      () => {
        socket.destroy();
        reject(
          new Retry(
            connected
              ? 'the connection was accepted but no store handshake came within the deadline (is another program using MASTER_PORT?)'
              : 'no answer within the deadline',
          ),
        );
      },
      Math.min(Math.max(1, deadline - Date.now()), 0x7fffffff),
    );
    // A store greets at once; a port still silent after SILENCE_MS may be webccl serve's HTTP
    // port, asked on a second connection while this one waits on (served-store.ts).
    let asking: ReturnType<typeof setTimeout> | undefined;
    const stop = () => {
      clearTimeout(timer);
      clearTimeout(asking);
    };
    socket.on('error', (e: NodeJS.ErrnoException) => {
      stop();
      reject(new Retry(e.code ?? e.message));
    });
    socket.once('connect', () => {
      connected = true;
      if (!o.tls) {
        socket.once('data', () => (heard = true));
        asking = setTimeout(
          () =>
            void askServedJob(o.host, o.port).then((served) => {
              if (!served || heard || socket.destroyed) return;
              stop();
              socket.destroy();
              reject(new ServedElsewhere(served));
            }),
          SILENCE_MS,
        );
      }
      secureDialled(o.tls, socket, {
        notice: STORE_TLS_NOTICE,
        where: `store at ${o.where}`,
        timeoutMs: deadline - Date.now(),
      })
        .then((s) => StoreClient.handshake(s, o))
        .then(resolve, reject)
        .finally(stop);
    });
  });
}
