// The closed-form data of `webccl perf -c 1`: fills, expected values and the #wrong count, and
// the #wrong of every block collective's case against a stand-in world with deliberate faults.
import { describe, expect, it } from 'vitest';
import { DTYPES, type Dtype } from '../../src/core/dtypes.js';
import type { BufferArg, TypedArray } from '../../src/engine/buffers.js';
import type { Work } from '../../src/engine/work.js';
import { type CaseComm, makeCase } from '../../src/launch/perf/cases.js';
import { type Collective, shapeOf } from '../../src/launch/perf/collectives.js';
import {
  BLOCK_PERIOD,
  blockValue,
  countWrong,
  countWrongBlock,
  decode,
  encode,
  fill,
  fillBlock,
  fromBf16,
  fromF16,
  PERIOD,
  reduced,
  toBf16,
  toF16,
  value,
} from '../../src/launch/perf/data.js';
import { type Placement, type PlannedRow, placementsOf, type RankSpec } from '../../src/launch/perf/plan.js';

const ARRAYS: Record<Dtype, new (n: number) => TypedArray> = {
  f32: Float32Array,
  f64: Float64Array,
  i32: Int32Array,
  u32: Uint32Array,
  i8: Int8Array,
  u8: Uint8Array,
  i64: BigInt64Array,
  bf16: Uint16Array,
  f16: Uint16Array,
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

describe('block data (alltoall, gather, scatter, sendrecv, pingpong)', () => {
  it('differs for every (source, destination) pair of up to 11 ranks, and is exact in every dtype', () => {
    const seen = new Map<string, string>();
    for (let s = 0; s < 11; s++) {
      for (let d = 0; d < 11; d++) {
        const key = Array.from({ length: 4 }, (_, i) => blockValue(s, d, i)).join(',');
        expect(seen.get(key)).toBeUndefined();
        seen.set(key, `${s}>${d}`);
      }
    }
    for (let i = 0; i < 2 * BLOCK_PERIOD; i++) {
      const v = blockValue(63, 63, i);
      expect(v).toBeGreaterThanOrEqual(1);
      expect(v).toBeLessThanOrEqual(127);
      for (const dtype of DTYPES) expect(decode(dtype, encode(dtype, v))).toBe(v);
    }
  });

  it.each(DTYPES)('%s: a filled block matches, a block of another pair or shifted by one does not', (dtype) => {
    const a = new ARRAYS[dtype](300);
    fillBlock(a, dtype, 3, 1);
    expect(countWrongBlock(a, dtype, 3, 1)).toBe(0);
    expect(countWrongBlock(a, dtype, 1, 3)).toBe(300);
    expect(countWrongBlock(a, dtype, 3, 2)).toBe(300);
    expect(countWrongBlock(a.subarray(1) as TypedArray, dtype, 3, 1)).toBe(299);
    (a as unknown as (number | bigint)[])[200] = encode(dtype, 0);
    expect(countWrongBlock(a, dtype, 3, 1)).toBe(1);
  });
});

// The cases rank.ts times, driven on every rank of a stand-in world: a faithful result has
// #wrong 0; a corrupted element counts once; a block delivered from or to the wrong rank counts.
type Fault = 'none' | 'flip' | 'misroute';
const arrOf = (a: BufferArg): TypedArray =>
  ArrayBuffer.isView(a) ? (a as TypedArray) : (a as { data: TypedArray }).data;
const blockOf = (a: TypedArray, j: number, count: number) => a.subarray(j * count, (j + 1) * count) as TypedArray;
const DONE = { waitSync() {} } as unknown as Work;

function standInWorld(n: number, dtype: Dtype, fault: Fault): CaseComm[] {
  const calls = new Map<string, unknown[][]>();
  const bad = encode(dtype, 0); // block values are 1..127: 0 is never right
  const flip = (a: TypedArray) => {
    (a as unknown as (number | bigint)[])[0] = bad;
  };
  /** Collects one call per rank; the last one runs `finish` with every rank's arguments. */
  const collective = (name: string, r: number, args: unknown[], finish: (all: unknown[][]) => void) => {
    const all = calls.get(name) ?? [];
    all[r] = args;
    calls.set(name, all);
    if (all.filter(Boolean).length === n) {
      calls.delete(name);
      finish(all);
    }
    return DONE;
  };
  const sends = new Map<string, TypedArray[]>();
  const recvs = new Map<string, TypedArray[]>();
  const deliver = (key: string, src: number, dst: number) => {
    const s = sends.get(key) ?? [];
    const q = recvs.get(key) ?? [];
    while (s.length && q.length) {
      const into = q.shift()!;
      const from = s.shift()!;
      into.set(from);
      // misroute: the receiver gets the message of the other direction (dst to src).
      if (fault === 'misroute') fillBlock(into, dtype, dst, src);
      if (fault === 'flip' && dst === n - 1) flip(into);
    }
  };
  return Array.from(
    { length: n },
    (_, r): CaseComm => ({
      rank: r,
      size: n,
      allToAll: ((out: BufferArg, input: BufferArg) =>
        collective('allToAll', r, [out, input], (all) => {
          const count = arrOf(input).length / n;
          for (let d = 0; d < n; d++) {
            for (let s = 0; s < n; s++) {
              const from = fault === 'misroute' ? (s + 1) % n : s;
              blockOf(arrOf(all[d][0] as BufferArg), s, count).set(blockOf(arrOf(all[from][1] as BufferArg), d, count));
            }
          }
          if (fault === 'flip') flip(arrOf(all[n - 1][0] as BufferArg));
        })) as CaseComm['allToAll'],
      gather: ((out: BufferArg | null, input: BufferArg, o?: { root?: number }) =>
        collective('gather', r, [out, input], (all) => {
          const root = o?.root ?? 0;
          const dst = arrOf(all[root][0] as BufferArg);
          const count = arrOf(input).length;
          // Copy through a snapshot: in place, a rank's input is a block of the root's output.
          const inputs = all.map((a) => arrOf(a[1] as BufferArg).slice());
          for (let s = 0; s < n; s++) blockOf(dst, s, count).set(inputs[fault === 'misroute' ? (s + 1) % n : s]);
          if (fault === 'flip') flip(dst);
        })) as CaseComm['gather'],
      scatter: ((out: BufferArg, input: BufferArg | null, o?: { root?: number }) =>
        collective('scatter', r, [out, input], (all) => {
          const root = o?.root ?? 0;
          const src = arrOf(all[root][1] as BufferArg).slice();
          const count = arrOf(out).length;
          for (let d = 0; d < n; d++)
            arrOf(all[d][0] as BufferArg).set(blockOf(src, fault === 'misroute' ? (d + 1) % n : d, count));
          if (fault === 'flip') flip(arrOf(all[n - 1][0] as BufferArg));
        })) as CaseComm['scatter'],
      send: ((x: BufferArg, peer: number) => {
        const key = `${r}>${peer}`;
        sends.set(key, [...(sends.get(key) ?? []), arrOf(x).slice()]);
        deliver(key, r, peer);
        return DONE;
      }) as CaseComm['send'],
      recv: ((x: BufferArg, peer: number) => {
        const key = `${peer}>${r}`;
        recvs.set(key, [...(recvs.get(key) ?? []), arrOf(x)]);
        deliver(key, peer, r);
        return DONE;
      }) as CaseComm['recv'],
      allReduce: () => DONE,
      allGather: () => DONE,
      reduceScatter: () => DONE,
      broadcast: () => DONE,
      reduce: () => DONE,
    }),
  );
}

/** #wrong summed over the ranks of a stand-in world after one checked call of `coll`. */
function wrongAfter(
  coll: Collective,
  n: number,
  place: Placement,
  dtype: Dtype,
  bytes: number,
  fault: Fault,
  root = n - 1,
): number {
  const spec = { collective: coll, algo: undefined } as RankSpec;
  const row: PlannedRow = { idx: 0, dtype, op: 'sum', root, shape: shapeOf(coll, dtype, n, bytes) };
  const world = standInWorld(n, dtype, fault);
  const cases = world.map((comm) =>
    makeCase(comm, spec, row, place, new ARRAYS[dtype](row.shape.sendCount), new ARRAYS[dtype](row.shape.recvCount)),
  );
  for (const c of cases) c.prepare();
  // Every rank's phase p is issued before any rank's phase p + 1, as the ranks would run them.
  for (let p = 0; p < cases[0].phases.length; p++) for (const c of cases) c.phases[p]();
  return cases.reduce((s, c) => s + c.wrong(), 0);
}

describe('#wrong of the block collectives (stand-in world)', () => {
  const grid: [Collective, number, Placement][] = [];
  for (const coll of ['alltoall', 'gather', 'scatter', 'sendrecv', 'pingpong'] as const) {
    for (const n of coll === 'pingpong' ? [2] : [2, 3, 4])
      for (const place of placementsOf(coll)) grid.push([coll, n, place]);
  }

  it.each(grid)(
    '%s, %d ranks, %s: 0 when right, 1 for one bad element, more for a misrouted block',
    (coll, n, place) => {
      for (const bytes of [4, 4 * n - 4, 1000, 4 * 127 * n + 12]) {
        expect({ bytes, wrong: wrongAfter(coll, n, place, 'f32', bytes, 'none') }).toEqual({ bytes, wrong: 0 });
        expect({ bytes, wrong: wrongAfter(coll, n, place, 'f32', bytes, 'flip') }).toEqual({ bytes, wrong: 1 });
        expect(wrongAfter(coll, n, place, 'f32', bytes, 'misroute')).toBeGreaterThan(0);
      }
    },
  );

  it.each(DTYPES)('%s: every dtype is checked exactly', (dtype) => {
    for (const coll of ['alltoall', 'gather', 'scatter', 'sendrecv'] as const) {
      expect({ coll, wrong: wrongAfter(coll, 3, 'oop', dtype, 600, 'none') }).toEqual({ coll, wrong: 0 });
      expect({ coll, wrong: wrongAfter(coll, 3, 'oop', dtype, 600, 'flip') }).toEqual({ coll, wrong: 1 });
      expect(wrongAfter(coll, 3, 'oop', dtype, 600, 'misroute')).toBeGreaterThan(0);
    }
  });

  it('gather and scatter with the root on rank 0 too', () => {
    for (const coll of ['gather', 'scatter'] as const) {
      for (const place of placementsOf(coll)) {
        expect(wrongAfter(coll, 4, place, 'i32', 256, 'none', 0)).toBe(0);
        expect(wrongAfter(coll, 4, place, 'i32', 256, 'misroute', 0)).toBeGreaterThan(0);
      }
    }
  });
});
