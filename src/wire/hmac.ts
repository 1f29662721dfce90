// HMAC-SHA-256 and random nonces over WebCrypto (browser-safe). `globalThis.crypto.subtle` is
// there in Node 20 and in every browser page served over https or from localhost, so one code
// path proves the token in both. It is asynchronous (the digest runs off the JS thread), which
// is why the handshake computes both proofs of an exchange before it sends its own: the last
// proof to arrive is then checked at once (see auth.ts).
import { WebcclError } from '../core/errors.js';

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  // A page served over plain http from another host is not a secure context: no crypto.subtle.
  if (!s)
    throw new WebcclError(
      'UNSUPPORTED',
      'WebCrypto (crypto.subtle) is not available here; a browser page needs a secure context (https or localhost) to prove the job token',
    );
  return s;
}

/** `n` random bytes from the platform's CSPRNG. */
export function randomBytes(n: number): Uint8Array {
  const c = globalThis.crypto;
  if (!c?.getRandomValues) throw new WebcclError('UNSUPPORTED', 'crypto.getRandomValues is not available here');
  return c.getRandomValues(new Uint8Array(n));
}

/** `b` as WebCrypto takes it: on an ArrayBuffer (a view of shared memory is copied). */
const plain = (b: Uint8Array): Uint8Array<ArrayBuffer> =>
  b.buffer instanceof ArrayBuffer ? (b as Uint8Array<ArrayBuffer>) : new Uint8Array(b);

/** HMAC-SHA-256 of each of `messages` under `key` (one key import for all of them). */
export async function hmacSha256(key: Uint8Array, messages: Uint8Array[]): Promise<Uint8Array[]> {
  const s = subtle();
  const k = await s.importKey('raw', plain(key), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return Promise.all(messages.map(async (m) => new Uint8Array(await s.sign('HMAC', k, plain(m)))));
}

/** Whether two byte strings are equal, in time that depends only on their lengths. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}
