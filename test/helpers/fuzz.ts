// Shared pieces of the wire fuzzers: run settings (a fixed seed and a modest number of runs in
// CI, more on request: WEBCCL_FUZZ_RUNS=100000 WEBCCL_FUZZ_SEED=123 npm run fuzz), byte streams
// cut at random points, mutations of valid frames, and a watch on typed-array allocations that
// refuses (before allocating) any buffer over a parser's stated limit.
import fc from 'fast-check';
import { WebcclError } from '../../src/core/errors.js';

const env = process.env;

/**
 * fast-check settings for one property: `runs` in CI; WEBCCL_FUZZ_RUNS × `share` on request
 * (a property over real sockets takes a share of the runs, as each costs milliseconds).
 */
export function fuzzSettings(runs: number, share = 1): { numRuns: number; seed: number; endOnFailure: true } {
  const n = Number(env.WEBCCL_FUZZ_RUNS);
  const seed = Number(env.WEBCCL_FUZZ_SEED);
  return {
    numRuns: Number.isInteger(n) && n > 0 ? Math.max(runs, Math.round(n * share)) : runs,
    seed: Number.isInteger(seed) ? seed : 0x0c0ffee,
    endOnFailure: true,
  };
}

/** Whether the fuzzers run longer than in CI (tests then get a longer vitest deadline). */
export const longRun = Number(env.WEBCCL_FUZZ_RUNS) > 0;

/** Cut points for a stream: `split` turns them into pieces (empty pieces included). */
export const cuts = fc.array(fc.nat(), { maxLength: 24 });

/** `bytes` cut at `at` (each taken modulo length + 1), in order; may hold empty pieces. */
export function split(bytes: Uint8Array, at: number[]): Uint8Array[] {
  const points = at.map((c) => c % (bytes.length + 1)).sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const p of points) {
    pieces.push(bytes.subarray(from, p));
    from = p;
  }
  pieces.push(bytes.subarray(from));
  return pieces;
}

export function concatAll(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** u32 values worth trying in a length field: around every limit, and the extremes. */
export const edgeU32 = fc.oneof(
  fc.constantFrom(
    0,
    1,
    2,
    3,
    4,
    5,
    8,
    11,
    12,
    13,
    31,
    32,
    33,
    42,
    255,
    256,
    257,
    1023,
    1024,
    1025,
    1027,
    1030,
    4096,
    4102,
    4106,
    5128,
    5130,
    5131,
    65535,
    65536,
    2 ** 20,
    2 ** 20 + 1,
    2 ** 30,
    2 ** 31 - 1,
    2 ** 31,
    2 ** 32 - 13,
    2 ** 32 - 12,
    2 ** 32 - 1,
  ),
  fc.integer({ min: 0, max: 0xffffffff }),
);

export type Mutation =
  | { t: 'bit'; at: number; bit: number }
  | { t: 'byte'; at: number; v: number }
  | { t: 'kind'; frame: number; v: number }
  | { t: 'length'; frame: number; v: number }
  | { t: 'u16'; at: number; v: number }
  | { t: 'u32'; at: number; v: number }
  | { t: 'cut'; at: number }
  | { t: 'insert'; at: number; bytes: Uint8Array }
  | { t: 'repeat'; at: number; n: number };

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ t: fc.constant('bit' as const), at: fc.nat(), bit: fc.nat(7) }),
  fc.record({ t: fc.constant('byte' as const), at: fc.nat(), v: fc.nat(255) }),
  fc.record({ t: fc.constant('kind' as const), frame: fc.nat(), v: fc.oneof(fc.nat(40), fc.nat(255)) }),
  fc.record({ t: fc.constant('length' as const), frame: fc.nat(), v: edgeU32 }),
  fc.record({
    t: fc.constant('u16' as const),
    at: fc.nat(),
    v: fc.oneof(fc.constantFrom(0, 1, 255, 256, 1024, 1025, 4096, 4097, 0xffff), fc.nat(0xffff)),
  }),
  fc.record({ t: fc.constant('u32' as const), at: fc.nat(), v: edgeU32 }),
  fc.record({ t: fc.constant('cut' as const), at: fc.nat() }),
  fc.record({ t: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
  fc.record({ t: fc.constant('repeat' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 64 }) }),
);

/**
 * Applies mutations to a stream of frames whose headers (u8 kind | u32 length) start at
 * `starts`; returns a new buffer.
 */
export function mutate(frames: Uint8Array[], ms: Mutation[]): Uint8Array {
  let b = concatAll(frames);
  const starts: number[] = [];
  frames.reduce((at, f) => {
    starts.push(at);
    return at + f.length;
  }, 0);
  const put = (at: number, bytes: number, v: number) => {
    if (b.length < bytes) return;
    const p = at % (b.length - bytes + 1);
    const view = new DataView(b.buffer, b.byteOffset, b.length);
    if (bytes === 2) view.setUint16(p, v, true);
    else view.setUint32(p, v >>> 0, true);
  };
  for (const m of ms) {
    if (b.length === 0 && m.t !== 'insert') continue;
    switch (m.t) {
      case 'bit':
        b[m.at % b.length] ^= 1 << m.bit;
        break;
      case 'byte':
        b[m.at % b.length] = m.v;
        break;
      case 'kind':
        if (starts.length) b[starts[m.frame % starts.length] % b.length] = m.v;
        break;
      case 'length':
        if (starts.length && starts[m.frame % starts.length] + 5 <= b.length)
          new DataView(b.buffer, b.byteOffset).setUint32(starts[m.frame % starts.length] + 1, m.v >>> 0, true);
        break;
      case 'u16':
        put(m.at, 2, m.v);
        break;
      case 'u32':
        put(m.at, 4, m.v);
        break;
      case 'cut':
        b = b.slice(0, m.at % (b.length + 1));
        break;
      case 'insert': {
        const p = m.at % (b.length + 1);
        b = concatAll([b.subarray(0, p), m.bytes, b.subarray(p)]);
        break;
      }
      case 'repeat': {
        const p = m.at % b.length;
        b = concatAll([b.subarray(0, p), new Uint8Array(m.n).fill(b[p]), b.subarray(p)]);
        break;
      }
    }
  }
  return b;
}

/** Thrown by the allocation watch: a parser asked for more bytes than its stated limit. */
export class OverLimit extends Error {}

/**
 * Runs `f` with the global Uint8Array and ArrayBuffer constructors watched: asking for more
 * than `limit` bytes throws OverLimit before anything is allocated. Returns the largest size
 * asked for (over `limit` if any was refused). The parsers allocate with `new Uint8Array(n)`, which this sees.
 */
export function watchAllocations(limit: number, f: () => void): number {
  const g = globalThis as unknown as { Uint8Array: typeof Uint8Array; ArrayBuffer: typeof ArrayBuffer };
  const saved = { Uint8Array: g.Uint8Array, ArrayBuffer: g.ArrayBuffer };
  let largest = 0;
  const watch = <T extends object>(C: T, perUnit: number): T =>
    new Proxy(C, {
      construct(target, args, newTarget) {
        const n = typeof args[0] === 'number' ? args[0] * perUnit : 0;
        // Recorded before refusing: code that swallows the OverLimit still shows in the result.
        largest = Math.max(largest, n);
        if (n > limit) throw new OverLimit(`allocation of ${n} bytes, over the limit of ${limit}`);
        return Reflect.construct(
          target as never,
          args,
          newTarget === watched.Uint8Array || newTarget === watched.ArrayBuffer ? (target as never) : newTarget,
        );
      },
    });
  const watched = { Uint8Array: watch(saved.Uint8Array, 1), ArrayBuffer: watch(saved.ArrayBuffer, 1) };
  g.Uint8Array = watched.Uint8Array;
  g.ArrayBuffer = watched.ArrayBuffer;
  try {
    f();
  } finally {
    g.Uint8Array = saved.Uint8Array;
    g.ArrayBuffer = saved.ArrayBuffer;
  }
  return largest;
}

/**
 * The parsers' contract for hostile input: a rejection is a WebcclError with one of `codes`
 * (never a TypeError, RangeError or an allocation over the limit).
 */
export function expectCoded(e: unknown, codes: readonly string[]): void {
  if (e instanceof OverLimit) throw e;
  if (!WebcclError.is(e))
    throw new Error(`not a WebcclError: ${e instanceof Error ? `${e.name}: ${e.message}\n${e.stack}` : String(e)}`);
  if (!codes.includes(e.code)) throw new Error(`code ${e.code} is not one of ${codes.join(', ')}: ${e.message}`);
}

/**
 * Resolves once `done()` holds, looking after each turn of the event loop (and giving up after
 * `ms`, leaving the caller's own checks to fail). A handshake proves the token asynchronously
 * (WebCrypto), so a test that plays the peer waits for it this way before it answers.
 */
export async function until(done: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done() && Date.now() < end) await new Promise((r) => setTimeout(r, 1));
}
