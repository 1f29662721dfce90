// Placeholder until the kernels land.
export function copyBytes(dst: usize, src: usize, bytes: usize): void {
  memory.copy(dst, src, bytes);
}
