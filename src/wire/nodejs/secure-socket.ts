// Optional TLS under the rendezvous store's and the transport's connections (Node only): one
// place where both make their sockets, so that neither needs the other. Without TLS it hands
// out net sockets as they are. With TLS (WEBCCL_TLS=1) every connection runs TLS 1.3, keyed
// (tls-settings.ts)
// - by the job token: a pre-shared key HKDF-SHA256(token, job id, "webccl tls"), so no
//   certificates are needed and each end proves the token to the other (ECDHE still gives every
//   connection its own keys). The key's identity names the job (a hash of its id, nothing
//   secret), so an acceptor tells a dialler of this job with another token (its handshake fails
//   after claiming this job: see ListenerOptions.onRefused) from a stranger; or
// - by given certificates (WEBCCL_TLS_CERT, WEBCCL_TLS_KEY, WEBCCL_TLS_CA): mutual TLS, each end
//   must present a certificate the CA signed. Host names are not checked: ranks dial addresses.
// The protocols above run unchanged on the secure socket, their HMAC proof of the token included.
//
// Before TLS begins, a secure end sends one frame of the plain protocol (the caller's `notice`,
// which a plain peer shows as its error: "the other end uses TLS") and checks that the peer
// sent the same frame. So a rank without WEBCCL_TLS fails at once on both ends, naming the
// mismatch, where the two would otherwise each wait for a first word the other never sends.
// After the TLS handshake the acceptor sends one byte and the dialler answers it: in TLS 1.3 a
// dialler finishes its handshake before the acceptor has checked the dialler's certificate, and
// this makes a refusal reach both ends as AUTH_FAILED before either speaks its protocol.
// (tls-preamble.ts reads these bytes and words the refusals.)
import * as net from 'node:net';
import * as tls from 'node:tls';
import { WebcclError } from '../../core/errors.js';
import { ACK, readBytes, readNotice, refusedLate, tlsRefusal } from './tls-preamble.js';
import type { WireTls } from './tls-settings.js';

export { resolveWireTls, type WireTls, wireTls } from './tls-settings.js';

/** What a secure connection may take from accept (or connect) to its protocol's first byte. */
export const SECURE_PHASE_MS = 10_000;
/** The text a plain peer shows when it meets a secure one (inside its own protocol's frame). */
export const TLS_NOTICE =
  'the other end uses TLS (WEBCCL_TLS=1) and this one does not: set WEBCCL_TLS alike on every rank';

/** OpenSSL's error when the dialler's key is not the one its identity names here. */
const BINDER_MISMATCH = 'ERR_SSL_BINDER_DOES_NOT_VERIFY';

export interface ListenerOptions {
  /** The plain protocol's frame that a secure end sends first (see the header). */
  notice: Uint8Array;
  /** Deadline of the TLS phase of one connection (at most SECURE_PHASE_MS). */
  timeoutMs: number;
  /** A connection ready for the protocol: as accepted, or once TLS is up. */
  onSocket(socket: net.Socket): void;
  /**
   * A connection refused before its protocol began (TLS mismatch, failed TLS handshake). An
   * AUTH_FAILED whose details have `claimedJob: true` came from a dialler that named this job's
   * key but whose key was another: most likely a rank of this job with another WEBCCL_TOKEN.
   */
  onRefused(e: WebcclError, remote: string): void;
}

const label = (s: net.Socket) =>
  s.remoteAddress?.includes(':')
    ? `[${s.remoteAddress}]:${s.remotePort}`
    : `${s.remoteAddress ?? '?'}:${s.remotePort ?? 0}`;

/** A listener (not yet listening) whose connections reach `onSocket` plain, or secure when `wire` is given. */
export function createListener(wire: WireTls | undefined, o: ListenerOptions): net.Server {
  if (!wire) return net.createServer(o.onSocket);
  const pending = new Set<net.Socket>();
  const server = net.createServer((raw) => {
    pending.add(raw);
    const remote = label(raw);
    let done = false;
    const end = (e?: WebcclError, ready?: net.Socket) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      pending.delete(raw);
      if (e) {
        raw.destroy();
        ready?.destroy();
        return o.onRefused(e, remote);
      }
      o.onSocket(ready!);
      ready!.resume(); // the protocol's handlers are on: let what came with the last byte flow
    };
    const timer = setTimeout(
      () =>
        end(
          new WebcclError('CONNECT_FAILED', `the peer did not complete TLS within ${phaseMs(o.timeoutMs)} ms`, {
            peer: remote,
          }),
        ),
      phaseMs(o.timeoutMs),
    );
    raw.on('error', () => {}); // 'close' follows
    raw.write(o.notice);
    // Messages here say "the peer": the caller's refusal line names the remote address.
    readNotice(raw, o.notice, { who: 'the peer', remote }, 'accept', (e, rest) => {
      if (e) return end(e);
      if (rest!.length) raw.unshift(rest!); // the dialler's ClientHello may have come with its notice
      // A TLS server that never listens takes the socket, already past the notice (Node's
      // documented way to hand a TLS server a connection; it checks client certificates).
      const inner = tls.createServer(wire.server);
      inner.on('secureConnection', (s: tls.TLSSocket) => {
        s.on('error', () => {}); // 'close' follows
        s.write(Uint8Array.of(ACK));
        readBytes(s, 1, true, (got, rest) => {
          if (!got) return end(refusedLate({ who: 'the peer', remote }), s);
          if (got[0] !== ACK)
            return end(
              new WebcclError('PROTOCOL_ERROR', `the peer sent ${got[0]} where the end of the TLS handshake was due`, {
                remote,
              }),
              s,
            );
          if (rest.length) s.unshift(rest);
          end(undefined, s);
        });
      });
      inner.on('tlsClientError', (err, s) => {
        const e = tlsRefusal(err, { who: 'the peer', remote }, s.authorizationError);
        // It named this job's key and its proof of the key (the binder) did not verify: a rank
        // of this job with another token. (A handshake cut short for another cause is not that.)
        if (wire.claimedJob?.(s) && (err as { code?: string }).code === BINDER_MISMATCH) e.details.claimedJob = true;
        end(e);
      });
      inner.emit('connection', raw);
    });
  });
  server.on('close', () => {
    for (const s of pending) s.destroy();
  });
  return server;
}

export interface DialOptions {
  notice: Uint8Array;
  /** Who is at the other end, for messages: "rank 2 at 10.0.0.2:4000", "store at ...". */
  where: string;
  /** Deadline of the TLS phase (at most SECURE_PHASE_MS). */
  timeoutMs: number;
}

/**
 * The socket to speak the protocol on, given a dialled socket that has connected: the same
 * socket when plain; its TLS socket once the handshake is done and both ends accepted it.
 * Rejects with PROTOCOL_ERROR (the peer does not use TLS), AUTH_FAILED (the TLS handshake
 * failed: another key or an untrusted certificate) or CONNECT_FAILED (no answer in time).
 */
export function secureDialled(wire: WireTls | undefined, raw: net.Socket, o: DialOptions): Promise<net.Socket> {
  if (!wire) return Promise.resolve(raw);
  return new Promise((resolve, reject) => {
    let done = false;
    let secure: tls.TLSSocket | undefined;
    const end = (e?: WebcclError) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (!e) return resolve(secure!);
      secure?.destroy();
      raw.destroy();
      reject(e);
    };
    const timer = setTimeout(
      () =>
        end(
          new WebcclError('CONNECT_FAILED', `no TLS handshake with ${o.where} within ${phaseMs(o.timeoutMs)} ms`, {
            peer: o.where,
          }),
        ),
      phaseMs(o.timeoutMs),
    );
    raw.on('error', () => {}); // 'close' follows
    raw.write(o.notice);
    const peer = { who: o.where, remote: o.where };
    readNotice(raw, o.notice, peer, 'dial', (e, rest) => {
      if (e) return end(e);
      // The acceptor sends nothing after its notice until our ClientHello: more is not TLS.
      if (rest!.length)
        return end(
          new WebcclError(
            'PROTOCOL_ERROR',
            `${o.where} sent ${rest!.length} byte(s) after its TLS notice, before the TLS handshake`,
            { peer: o.where },
          ),
        );
      secure = tls.connect({ ...wire.client, socket: raw });
      secure.on('error', (err) => end(tlsRefusal(err, peer)));
      secure.once('secureConnect', () => {
        // Not paused: the acceptor sends nothing more until our answer, and the caller's
        // handlers are on before any I/O can deliver it.
        readBytes(secure!, 1, false, (got, rest) => {
          if (!got) return end(refusedLate(peer));
          if (got[0] !== ACK || rest.length)
            return end(
              new WebcclError(
                'PROTOCOL_ERROR',
                `${o.where} sent ${got[0]}${rest.length ? ` and ${rest.length} more byte(s)` : ''} where the end of the TLS handshake was due`,
                { peer: o.where },
              ),
            );
          secure!.write(Uint8Array.of(ACK));
          end();
        });
      });
    });
  });
}

const phaseMs = (ms: number) => Math.max(1, Math.min(ms, SECURE_PHASE_MS));
