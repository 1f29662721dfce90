// Reduction loops for the halves (H = F16 or BF16 from half.ts, K = an op class on f32 from
// lanes.ts). Elements are widened to f32, combined in f32, and rounded once when stored: a
// k-way fold keeps its whole accumulation in f32. Steps: 32 bytes (sixteen halves, four f32x4
// accumulators), then 16 bytes, then single elements.
import { srcAt } from './loops';

/** Eight halves of x ⊕ y (16 bytes each way). */
@inline function pair<H, K>(x: v128, y: v128): v128 {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  return h.pack(op.v(h.lo(x), h.lo(y)), op.v(h.hi(x), h.hi(y)));
}

/** dst[i] = round(a[i] ⊕ b[i]); dst may be a or b. */
export function halfBinary<H, K>(dst: usize, a: usize, b: usize, n: usize): void {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  const bytes = n << 1;
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 32 <= bytes; i += 32) {
      const r0 = pair<H, K>(v128.load(a + i), v128.load(b + i));
      const r1 = pair<H, K>(v128.load(a + i, 16), v128.load(b + i, 16));
      v128.store(dst + i, r0);
      v128.store(dst + i, r1, 16);
    }
    for (; i + 16 <= bytes; i += 16) v128.store(dst + i, pair<H, K>(v128.load(a + i), v128.load(b + i)));
  }
  for (; i < bytes; i += 2) {
    store<u16>(dst + i, h.down(op.s(h.up(load<u16>(a + i)), h.up(load<u16>(b + i)))));
  }
}

/** dst[i] = round(((s0[i] ⊕ s1[i]) ⊕ s2[i]) ⊕ …) for k >= 2 sources; dst may be any source. */
export function halfFoldK<H, K>(dst: usize, table: usize, k: i32, n: usize): void {
  const h = changetype<H>(0);
  const op = changetype<K>(0);
  const bytes = n << 1;
  const p0 = srcAt(table, 0);
  const p1 = srcAt(table, 1);
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 32 <= bytes; i += 32) {
      let x = v128.load(p0 + i);
      let y = v128.load(p1 + i);
      let l0 = op.v(h.lo(x), h.lo(y));
      let h0 = op.v(h.hi(x), h.hi(y));
      x = v128.load(p0 + i, 16);
      y = v128.load(p1 + i, 16);
      let l1 = op.v(h.lo(x), h.lo(y));
      let h1 = op.v(h.hi(x), h.hi(y));
      for (let j = 2; j < k; j++) {
        const p = srcAt(table, j) + i;
        x = v128.load(p);
        y = v128.load(p, 16);
        l0 = op.v(l0, h.lo(x));
        h0 = op.v(h0, h.hi(x));
        l1 = op.v(l1, h.lo(y));
        h1 = op.v(h1, h.hi(y));
      }
      v128.store(dst + i, h.pack(l0, h0));
      v128.store(dst + i, h.pack(l1, h1), 16);
    }
    for (; i + 16 <= bytes; i += 16) {
      const x = v128.load(p0 + i);
      const y = v128.load(p1 + i);
      let l = op.v(h.lo(x), h.lo(y));
      let u = op.v(h.hi(x), h.hi(y));
      for (let j = 2; j < k; j++) {
        const z = v128.load(srcAt(table, j) + i);
        l = op.v(l, h.lo(z));
        u = op.v(u, h.hi(z));
      }
      v128.store(dst + i, h.pack(l, u));
    }
  }
  for (; i < bytes; i += 2) {
    let acc = op.s(h.up(load<u16>(p0 + i)), h.up(load<u16>(p1 + i)));
    for (let j = 2; j < k; j++) acc = op.s(acc, h.up(load<u16>(srcAt(table, j) + i)));
    store<u16>(dst + i, h.down(acc));
  }
}

/** dst[i] = round(src[i] * factor) in f32; dst may be src. */
export function halfScale<H>(dst: usize, src: usize, n: usize, factor: f32): void {
  const h = changetype<H>(0);
  const bytes = n << 1;
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    const f = f32x4.splat(factor);
    for (; i + 32 <= bytes; i += 32) {
      const x0 = v128.load(src + i);
      const x1 = v128.load(src + i, 16);
      v128.store(dst + i, h.pack(f32x4.mul(h.lo(x0), f), f32x4.mul(h.hi(x0), f)));
      v128.store(dst + i, h.pack(f32x4.mul(h.lo(x1), f), f32x4.mul(h.hi(x1), f)), 16);
    }
    for (; i + 16 <= bytes; i += 16) {
      const x = v128.load(src + i);
      v128.store(dst + i, h.pack(f32x4.mul(h.lo(x), f), f32x4.mul(h.hi(x), f)));
    }
  }
  for (; i < bytes; i += 2) store<u16>(dst + i, h.down(h.up(load<u16>(src + i)) * factor));
}
