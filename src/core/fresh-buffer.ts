// The node memory's buffer as large as the memory is now, on every thread.
//
// When one thread grows a shared WebAssembly.Memory, V8 gives the other threads the new, longer
// buffer only once each has handled the grow's interrupt, at some later stack check: until then
// their `memory.buffer` is the old one. A view made from it ends at the old size, so a block
// another rank allocated past that size reads as undefined and writes to it are dropped without
// a word (an 8-rank test met it: the heap's walk found a header "overwritten", sizes undefined).
// memory.grow(0) hands the calling thread the current buffer at once.
//
// Whether a buffer is long enough is told by the heap's top, in the node header (inside any
// view): every block handed out lies below it, and the memory is grown before the top moves.
import { N, NODE_BASE } from './shm-map.js';

const TOP = (NODE_BASE + N.HEAP_TOP) >> 2;
/** A view of each memory's header, made once: a shared buffer is never detached, so it stays valid. */
const headers = new WeakMap<WebAssembly.Memory, Int32Array>();

/** `memory.buffer`, renewed first when it ends below the heap's top (another thread grew the memory). */
export function freshBuffer(memory: WebAssembly.Memory): ArrayBufferLike {
  const buffer: ArrayBufferLike = memory.buffer;
  const bytes = buffer.byteLength;
  // An unshared memory has one thread, which sees its own grows (and grow(0) would detach every view of it).
  if (typeof SharedArrayBuffer === 'undefined' || !(buffer instanceof SharedArrayBuffer)) return buffer;
  if (bytes <= NODE_BASE + N.HEAP_TOP) return buffer; // not a node memory (yet)
  let header = headers.get(memory);
  if (header === undefined) headers.set(memory, (header = new Int32Array(buffer, 0, TOP + 1)));
  if (Atomics.load(header, TOP) <= bytes) return buffer;
  memory.grow(0);
  return memory.buffer;
}

/** An Int32Array over the whole of freshBuffer(memory): the view most words of the node memory are read through. */
export function freshI32(memory: WebAssembly.Memory): Int32Array {
  return new Int32Array(freshBuffer(memory));
}
