// The client's side of the rendezvous store's handshake over any byte pipe (browser-safe): check
// the server's protocol version, prove the job's token, and check that the server proves it too,
// before the session (store-session.ts) sends a single request.
import { WebcclError } from '../core/errors.js';
import { AUTH_FAIL_REASONS, Challenge } from '../wire/auth.js';
import { sameBytes } from '../wire/hmac.js';
import { type ConnEvents, Retry, type StoreConn } from './store-carrier.js';
import { ACCEPTS, AUTH_LABEL, decode, encode, FrameParser, type Message, VERSION } from './store-protocol.js';

export interface SessionOptions {
  token: Uint8Array;
  jobId: string;
  /** How the store is named in errors (host:port, or a ws:// URL). */
  where: string;
  /** Largest value this client accepts. */
  maxValue: number;
  /** Default deadline of get and wait. */
  timeoutMs: number;
}

/** A session once the server has proven the token, and where its frames and failures go. */
export interface Handshaken<S> {
  session: S;
  receive(m: Message): void;
  fail(e: WebcclError): void;
}

/**
 * Runs the handshake over `conn`: resolves with the session `ready` builds once the server has
 * proven the token, or rejects with Retry (closed early) / AUTH_FAILED / PROTOCOL_ERROR.
 * Returns the events the carrier must deliver.
 */
export function clientHandshake<S>(
  conn: StoreConn,
  o: SessionOptions,
  ready: (parser: FrameParser, maxValue: number) => Handshaken<S>,
): { events: ConnEvents; session: Promise<S> } {
  let events!: ConnEvents;
  const session = new Promise<S>((resolve, reject) => {
    const challenge = new Challenge(o.token, o.jobId, AUTH_LABEL, ['client', 'server']);
    let snonce: Uint8Array | undefined;
    /** The server's AUTH_OK proof, computed with ours before AUTH leaves (wire/auth.ts). */
    let expected: Uint8Array | undefined;
    let maxValue = o.maxValue;
    let client: Handshaken<S> | undefined;
    let settled = false;
    const finish = (e: Error) => {
      settled = true;
      conn.destroy();
      reject(e);
    };
    const refused = (why: string) =>
      finish(new WebcclError('AUTH_FAILED', `store at ${o.where} ${why}`, { where: o.where }));
    const parser = new FrameParser(o.maxValue, ACCEPTS.clientHandshake, (kind, body) => {
      const m = decode(kind, body, o.maxValue);
      if (client) return client.receive(m);
      if (m.type === 'hello' && !snonce) {
        if (m.version !== VERSION)
          return finish(
            new WebcclError(
              'PROTOCOL_ERROR',
              `store at ${o.where} speaks protocol version ${m.version}, we speak ${VERSION}`,
            ),
          );
        snonce = m.nonce;
        maxValue = Math.min(maxValue, m.maxValueBytes);
        // The proofs are computed asynchronously; what the server sends meanwhile waits in the parser.
        parser.hold();
        conn.pause();
        challenge.proofs(m.nonce).then(
          (p) => {
            if (conn.destroyed) return;
            expected = p.theirs;
            conn.write(encode({ type: 'auth', jobId: o.jobId, nonce: challenge.nonce, mac: p.mine }));
            conn.resume();
            feed(() => parser.release());
          },
          (e: Error) => finish(e),
        );
      } else if (m.type === 'authFail') {
        const reason = AUTH_FAIL_REASONS[m.reason] ?? `reason ${m.reason}`;
        finish(new WebcclError('AUTH_FAILED', `store at ${o.where} refused us: ${reason}`, { where: o.where, reason }));
      } else if (m.type === 'authOk' && expected) {
        if (!sameBytes(expected, m.mac))
          return refused('did not prove it holds the job token (wrong token or an impostor)');
        parser.accept(ACCEPTS.clientReady);
        settled = true;
        client = ready(parser, maxValue);
        resolve(client.session);
      } else if (m.type === 'protocolError')
        finish(new WebcclError('PROTOCOL_ERROR', `store at ${o.where} hung up: ${m.message}`));
      else finish(new WebcclError('PROTOCOL_ERROR', `store at ${o.where} sent ${m.type} during the handshake`));
    });
    /** Runs `f` (which feeds the parser); a frame it cannot parse ends the connection. */
    const feed = (f: () => void) => {
      try {
        f();
      } catch (e) {
        if (client) return client.fail(e as WebcclError);
        // A frame we cannot parse before the handshake: something else listens there.
        const why = WebcclError.is(e) ? e.reason : String(e);
        finish(
          new WebcclError(
            'PROTOCOL_ERROR',
            `the server at ${o.where} does not speak the webccl store protocol (${why}); is another program using MASTER_PORT?`,
          ),
        );
      }
    };
    events = {
      data: (chunk) => feed(() => parser.push(chunk)),
      close: () => {
        if (client) client.fail(new WebcclError('CONNECTION_CLOSED', `connection to the store at ${o.where} closed`));
        else if (!settled) finish(new Retry('the connection closed during the handshake'));
      },
    };
  });
  return { events, session };
}
