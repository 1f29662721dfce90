// The closed-form data of `webccl perf -c 1`: fills, expected values and the #wrong count.
import { describe, expect, it } from 'vitest';
import { PERIOD, countWrong, decode, encode, fill, fromBf16, fromF16, reduced, toBf16, toF16, value } from '../src/launch/perf/data.js';
import { DTYPES, type Dtype } from '../src/core/dtypes.js';
import type { TypedArray } from '../src/comm/buffers.js';

const ARRAYS: Record<Dtype, new (n: number) => TypedArray> = {
  f32: Float32Array, f64: Float64Array, i32: Int32Array, u32: Uint32Array, i8: Int8Array, u8: Uint8Array,
  i64: BigInt64Array, bf16: Uint16Array, f16: Uint16Array,
};

describe('half conversions', () => {
  it.each([0, 1, 2, 3, 4, 0.5, -2, 1024, 65504, 2 ** -14, 2 ** -24])('f16 round-trips %d', (x) => {
    expect(fromF16(toF16(x))).toBe(x);
  });

  it('f16 rounds to nearest even and overflows to infinity', () => {
    expect(fromF16(toF16(1 + 2 ** -11))).toBe(1); // halfway: even
    expect(fromF16(toF16(1 + 3 * 2 ** -11))).toBe(1 + 2 ** -9);
    expect(fromF16(toF16(1e6))).toBe(Infinity);
    expect(toF16(1)).toBe(0x3c00);
    expect(toF16(-2)).toBe(0xc000);
  });

  it('bf16 keeps the top half of f32, rounded to nearest even', () => {
    expect(toBf16(1)).toBe(0x3f80);
    expect(fromBf16(toBf16(256))).toBe(256);
    expect(fromBf16(toBf16(257))).toBe(256);
    expect(fromBf16(toBf16(1 / 3))).toBeCloseTo(1 / 3, 2);
  });
});

describe('closed-form values', () => {
  it('repeat every PERIOD elements and are small integers', () => {
    for (const op of ['sum', 'prod'] as const) {
      for (let r = 0; r < 5; r++) {
        for (let i = 0; i < 20; i++) {
          expect(value(op, r, i)).toBe(value(op, r, i + PERIOD));
          expect([1, 2, 3, 4]).toContain(value(op, r, i));
        }
      }
    }
  });

  it('reduce exactly over ranks', () => {
    // Ranks 0..3 at i = 0 hold 1, 2, 3, 4.
    expect(reduced('sum', 4, 0)).toBe(10);
    expect(reduced('avg', 4, 0)).toBe(2.5);
    expect(reduced('max', 4, 0)).toBe(4);
    expect(reduced('min', 4, 1)).toBe(1);
    // prod: 2 where (r + i) % 8 == 0.
    expect(reduced('prod', 16, 0)).toBe(4);
  });

  it('wrap integers and round floats as the dtype does', () => {
    expect(encode('i8', 130)).toBe(-126);
    expect(encode('u8', 256)).toBe(0);
    expect(encode('u32', -1)).toBe(0xffffffff);
    expect(encode('i64', 5)).toBe(5n);
    expect(decode('f16', encode('f16', 3))).toBe(3);
  });
});

describe('fill and countWrong', () => {
  it.each(DTYPES)('%s: a filled buffer matches its own expectation, and each corruption counts once', (dtype) => {
    const n = 37;
    const a = new ARRAYS[dtype](n);
    fill(a, dtype, 'sum', 2, 5);
    expect(countWrong(a, dtype, 'sum', 5, (i) => value('sum', 2, i))).toBe(0);
    expect(countWrong(a, dtype, 'sum', 6, (i) => value('sum', 2, i))).toBeGreaterThan(0);
    (a as unknown as (number | bigint)[])[3] = encode(dtype, 100);
    (a as unknown as (number | bigint)[])[30] = encode(dtype, 0);
    expect(countWrong(a, dtype, 'sum', 5, (i) => value('sum', 2, i))).toBe(2);
  });

  it('compares avg within a few ulps', () => {
    const a = new Float32Array(8).fill(Math.fround(10 / 3));
    expect(countWrong(a, 'f32', 'avg', 0, () => 10 / 3)).toBe(0);
    a[2] = 3.4;
    expect(countWrong(a, 'f32', 'avg', 0, () => 10 / 3)).toBe(1);
    const h = new Uint16Array(4).fill(toF16(10 / 3));
    expect(countWrong(h, 'f16', 'avg', 0, () => 10 / 3)).toBe(0);
  });

  it('fills buffers shorter than a period', () => {
    const a = new Int32Array(3);
    fill(a, 'i32', 'sum', 0, 0);
    expect(Array.from(a)).toEqual([1, 2, 3]);
  });
});
