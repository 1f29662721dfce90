// Cases for collectives whose ranks hold tensors in different layouts, with no wireLayout: each
// case makes one rank's tensors (inputs with garbage in their padding, outputs pre-filled with
// garbage), issues the op, and checks that rank's result element by element against a plain
// computation over the logical values, in the rank's own layout (padding zero). Plain JS so
// that the thread and process fixtures run the same cases as the in-process tests.
import { fromBf16, fromF16, toBf16, toF16 } from './closed-form.mjs';

const ARR = {
  f32: Float32Array,
  f16: Uint16Array,
  bf16: Uint16Array,
  i8: Int8Array,
  u8: Uint8Array,
  i32: Int32Array,
  f64: Float64Array,
};
const enc = (dt, v) => (dt === 'f16' ? toF16(v) : dt === 'bf16' ? toBf16(v) : v);
const dec = (dt, v) => (dt === 'f16' ? fromF16(v) : dt === 'bf16' ? fromBf16(v) : v);

/** Where logical (n, c, h, w) lies, from the layouts' definitions. */
export function offsetOf(l, n, c, h, w) {
  const [, C, H, W] = l.shape;
  if (l.layout === 'NCHW') return ((n * C + c) * H + h) * W + w;
  if (l.layout === 'NHWC') return ((n * H + h) * W + w) * C + c;
  const C1 = Math.ceil(C / l.c0);
  return (((n * C1 + Math.floor(c / l.c0)) * H + h) * W + w) * l.c0 + (c % l.c0);
}

function physical(l) {
  const [n, c, h, w] = l.shape;
  return l.layout === 'NC1HWC0' ? n * Math.ceil(c / l.c0) * l.c0 * h * w : n * c * h * w;
}

function each(shape, f) {
  const [N, C, H, W] = shape;
  for (let n = 0; n < N; n++)
    for (let c = 0; c < C; c++) for (let h = 0; h < H; h++) for (let w = 0; w < W; w++) f(n, c, h, w);
}

/** A tensor of `l` filled from f; every other element (padding) holds `garbage`. */
function tensor(dt, l, f, garbage) {
  const data = new ARR[dt](physical(l)).fill(enc(dt, garbage));
  each(l.shape, (n, c, h, w) => {
    data[offsetOf(l, n, c, h, w)] = enc(dt, f(n, c, h, w));
  });
  return { data, dtype: dt, shape: l.shape, layout: l.layout, ...(l.layout === 'NC1HWC0' ? { c0: l.c0 } : {}) };
}

/** The first element of t that is not f (or padding that is not zero), or undefined. */
function wrongIn(t, f) {
  const l = { shape: t.shape, layout: t.layout, c0: t.c0 };
  const real = new Uint8Array(t.data.length);
  let bad;
  each(t.shape, (n, c, h, w) => {
    const at = offsetOf(l, n, c, h, w);
    real[at] = 1;
    const got = dec(t.dtype, t.data[at]);
    if (!bad && got !== f(n, c, h, w)) bad = `(${n},${c},${h},${w}) is ${got}, expected ${f(n, c, h, w)}`;
  });
  for (let i = 0; i < t.data.length && !bad; i++)
    if (!real[i] && t.data[i] !== 0) bad = `padding element ${i} is ${t.data[i]}`;
  return bad;
}

/** Logical value of rank r at (n, c, h, w): small integers, exact in every dtype and in sums of a few ranks. */
export const val = (r, n, c, h, w) => ((r + 1 + n + 2 * c + 3 * h + 5 * w) % 7) - 3;

/**
 * Rank r's layout in mix k: NC1HWC0 with C0 16 and 8, NHWC and NCHW, in an order that rotates
 * with k; mix 'same:j' gives every rank the j-th of them (nothing is converted then).
 */
export function layoutOf(r, k = 0) {
  const all = [{ layout: 'NC1HWC0', c0: 16 }, { layout: 'NHWC' }, { layout: 'NC1HWC0', c0: 8 }, { layout: 'NCHW' }];
  if (typeof k === 'string') return all[Number(k.split(':')[1])];
  return all[(r + k) % all.length];
}

export const COLLECTIVES = ['allReduce', 'allGather', 'reduceScatter', 'broadcast', 'reduce', 'gather', 'scatter'];
/** N·C·H·W: 0, 1, odd, C below C0, C not a multiple of C0, and sizes that cross chunk boundaries. */
export const SHAPES = [
  [0, 5, 2, 2],
  [1, 1, 1, 1],
  [1, 3, 1, 5],
  [2, 37, 5, 3],
  [3, 20, 7, 9],
];
export const DTYPES = ['f32', 'f16', 'bf16', 'i8', 'u8', 'i32', 'f64'];

/**
 * One case: `issue(comm, rank)` makes that rank's tensors and returns its Work; `check(rank)`
 * says what is wrong with its result (undefined when right). `size` ranks, mix k of layouts.
 */
export function mixedCase(name, dt, shape, size, k = 0) {
  const [N, C, H, W] = shape;
  const big = [N * size, C, H, W];
  const root = name === 'broadcast' ? size - 1 : name === 'gather' ? 1 % size : 0;
  const u8 = dt === 'u8';
  const v = (r, ...i) => val(r, ...i) + (u8 ? 3 : 0); // u8 holds no negatives
  const sum = (f) => {
    let a = 0;
    for (let q = 0; q < size; q++) a += f(q);
    return a;
  };
  const mine = {};
  const lay = (r, s) => ({ ...layoutOf(r, k), shape: s });
  return {
    label: `${name} ${dt} [${shape}] mix ${k}`,
    issue(comm, r) {
      const g = 5; // garbage in every padding element
      const t = (s, f) => tensor(dt, lay(r, s), f, g);
      const m = (mine[r] = {});
      switch (name) {
        case 'allReduce':
          m.out = t(shape, (...i) => v(r, ...i));
          m.want = (...i) => sum((q) => v(q, ...i));
          return comm.allReduce(m.out);
        case 'allGather':
          m.out = t(big, () => 9);
          m.want = (n, c, h, w) => v(Math.floor(n / N), n % N, c, h, w);
          return comm.allGather(
            m.out,
            t(shape, (...i) => v(r, ...i)),
          );
        case 'reduceScatter':
          m.out = t(shape, () => 9);
          m.want = (n, c, h, w) => sum((q) => v(q, r * N + n, c, h, w));
          return comm.reduceScatter(
            m.out,
            t(big, (...i) => v(r, ...i)),
          );
        case 'broadcast':
          m.out = t(shape, (...i) => (r === root ? v(r, ...i) : 9));
          m.want = (...i) => v(root, ...i);
          return comm.broadcast(m.out, { root });
        case 'reduce':
          m.out = t(shape, (...i) => v(r, ...i));
          m.want = r === root ? (...i) => sum((q) => v(q, ...i)) : undefined;
          return comm.reduce(m.out, { root });
        case 'gather':
          m.out = r === root ? t(big, () => 9) : null;
          m.want = (n, c, h, w) => v(Math.floor(n / N), n % N, c, h, w);
          return comm.gather(
            m.out,
            t(shape, (...i) => v(r, ...i)),
            { root },
          );
        case 'scatter':
          m.out = t(shape, () => 9);
          m.want = (n, c, h, w) => v(root, r * N + n, c, h, w);
          return comm.scatter(m.out, r === root ? t(big, (...i) => v(r, ...i)) : null, { root });
        default:
          throw new Error(`mixedCase: no collective ${name}`);
      }
    },
    check(r) {
      const m = mine[r];
      if (!m.out || !m.want) return undefined;
      const w = wrongIn(m.out, m.want);
      return w && `${this.label} rank ${r} (${m.out.layout}${m.out.c0 ? ` c0 ${m.out.c0}` : ''}): ${w}`;
    },
  };
}

/** Every case of the grid, in one order on every rank. */
export function mixedGrid(size, { collectives = COLLECTIVES, dtypes = DTYPES, shapes = SHAPES, mixes = [0, 1] } = {}) {
  const cases = [];
  for (const k of mixes)
    for (const dt of dtypes)
      for (const shape of shapes) for (const name of collectives) cases.push(mixedCase(name, dt, shape, size, k));
  return cases;
}
