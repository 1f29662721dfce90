// Reduction loops for dtypes whose elements keep their width (everything but the halves).
// T is the element type, K an op class from lanes.ts. Every loop has the same shape: 64-byte
// steps of four independent 16-byte blocks, then 16-byte blocks, then single elements. The
// vector part exists only in the SIMD build; the scalar build runs the element loop alone,
// with the same results bit for bit. Byte addresses need no alignment.
import { canonS, canonV, store4, vmul, vsplat } from './lanes';

/** Byte address of source `j` in a table of u32 addresses. */
@inline
export function srcAt(table: usize, j: i32): usize {
  return <usize>load<u32>(table + ((<usize>j) << 2));
}

/** dst[i] = a[i] ⊕ b[i] for n elements; dst may be a or b. */
export function binary<T, K>(dst: usize, a: usize, b: usize, n: usize): void {
  const op = changetype<K>(0);
  const bytes = n * sizeof<T>();
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 64 <= bytes; i += 64) {
      const r0 = op.v(v128.load(a + i), v128.load(b + i));
      const r1 = op.v(v128.load(a + i, 16), v128.load(b + i, 16));
      const r2 = op.v(v128.load(a + i, 32), v128.load(b + i, 32));
      const r3 = op.v(v128.load(a + i, 48), v128.load(b + i, 48));
      store4<T>(dst + i, r0, r1, r2, r3);
    }
    for (; i + 16 <= bytes; i += 16) {
      v128.store(dst + i, canonV<T>(op.v(v128.load(a + i), v128.load(b + i))));
    }
  }
  for (; i < bytes; i += sizeof<T>()) {
    store<T>(dst + i, canonS<T>(op.s(load<T>(a + i), load<T>(b + i))));
  }
}

/**
 * dst[i] = ((s0[i] ⊕ s1[i]) ⊕ s2[i]) ⊕ … for k >= 2 sources listed in `table`; dst may be any
 * source (each block is read from every source before dst's block is written). The first
 * eight sources sit in locals, each folded under a branch the predictor learns once; sources
 * past the eighth are read through the table.
 */
export function foldK<T, K>(dst: usize, table: usize, k: i32, n: usize): void {
  const op = changetype<K>(0);
  const bytes = n * sizeof<T>();
  const p0 = srcAt(table, 0);
  const p1 = srcAt(table, 1);
  const p2 = k > 2 ? srcAt(table, 2) : p0;
  const p3 = k > 3 ? srcAt(table, 3) : p0;
  const p4 = k > 4 ? srcAt(table, 4) : p0;
  const p5 = k > 5 ? srcAt(table, 5) : p0;
  const p6 = k > 6 ? srcAt(table, 6) : p0;
  const p7 = k > 7 ? srcAt(table, 7) : p0;
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 64 <= bytes; i += 64) {
      let a0 = op.v(v128.load(p0 + i), v128.load(p1 + i));
      let a1 = op.v(v128.load(p0 + i, 16), v128.load(p1 + i, 16));
      let a2 = op.v(v128.load(p0 + i, 32), v128.load(p1 + i, 32));
      let a3 = op.v(v128.load(p0 + i, 48), v128.load(p1 + i, 48));
      if (k > 2) {
        a0 = op.v(a0, v128.load(p2 + i));
        a1 = op.v(a1, v128.load(p2 + i, 16));
        a2 = op.v(a2, v128.load(p2 + i, 32));
        a3 = op.v(a3, v128.load(p2 + i, 48));
        if (k > 3) {
          a0 = op.v(a0, v128.load(p3 + i));
          a1 = op.v(a1, v128.load(p3 + i, 16));
          a2 = op.v(a2, v128.load(p3 + i, 32));
          a3 = op.v(a3, v128.load(p3 + i, 48));
          if (k > 4) {
            a0 = op.v(a0, v128.load(p4 + i));
            a1 = op.v(a1, v128.load(p4 + i, 16));
            a2 = op.v(a2, v128.load(p4 + i, 32));
            a3 = op.v(a3, v128.load(p4 + i, 48));
            if (k > 5) {
              a0 = op.v(a0, v128.load(p5 + i));
              a1 = op.v(a1, v128.load(p5 + i, 16));
              a2 = op.v(a2, v128.load(p5 + i, 32));
              a3 = op.v(a3, v128.load(p5 + i, 48));
              if (k > 6) {
                a0 = op.v(a0, v128.load(p6 + i));
                a1 = op.v(a1, v128.load(p6 + i, 16));
                a2 = op.v(a2, v128.load(p6 + i, 32));
                a3 = op.v(a3, v128.load(p6 + i, 48));
                if (k > 7) {
                  a0 = op.v(a0, v128.load(p7 + i));
                  a1 = op.v(a1, v128.load(p7 + i, 16));
                  a2 = op.v(a2, v128.load(p7 + i, 32));
                  a3 = op.v(a3, v128.load(p7 + i, 48));
                  for (let j = 8; j < k; j++) {
                    const p = srcAt(table, j) + i;
                    a0 = op.v(a0, v128.load(p));
                    a1 = op.v(a1, v128.load(p, 16));
                    a2 = op.v(a2, v128.load(p, 32));
                    a3 = op.v(a3, v128.load(p, 48));
                  }
                }
              }
            }
          }
        }
      }
      store4<T>(dst + i, a0, a1, a2, a3);
    }
    for (; i + 16 <= bytes; i += 16) {
      let acc = op.v(v128.load(p0 + i), v128.load(p1 + i));
      for (let j = 2; j < k; j++) acc = op.v(acc, v128.load(srcAt(table, j) + i));
      v128.store(dst + i, canonV<T>(acc));
    }
  }
  for (; i < bytes; i += sizeof<T>()) {
    let acc = op.s(load<T>(p0 + i), load<T>(p1 + i));
    if (k > 2) {
      acc = op.s(acc, load<T>(p2 + i));
      if (k > 3) {
        acc = op.s(acc, load<T>(p3 + i));
        for (let j = 4; j < k; j++) acc = op.s(acc, load<T>(srcAt(table, j) + i));
      }
    }
    store<T>(dst + i, canonS<T>(acc));
  }
}

/** dst[i] = src[i] * factor for f32 or f64; dst may be src. */
export function scaleLoop<T>(dst: usize, src: usize, n: usize, factor: T): void {
  const bytes = n * sizeof<T>();
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    const f = vsplat<T>(factor);
    for (; i + 64 <= bytes; i += 64) {
      const r0 = vmul<T>(v128.load(src + i), f);
      const r1 = vmul<T>(v128.load(src + i, 16), f);
      const r2 = vmul<T>(v128.load(src + i, 32), f);
      const r3 = vmul<T>(v128.load(src + i, 48), f);
      store4<T>(dst + i, r0, r1, r2, r3);
    }
    for (; i + 16 <= bytes; i += 16) {
      v128.store(dst + i, canonV<T>(vmul<T>(v128.load(src + i), f)));
    }
  }
  for (; i < bytes; i += sizeof<T>()) {
    store<T>(dst + i, canonS<T>(<T>(load<T>(src + i) * factor)));
  }
}
