// One connection to the rendezvous store, whatever carries it: the HMAC challenge-response
// before any request is parsed, backpressure on the answers, and the requests served from the
// shared table. The server (store-server.ts) owns the table, the listener and the counts.
import { WebcclError } from '../../core/errors.js';
import { AUTH_FAIL_REASONS, AuthFail, Challenge, type Refused } from '../../wire/auth.js';
import { sameBytes } from '../../wire/hmac.js';
import type { ConnEvents } from '../store-carrier.js';
import { ACCEPTS, AUTH_LABEL, decode, encode, FrameParser, type Message, VERSION } from '../store-protocol.js';
import type { Table, Waiter } from './store-table.js';

/**
 * A connection the store serves, whatever carries it: a TCP socket in store-server.ts, a
 * WebSocket in store-websocket.ts. The carrier delivers what it reads, and its close, to the
 * ConnEvents that serve() returns.
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

/** What a connection needs of its server. */
export interface StoreConnContext {
  table: Table;
  token: Uint8Array;
  jobId: string;
  maxValue: number;
  /** How long the peer may take to authenticate. */
  authTimeoutMs: number;
  /** Counts and reports a refused peer. */
  reject(remote: string, kind: 'auth' | 'protocol', reason: string): void;
  /** The peer passed the challenge. */
  authenticated(): void;
  /** The connection closed and dropped its parked requests. */
  closed(conn: ServedConn): void;
}

/** Greets `conn` and serves it; returns where its carrier delivers what it reads and its close. */
export function serveStoreConnection(conn: ServedConn, ctx: StoreConnContext): ConnEvents {
  const { table, maxValue, reject, authTimeoutMs } = ctx;
  const { remote } = conn;
  const challenge = new Challenge(ctx.token, ctx.jobId, AUTH_LABEL, ['server', 'client']);
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
        ctx.authenticated();
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
    reject(remote, 'auth', `no AUTH within ${authTimeoutMs} ms`);
    hangUp();
  }, authTimeoutMs);

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
      for (const w of parked) table.finish(w);
      parked.clear();
      ctx.closed(conn);
    },
  };
}

/** Whether a connection's first bytes are an HTTP GET. */
function isHttpGet(chunk: Uint8Array): boolean {
  return chunk.length >= 4 && chunk[0] === 0x47 && chunk[1] === 0x45 && chunk[2] === 0x54 && chunk[3] === 0x20;
}
