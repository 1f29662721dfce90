// Property-based fuzzing of the rendezvous store's wire protocol (store-protocol.ts, the parser
// and decoder store-server.ts and store-client.ts run on every byte from the network): valid
// frames round-trip whatever the cuts in the stream; random and mutated streams, cut at random
// points, are either accepted or refused with PROTOCOL_ERROR, never a TypeError or RangeError,
// and never allocate more than the stated limits; a frame that decodes is the one its message
// encodes to (no two byte strings mean the same request). Then the same streams against a store
// server over loopback (it answers with valid frames and serves on) and against a client facing a
// hostile server (it connects or fails with a code, and so does every request it has pending).
import { createHmac } from 'node:crypto';
import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreClient } from '../../src/bootstrap/nodejs/store-client.js';
import { type StoreServer, startStoreServer } from '../../src/bootstrap/nodejs/store-server.js';
import {
  ACCEPTS,
  authPayload,
  decode,
  encode,
  FrameParser,
  Kind,
  MAX_KEY_BYTES,
  type Message,
  maxBodyBytes,
  VERSION,
} from '../../src/bootstrap/store-protocol.js';
import { WebcclError } from '../../src/core/errors.js';
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

const MAX_VALUE = 1024;
const DEADLINE = longRun ? 3_600_000 : 60_000;

/** Characters that stress UTF-8 handling: multi-byte, NUL, a byte-order mark, a zero-width space. */
const chars = fc.constantFrom(
  'a',
  'b',
  'z',
  '/',
  ':',
  '0',
  ' ',
  'ü',
  'é',
  '€',
  'ключ'[0],
  '😀',
  '\u0000',
  '\uFEFF',
  '\u200B',
  '\uFFFD',
);
const text = (maxLength: number) => fc.array(chars, { maxLength }).map((a) => a.join(''));
const key = fc.oneof(
  { weight: 9, arbitrary: fc.array(chars, { minLength: 1, maxLength: 12 }).map((a) => a.join('')) },
  { weight: 1, arbitrary: fc.constantFrom('k'.repeat(MAX_KEY_BYTES), 'ü'.repeat(MAX_KEY_BYTES / 2)) },
);
const u32 = fc.oneof(fc.constantFrom(0, 1, 0xffffffff), fc.integer({ min: 0, max: 0xffffffff }));
const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 32 });
const value = fc.oneof(
  { weight: 9, arbitrary: fc.uint8Array({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom(new Uint8Array(MAX_VALUE).fill(0xab), new Uint8Array(MAX_VALUE - 1)) },
);
const i64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });

const message: fc.Arbitrary<Message> = fc.oneof(
  fc.record({ type: fc.constant('hello' as const), version: fc.constant(VERSION), maxValueBytes: u32, nonce: bytes32 }),
  fc.record({ type: fc.constant('auth' as const), jobId: text(60), nonce: bytes32, mac: bytes32 }),
  fc.record({ type: fc.constant('authOk' as const), mac: bytes32 }),
  fc.record({ type: fc.constant('authFail' as const), reason: fc.nat(255) }),
  fc.record({ type: fc.constant('protocolError' as const), message: text(200) }),
  fc.record({ type: fc.constant('set' as const), id: u32, key, value }),
  fc.record({ type: fc.constant('get' as const), id: u32, key, timeoutMs: u32 }),
  fc.record({ type: fc.constant('add' as const), id: u32, key, delta: i64 }),
  fc.record({ type: fc.constant('wait' as const), id: u32, keys: fc.array(key, { maxLength: 6 }), timeoutMs: u32 }),
  fc.record({
    type: fc.constant('compareSet' as const),
    id: u32,
    key,
    expected: fc.option(value, { nil: null }),
    desired: value,
  }),
  fc.record({ type: fc.constant('delete' as const), id: u32, key }),
  fc.record({ type: fc.constant('numKeys' as const), id: u32 }),
  fc.record({ type: fc.constant('ok' as const), id: u32 }),
  fc.record({ type: fc.constant('value' as const), id: u32, value: fc.option(value, { nil: null }) }),
  fc.record({ type: fc.constant('number' as const), id: u32, value: i64 }),
  fc.record({ type: fc.constant('timeout' as const), id: u32, keys: fc.array(key, { maxLength: 6 }) }),
  fc.record({ type: fc.constant('error' as const), id: u32, message: text(200) }),
);

const frameOf = (m: Message) => concatAll(encode(m));
const ALL_KINDS = Object.values(Kind);
/** The phases a parser runs in, as the server and the client set them. */
const PHASES = [
  ACCEPTS.serverHandshake,
  ACCEPTS.serverReady,
  ACCEPTS.clientHandshake,
  ACCEPTS.clientReady,
  ALL_KINDS,
] as const;
/** The largest body any accepted kind may announce: no allocation may exceed it. */
const limitOf = (kinds: readonly number[]) => Math.max(...kinds.map((k) => maxBodyBytes(k, MAX_VALUE)));

/**
 * Feeds `pieces` to a parser in `kinds`' phase, decoding each frame as the server and the client
 * do, and checking that each accepted frame is exactly its message's encoding. Returns the
 * messages and the error that ended the stream, if any.
 */
function parse(kinds: readonly number[], pieces: Uint8Array[]): { got: Message[]; error?: unknown; largest: number } {
  const got: Message[] = [];
  let error: unknown;
  const p = new FrameParser(MAX_VALUE, kinds, (kind, body) => {
    const m = decode(kind, body, MAX_VALUE);
    const again = frameOf(m);
    const wire = concatAll([
      Uint8Array.of(
        kind,
        body.length & 0xff,
        (body.length >>> 8) & 0xff,
        (body.length >>> 16) & 0xff,
        body.length >>> 24,
      ),
      body,
    ]);
    if (!(m.type === 'hello' && m.version !== VERSION) && !Buffer.from(again).equals(wire)) {
      throw new Error(
        `a ${m.type} frame decoded, but its message encodes to other bytes: ${Buffer.from(wire).toString('hex').slice(0, 400)}`,
      );
    }
    got.push(m);
  });
  const largest = watchAllocations(limitOf(kinds), () => {
    try {
      for (const piece of pieces) p.push(piece);
    } catch (e) {
      error = e;
    }
  });
  return { got, error, largest };
}

describe('store protocol fuzzing', () => {
  it(
    'valid frames round-trip through the parser whatever the cuts in the stream',
    () => {
      fc.assert(
        fc.property(fc.array(message, { minLength: 1, maxLength: 8 }), cuts, (ms, at) => {
          const { got, error } = parse(ALL_KINDS, split(concatAll(ms.map(frameOf)), at));
          expect(error).toBeUndefined();
          expect(got).toEqual(ms);
        }),
        fuzzSettings(1000),
      );
    },
    DEADLINE,
  );

  it(
    'mutated frames, cut anywhere, are accepted or refused with PROTOCOL_ERROR within the limits',
    () => {
      fc.assert(
        fc.property(
          fc.array(message, { minLength: 1, maxLength: 4 }),
          fc.array(mutation, { minLength: 1, maxLength: 4 }),
          cuts,
          fc.constantFrom(...PHASES),
          (ms, muts, at, kinds) => {
            const { error, largest } = parse(kinds, split(mutate(ms.map(frameOf), muts), at));
            if (error !== undefined) expectCoded(error, ['PROTOCOL_ERROR']);
            expect(largest).toBeLessThanOrEqual(limitOf(kinds));
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
      const kindByte = fc.oneof(fc.constantFrom(...ALL_KINDS), fc.nat(255));
      const stream = fc
        .array(fc.tuple(kindByte, fc.uint8Array({ maxLength: 4 }), fc.uint8Array({ maxLength: 48 })), {
          minLength: 1,
          maxLength: 4,
        })
        .map((fs) => concatAll(fs.flatMap(([k, len, rest]) => [Uint8Array.of(k), len, rest])));
      fc.assert(
        fc.property(
          fc.oneof(stream, fc.uint8Array({ maxLength: 96 })),
          cuts,
          fc.constantFrom(...PHASES),
          (b, at, kinds) => {
            const { error, largest } = parse(kinds, split(b, at));
            if (error !== undefined) expectCoded(error, ['PROTOCOL_ERROR']);
            expect(largest).toBeLessThanOrEqual(limitOf(kinds));
          },
        ),
        fuzzSettings(1500),
      );
    },
    DEADLINE,
  );

  it('keeps what the fuzzers found fixed: a leading U+FEFF stays in a key, a presence flag is 0 or 1', () => {
    // The decoder dropped a leading byte-order mark: "\uFEFFk" arrived as "k", another key.
    for (const m of [
      { type: 'set', id: 1, key: '\uFEFFk', value: Uint8Array.of(1) },
      { type: 'auth', jobId: '\uFEFFjob', nonce: new Uint8Array(32), mac: new Uint8Array(32) },
    ] as Message[]) {
      const { got, error } = parse(ALL_KINDS, [frameOf(m)]);
      expect(error).toBeUndefined();
      expect(got).toEqual([m]);
    }
    // A flag of 5 was read as "present": two encodings of one answer.
    const value = frameOf({ type: 'value', id: 7, value: Uint8Array.of(1, 2) });
    value[5 + 4] = 5;
    const compareSet = frameOf({ type: 'compareSet', id: 7, key: 'k', expected: null, desired: Uint8Array.of(1) });
    compareSet[5 + 4 + 2 + 1] = 2;
    for (const [kinds, b] of [
      [ACCEPTS.clientReady, value],
      [ACCEPTS.serverReady, compareSet],
    ] as const) {
      const { got, error } = parse(kinds, [b]);
      expect(got).toEqual([]);
      expect(error).toMatchObject({ code: 'PROTOCOL_ERROR' });
    }
  });

  it('a closed parser ignores everything after the frame that broke a limit', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), cuts, (rest, at) => {
        let frames = 0;
        const p = new FrameParser(MAX_VALUE, ACCEPTS.serverReady, () => frames++);
        expect(() => p.push(Uint8Array.of(Kind.set, 0xff, 0xff, 0xff, 0xff))).toThrow(
          expect.objectContaining({ code: 'PROTOCOL_ERROR' }),
        );
        for (const piece of split(concatAll([frameOf({ type: 'numKeys', id: 1 }), rest]), at)) p.push(piece);
        expect(frames).toBe(0);
      }),
      fuzzSettings(100),
    );
  });
});

const TOKEN = 'fuzz-token';
const JOB = 'fuzz-job';
const hmac = (p: Uint8Array) => createHmac('sha256', TOKEN).update(p).digest();
const requests = fc
  .array(
    message.filter((m) => (ACCEPTS.serverReady as readonly number[]).includes(Kind[m.type])),
    { minLength: 1, maxLength: 4 },
  )
  // A request that waits without a deadline would hold the connection until the test ends it: give it a short one.
  .map((ms) => ms.map((m) => ('timeoutMs' in m ? { ...m, timeoutMs: m.timeoutMs % 50 } : m)));

/** Until `socket` closes or has been quiet for `ms`. */
function settle(socket: net.Socket, ms: number): Promise<void> {
  return new Promise((resolve) => {
    let timer = setTimeout(resolve, ms);
    socket.on('data', () => {
      clearTimeout(timer);
      timer = setTimeout(resolve, ms);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

describe('store server fuzzing over loopback', () => {
  let server: StoreServer;
  const rejects: string[] = [];
  beforeAll(async () => {
    server = await startStoreServer({
      token: TOKEN,
      jobId: JOB,
      maxValueBytes: MAX_VALUE,
      onReject: (r) => rejects.push(r.kind),
    });
  });
  afterAll(() => server.close());

  it(
    'serves or refuses mutated requests, before and after authenticating, answers only with valid frames, and serves on',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          requests,
          fc.array(mutation, { maxLength: 3 }),
          cuts,
          fc.boolean(),
          async (ms, muts, at, authenticate) => {
            const socket = net.connect({ host: '127.0.0.1', port: server.port });
            socket.on('error', () => {});
            const answers: Message[] = [];
            let bad: unknown;
            const hello = new Promise<Message>((resolve) => {
              const p = new FrameParser(MAX_VALUE, [...ACCEPTS.clientHandshake, ...ACCEPTS.clientReady], (k, b) => {
                const m = decode(k, b, MAX_VALUE);
                if (m.type === 'hello') resolve(m);
                else answers.push(m);
              });
              socket.on('data', (d: Buffer) => {
                try {
                  p.push(d);
                } catch (e) {
                  bad = e;
                }
              });
            });
            const h = await hello;
            if (h.type !== 'hello') throw new Error('no HELLO');
            const frames = ms.map(frameOf);
            if (authenticate) {
              const nonce = new Uint8Array(32).fill(3);
              frames.unshift(
                frameOf({ type: 'auth', jobId: JOB, nonce, mac: hmac(authPayload('client', h.nonce, JOB, nonce)) }),
              );
            }
            for (const piece of split(mutate(frames, muts), at)) {
              if (socket.destroyed) break;
              socket.write(piece);
              await new Promise((r) => setImmediate(r));
            }
            await settle(socket, 60);
            socket.destroy();
            expect(bad).toBeUndefined();
            if (muts.length === 0 && authenticate) expect(answers.map((a) => a.type)).not.toContain('protocolError');
          },
        ),
        fuzzSettings(60, 0.01),
      );
      expect(new Set(rejects)).toEqual(new Set(rejects.filter((k) => k === 'auth' || k === 'protocol')));
      const c = await StoreClient.connect({
        host: '127.0.0.1',
        port: server.port,
        token: TOKEN,
        jobId: JOB,
        timeoutMs: 10_000,
        maxValueBytes: MAX_VALUE,
      });
      await c.set('after', 'fuzz');
      expect(new TextDecoder().decode(await c.get('after'))).toBe('fuzz');
      await c.close();
    },
    DEADLINE,
  );
});

/** A socket that records what the client writes; the test plays the server. */
class FakeSocket extends EventEmitter {
  destroyed = false;
  /** The client pauses reading while it computes its proofs, and resumes once AUTH is sent. */
  paused = false;
  readonly written: Uint8Array[] = [];
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  /** Until the client has finished what it computes asynchronously (or has given up). */
  idle(): Promise<void> {
    return until(() => !this.paused || this.destroyed);
  }
  write(b: Uint8Array): boolean {
    this.written.push(b);
    return true;
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }
}

describe('store client fuzzing', () => {
  it('keeps what the fuzzer found fixed: a request answered with the wrong kind fails (it waited forever)', async () => {
    const socket = new FakeSocket();
    const serverNonce = new Uint8Array(32).fill(4);
    const connecting = StoreClient.handshake(socket as unknown as net.Socket, {
      token: new TextEncoder().encode(TOKEN),
      jobId: JOB,
      where: 'fake:1',
      maxValue: MAX_VALUE,
      timeoutMs: 60_000,
    });
    socket.emit(
      'data',
      Buffer.from(frameOf({ type: 'hello', version: VERSION, maxValueBytes: MAX_VALUE, nonce: serverNonce })),
    );
    await socket.idle();
    const auth = decode(Kind.auth, concatAll(socket.written).subarray(5), MAX_VALUE);
    if (auth.type !== 'auth') throw new Error('no AUTH');
    socket.emit(
      'data',
      Buffer.from(frameOf({ type: 'authOk', mac: hmac(authPayload('server', auth.nonce, JOB, serverNonce)) })),
    );
    const c = await connecting;
    const got = c.get('k').then(
      () => 'resolved',
      (e: WebcclError) => e.code,
    );
    socket.emit('data', Buffer.from(frameOf({ type: 'ok', id: 1 })));
    const first = await Promise.race([got, new Promise((r) => setTimeout(() => r('still pending'), 2000))]);
    socket.destroy();
    expect(first).toBe('PROTOCOL_ERROR');
  });

  it(
    'a client fed a mutated server stream ends connected or with a coded error, and fails its requests with codes',
    async () => {
      const serverNonce = new Uint8Array(32).fill(4);
      const answers = fc
        .array(
          message.filter((m) => (ACCEPTS.clientReady as readonly number[]).includes(Kind[m.type])),
          { maxLength: 4 },
        )
        .map((ms) => ms.map((m) => ('id' in m ? { ...m, id: m.id % 4 } : m)));
      await fc.assert(
        fc.asyncProperty(
          fc.array(mutation, { maxLength: 2 }),
          fc.array(mutation, { maxLength: 3 }),
          answers,
          cuts,
          async (helloMuts, restMuts, later, at) => {
            const socket = new FakeSocket();
            const o = {
              token: new TextEncoder().encode(TOKEN),
              jobId: JOB,
              where: 'fake:1',
              maxValue: MAX_VALUE,
              timeoutMs: 60_000,
            };
            let outcome: unknown;
            const connecting = StoreClient.handshake(socket as unknown as net.Socket, o).then(
              (c) => (outcome = c),
              (e) => (outcome = e),
            );
            const feed = (b: Uint8Array) => {
              for (const piece of split(b, at)) if (!socket.destroyed) socket.emit('data', Buffer.from(piece));
            };
            feed(
              mutate(
                [frameOf({ type: 'hello', version: VERSION, maxValueBytes: MAX_VALUE, nonce: serverNonce })],
                helloMuts,
              ),
            );
            await socket.idle();
            const auth = socket.written.length
              ? decode(Kind.auth, concatAll(socket.written).subarray(5), MAX_VALUE)
              : undefined;
            const pending: Promise<unknown>[] = [];
            if (auth?.type === 'auth') {
              const ok = frameOf({ type: 'authOk', mac: hmac(authPayload('server', auth.nonce, JOB, serverNonce)) });
              feed(mutate([ok], restMuts));
              await Promise.resolve();
              if (outcome instanceof StoreClient) {
                for (const k of ['a', 'b', 'c'])
                  pending.push(
                    outcome.get(k).then(
                      () => undefined,
                      (e) => e,
                    ),
                  );
                feed(mutate(later.map(frameOf), restMuts));
              }
            }
            socket.destroy();
            await connecting;
            const errors = [outcome, ...(await Promise.all(pending))].filter(
              (e) => e !== undefined && !(e instanceof StoreClient),
            );
            for (const e of errors) {
              // A close before the handshake ends is retried by connect() until its deadline (then CONNECT_FAILED).
              if (!WebcclError.is(e) && (e as Error).constructor.name === 'Retry') continue;
              expectCoded(e, [
                'PROTOCOL_ERROR',
                'AUTH_FAILED',
                'CONNECTION_CLOSED',
                'STORE_TIMEOUT',
                'INVALID_ARGUMENT',
              ]);
            }
            if (helloMuts.length === 0 && restMuts.length === 0) expect(outcome).toBeInstanceOf(StoreClient);
          },
        ),
        { ...fuzzSettings(500), timeout: 5000 },
      );
    },
    DEADLINE,
  );
});
