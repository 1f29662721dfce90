// The wasm reduction kernels against a plain-JS reference, bit for bit, in both builds (SIMD and
// scalar), for every dtype × op × form, at lengths that leave every kind of tail and at unaligned
// byte offsets. Guard bytes around dst must survive. Float inputs mix ordinary values with NaNs
// (several payloads, both signs), ±0, ±Inf, subnormals and extremes; half inputs also give ties.
//
// NaN policy checked here: reductions and scale write the canonical quiet NaN (f32 0x7fc00000,
// f64 0x7ff8000000000000, f16 0x7e00, bf16 0x7fc0); widening half -> f32 keeps every bit;
// narrowing f32 -> half writes the canonical NaN (so a round trip is the identity except that
// every NaN pattern comes back as 0x7e00 / 0x7fc0).
import { describe, expect, it } from 'vitest';
import { createSharedMemory, loadWasm } from '../../src/core/wasm.js';
import {
  BF16_QNAN,
  bf16ToNumber,
  CODE,
  DTYPE_LIST,
  type Dtype,
  F16_QNAN,
  FLOATS,
  f16ToNumber,
  numberToBf16,
  numberToF16,
  OP_CODE,
  OP_LIST,
  type Op,
  refFold,
  refScale,
  SIZE,
} from '../helpers/reference.js';

type Fn = (...args: number[]) => void;
interface Build {
  name: string;
  fn: Record<string, Fn>;
}

const LENGTHS = [0, 1, 3, 15, 16, 17, 1023, 4099];
const MAX_BYTES = 4099 * 8;
const GUARD = 48;
const SLOT = 65536 * 4 + 2 * GUARD + 64; // room for the 65536-element conversions
const memory = createSharedMemory(8 << 20);
const builds: Build[] = [true, false].map((simd) => {
  const core = loadWasm(memory, simd);
  return { name: simd ? 'simd' : 'scalar', fn: core.exports as unknown as Record<string, Fn> };
});
const heap = (builds[0].fn.heapBase as unknown as () => number)();
const BASE = (heap + 4096 + 63) & ~63;
const TABLE = BASE; // 64 bytes, then the slots
const u8 = () => new Uint8Array(memory.buffer);
/** Byte address of buffer `slot`, misaligned by an odd offset that differs per slot. */
const addr = (slot: number) => BASE + 64 + slot * SLOT + GUARD + ((slot * 2 + 1) % 16);

// --- deterministic inputs ---------------------------------------------------------------------
let seed = 0x9e3779b9;
function rand(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randInt = (n: number) => Math.floor(rand() * n);
const pick = <T>(xs: T[]): T => xs[randInt(xs.length)];

const F32_SPECIAL = [
  0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00123, 0xffffffff, 0, 0x80000000, 0x7f800000, 0xff800000, 0x00000001,
  0x807fffff, 0x00400000, 0x7f7fffff, 0xff7fffff, 0x00800000,
];
const F64_SPECIAL_HI = [
  0x7ff80000, 0xfff80000, 0x7ff00001, 0x7ff40000, 0, 0x80000000, 0x7ff00000, 0xfff00000, 0x00000000, 0x800fffff,
  0x7fefffff, 0x00100000,
];

function randomBytes(dt: Dtype, n: number): Uint8Array {
  const out = new Uint8Array(n * SIZE[dt]);
  const v = new DataView(out.buffer);
  for (let i = 0; i < n; i++) {
    const special = rand() < 0.08;
    switch (dt) {
      case 'f32':
        if (special) v.setUint32(i * 4, pick(F32_SPECIAL), true);
        else v.setFloat32(i * 4, (rand() * 2 - 1) * 2 ** (randInt(9) - 4), true);
        break;
      case 'f64':
        if (special) {
          v.setUint32(i * 8 + 4, pick(F64_SPECIAL_HI), true);
          v.setUint32(i * 8, rand() < 0.5 ? 0 : randInt(2 ** 32), true);
        } else v.setFloat64(i * 8, (rand() * 2 - 1) * 2 ** (randInt(9) - 4), true);
        break;
      case 'bf16':
      case 'f16': {
        // Ordinary values share a few exponents, so sums often fall exactly between two halves.
        const expBits = dt === 'f16' ? 10 : 7;
        const bias = dt === 'f16' ? 15 : 127;
        const h = special
          ? randInt(65536)
          : (rand() < 0.5 ? 0x8000 : 0) | ((bias - 1 + randInt(3)) << expBits) | randInt(1 << expBits);
        v.setUint16(i * 2, h, true);
        break;
      }
      default:
        for (let b = 0; b < SIZE[dt]; b++) out[i * SIZE[dt] + b] = randInt(256);
    }
  }
  return out;
}

// --- running a case in both builds ------------------------------------------------------------
interface Case {
  label: string;
  dstSlot: number;
  init?: Uint8Array; // initial dst content when dst is its own buffer (reduceInto)
  sources: { slot: number; bytes: Uint8Array }[];
  run: (fn: Record<string, Fn>, dst: number) => void;
  expected: Uint8Array;
}

function hex(bytes: Uint8Array, at: number, size: number): string {
  let s = '';
  for (let b = size - 1; b >= 0; b--) s += bytes[at + b].toString(16).padStart(2, '0');
  return s;
}

/** Runs one case in a build; returns a description of the first difference or undefined. */
function runCase(b: Build, c: Case, size: number): { out: Uint8Array; error?: string } {
  const mem = u8();
  const dst = addr(c.dstSlot);
  const n = c.expected.length;
  mem.fill(0xa5, dst - GUARD, dst + n + GUARD);
  for (const s of c.sources) mem.set(s.bytes, addr(s.slot));
  if (c.init) mem.set(c.init, dst);
  c.run(b.fn, dst);
  const out = mem.slice(dst, dst + n);
  for (let i = 1; i <= GUARD; i++) {
    if (mem[dst - i] !== 0xa5 || mem[dst + n + i - 1] !== 0xa5)
      return { out, error: `${b.name} ${c.label}: guard byte changed` };
  }
  for (const s of c.sources) {
    if (s.slot === c.dstSlot) continue;
    const now = mem.subarray(addr(s.slot), addr(s.slot) + s.bytes.length);
    if (now.some((x, i) => x !== s.bytes[i])) return { out, error: `${b.name} ${c.label}: source ${s.slot} changed` };
  }
  for (let i = 0; i < n; i += size) {
    for (let k = 0; k < size; k++) {
      if (out[i + k] !== c.expected[i + k]) {
        const inputs = c.sources.map((s) => hex(s.bytes, i, size)).join(' ');
        return {
          out,
          error: `${b.name} ${c.label}: element ${i / size} is ${hex(out, i, size)}, expected ${hex(c.expected, i, size)} (inputs ${inputs})`,
        };
      }
    }
  }
  return { out };
}

/** Every case must match the reference in both builds, and the builds must match each other. */
function check(cases: Case[], size: number): void {
  for (const c of cases) {
    const [simd, scalar] = builds.map((b) => runCase(b, c, size));
    expect(simd.error).toBeUndefined();
    expect(scalar.error).toBeUndefined();
    expect(Buffer.compare(simd.out, scalar.out), `${c.label}: simd and scalar differ`).toBe(0);
  }
}

function writeTable(slots: number[]): void {
  const v = new DataView(memory.buffer);
  slots.forEach((s, j) => v.setUint32(TABLE + j * 4, addr(s), true));
}

function reductionCases(dt: Dtype, op: Op): Case[] {
  const d = CODE[dt];
  const o = OP_CODE[op];
  const cases: Case[] = [];
  for (const n of LENGTHS) {
    const src = Array.from({ length: 10 }, () => randomBytes(dt, n));
    const srcs = (k: number) => src.slice(0, k).map((bytes, j) => ({ slot: j + 1, bytes }));
    const ab = refFold(dt, op, src.slice(0, 2), n);
    cases.push({
      label: `reduceInto n=${n}`,
      dstSlot: 0,
      init: src[0],
      sources: [{ slot: 1, bytes: src[1] }],
      run: (f, dst) => f.reduceInto(d, o, dst, addr(1), n),
      expected: ab,
    });
    cases.push({
      label: `reduce2 n=${n}`,
      dstSlot: 0,
      sources: srcs(2),
      run: (f, dst) => f.reduce2(d, o, dst, addr(1), addr(2), n),
      expected: ab,
    });
    cases.push({
      label: `reduce2 dst=a n=${n}`,
      dstSlot: 1,
      sources: srcs(2),
      run: (f, dst) => f.reduce2(d, o, dst, dst, addr(2), n),
      expected: ab,
    });
    cases.push({
      label: `reduce2 dst=b n=${n}`,
      dstSlot: 2,
      sources: srcs(2),
      run: (f, dst) => f.reduce2(d, o, dst, addr(1), dst, n),
      expected: ab,
    });
    for (const [k, dstSlot] of [
      [1, 0],
      [2, 0],
      [3, 0],
      [5, 0],
      [8, 0],
      [10, 0],
      [3, 2],
      [5, 1],
      [8, 8],
    ]) {
      const expected = k === 1 ? src[0] : refFold(dt, op, src.slice(0, k), n);
      const slots = Array.from({ length: k }, (_, j) => j + 1);
      cases.push({
        label: `reduceK k=${k}${dstSlot ? ` dst=s${dstSlot - 1}` : ''} n=${n}`,
        dstSlot,
        sources: srcs(k),
        run: (f, dst) => {
          writeTable(slots);
          f.reduceK(d, o, dst, TABLE, k, n);
        },
        expected,
      });
    }
  }
  return cases;
}

describe('reductions: both builds match the JS reference bit for bit', () => {
  for (const dt of DTYPE_LIST) {
    for (const op of OP_LIST) {
      it(`${dt} ${op}`, () => check(reductionCases(dt, op), SIZE[dt]));
    }
  }
});

describe('f16 sums: every pattern against partners from all over the range', () => {
  // The SIMD build adds f16 in a scaled f32 domain and falls back per block on Inf / NaN: every
  // one of the 65536 patterns meets partners of every class (sign, subnormal, normal, Inf, NaN)
  // in blocks with and without an Inf or NaN, two-way and folded.
  const partner = (stride: number, offset: number) => {
    const p = new Uint16Array(65536);
    for (let h = 0; h < 65536; h++) p[h] = (Math.imul(h, stride) + offset) & 0xffff;
    return new Uint8Array(p.buffer);
  };
  for (const [stride, offset] of [
    [1, 0],
    [1, 0x8000],
    [40503, 7],
    [12345, 0x3c00],
    [2, 1],
    [65535, 0x0400],
  ]) {
    it(`partners h*${stride}+${offset}`, () => {
      const a = ALL16;
      const b = partner(stride, offset);
      const c = partner(stride * 3 + 2, offset ^ 0x8001);
      const n = 65536;
      const sum = CODE.f16;
      const cases: Case[] = [
        {
          label: 'reduce2',
          dstSlot: 0,
          sources: [
            { slot: 1, bytes: a },
            { slot: 2, bytes: b },
          ],
          run: (f, dst) => f.reduce2(sum, OP_CODE.sum, dst, addr(1), addr(2), n),
          expected: refFold('f16', 'sum', [a, b], n),
        },
        {
          label: 'reduceK k=3',
          dstSlot: 0,
          sources: [
            { slot: 1, bytes: a },
            { slot: 2, bytes: b },
            { slot: 3, bytes: c },
          ],
          run: (f, dst) => {
            writeTable([1, 2, 3]);
            f.reduceK(sum, OP_CODE.sum, dst, TABLE, 3, n);
          },
          expected: refFold('f16', 'sum', [a, b, c], n),
        },
      ];
      check(cases, 2);
    });
  }
});

describe('test data', () => {
  it('half inputs give exact ties under sum (so round-half-to-even is exercised)', () => {
    for (const [dt, toNum, fromNum] of [
      ['f16', f16ToNumber, numberToF16],
      ['bf16', bf16ToNumber, numberToBf16],
    ] as const) {
      const a = new DataView(randomBytes(dt, 4096).buffer);
      const b = new DataView(randomBytes(dt, 4096).buffer);
      let ties = 0;
      for (let i = 0; i < 4096; i++) {
        const x = Math.abs(Math.fround(toNum(a.getUint16(i * 2, true)) + toNum(b.getUint16(i * 2, true))));
        if (!Number.isFinite(x)) continue;
        const h = fromNum(x);
        const v = toNum(h);
        const other = toNum(x > v ? h + 1 : h - 1);
        if (x !== v && Math.abs(x - v) === Math.abs(other - x)) ties++;
      }
      expect(ties, dt).toBeGreaterThan(100);
    }
  });
});

describe('scale', () => {
  for (const dt of FLOATS) {
    it(`${dt}`, () => {
      const cases: Case[] = [];
      for (const n of LENGTHS) {
        const src = randomBytes(dt, n);
        for (const factor of [0.5, 1 / 3, -2.5, 1e-30, 2 ** 20, Infinity, NaN]) {
          const expected = refScale(dt, src, n, factor);
          const sources = [{ slot: 1, bytes: src }];
          cases.push({
            label: `scale ${factor} n=${n}`,
            dstSlot: 0,
            sources,
            run: (f, dst) => f.scale(CODE[dt], dst, addr(1), n, factor),
            expected,
          });
          cases.push({
            label: `scale in place ${factor} n=${n}`,
            dstSlot: 1,
            sources,
            run: (f, dst) => f.scale(CODE[dt], dst, dst, n, factor),
            expected,
          });
        }
      }
      check(cases, SIZE[dt]);
    });
  }
});

// --- conversions ------------------------------------------------------------------------------
const ALL16 = new Uint8Array(new Uint16Array(Array.from({ length: 65536 }, (_, i) => i)).buffer);
const f32Bytes = (bits: number[]) => new Uint8Array(new Uint32Array(bits).buffer);
const bitsOfF32 = (x: number) => new Uint32Array(new Float32Array([x]).buffer)[0];

/** f32 inputs for narrowing: random patterns, specials, and every midpoint (tie) between halves. */
function narrowingInputs(half: 'f16' | 'bf16'): number[] {
  const bits: number[] = [
    ...F32_SPECIAL,
    0x477fefff,
    0x477ff000,
    0x477fe000,
    0x387fffff,
    0x38800000,
    0x33000000,
    0x33000001,
  ];
  for (let i = 0; i < 20000; i++) bits.push(randInt(2 ** 32));
  for (let h = 0; h < 0x7fff; h++) {
    if (half === 'f16') {
      if (h >= 0x7bff) break;
      const mid = (f16ToNumber(h) + f16ToNumber(h + 1)) / 2;
      bits.push(bitsOfF32(mid), bitsOfF32(-mid), bitsOfF32(mid) + 1, bitsOfF32(mid) - 1);
    } else {
      if (h >= 0x7f7f) break;
      bits.push((h << 16) + 0x8000, ((h << 16) + 0x8000 + 0x80000000) >>> 0, (h << 16) + 0x7fff, (h << 16) + 0x8001);
    }
  }
  return bits;
}

describe('conversions', () => {
  for (const half of ['f16', 'bf16'] as const) {
    const toF32 = half === 'f16' ? 'f16ToF32' : 'bf16ToF32';
    const fromF32 = half === 'f16' ? 'f32ToF16' : 'f32ToBf16';
    const toNumber = half === 'f16' ? f16ToNumber : bf16ToNumber;
    const fromNumber = half === 'f16' ? numberToF16 : numberToBf16;
    const qnan = half === 'f16' ? F16_QNAN : BF16_QNAN;
    const isNaNBits = (h: number) => (half === 'f16' ? (h & 0x7fff) > 0x7c00 : (h & 0x7fff) > 0x7f80);

    it(`${half} -> f32 is exact for all 65536 patterns (NaN payloads kept)`, () => {
      const expected = new Uint32Array(65536);
      for (let h = 0; h < 65536; h++) {
        expected[h] = isNaNBits(h)
          ? (((h & 0x8000) << 16) | (half === 'f16' ? 0x7f800000 | ((h & 0x3ff) << 13) : (h & 0x7fff) << 16)) >>> 0
          : bitsOfF32(toNumber(h));
      }
      const cases: Case[] = [0, 1, 7, 8, 9, 15, 16, 17, 33, 65536].map((n) => ({
        label: `${toF32} n=${n}`,
        dstSlot: 0,
        sources: [{ slot: 1, bytes: ALL16.slice(0, n * 2) }],
        run: (f, dst) => f[toF32](dst, addr(1), n),
        expected: new Uint8Array(expected.buffer, 0, n * 4),
      }));
      check(cases, 4);
    });

    it(`f32 -> ${half} rounds to nearest even (ties, subnormals, overflow; NaN -> ${qnan.toString(16)})`, () => {
      const bits = narrowingInputs(half);
      const n = Math.min(bits.length, MAX_BYTES / 4);
      const cases: Case[] = [];
      for (let at = 0; at < bits.length; at += n) {
        const chunk = bits.slice(at, at + n);
        const src = f32Bytes(chunk);
        const f32 = new Float32Array(src.buffer);
        const expected = new Uint8Array(new Uint16Array(Array.from(f32, fromNumber)).buffer);
        cases.push({
          label: `${fromF32} chunk ${at}`,
          dstSlot: 0,
          sources: [{ slot: 1, bytes: src }],
          run: (f, dst) => f[fromF32](dst, addr(1), chunk.length),
          expected,
        });
      }
      const small = f32Bytes(bits.slice(0, 40));
      const smallExp = new Uint8Array(new Uint16Array(Array.from(new Float32Array(small.buffer), fromNumber)).buffer);
      for (const m of [0, 1, 7, 8, 9, 15, 16, 17, 33]) {
        const expected = smallExp.slice(0, m * 2);
        const sources = [{ slot: 1, bytes: small.slice(0, m * 4) }];
        cases.push({
          label: `${fromF32} n=${m}`,
          dstSlot: 0,
          sources,
          run: (f, dst) => f[fromF32](dst, addr(1), m),
          expected,
        });
        // In place the halves fill the first half of the f32 buffer; the rest keeps its bytes.
        const inPlace = new Uint8Array([...expected, ...small.slice(m * 2, m * 4)]);
        cases.push({
          label: `${fromF32} in place n=${m}`,
          dstSlot: 1,
          sources,
          run: (f, dst) => f[fromF32](dst, dst, m),
          expected: inPlace,
        });
      }
      check(cases, 2);
    });

    it(`${half} -> f32 -> ${half} round-trips all 65536 patterns (NaNs become ${qnan.toString(16)})`, () => {
      for (const b of builds) {
        const src = addr(1);
        const mid = addr(2);
        const back = addr(5);
        u8().set(ALL16, src);
        b.fn[toF32](mid, src, 65536);
        b.fn[fromF32](back, mid, 65536);
        const out = new DataView(memory.buffer, back, 65536 * 2);
        let bad = -1;
        for (let h = 0; h < 65536 && bad < 0; h++) {
          if (out.getUint16(h * 2, true) !== (isNaNBits(h) ? qnan : h)) bad = h;
        }
        expect(bad, `${b.name}: pattern ${bad.toString(16)}`).toBe(-1);
      }
    });
  }
});

describe('argument codes', () => {
  it('unknown dtype or op traps in both builds', () => {
    for (const b of builds) {
      expect(() => b.fn.reduce2(9, 0, addr(0), addr(1), addr(2), 4)).toThrow(WebAssembly.RuntimeError);
      expect(() => b.fn.reduce2(0, 4, addr(0), addr(1), addr(2), 4)).toThrow(WebAssembly.RuntimeError);
      expect(() => b.fn.reduceK(0, 7, addr(0), TABLE, 3, 4)).toThrow(WebAssembly.RuntimeError);
      expect(() => b.fn.scale(CODE.i32, addr(0), addr(1), 4, 2)).toThrow(WebAssembly.RuntimeError);
    }
  });
});
