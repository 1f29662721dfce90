// Kernels of bench/write-streams.mjs (compiled there with asc, SIMD on): plain copies that
// differ only in where they write, to see what a layout conversion's write side costs apart
// from its shuffles. Not part of the library.

/** wasm's memory.copy: the anchor. */
export function copyAll(dst: usize, src: usize, n: usize): void {
  memory.copy(dst, src, n);
}

/** A 16-byte load/store loop over `n` bytes: memory.copy's work without memory.copy. */
export function copyLoop(dst: usize, src: usize, n: usize): void {
  for (let i: usize = 0; i < n; i += 64) {
    v128.store(dst + i, v128.load(src + i));
    v128.store(dst + i + 16, v128.load(src + i + 16));
    v128.store(dst + i + 32, v128.load(src + i + 32));
    v128.store(dst + i + 48, v128.load(src + i + 48));
  }
}

/**
 * The source read straight through, written to `k` dst rows n / k bytes apart, `run` bytes to
 * each in turn: the write pattern of a scatter transpose with k far rows written at once.
 */
export function copyStreams(dst: usize, src: usize, n: usize, run: usize, k: usize): void {
  const per = n / k;
  let s = src;
  for (let off: usize = 0; off < per; off += run) {
    for (let j: usize = 0; j < k; j++) {
      const d = dst + j * per + off;
      for (let i: usize = 0; i < run; i += 16) v128.store(d + i, v128.load(s + i));
      s += run;
    }
  }
}
