// A node's memory where SharedArrayBuffer does not exist (a page that is not cross-origin
// isolated): a node of one rank needs no sharing, so it runs on an unshared WebAssembly.Memory.
// Two things differ from a shared one. The core's module imports a shared memory; the same
// bytes with the import's limits flag changed from "shared, with maximum" to "with maximum"
// import an unshared one (atomic instructions stay valid on unshared memory; only a wait would
// trap, and a node of one never waits on another rank). And growing an unshared memory detaches
// every view of it, which the library keeps; so the memory has a fixed size from the start
// (UNSHARED_NODE_BYTES), and an alloc beyond it fails with a clear error instead of growing.
import { WebcclError } from './errors.js';

/** The fixed size of a node memory that cannot be shared (its heap ends there). */
export const UNSHARED_NODE_BYTES = 256 << 20;
const PAGE = 65536;

export const isShared = (m: WebAssembly.Memory): boolean =>
  typeof SharedArrayBuffer !== 'undefined' && m.buffer instanceof SharedArrayBuffer;

/** An unshared memory of UNSHARED_NODE_BYTES (at least `bytes`), which never grows. */
export function unsharedMemory(bytes: number): WebAssembly.Memory {
  const pages = Math.max(UNSHARED_NODE_BYTES, bytes) / PAGE;
  return new WebAssembly.Memory({ initial: Math.ceil(pages), maximum: Math.ceil(pages) });
}

/** Reads an unsigned LEB128 at `at`: [value, next offset]. */
function leb(b: Uint8Array, at: number): [number, number] {
  let v = 0;
  for (let shift = 0; ; shift += 7) {
    const byte = b[at++];
    v += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return [v, at];
    if (shift > 28) throw new WebcclError('INTERNAL', 'wasm core: malformed LEB128');
  }
}

/** A copy of the module `bytes` whose memory import is unshared. */
export function importUnsharedMemory(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(bytes);
  let at = 8; // magic and version
  while (at < b.length) {
    const id = b[at];
    const [size, body] = leb(b, at + 1);
    if (id === 2) {
      let [count, p] = leb(b, body);
      for (; count > 0; count--) {
        for (let name = 0; name < 2; name++) {
          const [len, q] = leb(b, p);
          p = q + len;
        }
        const kind = b[p++];
        if (kind === 2) {
          // Limits: 0x03 = shared with a maximum; 0x01 = a maximum, unshared.
          if (b[p] !== 0x03)
            throw new WebcclError('INTERNAL', `wasm core: memory import has limits flag ${b[p]}, expected shared (3)`);
          b[p] = 0x01;
          return b;
        }
        // Skip the other import kinds: function (type index), table (reftype + limits), global (type + mutability).
        if (kind === 0) p = leb(b, p)[1];
        else if (kind === 1) p = skipLimits(b, p + 1);
        else if (kind === 3) p += 2;
        else throw new WebcclError('INTERNAL', `wasm core: unknown import kind ${kind}`);
      }
    }
    at = body + size;
  }
  throw new WebcclError('INTERNAL', 'wasm core: no memory import found');
}

function skipLimits(b: Uint8Array, p: number): number {
  const flag = b[p];
  let q = leb(b, p + 1)[1];
  if (flag & 1) q = leb(b, q)[1];
  return q;
}
