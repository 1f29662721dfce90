// Optional TLS under the rendezvous store's and the transport's connections (Node only): one
// place where both make their sockets, so that neither needs the other. Without TLS it hands
// out net sockets as they are. With TLS (WEBCCL_TLS=1) every connection runs TLS 1.3, keyed
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
import { createHash, hkdfSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { envString, type TlsFiles } from '../../core/config.js';
import { fail, WebcclError } from '../../core/errors.js';

/** The TLS settings of a job, resolved once: what its listeners and diallers use. */
export interface WireTls {
  /** How the ends prove themselves: the job token's key, or certificates. */
  readonly keyedBy: 'token' | 'certs';
  readonly server: tls.TlsOptions;
  readonly client: tls.ConnectionOptions;
  /** Keyed by the token: whether an accepted TLS socket named this job's key (see the header). */
  readonly claimedJob?: (s: tls.TLSSocket) => boolean;
}

/** What a secure connection may take from accept (or connect) to its protocol's first byte. */
export const SECURE_PHASE_MS = 10_000;
/** The text a plain peer shows when it meets a secure one (inside its own protocol's frame). */
export const TLS_NOTICE =
  'the other end uses TLS (WEBCCL_TLS=1) and this one does not: set WEBCCL_TLS alike on every rank';

const SUITES = 'TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256';
/** The key's identity: the protocol and the job, never the token (it crosses the wire in clear). */
const pskIdentity = (jobId: string) => `webccl/1/${createHash('sha256').update(jobId).digest('hex').slice(0, 16)}`;
const ACK = 0x01;
/** OpenSSL's error when the dialler's key is not the one its identity names here. */
const BINDER_MISMATCH = 'ERR_SSL_BINDER_DOES_NOT_VERIFY';
const VARS = { cert: 'WEBCCL_TLS_CERT', key: 'WEBCCL_TLS_KEY', ca: 'WEBCCL_TLS_CA' } as const;

/** The job's TLS settings, keyed by the token (and job id) or by the given certificate files. */
export function wireTls(token: Uint8Array, jobId: string, files?: TlsFiles): WireTls {
  const base = { minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3', ciphers: SUITES } as const;
  // Ranks dial addresses, and a certificate names a host: trust is the key or the CA, not names.
  const anyHost = () => undefined;
  if (!files) {
    const psk = Buffer.from(hkdfSync('sha256', token, jobId, 'webccl tls', 32));
    const identity = pskIdentity(jobId);
    // The sockets that named this job's key: if their handshake then fails, the dialler holds
    // another token. Another job's identity gets no key (and stays a stranger).
    const claimed = new WeakSet<tls.TLSSocket>();
    return {
      keyedBy: 'token',
      server: {
        ...base,
        pskCallback: (s, id) => {
          if (id !== identity) return null;
          claimed.add(s);
          return psk;
        },
      },
      client: { ...base, pskCallback: () => ({ psk, identity }), checkServerIdentity: anyHost },
      claimedJob: (s) => claimed.has(s),
    };
  }
  const pem = Object.fromEntries((['cert', 'key', 'ca'] as const).map((k) => [k, readPem(k, files[k])])) as Record<
    keyof TlsFiles,
    Buffer
  >;
  try {
    // a key that does not match its certificate fails here, not at the first peer
    tls.createSecureContext({ ...base, ...pem });
  } catch (e) {
    fail(
      'INVALID_ARGUMENT',
      `TLS certificate ${files.cert}, key ${files.key} or CA ${files.ca} is unusable: ${(e as Error).message}`,
      { ...files },
    );
  }
  return {
    keyedBy: 'certs',
    server: { ...base, ...pem, requestCert: true, rejectUnauthorized: true },
    client: { ...base, ...pem, rejectUnauthorized: true, checkServerIdentity: anyHost },
  };
}

function readPem(what: keyof TlsFiles, path: string): Buffer {
  if (typeof path !== 'string' || path === '')
    fail('INVALID_ARGUMENT', `tls.${what} must be the path of a PEM file (${VARS[what]})`);
  try {
    return readFileSync(path);
  } catch (e) {
    return fail(
      'INVALID_ARGUMENT',
      `cannot read the TLS ${what} file ${path} (${VARS[what]}): ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      { path },
    );
  }
}

/**
 * The job's TLS settings from an option (true, false, or certificate files), else from
 * WEBCCL_TLS and WEBCCL_TLS_CERT/KEY/CA; undefined when the job runs without TLS. Certificate
 * variables without WEBCCL_TLS=1 are refused: they must never leave a job unencrypted unnoticed.
 */
export function resolveWireTls(
  option: boolean | TlsFiles | undefined,
  token: Uint8Array,
  jobId: string,
): WireTls | undefined {
  if (option !== undefined && typeof option !== 'boolean' && (typeof option !== 'object' || option === null)) {
    fail(
      'INVALID_ARGUMENT',
      `tls must be true, false or { cert, key, ca } (paths of PEM files), got ${JSON.stringify(option)}`,
    );
  }
  if (typeof option === 'object') {
    const unknown = Object.keys(option).filter((k) => !(k in VARS));
    if (unknown.length)
      fail(
        'INVALID_ARGUMENT',
        `tls: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: cert, key, ca)`,
        { unknown },
      );
    return wireTls(token, jobId, option);
  }
  const flag = envString('WEBCCL_TLS');
  if (flag !== undefined && !['0', '1'].includes(flag))
    fail('INVALID_ARGUMENT', `WEBCCL_TLS=${JSON.stringify(flag)}: expected 1 (encrypt) or 0`);
  const given = (Object.keys(VARS) as (keyof TlsFiles)[]).filter((k) => envString(VARS[k]) !== undefined);
  const on = option ?? flag === '1';
  if (given.length && !on)
    fail(
      'INVALID_ARGUMENT',
      `${given.map((k) => VARS[k]).join(', ')} set, but TLS is off: set WEBCCL_TLS=1 to use the certificates, or unset them`,
    );
  if (!on) return undefined;
  if (given.length === 0) return wireTls(token, jobId);
  if (given.length < 3)
    fail(
      'INVALID_ARGUMENT',
      `TLS with certificates needs ${Object.values(VARS).join(', ')} together; missing ${(
        Object.keys(VARS) as (keyof TlsFiles)[]
      )
        .filter((k) => !given.includes(k))
        .map((k) => VARS[k])
        .join(', ')}`,
    );
  return wireTls(token, jobId, {
    cert: envString('WEBCCL_TLS_CERT')!,
    key: envString('WEBCCL_TLS_KEY')!,
    ca: envString('WEBCCL_TLS_CA')!,
  });
}

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

/** A TLS handshake that failed: the peers do not share the key, or a certificate is not trusted. */
function tlsRefusal(err: Error & { code?: string; reason?: string }, p: Peer, certError?: Error | string): WebcclError {
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
function refusedLate(p: Peer): WebcclError {
  return new WebcclError(
    'AUTH_FAILED',
    `${p.who} closed the connection at the end of the TLS handshake (it refused this end's key or certificate, or it ended)`,
    { peer: p.remote },
  );
}

/** Who is at the other end: how messages name it, and its address for details. */
interface Peer {
  who: string;
  remote: string;
}

/**
 * Reads the peer's notice, byte by byte against ours: a plain peer is told apart at its first
 * byte that differs. Calls back once, with an error or with the bytes read past the notice.
 */
function readNotice(
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
function readBytes(
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
