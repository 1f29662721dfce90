// Tensor layout conversions (NCHW, NHWC, NC1HWC0) against a plain reference that places every
// logical element by its index formula: every layout pair × element width × shapes with C not a
// multiple of C0, C < C0, C = 1, H or W = 1, N = 0, in the SIMD and the scalar build (which must
// give the same bytes), round trips, zero padding, and garbage padding that must not leak.
import { describe, expect, it } from 'vitest';
import { defaultC0, type Layout, physicalCount, sameBytes, type TensorLayout } from '../../src/core/tensor-layout.js';
import { createSharedMemory, loadWasm } from '../../src/core/wasm.js';
import { convertDtype, convertLayout } from '../../src/layouts/convert.js';
import { caught } from '../helpers/caught.js';
import { LAYOUT_NAMES, paddingMask, refConvert } from '../helpers/layout-ref.js';

const LAYOUTS = LAYOUT_NAMES;
const CODE: Record<Layout, number> = { NCHW: 0, NHWC: 1, NC1HWC0: 2 };

let seed = 12345;
const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) & 0xff;

const SHAPES: [number, number, number, number][] = [
  [0, 3, 2, 2],
  [2, 0, 3, 3],
  [1, 1, 1, 1],
  [2, 3, 4, 5],
  [1, 17, 3, 3],
  [2, 5, 1, 7],
  [1, 20, 6, 1],
  [3, 33, 5, 7],
  [1, 1, 9, 9],
  [2, 40, 16, 17],
  [1, 64, 8, 8],
  [1, 16, 4, 4],
  // Whole channel blocks over groups of pixels and a few more (convert.ts: NHWC <-> NC1HWC0).
  [2, 64, 5, 7],
  // H·W a multiple of 2048 (1-byte tiles then write their 16 rows in two halves, transpose.ts)
  // and of 4096, with C over a block of tiles and not a multiple of C0.
  [1, 37, 32, 64],
  [2, 70, 64, 64],
];
const WIDTHS = [1, 2, 4, 8];

const memory = createSharedMemory(16 << 20);
const builds = [true, false].map((simd) => ({ name: simd ? 'simd' : 'scalar', x: loadWasm(memory, simd).exports }));
const BASE = (builds[0].x.heapBase() + 4096 + 63) & ~63;
type Run = (
  es: number,
  from: number,
  to: number,
  dst: number,
  src: number,
  n: number,
  c: number,
  hw: number,
  c0: number,
) => void;

/** Runs the kernel at odd offsets with guards around dst; returns dst's bytes. */
function kernel(
  x: Record<string, unknown>,
  es: number,
  src: Uint8Array,
  from: TensorLayout,
  to: TensorLayout,
): Uint8Array {
  const s = BASE + 3;
  const outBytes = physicalCount(to) * es;
  const d = ((s + src.length + 64 + 63) & ~63) + 5;
  const short = d + outBytes + 64 - memory.buffer.byteLength;
  if (short > 0) memory.grow(Math.ceil(short / 65536));
  const mem = new Uint8Array(memory.buffer);
  mem.fill(0xa5, d - 16, d + outBytes + 16);
  mem.set(src, s);
  const c0 = from.layout === 'NC1HWC0' ? from.c0 : to.c0;
  (x.convertLayout as Run)(
    es,
    CODE[from.layout],
    CODE[to.layout],
    d,
    s,
    from.shape[0],
    from.shape[1],
    from.shape[2] * from.shape[3],
    c0,
  );
  for (let i = 1; i <= 16; i++)
    expect(mem[d - i] === 0xa5 && mem[d + outBytes + i - 1] === 0xa5, 'guard bytes').toBe(true);
  return mem.slice(d, d + outBytes);
}

describe('layout kernels match the reference in both builds', () => {
  for (const es of WIDTHS) {
    it(`${es}-byte elements, every layout pair and shape`, () => {
      for (const shape of SHAPES) {
        for (const c0 of [es === 1 ? 32 : 16, 4, 1, 5]) {
          for (const fromName of LAYOUTS) {
            for (const toName of LAYOUTS) {
              if (fromName === 'NC1HWC0' && toName === 'NC1HWC0') continue; // the same c0: a copy
              const from: TensorLayout = { shape, layout: fromName, c0 };
              const to: TensorLayout = { shape, layout: toName, c0 };
              const src = new Uint8Array(physicalCount(from) * es).map(rnd);
              const expected = refConvert(es, src, from, to);
              const outs = builds.map((b) => kernel(b.x, es, src, from, to));
              const label = `${fromName}->${toName} [${shape}] c0 ${c0}`;
              expect(Buffer.compare(outs[0], expected), `simd ${label}`).toBe(0);
              expect(Buffer.compare(outs[1], expected), `scalar ${label}`).toBe(0);
              if (toName === 'NC1HWC0') {
                const mask = paddingMask(to);
                expect(
                  mask.every((p, i) => !p || outs[0].subarray(i * es, i * es + es).every((v) => v === 0)),
                  `padding zero ${label}`,
                ).toBe(true);
              }
            }
          }
        }
      }
    });
  }
});

// Transposes of more than 1 MiB (past L2) walk in longer runs (transpose.ts), and those whose
// dst rows lie 128 KiB or more apart in larger blocks: shapes with H·W a power of two, whose
// planes then alias in L1 and L2, with planes below and at 128 KiB, and with C a multiple of
// C0 or not (a last channel block too small for that walk), in the default c0 of each width.
const LARGE_SHAPES: Record<number, [number, number, number, number][]> = {
  // [1, 80, 131, 131]: 1-byte NCHW -> NHWC staged in dst (transpose.ts), its blocks and the rest.
  1: [
    [1, 64, 128, 256],
    [1, 40, 256, 256],
    [1, 17, 512, 256],
    [1, 80, 131, 131],
  ],
  2: [
    [1, 20, 256, 256],
    [2, 24, 128, 256],
  ],
  // [1, 16, 127, 131]: 4-byte NCHW -> NC1HWC0 in short runs (transpose.ts) ending in a partial block.
  4: [
    [1, 32, 128, 128],
    [1, 20, 128, 256],
    [1, 16, 127, 131],
  ],
  8: [[1, 6, 128, 256]],
};

describe('layout kernels match the reference past L2 (> 1 MiB per transpose)', () => {
  for (const es of WIDTHS) {
    it(`${es}-byte elements, every layout pair`, () => {
      const c0 = es === 1 ? 32 : 16;
      for (const shape of LARGE_SHAPES[es]) {
        for (const fromName of LAYOUTS) {
          const from: TensorLayout = { shape, layout: fromName, c0 };
          const src = new Uint8Array(physicalCount(from) * es).map(rnd);
          for (const toName of LAYOUTS) {
            if (fromName === toName) continue;
            const to: TensorLayout = { shape, layout: toName, c0 };
            const expected = refConvert(es, src, from, to);
            const label = `${fromName}->${toName} [${shape}] c0 ${c0}`;
            for (const b of builds)
              expect(Buffer.compare(kernel(b.x, es, src, from, to), expected), `${b.name} ${label}`).toBe(0);
          }
        }
      }
    }, 120_000);
  }
});

describe('convertLayout', () => {
  const dtypes = [
    ['u8', Uint8Array],
    ['i8', Int8Array],
    ['f16', Uint16Array],
    ['bf16', Uint16Array],
    ['f32', Float32Array],
    ['i32', Int32Array],
    ['u32', Uint32Array],
    ['f64', Float64Array],
  ] as const;
  for (const [dtype, Ctor] of dtypes) {
    it(`${dtype}: round trips through every layout are exact; padding is zero and garbage in it is ignored`, () => {
      for (const shape of [
        [2, 19, 3, 5],
        [1, 3, 1, 1],
        [0, 5, 2, 2],
        [3, 1, 4, 4],
      ] as [number, number, number, number][]) {
        const count = shape.reduce((a, b) => a * b, 1);
        const data = new Ctor(count);
        const bytes = new Uint8Array(data.buffer);
        for (let i = 0; i < bytes.length; i++) bytes[i] = rnd();
        const nchw = { data, dtype, shape, layout: 'NCHW' as const };
        for (const mid of LAYOUTS) {
          const t = convertLayout(nchw, mid);
          expect(t.layout).toBe(mid);
          if (mid === 'NC1HWC0') {
            expect(t.c0).toBe(defaultC0(dtype));
            const mask = paddingMask({ shape, layout: mid, c0: t.c0! });
            const tb = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
            const es = t.data.BYTES_PER_ELEMENT;
            mask.forEach((p, i) => {
              if (p) {
                expect(tb.subarray(i * es, i * es + es).every((v) => v === 0)).toBe(true);
                tb.fill(0x5a, i * es, i * es + es);
              }
            });
          }
          for (const other of LAYOUTS) {
            const u = convertLayout(t, other, other === 'NC1HWC0' ? { c0: 4 } : undefined);
            const back = convertLayout(u, 'NCHW');
            expect(
              Buffer.compare(new Uint8Array(back.data.buffer), bytes),
              `${dtype} [${shape}] NCHW->${mid}->${other}->NCHW`,
            ).toBe(0);
          }
        }
      }
    });
  }

  it('writes into out, changes c0 between NC1HWC0 tensors, and copies when the bytes coincide', () => {
    const data = Float32Array.from({ length: 2 * 5 * 3 }, (_, i) => i + 1);
    const t = { data, dtype: 'f32', shape: [2, 5, 3, 1], layout: 'NCHW' as const };
    const a = convertLayout(t, 'NC1HWC0', { c0: 4 });
    const out = new Float32Array(2 * 3 * 3 * 2);
    const b = convertLayout(a, 'NC1HWC0', { c0: 2, out });
    expect(b.data).toBe(out);
    expect(Array.from(convertLayout(b, 'NCHW').data)).toEqual(Array.from(data));
    expect(
      sameBytes({ shape: [2, 1, 3, 3], layout: 'NCHW', c0: 16 }, { shape: [2, 1, 3, 3], layout: 'NHWC', c0: 16 }),
    ).toBe(true);
    expect(
      sameBytes({ shape: [2, 16, 3, 3], layout: 'NHWC', c0: 16 }, { shape: [2, 16, 3, 3], layout: 'NC1HWC0', c0: 16 }),
    ).toBe(true);
    expect(
      sameBytes({ shape: [2, 3, 3, 3], layout: 'NCHW', c0: 16 }, { shape: [2, 3, 3, 3], layout: 'NHWC', c0: 16 }),
    ).toBe(false);
    const same = convertLayout({ data, dtype: 'f32', shape: [2, 15, 1, 1], layout: 'NCHW' }, 'NHWC', { out: data });
    expect(same.data).toBe(data);
  });

  it('refuses bad tensors and options before converting', () => {
    const data = new Float32Array(2 * 3 * 4);
    let e = caught(() => convertLayout({ data, dtype: 'f32', shape: [2, 3, 4, 2], layout: 'NCHW' }, 'NHWC'));
    expect([e.code, e.details.expected, e.details.actual]).toEqual(['SIZE_MISMATCH', 48, 24]);
    e = caught(() => convertLayout({ data, dtype: 'f32', shape: [2, 3, 4, 1], layout: 'NC1HWC0' }, 'NHWC'));
    expect([e.code, e.details.expected]).toEqual(['SIZE_MISMATCH', 2 * 16 * 4]);
    e = caught(() => convertLayout({ data, dtype: 'f32', shape: [2, 3, 4], layout: 'NCHW' }, 'NHWC'));
    expect([e.code, e.details.option]).toEqual(['INVALID_ARGUMENT', 'shape']);
    e = caught(() => convertLayout({ data, dtype: 'f32', shape: [2, 3, 4, 1], layout: 'NCWH' }, 'NHWC'));
    expect([e.code, e.details.option]).toEqual(['INVALID_ARGUMENT', 'layout']);
    e = caught(() => convertLayout({ data, dtype: 'f32', shape: [2, 3, 4, 1], layout: 'NCHW' }, 'NC1HWC0', { c0: 0 }));
    expect([e.code, e.details.option]).toEqual(['INVALID_ARGUMENT', 'c0']);
    e = caught(() => convertLayout({ data, dtype: 'f32', shape: [2, 3, 4, 1], layout: 'NCHW', c0: 8 }, 'NHWC'));
    expect([e.code, e.details.option]).toEqual(['INVALID_ARGUMENT', 'c0']);
    e = caught(() =>
      convertLayout({ data, dtype: 'f32', shape: [2, 3, 4, 1], layout: 'NCHW' }, 'NHWC', { out: new Float32Array(5) }),
    );
    expect([e.code, e.details.expected]).toEqual(['SIZE_MISMATCH', 24]);
    e = caught(() => convertLayout({ data, dtype: 'f32', shape: [2, 3, 4, 1], layout: 'NCHW' }, 'NHWC', { out: data }));
    expect([e.code, e.details.overlap]).toEqual(['INVALID_ARGUMENT', true]);
    e = caught(() => convertLayout(data, 'NHWC'));
    expect(e.code).toBe('INVALID_ARGUMENT');
  });
});

describe('convertDtype', () => {
  it('f32 <-> f16 / bf16 round to nearest even and keep the layout fields', () => {
    const x = Float32Array.from([
      1,
      1 + 2 ** -11,
      1 + 3 * 2 ** -11,
      65520,
      -0,
      NaN,
      2 ** -24,
      2 ** -25,
      1 + 2 ** -8,
      1 + 3 * 2 ** -8,
    ]);
    const h = convertDtype({ data: x, dtype: 'f32', shape: [1, 10, 1, 1], layout: 'NHWC' }, 'f16');
    expect(Array.from(h.data)).toEqual([
      0x3c00, 0x3c00, 0x3c02, 0x7c00, 0x8000, 0x7e00, 0x0001, 0x0000, 0x3c04, 0x3c0c,
    ]);
    expect([h.dtype, h.layout, h.shape]).toEqual(['f16', 'NHWC', [1, 10, 1, 1]]);
    const b = convertDtype(x, 'bf16');
    expect(Array.from(b.data).slice(8)).toEqual([0x3f80, 0x3f82]);
    expect(Array.from(convertDtype(h, 'f32').data).slice(0, 5)).toEqual([1, 1, 1 + 2 * 2 ** -10, Infinity, -0]);
    expect(Array.from(convertDtype({ data: new Uint16Array([0x3c01]), dtype: 'f16' }, 'f64').data)).toEqual([
      1 + 2 ** -10,
    ]);
  });

  it('widens integers exactly, rounds f64 to f32, and refuses what it does not offer', () => {
    expect(Array.from(convertDtype(Int8Array.from([-128, 127]), 'f32').data)).toEqual([-128, 127]);
    expect(Array.from(convertDtype(Uint8Array.from([255]), 'i32').data)).toEqual([255]);
    expect(Array.from(convertDtype(Int32Array.from([-(2 ** 31)]), 'f64').data)).toEqual([-(2 ** 31)]);
    expect(Array.from(convertDtype(Float64Array.from([1 + 2 ** -24]), 'f32').data)).toEqual([1]);
    expect(convertDtype(new Float32Array(0), 'f16').data.length).toBe(0);
    const e = caught(() => convertDtype(new Float32Array(2), 'i32'));
    expect([e.code, e.details.from, e.details.to]).toEqual(['INVALID_DTYPE', 'f32', 'i32']);
    expect(caught(() => convertDtype(new Float32Array(2), 'f16', { out: new Float32Array(2) })).code).toBe(
      'INVALID_DTYPE',
    );
    expect(
      caught(() => convertDtype(new Float32Array(2), 'f16', { out: { data: new Uint16Array(3), dtype: 'f16' } })).code,
    ).toBe('SIZE_MISMATCH');
  });
});
