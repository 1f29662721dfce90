// The rendezvous store's server (Node only): an in-memory key-value map served over TCP, like
// torch's TCPStore, started by rank 0 or the launcher at MASTER_ADDR:MASTER_PORT, and to any
// other carrier of the same byte stream through serve() (WebSockets: store-websocket.ts). Each
// connection must pass the HMAC challenge-response (wire/auth.ts, framed as store-protocol.ts
// says) before any request is parsed; a peer that fails it, or breaks a frame limit, is told why
// and disconnected, and the rejection is counted (stats()) and reported (onReject, else a WARN
// log line).
import type * as net from 'node:net';
import { WebcclError } from '../../core/errors.js';
import { log } from '../../core/log.js';
import { RateLimitedLog } from '../../core/rate-log.js';
import { AUTH_FAIL_REASONS, AuthFail, Challenge, type Refused } from '../../wire/auth.js';
import { concat, textBytes } from '../../wire/bytes.js';
import { sameBytes } from '../../wire/hmac.js';
import { createListener, TLS_NOTICE, type WireTls } from '../../wire/nodejs/secure-socket.js';
import { checkSecrets, hostPort } from '../../wire/secrets.js';
import { WRONG_TOKEN_KEY } from '../meet.js';
import {
  ACCEPTS,
  AUTH_LABEL,
  decode,
  encode,
  FrameParser,
  MAX_VALUE_LIMIT,
  type Message,
  NO_DEADLINE,
  VERSION,
} from '../store-protocol.js';
import type { ConnEvents } from '../store-session.js';
import { socketFlow } from './socket-flow.js';

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

/**
 * A connection the store serves, whatever carries it: a TCP socket here, a WebSocket in
 * store-websocket.ts. The carrier delivers what it reads, and its close, to the ConnEvents
 * that serve() returns.
 */
export interface ServedConn {
  /** The peer, as refusals name it. */
  readonly remote: string;
  /** Closed or closing: nothing more is sent. */
  readonly ended: boolean;
  /** Sends one frame's parts in order; false when the carrier asks us to wait for onceDrain. */
  write(parts: Uint8Array[]): boolean;
  onceDrain(f: () => void): void;
  pause(): void;
  resume(): void;
  /** Closes after what was sent has left (and destroys the connection if that takes long). */
  end(): void;
  destroy(): void;
  unref(): void;
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

type Reply = (m: Message) => void;

/** A get or wait parked until its keys exist or its deadline passes. */
interface Waiter {
  id: number;
  reply: Reply;
  missing: Set<string>;
  /** For a get: the key whose value answers it. */
  get?: string;
  timer?: ReturnType<typeof setTimeout>;
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function equalValues(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
}

/** The key-value map and its waiters; knows nothing of sockets. */
class Table {
  readonly data = new Map<string, Uint8Array>();
  private readonly waiting = new Map<string, Set<Waiter>>();

  put(key: string, value: Uint8Array): void {
    this.data.set(key, value);
    const ws = this.waiting.get(key);
    if (!ws) return;
    this.waiting.delete(key);
    for (const w of ws) {
      w.missing.delete(key);
      if (w.missing.size === 0)
        this.finish(
          w,
          w.get === undefined
            ? { type: 'ok', id: w.id }
            : { type: 'value', id: w.id, value: this.data.get(w.get) ?? null },
        );
    }
  }

  park(w: Waiter, timeoutMs: number): void {
    for (const k of w.missing) {
      let ws = this.waiting.get(k);
      if (!ws) this.waiting.set(k, (ws = new Set()));
      ws.add(w);
    }
    if (timeoutMs !== NO_DEADLINE) {
      w.timer = setTimeout(
        () => this.finish(w, { type: 'timeout', id: w.id, keys: [...w.missing] }),
        Math.min(timeoutMs, 0x7fffffff),
      );
    }
  }

  /** Forgets every key; only when no connection is left, so no waiter either. */
  clear(): void {
    this.data.clear();
    for (const ws of this.waiting.values()) for (const w of ws) this.finish(w);
    this.waiting.clear();
  }

  /** Answers a waiter (or drops it when `m` is undefined) and forgets it. */
  finish(w: Waiter, m?: Message): void {
    clearTimeout(w.timer);
    for (const k of w.missing) {
      const ws = this.waiting.get(k);
      ws?.delete(w);
      if (ws?.size === 0) this.waiting.delete(k);
    }
    w.missing.clear();
    if (m) w.reply(m);
  }

  /** Serves one authenticated request; returns the parked waiter, if any. */
  // biome-ignore lint/suspicious/noConfusingVoidType: void when a reply was sent, a Waiter when one was parked
  serve(m: Message, reply: Reply): Waiter | void {
    const { data } = this;
    switch (m.type) {
      case 'set':
        this.put(m.key, m.value);
        return reply({ type: 'ok', id: m.id });
      case 'get': {
        const value = data.get(m.key);
        if (value) return reply({ type: 'value', id: m.id, value });
        return this.waitFor({ id: m.id, reply, missing: new Set([m.key]), get: m.key }, m.timeoutMs);
      }
      case 'wait':
        return this.waitFor({ id: m.id, reply, missing: new Set(m.keys.filter((k) => !data.has(k))) }, m.timeoutMs);
      case 'add': {
        const old = data.get(m.key);
        const text = old === undefined ? '0' : Buffer.from(old).toString('latin1');
        if (!/^-?[0-9]{1,16}$/.test(text))
          return reply({ type: 'error', id: m.id, message: `add("${m.key}"): the value is not an integer counter` });
        const sum = BigInt(text) + m.delta;
        if (sum > SAFE || sum < -SAFE)
          return reply({ type: 'error', id: m.id, message: `add("${m.key}"): ${sum} is beyond a safe integer` });
        this.put(m.key, textBytes(sum.toString()));
        return reply({ type: 'number', id: m.id, value: sum });
      }
      case 'compareSet': {
        const cur = data.get(m.key);
        const match = cur === undefined ? m.expected === null : m.expected !== null && equalValues(cur, m.expected);
        if (match) this.put(m.key, m.desired.slice());
        return reply({ type: 'value', id: m.id, value: data.get(m.key) ?? null });
      }
      case 'delete':
        return reply({ type: 'number', id: m.id, value: data.delete(m.key) ? 1n : 0n });
      case 'numKeys':
        return reply({ type: 'number', id: m.id, value: BigInt(data.size) });
      default:
        throw new WebcclError('PROTOCOL_ERROR', `${m.type} is not a request`);
    }
  }

  // biome-ignore lint/suspicious/noConfusingVoidType: void when a reply was sent, a Waiter when one was parked
  private waitFor(w: Waiter, timeoutMs: number): Waiter | void {
    if (w.missing.size === 0) return w.reply({ type: 'ok', id: w.id });
    this.park(w, timeoutMs);
    return w;
  }
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
    const { remote } = conn;
    const challenge = new Challenge(token, options.jobId, AUTH_LABEL, ['server', 'client']);
    const parked = new Set<Waiter>();
    let ready = false;
    let paused = false;

    const send = (m: Message) => {
      if (conn.ended) return;
      // Backpressure: stop reading requests until the peer has taken our answers.
      if (!conn.write(encode(m)) && !paused) {
        paused = true;
        conn.pause();
        conn.onceDrain(() => {
          paused = false;
          conn.resume();
        });
      }
    };
    const hangUp = () => {
      clearTimeout(authTimer);
      parser.close();
      for (const w of parked) table.finish(w);
      parked.clear();
      conn.end();
    };
    const authFail = (reason: number) => {
      reject(remote, 'auth', AUTH_FAIL_REASONS[reason]);
      send({ type: 'authFail', reason });
      hangUp();
    };
    const authenticate = (m: Message) => {
      if (m.type === 'protocolError') {
        // a client that gives up says why (a secure one meeting this plain store)
        reject(remote, 'protocol', `it hung up: ${m.message}`);
        return hangUp();
      }
      if (m.type !== 'auth') throw new WebcclError('PROTOCOL_ERROR', `${m.type} before authentication`);
      try {
        challenge.checkJob(m.jobId);
      } catch (e) {
        return authFail((e as Refused).reason);
      }
      // The proof is checked asynchronously: requests the client sent behind its AUTH wait,
      // unparsed, and are served only if it passes (dropped with the connection if not).
      parser.hold();
      conn.pause();
      challenge.proofs(m.nonce).then(
        (p) => {
          if (conn.ended) return;
          if (!sameBytes(p.theirs, m.mac)) return authFail(AuthFail.token);
          clearTimeout(authTimer);
          ready = true;
          counts.authenticated++;
          parser.accept(ACCEPTS.serverReady);
          conn.resume(); // before send(), which may pause the connection again for backpressure
          send({ type: 'authOk', mac: p.mine });
          guarded(() => parser.release());
        },
        (e: unknown) => {
          reject(remote, 'protocol', WebcclError.is(e) ? e.reason : String(e));
          hangUp();
        },
      );
    };
    const parser = new FrameParser(maxValue, ACCEPTS.serverHandshake, (kind, body) => {
      const m = decode(kind, body, maxValue);
      if (!ready) return authenticate(m);
      // biome-ignore lint/suspicious/noConfusingVoidType: void when a reply was sent, a Waiter when one was parked
      let w: Waiter | void;
      w = table.serve(m, (answer) => {
        if (w) parked.delete(w);
        send(answer);
      });
      if (w) parked.add(w);
    });
    const authTimer = setTimeout(() => {
      reject(remote, 'auth', `no AUTH within ${options.authTimeoutMs ?? 10_000} ms`);
      hangUp();
    }, options.authTimeoutMs ?? 10_000);

    /** Runs `f` (which feeds the parser); a frame that breaks the protocol ends the connection. */
    const guarded = (f: () => void) => {
      try {
        f();
      } catch (e) {
        // The client wraps this text in its own PROTOCOL_ERROR: send it without our code suffix.
        const reason = WebcclError.is(e) ? e.reason : e instanceof Error ? e.message : String(e);
        reject(remote, 'protocol', reason);
        send({ type: 'protocolError', message: reason });
        hangUp();
      }
    };
    send({ type: 'hello', version: VERSION, maxValueBytes: maxValue, nonce: challenge.nonce });
    let first = true;
    return {
      data: (chunk) => {
        // An HTTP request is a rank asking whether this port is webccl serve's (served-store.ts),
        // sent when the store was slow to greet it (a port listening before its store started):
        // let go quietly, no refused peer. (No store frame starts so: its length would be ~1 GiB.)
        if (first) {
          first = false;
          if (isHttpGet(chunk)) return hangUp();
        }
        guarded(() => parser.push(chunk));
      },
      close: () => {
        clearTimeout(authTimer);
        parser.close();
        conns.delete(conn);
        for (const w of parked) table.finish(w);
        parked.clear();
        if (options.resetWhenIdle && conns.size === 0) table.clear();
      },
    };
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

/** Whether a connection's first bytes are an HTTP GET. */
function isHttpGet(chunk: Uint8Array): boolean {
  return chunk.length >= 4 && chunk[0] === 0x47 && chunk[1] === 0x45 && chunk[2] === 0x54 && chunk[3] === 0x20;
}
