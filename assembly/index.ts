// The webccl WebAssembly core: reduction kernels and the shared-memory step loops.
// Every export takes byte offsets into the (shared) linear memory that JS owns; nothing here
// allocates.
export * from './kernels/api';

/** First byte past the module's static data: JS lays out its control block above it. */
export function heapBase(): usize {
  return __heap_base;
}
export { advance } from './engine/run';
export { spinProbe, stepReached } from './engine/sync';
export { convertLayout, zeroPadding } from './layouts/convert';
