// Point-to-point cases shared by the in-process (shared memory) and the 2-node TCP runs of
// test/api/p2p.test.ts: each takes the ranks and a way to settle a batch of works, and returns the
// problems found (an empty list when all is well).
import { expect } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import type { WebcclError } from '../../src/core/errors.js';
import type { Work } from '../../src/engine/work.js';
import { DTYPES, makeBuffer, SIZE } from '../helpers/closed-form.mjs';

export type Settle = (works: Work[]) => Promise<(Error | undefined)[]>;
type Msg = { arg: any; bytes: Uint8Array; free?: () => void };

export const bytesOf = (d: any): Uint8Array => new Uint8Array(d.buffer, d.byteOffset, d.byteLength);

/** A buffer of `count` elements: from comm.alloc() (zero-copy) or a plain TypedArray. */
export function buffer(c: Communicator, dtype: string, count: number, zeroCopy: boolean): Msg {
  if (!zeroCopy) {
    const b = makeBuffer(dtype, count);
    return { arg: b.arg, bytes: bytesOf(b.data) };
  }
  const a = c.alloc(dtype as any, count) as any;
  return { arg: a, bytes: bytesOf(a.data ?? a), free: () => c.free(a) };
}

/** The payload of the k-th message from `from` to `to` with `tag`: every byte says which message it is. */
export const pattern = (from: number, to: number, tag: number, k: number, j: number): number =>
  (from * 31 + to * 7 + tag * 13 + k * 3 + j) & 0xff;
const fillMsg = (m: Msg, from: number, to: number, tag: number, k: number) =>
  m.bytes.forEach((_, j) => (m.bytes[j] = pattern(from, to, tag, k, j)));
function wrongIn(m: Msg, from: number, to: number, tag: number, k: number): string | undefined {
  for (let j = 0; j < m.bytes.length; j++) {
    if (m.bytes[j] !== pattern(from, to, tag, k, j))
      return `message ${from}->${to} tag ${tag} #${k}: byte ${j} of ${m.bytes.length} is ${m.bytes[j]}, expected ${pattern(from, to, tag, k, j)}`;
  }
  return undefined;
}

async function noErrors(settle: Settle, works: Work[]): Promise<void> {
  const errs = await settle(works);
  expect(errs.filter(Boolean).map((e) => `${(e as WebcclError).code}: ${e!.message}`)).toEqual([]);
}

/** Ping-pong between ranks 0 and 1, `rounds` times, every byte checked. */
export async function pingPong(
  cs: Communicator[],
  settle: Settle,
  rounds: number,
  dtype = 'f32',
  count = 2,
): Promise<void> {
  const wrong: string[] = [];
  for (let k = 0; k < rounds; k++) {
    const ping = buffer(cs[0], dtype, count, false),
      got = buffer(cs[1], dtype, count, false);
    fillMsg(ping, 0, 1, 0, k);
    await noErrors(settle, [cs[0].send(ping.arg, 1), cs[1].recv(got.arg, 0)]);
    const w = wrongIn(got, 0, 1, 0, k);
    if (w) wrong.push(w);
    const pong = buffer(cs[1], dtype, count, false),
      back = buffer(cs[0], dtype, count, false);
    fillMsg(pong, 1, 0, 0, k);
    await noErrors(settle, [cs[1].send(pong.arg, 0), cs[0].recv(back.arg, 1)]);
    const w2 = wrongIn(back, 1, 0, 0, k);
    if (w2) wrong.push(w2);
  }
  expect(wrong.slice(0, 3)).toEqual([]);
}

/** Every rank sends to the next and receives from the previous, sends first or recvs first. */
export async function ring(cs: Communicator[], settle: Settle, count: number, recvFirst: boolean): Promise<void> {
  const n = cs.length;
  const out = cs.map((c, r) => {
    const m = buffer(c, 'f32', count, r % 2 === 0);
    fillMsg(m, r, (r + 1) % n, 5, 0);
    return m;
  });
  const into = cs.map((c, r) => buffer(c, 'f32', count, r % 2 === 1));
  const works: Work[] = [];
  cs.forEach((c, r) => {
    const s = () => c.send(out[r].arg, (r + 1) % n, { tag: 5 });
    const v = () => c.recv(into[r].arg, (r + n - 1) % n, { tag: 5 });
    if (recvFirst) works.push(v(), s());
    else works.push(s(), v());
  });
  await noErrors(settle, works);
  expect(cs.map((_, r) => wrongIn(into[r], (r + n - 1) % n, r, 5, 0))).toEqual(cs.map(() => undefined));
  cs.forEach((_, r) => {
    out[r].free?.();
    into[r].free?.();
  });
}

/** Tags 1..3, two messages each, received in the reverse tag order: each tag keeps its own order. */
export async function outOfOrderTags(cs: Communicator[], settle: Settle): Promise<void> {
  const sent: Msg[] = [],
    got: { m: Msg; tag: number; k: number }[] = [];
  const works: Work[] = [];
  for (const tag of [1, 2, 3])
    for (const k of [0, 1]) {
      const m = buffer(cs[0], 'i32', 3 + tag, false);
      fillMsg(m, 0, 1, tag, k);
      sent.push(m);
      works.push(cs[0].send(m.arg, 1, { tag }));
    }
  for (const tag of [3, 2, 1])
    for (const k of [0, 1]) {
      const m = buffer(cs[1], 'i32', 3 + tag, false);
      got.push({ m, tag, k });
      works.push(cs[1].recv(m.arg, 0, { tag }));
    }
  await noErrors(settle, works);
  expect(got.map((g) => wrongIn(g.m, 0, 1, g.tag, g.k))).toEqual(got.map(() => undefined));
}

/**
 * `count` messages each way between ranks 0 and 1, on 7 tags, all issued before any wait: every
 * send first on both ranks, then every recv (the order that deadlocks a blocking exchange).
 */
export async function manyInFlight(cs: Communicator[], settle: Settle, count: number): Promise<void> {
  const works: Work[] = [];
  const got: { m: Msg; from: number; tag: number; k: number }[] = [];
  for (const [me, peer] of [
    [0, 1],
    [1, 0],
  ]) {
    for (let i = 0; i < count; i++) {
      const m = buffer(cs[me], 'u8', 1 + (i % 40), false);
      fillMsg(m, me, peer, i % 7, Math.floor(i / 7));
      works.push(cs[me].send(m.arg, peer, { tag: i % 7 }));
    }
  }
  for (const [me, peer] of [
    [0, 1],
    [1, 0],
  ]) {
    for (let i = 0; i < count; i++) {
      const m = buffer(cs[me], 'u8', 1 + (i % 40), false);
      got.push({ m, from: peer, tag: i % 7, k: Math.floor(i / 7) });
      works.push(cs[me].recv(m.arg, peer, { tag: i % 7 }));
    }
  }
  await noErrors(settle, works);
  const wrong = got.map((g) => wrongIn(g.m, g.from, 1 - g.from, g.tag, g.k)).filter(Boolean);
  expect(wrong.slice(0, 3)).toEqual([]);
}

/**
 * Sizes 0, 1, just past the inline payload, and `large` bytes, in every dtype width, alloc() and plain on each side.
 */
export async function sizesAndDtypes(cs: Communicator[], settle: Settle, large: number): Promise<void> {
  const wrong: string[] = [];
  let k = 0;
  for (const dtype of DTYPES) {
    for (const bytes of [0, SIZE[dtype], 40, 1000, large]) {
      const count = Math.floor(bytes / SIZE[dtype]);
      for (const [zs, zr] of [
        [false, false],
        [true, true],
        [true, false],
        [false, true],
      ]) {
        if (bytes === large && dtype !== 'f32' && dtype !== 'u8') continue; // large once per width class is enough
        const s = buffer(cs[0], dtype, count, zs),
          r = buffer(cs[1], dtype, count, zr);
        fillMsg(s, 0, 1, 9, k);
        await noErrors(settle, [cs[0].send(s.arg, 1, { tag: 9 }), cs[1].recv(r.arg, 0, { tag: 9 })]);
        const w = wrongIn(r, 0, 1, 9, k);
        if (w) wrong.push(`${dtype} ${zs ? 'alloc' : 'plain'}->${zr ? 'alloc' : 'plain'}: ${w}`);
        s.free?.();
        r.free?.();
        k++;
      }
    }
  }
  expect(wrong.slice(0, 3)).toEqual([]);
}

/** A recv of another size fails on both sides with SIZE_MISMATCH naming both sizes; the communicator goes on. */
export async function wrongSize(cs: Communicator[], settle: Settle): Promise<void> {
  const errs = await settle([
    cs[0].send(new Float32Array(10), 1, { tag: 4 }),
    cs[1].recv(new Float32Array(12), 0, { tag: 4 }),
  ]);
  for (const e of errs) {
    expect((e as WebcclError)?.code).toBe('SIZE_MISMATCH');
    expect((e as WebcclError).details).toMatchObject({ sentBytes: 40, recvBytes: 48, tag: 4 });
  }
  expect((errs[0] as WebcclError).details.peer).toBe(1);
  expect((errs[1] as WebcclError).details.peer).toBe(0);
  // Still usable: the next message with that tag is the next one sent.
  const m = buffer(cs[0], 'f32', 10, false),
    r = buffer(cs[1], 'f32', 10, false);
  fillMsg(m, 0, 1, 4, 1);
  await noErrors(settle, [cs[0].send(m.arg, 1, { tag: 4 }), cs[1].recv(r.arg, 0, { tag: 4 })]);
  expect(wrongIn(r, 0, 1, 4, 1)).toBeUndefined();
  await noErrors(
    settle,
    cs.map((c) => c.allReduce(new Float32Array(4))),
  );
}

/**
 * p2p mixed with collectives: a recv posted before an allReduce that its sender joins first,
 * and a send issued between two collectives; both ranks wait for the collectives first.
 */
export async function mixed(cs: Communicator[], settle: Settle): Promise<void> {
  const x = buffer(cs[0], 'f64', 100, false),
    y = buffer(cs[1], 'f64', 100, false);
  fillMsg(x, 1, 0, 2, 0);
  const a = cs.map(() => new Float32Array(8).fill(1));
  const recv = cs[0].recv(y.arg, 1, { tag: 2 });
  const ar0 = cs[0].allReduce(a[0]);
  const ar1 = cs[1].allReduce(a[1]);
  const send = cs[1].send(x.arg, 0, { tag: 2 });
  const b = cs.map(() => new Float32Array(8).fill(2));
  const bc = cs.map((c, r) => c.broadcast(b[r], { root: 1 }));
  await noErrors(settle, [ar0, ar1, ...bc]);
  await noErrors(settle, [recv, send]);
  expect(wrongIn(y, 1, 0, 2, 0)).toBeUndefined();
  expect([...a[0], ...a[1]]).toEqual(new Array(16).fill(2));
}
