// The job's TLS settings (Node only): TLS 1.3 keyed by the job token (a pre-shared key, no
// certificates) or by certificate files, resolved once from an option or from WEBCCL_TLS and
// WEBCCL_TLS_CERT/KEY/CA, so that every listener and dialler of a job secures its sockets alike
// (secure-socket.ts runs the connections).
import { createHash, hkdfSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as tls from 'node:tls';
import { envString, type TlsFiles } from '../../core/config.js';
import { fail } from '../../core/errors.js';

/** The TLS settings of a job, resolved once: what its listeners and diallers use. */
export interface WireTls {
  /** How the ends prove themselves: the job token's key, or certificates. */
  readonly keyedBy: 'token' | 'certs';
  readonly server: tls.TlsOptions;
  readonly client: tls.ConnectionOptions;
  /** Keyed by the token: whether an accepted TLS socket named this job's key (see secure-socket.ts). */
  readonly claimedJob?: (s: tls.TLSSocket) => boolean;
}

const SUITES = 'TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256';
/** The key's identity: the protocol and the job, never the token (it crosses the wire in clear). */
const pskIdentity = (jobId: string) => `webccl/1/${createHash('sha256').update(jobId).digest('hex').slice(0, 16)}`;
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
