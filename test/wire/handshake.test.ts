// The wire module's one handshake (src/wire/auth.ts) and its limits, in process: the proofs on
// their own (right and wrong token, wrong job, the exact bytes both protocols have always put on
// the wire), then the link handshake built on them (wire/link-handshake.ts) over a pair of
// in-memory pipes, no socket in sight: both ends authenticated, or both refused with the reason,
// a frame over its limit refused before anything is allocated for it, a handshake cut short
// ended by its deadline; and once through the TCP transport's Node adapter (link.ts).
import { createHmac } from 'node:crypto';
import type * as net from 'node:net';
import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AUTH_LABEL as STORE_LABEL, authPayload as storePayload } from '../../src/bootstrap/store-protocol.js';
import type { WebcclError } from '../../src/core/errors.js';
import { type Hooks, handshake } from '../../src/transport/tcp/nodejs/link.js';
import { AUTH_FAIL_REASONS, AuthFail, Challenge, Refused } from '../../src/wire/auth.js';
import { HEADER_BYTES, u32 } from '../../src/wire/bytes.js';
import { FrameParser } from '../../src/wire/frames.js';
import { sameBytes } from '../../src/wire/hmac.js';
import {
  authContext,
  Kind,
  AUTH_LABEL as LINK_LABEL,
  authPayload as linkPayload,
  maxHandshakeBody,
} from '../../src/wire/link-frames.js';
import { type Identity, type LinkHooks, type Opening, openLink, type Pipe } from '../../src/wire/link-handshake.js';
import { checkSecrets, hostPort } from '../../src/wire/secrets.js';
import { watchAllocations } from '../helpers/fuzz.js';

const enc = (s: string) => new TextEncoder().encode(s);
const TOKEN = enc('the-token');
const JOB = 'job-1';

/** What a refusal or a failed promise carries: its code and details, or 'resolved'. */
const outcome = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved' as const,
    (e: WebcclError) => ({ code: e.code, reason: e.details.reason }),
  );

describe('Challenge: the proofs of wire/auth.ts', () => {
  it('two ends with the right token each compute the proof the other expects', async () => {
    const client = new Challenge(TOKEN, JOB, STORE_LABEL, ['client', 'server']);
    const server = new Challenge(TOKEN, JOB, STORE_LABEL, ['server', 'client']);
    const [c, s] = await Promise.all([client.proofs(server.nonce), server.proofs(client.nonce)]);
    expect(sameBytes(c.mine, s.theirs) && sameBytes(s.mine, c.theirs)).toBe(true);
    expect(() => Challenge.check(s.theirs, c.mine, 'the client')).not.toThrow();
    // The two directions sign different bytes: a proof cannot be sent back as the answer.
    expect(sameBytes(c.mine, s.mine)).toBe(false);
  });

  it('signs exactly the bytes both protocols signed before (what is on the wire is unchanged)', async () => {
    const a = new Challenge(TOKEN, JOB, STORE_LABEL, ['client', 'server']);
    const peer = new Uint8Array(32).fill(7);
    const p = await a.proofs(peer);
    const hmac = (b: Uint8Array) => new Uint8Array(createHmac('sha256', TOKEN).update(b).digest());
    expect(p.mine).toEqual(hmac(storePayload('client', peer, JOB, a.nonce)));
    expect(p.theirs).toEqual(hmac(storePayload('server', a.nonce, JOB, peer)));
    const l = new Challenge(TOKEN, JOB, LINK_LABEL, ['accept', 'connect']);
    const q = await l.proofs(peer, authContext(0, 1, 2));
    expect(q.mine).toEqual(hmac(linkPayload('accept', peer, JOB, 0, 1, 2, l.nonce)));
    expect(q.theirs).toEqual(hmac(linkPayload('connect', l.nonce, JOB, 0, 1, 2, peer)));
  });

  it('a wrong token is refused with the token reason; a wrong job with the job reason', async () => {
    const us = new Challenge(TOKEN, JOB, STORE_LABEL, ['server', 'client']);
    const them = new Challenge(enc('another-token'), JOB, STORE_LABEL, ['client', 'server']);
    const [ours, theirs] = await Promise.all([us.proofs(them.nonce), them.proofs(us.nonce)]);
    const refusal = (f: () => void) => {
      try {
        f();
        return undefined;
      } catch (e) {
        return e instanceof Refused ? [e.reason, AUTH_FAIL_REASONS[e.reason]] : e;
      }
    };
    expect(refusal(() => Challenge.check(ours.theirs, theirs.mine, 'the client'))).toEqual([
      AuthFail.token,
      'token mismatch (the HMAC proof did not verify)',
    ]);
    expect(refusal(() => us.checkJob('job-2'))).toEqual([AuthFail.jobId, 'job id mismatch']);
    expect(refusal(() => us.checkJob(JOB))).toBeUndefined();
  });

  it("an end's own proof sent back to it is refused, even when the peer echoed its nonce (the role is in the signed bytes)", async () => {
    const server = new Challenge(TOKEN, JOB, STORE_LABEL, ['server', 'client']);
    const client = new Challenge(TOKEN, JOB, STORE_LABEL, ['client', 'server']);
    const s = await server.proofs(client.nonce);
    expect(() => Challenge.check(s.theirs, s.mine, 'the client')).toThrow(Refused);
    // A peer without the token that sends the server's own nonce back as its nonce, then the
    // server's proof as its answer: the two proofs still differ, by role.
    const echoed = await server.proofs(server.nonce);
    expect(() => Challenge.check(echoed.theirs, echoed.mine, 'the client')).toThrow(Refused);
  });

  it('draws a fresh nonce for every exchange', () => {
    const a = new Challenge(TOKEN, JOB, STORE_LABEL, ['client', 'server']);
    const b = new Challenge(TOKEN, JOB, STORE_LABEL, ['client', 'server']);
    expect(a.nonce.length).toBe(32);
    expect(sameBytes(a.nonce, b.nonce)).toBe(false);
  });

  it('checkSecrets and hostPort refuse what no handshake could use', () => {
    expect(checkSecrets('t', 'j')).toEqual(enc('t'));
    for (const [t, j] of [
      ['', 'j'],
      ['t', ''],
      ['t', 'x'.repeat(257)],
    ] as const) {
      expect(() => checkSecrets(t, j)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
    expect(hostPort('::1', 5)).toBe('[::1]:5');
  });
});

describe('FrameParser: limits checked before allocation', () => {
  const rules = { maxBody: (k: number) => (k === 1 ? 64 : -1), name: (k: number) => `kind ${k}` };

  it('refuses a frame announcing more than its limit without allocating its body', () => {
    const header = new Uint8Array(HEADER_BYTES);
    header[0] = 1;
    header.set(u32(0xffffffff), 1);
    const p = new FrameParser(rules, () => {
      throw new Error('no frame should arrive');
    });
    let error: unknown;
    const largest = watchAllocations(1024, () => {
      try {
        p.push(header);
      } catch (e) {
        error = e;
      }
    });
    expect(error).toMatchObject({ code: 'PROTOCOL_ERROR' });
    expect(largest).toBeLessThanOrEqual(64);
    // Closed after the violation: nothing further is parsed.
    expect(() => p.push(new Uint8Array([1, 0, 0, 0, 0]))).not.toThrow();
  });

  it('holds the bytes behind a frame while its owner checks it, then parses them in order', () => {
    const got: number[] = [];
    const p: FrameParser = new FrameParser(rules, (_k, body) => {
      got.push(body[0]);
      if (body[0] === 1) p.hold();
    });
    const f = (n: number) => [1, 1, 0, 0, 0, n];
    p.push(Uint8Array.of(...f(1), ...f(2), 1, 1));
    p.push(Uint8Array.of(0, 0, 0, 3));
    expect(got).toEqual([1]);
    p.release();
    expect(got).toEqual([1, 2, 3]);
  });

  it('refuses a kind not expected here, and passes a frame at its limit whole', () => {
    const got: number[] = [];
    const p = new FrameParser(rules, (_k, body) => got.push(body.length));
    p.push(Uint8Array.of(1, 64, 0, 0, 0, ...new Uint8Array(64)));
    expect(got).toEqual([64]);
    expect(() => p.push(Uint8Array.of(2, 0, 0, 0, 0))).toThrow(expect.objectContaining({ code: 'PROTOCOL_ERROR' }));
  });
});

/**
 * One end of an in-memory connection, as a carrier gives it to openLink: what one end writes
 * reaches the other on a later turn of the event loop (in order); a paused end queues what
 * arrives; ending or destroying one end closes both, after what was written has arrived.
 */
class MemoryPipe implements Pipe {
  destroyed = false;
  private paused = false;
  private queue: Uint8Array[] = [];
  peer!: MemoryPipe;
  opening?: Opening<unknown>;
  write(bytes: Uint8Array): void {
    if (this.destroyed) return;
    const copy = bytes.slice();
    setTimeout(() => this.peer.arrive(copy), 0);
  }
  end(bytes: Uint8Array): void {
    this.write(bytes);
    setTimeout(() => this.destroy(), 0);
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.opening?.closed();
    setTimeout(() => this.peer.destroy(), 0);
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
    for (const b of this.queue.splice(0)) this.arrive(b);
  }
  /** A write of the peer arrives. */
  arrive(bytes: Uint8Array): void {
    if (this.destroyed) return;
    if (this.paused) this.queue.push(bytes);
    else this.opening?.received(bytes, bytes.length);
  }
}

function pipePair(): [MemoryPipe, MemoryPipe] {
  const a = new MemoryPipe();
  const b = new MemoryPipe();
  a.peer = b;
  b.peer = a;
  return [a, b];
}

const hooks = (): LinkHooks<string> => ({
  admit: () => undefined,
  sink: () => ({ skip: true }),
  broken: () => {},
  closed: () => {},
  aborted: () => {},
});
const identity = (rank: number, o: Partial<Identity> = {}): Identity => ({
  jobId: JOB,
  token: TOKEN,
  rank,
  size: 2,
  nchannels: 1,
  ...o,
});
const DEADLINE = 30_000;

/** Opens one end of a link on `pipe` (the link it makes is the string "rank R channel C"). */
function open(
  pipe: MemoryPipe,
  id: Identity,
  expect: { peer: number; channel: number } | undefined,
  timeoutMs = DEADLINE,
): Promise<string> {
  const opening = openLink(pipe, id, expect, hooks(), timeoutMs, (peer, channel) => `rank ${peer} channel ${channel}`);
  pipe.opening = opening;
  return opening.linked;
}

/** Rank 0 dials rank 1 over an in-memory pair; resolves with both ends' outcomes. */
async function link(dialler: Partial<Identity>, acceptor: Partial<Identity>) {
  const [a, b] = pipePair();
  const both = await Promise.all([
    outcome(open(a, identity(0, dialler), { peer: 1, channel: 0 })),
    outcome(open(b, identity(1, acceptor), undefined)),
  ]);
  a.destroy();
  return both;
}

describe('openLink (wire/link-handshake.ts) over an in-memory pipe pair', () => {
  it('right token: both ends authenticated, each knowing the other', async () => {
    const [a, b] = pipePair();
    expect(await Promise.all([open(a, identity(0), { peer: 1, channel: 0 }), open(b, identity(1), undefined)])).toEqual(
      ['rank 1 channel 0', 'rank 0 channel 0'],
    );
    a.destroy();
  });

  it('wrong token: AUTH_FAILED on both ends, with the token reason', async () => {
    const refused = { code: 'AUTH_FAILED', reason: AuthFail.token };
    expect(await link({ token: enc('not-the-token') }, {})).toEqual([refused, refused]);
  });

  it('wrong job id: AUTH_FAILED on both ends, with the job reason', async () => {
    const refused = { code: 'AUTH_FAILED', reason: AuthFail.jobId };
    expect(await link({ jobId: 'job-2' }, {})).toEqual([refused, refused]);
  });

  it('a HELLO announcing more than its limit is refused (PROTOCOL_ERROR) before its body is read', async () => {
    const [a, b] = pipePair();
    const accepted = outcome(open(b, identity(1), undefined));
    a.write(Uint8Array.of(Kind.hello, ...u32(maxHandshakeBody(Kind.hello) + 1)));
    expect(await accepted).toEqual({ code: 'PROTOCOL_ERROR', reason: undefined });
    a.destroy();
  });

  it('a handshake cut short (half a HELLO, then silence) ends at its deadline with CONNECT_FAILED', async () => {
    const [a, b] = pipePair();
    const accepted = outcome(open(b, identity(1), undefined, 300));
    a.write(Uint8Array.of(Kind.hello, ...u32(maxHandshakeBody(Kind.hello)), 1, 2, 3));
    expect(await accepted).toEqual({ code: 'CONNECT_FAILED', reason: undefined });
    a.destroy();
  });
});

describe('the TCP link on it, over in-memory Node duplex streams', () => {
  /** Two in-memory stream ends: what one writes the other reads; destroying one closes both. */
  function duplexPair(): [Duplex, Duplex] {
    const ends: Duplex[] = [];
    const make = (other: () => Duplex) =>
      new Duplex({
        read() {},
        write(chunk, _encoding, done) {
          other().push(chunk);
          done();
        },
        final(done) {
          other().push(null);
          done();
        },
        destroy(err, done) {
          other().destroy();
          done(err);
        },
      });
    ends.push(
      make(() => ends[1]),
      make(() => ends[0]),
    );
    return [ends[0], ends[1]];
  }
  const tcpHooks = (): Hooks => ({ ...hooks(), closed: () => {} });

  it('right token links both ends; a wrong token is AUTH_FAILED on both with the reason', async () => {
    for (const [token, want] of [
      [TOKEN, 'resolved'],
      [enc('wrong'), { code: 'AUTH_FAILED', reason: AuthFail.token }],
    ] as const) {
      const [a, b] = duplexPair();
      const dialled = handshake(
        a as unknown as net.Socket,
        identity(0, { token }),
        { peer: 1, channel: 0 },
        tcpHooks(),
        DEADLINE,
      );
      const accepted = handshake(b as unknown as net.Socket, identity(1), undefined, tcpHooks(), DEADLINE);
      expect(await Promise.all([outcome(dialled), outcome(accepted)])).toEqual([want, want]);
      a.destroy();
    }
  });
});
