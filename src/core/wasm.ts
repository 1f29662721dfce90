// Loads the webccl WebAssembly core onto a (shared) memory. Both builds are embedded as base64,
// so loading needs no file access and no bundler plugin. The SIMD build is taken where the
// runtime validates it; WEBCCL_WASM=scalar (or the `simd` option) forces the choice.

import { WebcclError } from './errors.js';
import { importUnsharedMemory, isShared, unsharedMemory } from './unshared-memory.js';
import { SCALAR_WASM_BASE64, SIMD_WASM_BASE64 } from './wasm-binaries.generated.js';

export interface KernelExports {
  heapBase(): number;
  copyBytes(dst: number, src: number, bytes: number): void;
  [name: string]: unknown;
}

export interface WasmCore {
  exports: KernelExports;
  memory: WebAssembly.Memory;
  simd: boolean;
}

const moduleCache = new Map<string, WebAssembly.Module>();

function decodeBase64(b64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64);
  const out = new Uint8Array(new ArrayBuffer(bin.length));
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

let simdOk: boolean | undefined;
function simdSupported(): boolean {
  // The SIMD build itself is the probe: a runtime without SIMD fails to validate it.
  simdOk ??= WebAssembly.validate(decodeBase64(SIMD_WASM_BASE64));
  return simdOk;
}

/**
 * The compiled module for one build; compiled once per thread and cached. `shared: false` is the
 * same code importing an unshared memory (a node of one rank in a page without cross-origin
 * isolation): the import's limits flag is the only difference (unshared-memory.ts).
 */
export function wasmModule(simd: boolean, shared = true): WebAssembly.Module {
  const key = `${simd}/${shared}`;
  let m = moduleCache.get(key);
  if (!m) {
    const bytes = decodeBase64(simd ? SIMD_WASM_BASE64 : SCALAR_WASM_BASE64);
    m = new WebAssembly.Module(shared ? bytes : importUnsharedMemory(bytes));
    moduleCache.set(key, m);
  }
  return m;
}

export function preferSimd(requested?: boolean): boolean {
  if (requested !== undefined) return requested && simdSupported();
  const env = typeof process !== 'undefined' ? process.env?.WEBCCL_WASM : undefined;
  if (env === 'scalar') return false;
  return simdSupported();
}

/** The response headers a page must be served with for its workers to share memory. */
export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
} as const;

function notIsolated(what: string): never {
  const headers = Object.entries(ISOLATION_HEADERS)
    .map(([k, v]) => `${k}: ${v}`)
    .join(' and ');
  throw new WebcclError(
    'UNSUPPORTED',
    `${what}: shared memory needs a cross-origin isolated page; serve it with the headers ${headers} (SharedArrayBuffer is ${typeof SharedArrayBuffer === 'undefined' ? 'undefined' : 'not shareable with workers'} here)`,
    {
      headers: { ...ISOLATION_HEADERS },
    },
  );
}

/**
 * Creates a shared memory sized for `bytes` of content (grown later by alloc). `sharedWith` is
 * the number of threads that will use it: a page that is not cross-origin isolated cannot hand
 * it to a worker (postMessage fails with DataCloneError), so it is refused here, with the fix.
 */
export function createSharedMemory(bytes: number, sharedWith = 1): WebAssembly.Memory {
  const isolated = (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated;
  if (typeof SharedArrayBuffer === 'undefined' && sharedWith === 1) return unsharedMemory(bytes);
  if (typeof SharedArrayBuffer === 'undefined' || (isolated === false && sharedWith > 1)) notIsolated('createNode');
  const pages = Math.max(1, Math.ceil(bytes / 65536));
  try {
    return new WebAssembly.Memory({ initial: pages, maximum: 32768, shared: true });
  } catch (e) {
    if (isolated === false) notIsolated('createNode');
    throw new WebcclError(
      'UNSUPPORTED',
      `createNode: could not create a shared WebAssembly memory of ${pages} pages (${(e as Error).message})`,
    );
  }
}

/** Instantiates the core on `memory` (synchronously: modules are small). */
export function loadWasm(memory: WebAssembly.Memory, simd = preferSimd()): WasmCore {
  const env = {
    memory,
    abort(): never {
      throw new WebcclError('INTERNAL', 'webccl wasm core aborted');
    },
  };
  const instance = new WebAssembly.Instance(wasmModule(simd, isShared(memory)), { env });
  return { exports: instance.exports as unknown as KernelExports, memory, simd };
}
