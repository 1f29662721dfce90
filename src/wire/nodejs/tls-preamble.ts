// The bytes a secure connection exchanges around its TLS handshake (Node only): reading the
// peer's plain notice and the one-byte acknowledgement, and the errors that name why a peer was
// refused there, shared by the listening and the dialling side of secure-socket.ts.
import type * as net from 'node:net';
import { WebcclError } from '../../core/errors.js';

/** The byte each end sends once its TLS handshake is done and the peer accepted. */
export const ACK = 0x01;

/** A TLS handshake that failed: the peers do not share the key, or a certificate is not trusted. */
export function tlsRefusal(
  err: Error & { code?: string; reason?: string },
  p: Peer,
  certError?: Error | string,
): WebcclError {
  // A client certificate this end did not trust shows as the socket's authorizationError;
  // OpenSSL's errors carry a short reason beside their long message.
  const why = certError
    ? `the peer's certificate: ${String(certError)}`
    : `${err.reason ?? err.message.split('\n')[0]}${err.code ? `, ${err.code}` : ''}`;
  return new WebcclError(
    'AUTH_FAILED',
    `the TLS handshake with ${p.who} failed (${why}): every rank needs the same WEBCCL_TOKEN and WEBCCL_JOB_ID, or certificates from the same WEBCCL_TLS_CA`,
    { peer: p.remote, tls: err.code },
  );
}

/** The connection closed right after the TLS handshake: the peer refused our key or certificate. */
export function refusedLate(p: Peer): WebcclError {
  return new WebcclError(
    'AUTH_FAILED',
    `${p.who} closed the connection at the end of the TLS handshake (it refused this end's key or certificate, or it ended)`,
    { peer: p.remote },
  );
}

/** Who is at the other end: how messages name it, and its address for details. */
export interface Peer {
  who: string;
  remote: string;
}

/**
 * Reads the peer's notice, byte by byte against ours: a plain peer is told apart at its first
 * byte that differs. Calls back once, with an error or with the bytes read past the notice.
 */
export function readNotice(
  raw: net.Socket,
  notice: Uint8Array,
  p: Peer,
  side: 'accept' | 'dial',
  then: (e?: WebcclError, rest?: Buffer) => void,
): void {
  const plain = () =>
    new WebcclError(
      'PROTOCOL_ERROR',
      `${p.who} does not use TLS, and this rank does (WEBCCL_TLS=1): set WEBCCL_TLS alike on every rank`,
      { peer: p.remote, tls: 'mismatch' },
    );
  let at = 0;
  let finished = false;
  const finish = (e?: WebcclError, rest?: Buffer) => {
    if (finished) return;
    finished = true;
    raw.off('data', onData);
    raw.off('close', onClose);
    raw.pause();
    then(e, rest);
  };
  const onData = (chunk: Buffer) => {
    const n = Math.min(chunk.length, notice.length - at);
    for (let i = 0; i < n; i++) if (chunk[i] !== notice[at + i]) return finish(plain());
    at += n;
    if (at === notice.length) finish(undefined, chunk.subarray(n));
  };
  // A plain dialler shows our notice and hangs up; a plain acceptor hangs up on ours.
  const onClose = () =>
    finish(
      new WebcclError(
        'PROTOCOL_ERROR',
        `${p.who} closed the connection before TLS began: it does not use TLS while this rank does (WEBCCL_TLS=1), or it ${side === 'dial' ? 'failed' : 'gave up'}`,
        { peer: p.remote, tls: 'mismatch' },
      ),
    );
  raw.on('data', onData);
  raw.on('close', onClose);
}

/** Reads `n` bytes (then pauses if told); calls back with them and what came after, or with undefined on close. */
export function readBytes(
  s: net.Socket,
  n: number,
  pause: boolean,
  then: (got: Buffer | undefined, rest: Buffer) => void,
): void {
  let have = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    have = Buffer.concat([have, chunk]);
    if (have.length < n) return;
    s.off('data', onData);
    s.off('close', onClose);
    if (pause) s.pause();
    then(have.subarray(0, n), have.subarray(n));
  };
  const onClose = () => {
    s.off('data', onData);
    then(undefined, Buffer.alloc(0));
  };
  s.on('data', onData);
  s.on('close', onClose);
}
