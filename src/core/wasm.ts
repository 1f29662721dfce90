// Loads the webccl WebAssembly core onto a (shared) memory. Both builds are embedded as base64,
// so loading needs no file access and no bundler plugin. The SIMD build is taken where the
// runtime validates it; WEBCCL_WASM=scalar (or the `simd` option) forces the choice.
import { SCALAR_WASM_BASE64, SIMD_WASM_BASE64 } from './wasm-binaries.generated.js';
import { WebcclError } from './errors.js';

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

const moduleCache = new Map<boolean, WebAssembly.Module>();

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

/** The compiled module for one build; compiled once per thread and cached. */
export function wasmModule(simd: boolean): WebAssembly.Module {
  let m = moduleCache.get(simd);
  if (!m) {
    m = new WebAssembly.Module(decodeBase64(simd ? SIMD_WASM_BASE64 : SCALAR_WASM_BASE64));
    moduleCache.set(simd, m);
  }
  return m;
}

export function preferSimd(requested?: boolean): boolean {
  if (requested !== undefined) return requested && simdSupported();
  const env = typeof process !== 'undefined' ? process.env?.WEBCCL_WASM : undefined;
  if (env === 'scalar') return false;
  return simdSupported();
}

/** Creates a shared memory sized for `bytes` of content (grown later by alloc). */
export function createSharedMemory(bytes: number): WebAssembly.Memory {
  const pages = Math.max(1, Math.ceil(bytes / 65536));
  return new WebAssembly.Memory({ initial: pages, maximum: 32768, shared: true });
}

/** Instantiates the core on `memory` (synchronously: modules are small). */
export function loadWasm(memory: WebAssembly.Memory, simd = preferSimd()): WasmCore {
  const env = {
    memory,
    abort(): never {
      throw new WebcclError('INTERNAL', 'webccl wasm core aborted');
    },
  };
  const instance = new WebAssembly.Instance(wasmModule(simd), { env });
  return { exports: instance.exports as unknown as KernelExports, memory, simd };
}
