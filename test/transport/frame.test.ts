// The TCP transport's wire format and tag matching, without sockets: frames round-trip whole
// and one byte at a time, every limit is enforced before allocation, and Mailbox delivers each
// tag's payload to its receive whatever the order, within its hold limits.
import { describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
import { HoldBuffers } from '../../src/transport/hold-buffers.js';
import { Mailbox, type Sink } from '../../src/transport/mailbox.js';
import type { Tag } from '../../src/transport/transport.js';
import {
  authPayload,
  encodeDataHeader,
  encodeHandshake,
  type Handshake,
  Kind,
  Refusal,
  VERSION,
} from '../../src/wire/link-frames.js';
import { FrameReader } from '../../src/wire/link-reader.js';

const nonce = new Uint8Array(32).fill(7);
const hello: Handshake = {
  type: 'hello',
  version: VERSION,
  jobId: 'job-ü',
  rank: 3,
  size: 4,
  channel: 1,
  nchannels: 2,
  nonce,
};
const proof: Handshake = { type: 'proof', mac: new Uint8Array(32).fill(9) };
const refuse: Handshake = { type: 'refuse', reason: Refusal.token, message: 'token mismatch' };

function reader(handshaking = true) {
  const got: unknown[] = [];
  const r = new FrameReader({
    handshake: (m) => got.push(m),
    data: (tag, length): Sink => {
      const into = new Uint8Array(length);
      return { into, done: () => got.push({ tag, data: into }) };
    },
  });
  if (!handshaking) r.ready();
  return { r, got };
}

function dataFrame(tag: Tag, payload: Uint8Array): Uint8Array {
  const h = encodeDataHeader(tag, payload.length);
  const b = new Uint8Array(h.length + payload.length);
  b.set(h);
  b.set(payload, h.length);
  return b;
}

function code(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return WebcclError.is(e) ? e.code : 'other';
  }
  return undefined;
}

describe('tcp frames', () => {
  it('round-trip handshake frames, whole and one byte at a time', () => {
    for (const bytewise of [false, true]) {
      const { r, got } = reader();
      const bytes = [hello, proof, refuse].map(encodeHandshake);
      for (const b of bytes) {
        if (bytewise) for (const x of b) r.push(Uint8Array.of(x));
        else r.push(b);
      }
      expect(got).toEqual([hello, proof, refuse]);
    }
  });

  it('round-trip data frames (empty, small, 64 KiB), whole and one byte at a time', () => {
    const payloads = [new Uint8Array(0), Uint8Array.of(1, 2, 3), new Uint8Array(65536).map((_, i) => i * 31)];
    const frames = payloads.map((p, i) => dataFrame({ comm: i, seq: 0xffffffff, step: i + 7, space: i % 3 }, p));
    for (const bytewise of [false, true]) {
      const { r, got } = reader(false);
      const all = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
      let at = 0;
      for (const f of frames) {
        all.set(f, at);
        at += f.length;
      }
      if (bytewise) for (let i = 0; i < all.length; i++) r.push(all.subarray(i, i + 1));
      else r.push(all);
      expect(got).toEqual(
        payloads.map((p, i) => ({ tag: { comm: i, seq: 0xffffffff, step: i + 7, space: i % 3 }, data: p })),
      );
    }
  });

  it('writes a small frame with its payload in the header array, byte for byte as header then payload', () => {
    const tags: Tag[] = [
      { comm: 0, seq: 0, step: 0 },
      { comm: 0xfedcba98, seq: 0xffffffff, step: 0x80000001, space: 0x7fffffff },
      { comm: 5, seq: 2 ** 31, step: 3, space: 2 },
    ];
    for (const [i, tag] of tags.entries()) {
      const payload = new Uint8Array(i * 100).map((_, k) => k * 7 + i);
      const one = encodeDataHeader(tag, payload.length, payload.length);
      one.set(payload, one.length - payload.length);
      expect(one).toEqual(dataFrame(tag, payload));
      const v = new DataView(one.buffer);
      expect([
        v.getUint8(0),
        v.getUint32(1, true),
        v.getUint32(5, true),
        v.getUint32(9, true),
        v.getUint32(13, true),
        v.getUint32(17, true),
      ]).toEqual([Kind.data, 16 + payload.length, tag.comm, tag.seq, tag.step, tag.space ?? 0]);
      const { r, got } = reader(false);
      r.push(one);
      expect(got).toEqual([{ tag: { space: 0, ...tag }, data: payload }]);
    }
  });

  it('refuses wrong kinds and over-long frames before allocating', () => {
    const huge = Uint8Array.of(Kind.hello, 0xff, 0xff, 0xff, 0x7f);
    expect(code(() => reader().r.push(huge))).toBe('PROTOCOL_ERROR');
    expect(code(() => reader().r.push(dataFrame({ comm: 0, seq: 0, step: 0 }, Uint8Array.of(1))))).toBe(
      'PROTOCOL_ERROR',
    );
    expect(code(() => reader(false).r.push(encodeHandshake(proof)))).toBe('PROTOCOL_ERROR');
    expect(code(() => reader(false).r.push(Uint8Array.of(Kind.data, 3, 0, 0, 0)))).toBe('PROTOCOL_ERROR');
    expect(code(() => reader().r.push(Uint8Array.of(99, 0, 0, 0, 0)))).toBe('PROTOCOL_ERROR');
    const badMagic = encodeHandshake(hello);
    badMagic[5] ^= 1;
    expect(code(() => reader().r.push(badMagic))).toBe('PROTOCOL_ERROR');
    const { r } = reader();
    expect(code(() => r.push(huge))).toBe('PROTOCOL_ERROR');
    expect(code(() => r.push(encodeHandshake(proof)))).toBeUndefined(); // closed: ignores the rest
  });

  it('signs role, nonces, job, ranks and channel', () => {
    const a = authPayload('connect', nonce, 'j', 1, 0, 0, nonce);
    expect(a).not.toEqual(authPayload('accept', nonce, 'j', 1, 0, 0, nonce));
    expect(a).not.toEqual(authPayload('connect', nonce, 'j', 1, 0, 1, nonce));
    expect(a).not.toEqual(authPayload('connect', nonce, 'k', 1, 0, 0, nonce));
  });
});

describe('Mailbox', () => {
  const t = (seq: number, step = 0): Tag => ({ comm: 1, seq, step });
  const deliver = (box: Mailbox, tag: Tag, bytes: number[]) => {
    const s = box.claim(tag, bytes.length);
    if ('skip' in s) return false;
    s.into.set(bytes);
    s.done();
    return true;
  };

  it('matches by tag in either order', async () => {
    const box = new Mailbox(2);
    const a = new Uint8Array(2);
    const b = new Uint8Array(2);
    const pa = box.post(t(1), a);
    deliver(box, t(2), [3, 4]); // before its receive
    deliver(box, t(1), [1, 2]); // after its receive
    await pa;
    await box.post(t(2), b);
    expect([...a, ...b]).toEqual([1, 2, 3, 4]);
  });

  it('fails a receive whose payload has another length, either order', async () => {
    const box = new Mailbox(2);
    const p = box.post(t(1), new Uint8Array(4));
    expect(deliver(box, t(1), [1, 2])).toBe(false);
    await expect(p).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
    deliver(box, t(2), [1, 2]);
    await expect(box.post(t(2), new Uint8Array(3))).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
  });

  it('reuses the buffer of an early payload once it was copied out, for the next early payload of its length, never one still held', async () => {
    const buffers = new HoldBuffers(1 << 20, 2);
    const box = new Mailbox(1, undefined, buffers);
    const first = box.claim(t(1), 3) as Exclude<Sink, { skip: true }>;
    first.into.set([1, 2, 3]);
    first.done(); // held: no receive yet
    const held2 = box.claim(t(2), 3) as Exclude<Sink, { skip: true }>;
    expect(held2.into).not.toBe(first.into); // t(1)'s payload is still held
    held2.into.set([4, 5, 6]);
    held2.done();
    const a = new Uint8Array(3);
    await box.post(t(1), a); // copied out: its buffer is free again
    const third = box.claim(t(3), 3) as Exclude<Sink, { skip: true }>;
    expect(third.into).toBe(first.into);
    third.into.set([7, 8, 9]);
    third.done();
    const b = new Uint8Array(3);
    const c = new Uint8Array(3);
    await box.post(t(2), b);
    await box.post(t(3), c);
    expect([...a, ...b, ...c]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect((box.claim(t(4), 5) as Exclude<Sink, { skip: true }>).into).toHaveLength(5); // another length: a new one
    // Within its budget only: past it a buffer handed back is dropped.
    const small = new HoldBuffers(4, 2);
    const x = small.take(3);
    small.give(x);
    small.give(small.take(3)); // the same one, back again
    const y = new Uint8Array(3);
    small.give(y); // 6 bytes > 4: dropped
    expect(small.take(3)).toBe(x);
    expect(small.take(3)).not.toBe(y);
  });

  it('holds early payloads only within its limits', () => {
    const box = new Mailbox(0, { maxHeldMessages: 2, maxHeldBytes: 10 });
    deliver(box, t(1), [1]);
    expect(code(() => box.claim(t(2), 10))).toBe('PROTOCOL_ERROR');
    deliver(box, t(2), [1]);
    expect(code(() => box.claim(t(3), 1))).toBe('PROTOCOL_ERROR');
  });

  it('fails pending and later receives with one error', async () => {
    const box = new Mailbox(0);
    const p = box.post(t(1), new Uint8Array(1));
    const e = new WebcclError('CONNECTION_CLOSED', 'gone');
    box.fail(e);
    await expect(p).rejects.toBe(e);
    await expect(box.post(t(2), new Uint8Array(1))).rejects.toBe(e);
  });

  // A communicator that fails mid-payload gives its receive's buffer back (its op's scratch is
  // reused by the next communicator); the reader must not write the payload's remaining bytes
  // there. Both read paths: bytes pushed (TLS, WebSocket) and reads landing in target().
  it("a receive failed mid-payload gets none of the payload's later bytes", async () => {
    for (const path of ['push', 'target'] as const) {
      const box = new Mailbox(1);
      const r = new FrameReader({ handshake: () => {}, data: (tag, length) => box.claim(tag, length) });
      r.ready();
      const into = new Uint8Array(1000);
      const dead = box.post({ comm: 1, seq: 0, step: 0, space: 5 }, into);
      const frame = dataFrame({ comm: 1, seq: 0, step: 0, space: 5 }, new Uint8Array(1000).fill(9));
      const next = dataFrame({ comm: 2, seq: 0, step: 0, space: 6 }, Uint8Array.of(4, 2));
      const cut = frame.length - 700;
      r.push(frame.subarray(0, cut));
      box.failSpace(5, new WebcclError('ABORTED', 'communicator revoked'));
      await expect(dead).rejects.toMatchObject({ code: 'ABORTED' });
      const other = new Uint8Array(2);
      const live = box.post({ comm: 2, seq: 0, step: 0, space: 6 }, other);
      const rest = new Uint8Array([...frame.subarray(cut), ...next]);
      if (path === 'push') r.push(rest);
      else {
        for (let at = 0; at < rest.length; ) {
          const spare = new Uint8Array(64);
          const dst = r.target(spare);
          expect(dst.buffer).not.toBe(into.buffer);
          const n = Math.min(dst.length, rest.length - at);
          dst.set(rest.subarray(at, at + n));
          r.received(dst, n);
          at += n;
        }
      }
      await live;
      expect([...other]).toEqual([4, 2]);
      expect(
        into.subarray(300).every((b) => b === 0),
        path,
      ).toBe(true);
      expect(into.subarray(0, 300).every((b) => b === 9)).toBe(true);
    }
  });

  // A payload that began to arrive before its receive was posted goes into a hold buffer; once
  // the receive is posted, what arrived moves into it and the rest lands there directly (one
  // copy of the start, not of the whole payload). Both read paths.
  describe('a receive posted while its payload arrives held', () => {
    const tag = { comm: 1, seq: 0, step: 0, space: 5 };
    const payload = Uint8Array.from({ length: 1000 }, (_, i) => (i % 251) + 1);
    const setup = () => {
      const taken: Uint8Array[] = [];
      const buffers = new (class extends HoldBuffers {
        take(length: number) {
          const b = super.take(length);
          taken.push(b);
          return b;
        }
      })();
      const box = new Mailbox(1, { maxHeldMessages: 1, maxHeldBytes: 4096 }, buffers);
      const r = new FrameReader({ handshake: () => {}, data: (t, length) => box.claim(t, length) });
      r.ready();
      const frame = dataFrame(tag, payload);
      const cut = frame.length - 700; // 300 payload bytes arrive before the receive
      r.push(frame.subarray(0, cut));
      return { box, r, taken, rest: frame.subarray(cut) };
    };
    /** Feeds `bytes` as the socket would on `path`; returns the buffers the reads landed in. */
    const feed = (r: FrameReader, path: 'push' | 'target', bytes: Uint8Array) => {
      if (path === 'push') return r.push(bytes);
      for (let at = 0; at < bytes.length; ) {
        const dst = r.target(new Uint8Array(64));
        const n = Math.min(dst.length, bytes.length - at, 128);
        dst.set(bytes.subarray(at, at + n));
        r.received(dst, n);
        at += n;
      }
    };

    for (const path of ['push', 'target'] as const) {
      it(`takes the rest of it in place (${path})`, async () => {
        const { box, r, taken, rest } = setup();
        expect(taken).toHaveLength(1);
        const into = new Uint8Array(1000);
        const got = box.post(tag, into);
        feed(r, path, rest);
        await got;
        expect([...into]).toEqual([...payload]);
        // The hold buffer holds the first 300 bytes only: the rest never went there.
        expect(taken[0].subarray(0, 300)).toEqual(payload.subarray(0, 300));
        expect(taken[0].subarray(300).every((b) => b === 0)).toBe(true);
        // Its hold ended: another early payload fits the one-message limit.
        feed(r, path, dataFrame({ ...tag, seq: 1 }, Uint8Array.of(5)));
        const later = new Uint8Array(1);
        await box.post({ ...tag, seq: 1 }, later);
        expect(later[0]).toBe(5);
      });

      it(`a receive failed after it took over gets none of the later bytes (${path})`, async () => {
        const { box, r, rest } = setup();
        const into = new Uint8Array(1000);
        const got = box.post(tag, into);
        feed(r, path, rest.subarray(0, 200));
        box.failSpace(5, new WebcclError('ABORTED', 'communicator revoked'));
        await expect(got).rejects.toMatchObject({ code: 'ABORTED' });
        feed(r, path, rest.subarray(200));
        expect(into.subarray(0, 500)).toEqual(payload.subarray(0, 500));
        expect(into.subarray(500).every((b) => b === 0)).toBe(true);
        // The hold ended with it: another communicator's early payload fits the limit.
        const other = { comm: 2, seq: 0, step: 0, space: 6 };
        feed(r, path, dataFrame(other, Uint8Array.of(7)));
        const later = new Uint8Array(1);
        await box.post(other, later);
        expect(later[0]).toBe(7);
      });
    }
  });

  it('a peer that ended still serves what it sent before its receive was posted', async () => {
    // A rank that finished its last op exits; its last message may reach a peer that has not
    // posted the receive yet, and the close follows it.
    const box = new Mailbox(0);
    const pending = box.post(t(1), new Uint8Array(1));
    deliver(box, t(2), [7]);
    const e = new WebcclError('CONNECTION_CLOSED', 'rank 0 closed its connections');
    box.ended(e);
    await expect(pending).rejects.toBe(e); // nothing more will come for it
    const into = new Uint8Array(1);
    await box.post(t(2), into);
    expect(into[0]).toBe(7);
    await expect(box.post(t(2), new Uint8Array(1))).rejects.toBe(e); // served once
    await expect(box.post(t(3), new Uint8Array(1))).rejects.toBe(e);
    expect(deliver(box, t(4), [1])).toBe(false);
  });
});
