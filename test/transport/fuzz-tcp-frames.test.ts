// Property-based fuzzing of the TCP transport's frame reader (src/wire/link-reader.ts) and of how a link
// (link.ts) feeds it: through push() as a 'data' event does, and through target()/received() as
// a dialled socket's reads do (a payload landing straight in its receive). Valid frames
// round-trip whatever the cuts in the stream; random and mutated streams are accepted or refused
// with a coded error, never a TypeError or RangeError, and nothing is allocated beyond the stated
// limits (a handshake frame's maximum, the mailbox's hold limit for payloads).

import { createHmac } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type * as net from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
import { type HoldLimits, Mailbox, type Sink } from '../../src/transport/mailbox.js';
import { type Hooks, handshake, type Link } from '../../src/transport/tcp/nodejs/link.js';
import type { Tag } from '../../src/transport/transport.js';
import {
  authPayload,
  decodeHandshake,
  encodeDataHeader,
  encodeHandshake,
  type Handshake,
  Kind,
  maxHandshakeBody,
  VERSION,
} from '../../src/wire/link-frames.js';
import { FrameReader } from '../../src/wire/link-reader.js';
import {
  concatAll,
  cuts,
  expectCoded,
  fuzzSettings,
  longRun,
  mutate,
  mutation,
  split,
  until,
  watchAllocations,
} from '../helpers/fuzz.js';

const DEADLINE = longRun ? 3_600_000 : 60_000;
const LIMITS: HoldLimits = { maxHeldMessages: 8, maxHeldBytes: 4096 };
/** The most any frame may make the reader (or the mailbox behind it) allocate. */
const LIMIT = Math.max(LIMITS.maxHeldBytes, ...Object.values(Kind).map(maxHandshakeBody));

const chars = fc.constantFrom('a', 'z', '-', '0', ' ', 'ü', '€', '😀', '\u0000', '\uFEFF', '\uFFFD');
const text = (maxLength: number) => fc.array(chars, { maxLength }).map((a) => a.join(''));
const u32 = fc.oneof(fc.constantFrom(0, 1, 0xffffffff), fc.integer({ min: 0, max: 0xffffffff }));
const u16 = fc.nat(0xffff);
const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 32 });

const hello = fc.record({
  type: fc.constant('hello' as const),
  version: fc.constant(VERSION),
  jobId: text(60),
  rank: u32,
  size: u32,
  channel: u16,
  nchannels: u16,
  nonce: bytes32,
});
const proof = fc.record({ type: fc.constant('proof' as const), mac: bytes32 });
const refuse = fc.record({ type: fc.constant('refuse' as const), reason: fc.nat(255), message: text(200) });
const abort = fc.record({ type: fc.constant('abort' as const), message: text(200) });
const tag = fc.record({ comm: u32, seq: u32, step: u32, space: u32 });
const payload = fc.oneof(
  { weight: 19, arbitrary: fc.uint8Array({ maxLength: 48 }) },
  { weight: 1, arbitrary: fc.constantFrom(new Uint8Array(70_000).fill(3)) }, // past the reader's large-payload path
);
const data = fc.record({ type: fc.constant('data' as const), tag, payload });
type Data = { type: 'data'; tag: Tag; payload: Uint8Array };
type Frame = Handshake | Data;

function frameBytes(f: Frame): Uint8Array {
  return f.type === 'data' ? concatAll([encodeDataHeader(f.tag, f.payload.length), f.payload]) : encodeHandshake(f);
}

/** A stream as a link sees it: handshake frames, the PROOF that ends the handshake, then DATA and ABORT. */
const stream: fc.Arbitrary<Frame[]> = fc
  .tuple(
    fc.array(fc.oneof(hello, refuse, abort), { maxLength: 2 }),
    proof,
    fc.array(fc.oneof({ weight: 4, arbitrary: data }, { weight: 1, arbitrary: abort }), { maxLength: 6 }),
  )
  .map(([before, p, after]) => [...before, p, ...after]);

/** How the bytes reach the reader: push(), or target()/received() with a spare buffer of `spare` bytes. */
const feeding = fc.oneof(
  fc.constant({ direct: false, spare: 0 }),
  fc.record({ direct: fc.constant(true), spare: fc.oneof(fc.integer({ min: 1, max: 64 }), fc.constant(65536)) }),
);

/** Feeds `pieces` as Node's onread would: each read lands where target() says, at most a piece at a time. */
function feedDirect(
  r: { target(s: Uint8Array): Uint8Array; received(b: Uint8Array, n: number): void },
  pieces: Uint8Array[],
  spare: Uint8Array,
): void {
  for (const piece of pieces) {
    for (let at = 0; at < piece.length; ) {
      const into = r.target(spare);
      const n = Math.min(into.length, piece.length - at);
      if (n === 0) throw new Error('target() offered no room for the next read');
      into.set(piece.subarray(at, at + n));
      r.received(into, n);
      at += n;
    }
  }
}

/** Drives a FrameReader as a link does (PROOF ends the handshake); `sink` says where payloads go. */
function read(
  pieces: Uint8Array[],
  how: { direct: boolean; spare: number },
  sink: (tag: Tag, length: number) => Sink,
  limit = LIMIT,
) {
  const spare = new Uint8Array(how.spare);
  const got: Frame[] = [];
  let error: unknown;
  const r: FrameReader = new FrameReader({
    handshake: (m) => {
      got.push(m);
      if (m.type === 'proof') r.ready();
    },
    data: (t, length) => {
      const s = sink(t, length);
      if ('skip' in s) return s;
      return {
        into: s.into,
        done: () => {
          s.done();
          got.push({ type: 'data', tag: t, payload: s.into });
        },
      };
    },
  });
  const largest = watchAllocations(limit, () => {
    try {
      if (how.direct) feedDirect(r, pieces, spare);
      else for (const p of pieces) r.push(p);
    } catch (e) {
      error = e;
    }
  });
  return { got, error, largest };
}

/** A mailbox with small hold limits and a few receives posted (some of the wrong length). */
function mailbox(posts: { tag: Tag; length: number }[]) {
  const box = new Mailbox(1, LIMITS);
  const failures: unknown[] = [];
  for (const p of posts) box.post(p.tag, new Uint8Array(p.length)).catch((e) => failures.push(e));
  return { box, failures };
}

describe('tcp frame reader fuzzing', () => {
  it(
    'valid frames round-trip whatever the cuts, through push() and through direct reads',
    () => {
      fc.assert(
        fc.property(stream, cuts, feeding, (frames, at, how) => {
          const bytes = concatAll(frames.map(frameBytes));
          const { got, error } = read(
            split(bytes, at),
            how,
            (_t, length) => ({ into: new Uint8Array(length), done: () => {} }),
            Infinity,
          );
          expect(error).toBeUndefined();
          // Payloads compared natively (a deep equal of 70 kB element by element is slow).
          const flat = (fs: Frame[]) =>
            fs.map((f) =>
              f.type === 'data'
                ? {
                    ...f,
                    payload: Buffer.from(f.payload.buffer, f.payload.byteOffset, f.payload.length).toString('base64'),
                  }
                : f,
            );
          expect(flat(got)).toEqual(flat(frames));
        }),
        fuzzSettings(500),
      );
    },
    DEADLINE,
  );

  it(
    'mutated streams, cut anywhere, are accepted or refused with PROTOCOL_ERROR within the limits',
    async () => {
      const posts = fc.array(fc.record({ tag, length: fc.nat(64) }), { maxLength: 4 });
      await fc.assert(
        fc.asyncProperty(
          stream,
          fc.array(mutation, { minLength: 1, maxLength: 4 }),
          cuts,
          feeding,
          posts,
          async (frames, muts, at, how, posted) => {
            const { box, failures } = mailbox(posted);
            const { error, largest, got } = read(split(mutate(frames.map(frameBytes), muts), at), how, (t, n) =>
              box.claim(t, n),
            );
            if (error !== undefined) expectCoded(error, ['PROTOCOL_ERROR']);
            expect(largest).toBeLessThanOrEqual(LIMIT);
            // Whatever was accepted is the frame its fields encode to.
            for (const f of got)
              if (f.type !== 'data' && !(f.type === 'hello' && f.version !== VERSION))
                expect(decodeHandshake(Kind[f.type], encodeHandshake(f).subarray(5))).toEqual(f);
            box.fail(new WebcclError('CONNECTION_CLOSED', 'end of the test stream'));
            await Promise.resolve();
            for (const e of failures) expectCoded(e, ['SIZE_MISMATCH', 'MISMATCH', 'CONNECTION_CLOSED']);
          },
        ),
        fuzzSettings(3000),
      );
    },
    DEADLINE,
  );

  it(
    'random bytes, cut anywhere, are accepted or refused with PROTOCOL_ERROR within the limits',
    () => {
      const kindByte = fc.oneof(fc.constantFrom(...Object.values(Kind)), fc.nat(255));
      const junk = fc
        .array(fc.tuple(kindByte, fc.uint8Array({ maxLength: 4 }), fc.uint8Array({ maxLength: 40 })), {
          minLength: 1,
          maxLength: 4,
        })
        .map((fs) => concatAll(fs.flatMap(([k, len, rest]) => [Uint8Array.of(k), len, rest])));
      fc.assert(
        fc.property(
          fc.oneof(junk, fc.uint8Array({ maxLength: 96 })),
          fc.boolean(),
          cuts,
          feeding,
          (b, handshaking, at, how) => {
            const { box } = mailbox([]);
            const pieces = split(b, at);
            if (!handshaking) pieces.unshift(encodeHandshake({ type: 'proof', mac: new Uint8Array(32) }));
            const { error, largest } = read(pieces, how, (t, n) => box.claim(t, n));
            if (error !== undefined) expectCoded(error, ['PROTOCOL_ERROR']);
            expect(largest).toBeLessThanOrEqual(LIMIT);
          },
        ),
        fuzzSettings(3000),
      );
    },
    DEADLINE,
  );
});

/** A socket that records what the link writes; the test plays the peer by emitting 'close'. */
class FakeSocket extends EventEmitter {
  destroyed = false;
  writableEnded = false;
  /** The link pauses reading while it computes its proofs, and resumes once they are ready. */
  paused = false;
  readonly written: Uint8Array[] = [];
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  /** Until the link has finished what it computes asynchronously (or has given up). */
  idle(): Promise<void> {
    return until(() => !this.paused || this.destroyed || this.writableEnded);
  }
  write(b: Uint8Array): boolean {
    this.written.push(b);
    return true;
  }
  end(b?: Uint8Array): void {
    if (b) this.written.push(b);
    this.writableEnded = true;
  }
  destroy(): void {
    this.destroyed = true;
  }
}

const TOKEN = new Uint8Array(16).fill(5);
const JOB = 'fuzz-job';

describe('tcp link handshake fuzzing', () => {
  it(
    'a dialling link fed a mutated peer stream by direct reads ends in a link or a coded error',
    async () => {
      const codes = ['PROTOCOL_ERROR', 'AUTH_FAILED', 'CONNECTION_CLOSED'];
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.oneof({ weight: 4, arbitrary: data }, { weight: 1, arbitrary: abort }), { maxLength: 4 }),
          fc.array(mutation, { maxLength: 3 }),
          cuts,
          fc.integer({ min: 1, max: 4096 }),
          async (after, muts, at, spare) => {
            const socket = new FakeSocket();
            let feed: Parameters<NonNullable<Parameters<typeof handshake>[5]>>[0] | undefined;
            const seen: unknown[] = [];
            const box = new Mailbox(1, LIMITS);
            const hooks: Hooks = {
              admit: () => undefined,
              sink: (_peer, t, n) => box.claim(t, n),
              broken: (_peer, e) => seen.push(e),
              closed: (_link, e) => seen.push(e),
              aborted: () => {},
            };
            const id = { jobId: JOB, token: TOKEN, rank: 0, size: 2, nchannels: 1 };
            const linking = handshake(
              socket as unknown as net.Socket,
              id,
              { peer: 1, channel: 0 },
              hooks,
              60_000,
              (f) => (feed = f),
            );
            // Play rank 1 accepting: its HELLO, then the PROOF that answers the link's nonce, then traffic.
            const theirs = decodeHandshake(Kind.hello, socket.written[0].subarray(5));
            if (theirs.type !== 'hello') throw new Error('the link did not open with HELLO');
            const nonce = new Uint8Array(32).fill(9);
            const mac = createHmac('sha256', TOKEN)
              .update(authPayload('accept', theirs.nonce, JOB, 0, 1, 0, nonce))
              .digest();
            const frames: Frame[] = [
              { type: 'hello', version: VERSION, jobId: JOB, rank: 1, size: 2, channel: 0, nchannels: 1, nonce },
              { type: 'proof', mac },
              ...after,
            ];
            let link: Link | undefined;
            let failure: unknown;
            linking.then(
              (l) => (link = l),
              (e) => (failure = e),
            );
            // As a real acceptor does, the rest follows once the link has sent its PROOF (it computes
            // it asynchronously); with mutations the cut may fall elsewhere, and the link holds what
            // comes early until its proofs are ready.
            const bytes = mutate(frames.map(frameBytes), muts);
            const helloBytes = frameBytes(frames[0]).length;
            const room = new Uint8Array(spare);
            const direct = (pieces: Uint8Array[]) =>
              watchAllocations(LIMIT, () =>
                feedDirect({ target: (s) => feed!.target(s), received: (b, n) => feed!.received(b, n) }, pieces, room),
              );
            let largest = direct(split(bytes.subarray(0, helloBytes), at));
            await socket.idle();
            largest = Math.max(largest, direct(split(bytes.subarray(helloBytes), at)));
            await socket.idle();
            socket.emit('close');
            await linking.catch(() => undefined);
            expect(largest).toBeLessThanOrEqual(LIMIT);
            for (const e of [failure, ...seen].filter((x) => x !== undefined)) {
              expectCoded(e, codes);
              // A bug in the reader would surface here as a wrapped TypeError/RangeError.
              expect((e as Error).message).not.toMatch(/TypeError|RangeError/);
            }
            if (muts.length === 0) expect(link).toBeDefined();
            box.fail(new WebcclError('CONNECTION_CLOSED', 'end of the test stream'));
          },
        ),
        fuzzSettings(800),
      );
    },
    DEADLINE,
  );

  it(
    'an accepting link fed a mutated peer stream through data events ends in a link or a coded error',
    async () => {
      const codes = ['PROTOCOL_ERROR', 'AUTH_FAILED', 'CONNECTION_CLOSED'];
      await fc.assert(
        fc.asyncProperty(
          fc.array(mutation, { maxLength: 2 }),
          fc.array(fc.oneof({ weight: 4, arbitrary: data }, { weight: 1, arbitrary: abort }), { maxLength: 4 }),
          fc.array(mutation, { maxLength: 3 }),
          cuts,
          async (helloMuts, after, restMuts, at) => {
            const socket = new FakeSocket();
            const seen: unknown[] = [];
            const box = new Mailbox(0, LIMITS);
            const hooks: Hooks = {
              admit: (peer) => (peer === 0 ? undefined : 'rank not expected'),
              sink: (_peer, t, n) => box.claim(t, n),
              broken: (_peer, e) => seen.push(e),
              closed: (_link, e) => seen.push(e),
              aborted: () => {},
            };
            const id = { jobId: JOB, token: TOKEN, rank: 1, size: 2, nchannels: 1 };
            let link: Link | undefined;
            let failure: unknown;
            const linking = handshake(socket as unknown as net.Socket, id, undefined, hooks, 60_000).then(
              (l) => (link = l),
              (e) => (failure = e),
            );
            // Play rank 0 dialling: HELLO, then (once the link answers with its own) the PROOF over its nonce, then
            // traffic.
            const nonce = new Uint8Array(32).fill(8);
            const feed = (b: Uint8Array) => {
              for (const piece of split(b, at)) socket.emit('data', Buffer.from(piece));
            };
            const largest = watchAllocations(LIMIT, () =>
              feed(
                mutate(
                  [
                    frameBytes({
                      type: 'hello',
                      version: VERSION,
                      jobId: JOB,
                      rank: 0,
                      size: 2,
                      channel: 0,
                      nchannels: 1,
                      nonce,
                    }),
                  ],
                  helloMuts,
                ),
              ),
            );
            const answer =
              socket.written[0]?.[0] === Kind.hello
                ? decodeHandshake(Kind.hello, socket.written[0].subarray(5))
                : undefined;
            let more = 0;
            if (answer?.type === 'hello') {
              await socket.idle(); // the link's proofs are ready
              const mac = createHmac('sha256', TOKEN)
                .update(authPayload('connect', answer.nonce, JOB, 0, 1, 0, nonce))
                .digest();
              const rest = mutate([{ type: 'proof', mac } as Frame, ...after].map(frameBytes), restMuts);
              more = watchAllocations(LIMIT, () => feed(rest));
            }
            await socket.idle();
            socket.emit('close');
            await linking;
            expect(Math.max(largest, more)).toBeLessThanOrEqual(LIMIT);
            for (const e of [failure, ...seen].filter((x) => x !== undefined)) {
              expectCoded(e, codes);
              expect((e as Error).message).not.toMatch(/TypeError|RangeError/);
            }
            if (helloMuts.length === 0 && restMuts.length === 0) expect(link).toBeDefined();
            box.fail(new WebcclError('CONNECTION_CLOSED', 'end of the test stream'));
          },
        ),
        fuzzSettings(800),
      );
    },
    DEADLINE,
  );
});
