// The rendezvous store's client over a WebSocket (browser-safe): a page's native WebSocket, or
// in Node the `ws` package's (same interface; the Node entry passes it in, since Node 20 has no
// global WebSocket). Each binary message is a chunk of the same byte stream the TCP store
// carries, so the session (store-session.ts) runs unchanged: the same handshake, the same
// limits, the same errors and details. `webccl serve --token` answers at ws://HOST:P/store.
import { fail, WebcclError } from '../core/errors.js';
import { checkOptions, integer, type OptionSpec, string, timeoutMs as timeoutCheck } from '../core/options.js';
import { concat, textBytes } from '../wire/bytes.js';
import { checkSecrets } from '../wire/secrets.js';
import { unrefSocket } from '../wire/unref-socket.js';
import { clientLimits } from './store-arguments.js';
import { Retry, retrying, type StoreConn } from './store-carrier.js';
import type { FrameParser } from './store-protocol.js';
import { MAX_VALUE_LIMIT } from './store-protocol.js';
import { StoreSession } from './store-session.js';

/** The options of connectStore: the store's `url`, the job's `token` and `jobId` (all three required), and limits. */
export interface ConnectStoreOptions {
  /** The store's address: ws://HOST:P/store (wss:// behind a TLS proxy). */
  url: string;
  /** The job's token: never sent, proven by HMAC-SHA-256. */
  token: string | Uint8Array;
  /** The job's id, 1..256 UTF-8 bytes. */
  jobId: string;
  /** Connect deadline, and the default deadline of get and wait (default 300 s). */
  timeoutMs?: number;
  /** Largest value this client accepts from the store (default 64 MiB). */
  maxValueBytes?: number;
}

const tokenCheck = (v: unknown) =>
  typeof v === 'string' || v instanceof Uint8Array ? undefined : 'a string or a Uint8Array';
export const CONNECT_STORE_OPTIONS = {
  url: string,
  token: tokenCheck,
  jobId: string,
  timeoutMs: timeoutCheck,
  maxValueBytes: integer(1, MAX_VALUE_LIMIT),
} as const satisfies OptionSpec;

/** What this client uses of a WebSocket: the browser's interface, which `ws` also implements. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
}
export type WebSocketClass = new (url: string) => WebSocketLike;

const CLOSING = 2;

/**
 * A client of a job's rendezvous store, as connectStore returns it: set, get, add, wait,
 * compareSet, delete, numKeys and close, over a WebSocket (docs/browsers.md, connectStore).
 */
export class WebSocketStore extends StoreSession {
  private constructor(conn: StoreConn, parser: FrameParser, where: string, timeoutMs: number, maxValue: number) {
    super(conn, parser, where, timeoutMs, maxValue);
  }

  /** @internal One connection attempt: the session, or Retry / AUTH_FAILED / PROTOCOL_ERROR. */
  static attempt(
    Ws: WebSocketClass,
    url: string,
    o: { token: Uint8Array; jobId: string; timeoutMs: number; maxValue: number },
    deadline: number,
  ): Promise<WebSocketStore> {
    return new Promise((resolve, reject) => {
      let ws: WebSocketLike;
      try {
        ws = new Ws(url);
      } catch (e) {
        // A malformed URL (or a scheme other than ws:/wss:) is the caller's, not worth a retry.
        return reject(
          new WebcclError(
            'INVALID_ARGUMENT',
            `connectStore: cannot open a WebSocket to ${JSON.stringify(url)}: ${(e as Error).message}`,
            { url },
          ),
        );
      }
      ws.binaryType = 'arraybuffer';
      let gone = false;
      let events: { data(c: Uint8Array): void; close(): void } | undefined;
      let lastError = '';
      ws.onerror = (ev) => {
        lastError = String((ev as { message?: string }).message ?? 'a WebSocket error');
      };
      const closed = new Promise<void>((r) => {
        ws.onclose = (ev) => {
          gone = true;
          clearTimeout(timer);
          r();
          if (events) events.close();
          else
            reject(
              new Retry(
                `the WebSocket closed before the handshake (code ${ev.code}${lastError ? `, ${lastError}` : ''})`,
              ),
            );
        };
      });
      const timer = setTimeout(
        () => {
          ws.close();
          reject(new Retry('no store handshake within the deadline'));
        },
        Math.min(Math.max(1, deadline - Date.now()), 0x7fffffff),
      );
      const conn: StoreConn = {
        get destroyed() {
          return gone || ws.readyState >= CLOSING;
        },
        // One message per frame: the server reads messages as chunks of one stream, however split.
        // No backpressure: a page's WebSocket has no drain event, and store requests are small
        // and answered one by one (the WebSocket buffers what the network has not taken yet).
        write: (parts) => {
          if (!conn.destroyed) ws.send(concat(parts));
          return true;
        },
        onceDrain: (f) => f(),
        // A WebSocket cannot stop delivering; the session's parser holds what arrives meanwhile.
        pause: () => {},
        resume: () => {},
        destroy: () => {
          gone = true;
          if (ws.readyState < CLOSING) ws.close();
        },
        whenClosed: () => closed,
        unref: () => unrefSocket(ws),
      };
      ws.onopen = () => {
        const opened = StoreSession.open(
          conn,
          { ...o, where: url },
          (c, parser, where, t, mv) => new WebSocketStore(c, parser, where, t, mv),
        );
        events = opened.events;
        ws.onmessage = (ev) => {
          const d = ev.data;
          events!.data(
            d instanceof ArrayBuffer
              ? new Uint8Array(d)
              : ArrayBuffer.isView(d)
                ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength)
                : textBytes(String(d)),
          );
        };
        opened.session.then(resolve, reject).finally(() => clearTimeout(timer));
      };
    });
  }
}

/**
 * Connects to a job's rendezvous store over WebSocket and proves the job's token (HMAC over
 * WebCrypto: a page needs a secure context, https or localhost). Retries a refused or failed
 * connection until `timeoutMs`; rejects with INVALID_ARGUMENT (bad options), UNSUPPORTED (no
 * WebSocket or WebCrypto here), AUTH_FAILED (details.reason), PROTOCOL_ERROR or CONNECT_FAILED.
 */
export async function connectStoreWith(
  Ws: WebSocketClass | undefined,
  options: ConnectStoreOptions,
): Promise<WebSocketStore> {
  const o = checkOptions<ConnectStoreOptions>(
    'connectStore',
    options,
    CONNECT_STORE_OPTIONS,
    "{ url: 'ws://127.0.0.1:8081/store', token, jobId }",
  );
  if (o.url === undefined || o.token === undefined || o.jobId === undefined) {
    const missing = (['url', 'token', 'jobId'] as const).find((k) => o[k] === undefined)!;
    fail('INVALID_ARGUMENT', `connectStore: option ${missing} is required`, { option: missing });
  }
  if (!/^wss?:\/\//i.test(o.url))
    fail('INVALID_ARGUMENT', `connectStore: url must start with ws:// or wss://, got ${JSON.stringify(o.url)}`, {
      option: 'url',
      value: o.url,
    });
  const token = checkSecrets(o.token, o.jobId);
  const limits = clientLimits(o);
  if (!Ws)
    fail(
      'UNSUPPORTED',
      'connectStore: no WebSocket in this runtime (Node 20 has none: use the Node build of webccl, which brings the ws package)',
    );
  if (!globalThis.crypto?.subtle) {
    fail(
      'UNSUPPORTED',
      'connectStore: WebCrypto (crypto.subtle) is not available, so the job token cannot be proven; a browser page needs a secure context (https, or http://localhost / 127.0.0.1)',
    );
  }
  return retrying(o.url, limits.timeoutMs, { url: o.url }, (deadline) =>
    WebSocketStore.attempt(Ws, o.url, { token, jobId: o.jobId, ...limits }, deadline),
  );
}

/** connectStore on the runtime's own WebSocket (a browser's). */
export function connectStore(options: ConnectStoreOptions): Promise<WebSocketStore> {
  return connectStoreWith((globalThis as { WebSocket?: WebSocketClass }).WebSocket, options);
}
