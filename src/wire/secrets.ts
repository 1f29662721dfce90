// The shared secret and job id every connection of a job proves (browser-safe), checked at the
// API boundary of each protocol that takes them, and the "host:port" text that names a peer.
import { WebcclError } from '../core/errors.js';
import { textBytes } from './bytes.js';
import { MAX_JOB_ID_BYTES } from './limits.js';

/** Checks the shared secret and job id at the API boundary; returns the token's bytes. */
export function checkSecrets(token: string | Uint8Array, jobId: string): Uint8Array {
  const t = typeof token === 'string' ? textBytes(token) : token;
  if (!(t instanceof Uint8Array) || t.length === 0)
    throw new WebcclError('INVALID_ARGUMENT', 'store token must be a non-empty string or Uint8Array');
  const j = typeof jobId === 'string' ? textBytes(jobId).length : 0;
  if (j < 1 || j > MAX_JOB_ID_BYTES)
    throw new WebcclError('INVALID_ARGUMENT', `store jobId must be a string of 1..${MAX_JOB_ID_BYTES} UTF-8 bytes`);
  return t;
}

/** "host:port", with an IPv6 host in brackets. */
export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
