// The handshake that opens a connection between two ranks (browser-safe): the frames of
// link-frames.ts over any byte pipe, with the mutual proof of the job's token (auth.ts) before a
// single data frame is accepted. The connector (the end that dialled) says HELLO; the acceptor
// checks it (version, job, world size, channel, whether the rank may connect) and answers with
// its own; each then sends a PROOF over both nonces, the ranks and the channel, the connector
// first. A refusal is a WebcclError on this end and a REFUSE frame, naming it, on the other.
// Once linked, the same reader carries DATA to `sink` and an ABORT to `aborted`.
import { WebcclError } from '../core/errors.js';
import { AUTH_FAIL_REASONS, Challenge, type Proofs, Refused } from './auth.js';
import {
  AUTH_LABEL,
  authContext,
  encodeHandshake,
  type FrameTag,
  type Handshake,
  type Hello,
  Refusal,
  refusalCode,
  VERSION,
} from './link-frames.js';
import { FrameReader, type Sink } from './link-reader.js';

/** Who this end is: the job (and its token), its rank, and the shape of the mesh. */
export interface Identity {
  jobId: string;
  token: Uint8Array;
  rank: number;
  size: number;
  nchannels: number;
}

/** What the handshake needs of a connection, whatever carries it. */
export interface Pipe {
  readonly destroyed: boolean;
  write(bytes: Uint8Array): void;
  /** Sends `bytes` last and closes gracefully, so that they reach the peer. */
  end(bytes: Uint8Array): void;
  destroy(): void;
  /** Stops and restarts delivery of incoming bytes (while the proofs are computed). */
  pause(): void;
  resume(): void;
}

/** What the transport tells the handshake, and hears from the link after it. */
export interface LinkHooks<L> {
  /** Why `peer` may not connect on `channel` ('duplicate', or another reason), or undefined. */
  admit(peer: number, channel: number): string | undefined;
  sink(peer: number, tag: FrameTag, length: number): Sink;
  broken(peer: number, e: WebcclError): void;
  /** The peer closed this connection (after everything it sent on it has arrived). */
  closed(link: L, e: WebcclError): void;
  /** The peer failed and says why before it closes. */
  aborted(peer: number, message: string): void;
}

/** The handshake's end of the pipe: the carrier feeds it what it reads, and tells it of the close. */
export interface Opening<L> {
  /** Resolves with the link (made by `made` the moment the peer is proven). */
  linked: Promise<L>;
  /** Where the next read should land (see FrameReader.target). */
  target(spare: Uint8Array): Uint8Array;
  received(buf: Uint8Array, n: number): void;
  /** The pipe closed. */
  closed(): void;
  /** The carrier found a violation below the frames (a WebSocket message over its limit, a text one). */
  violated(message: string): void;
}

const REFUSAL_TEXT: Record<number, string> = {
  [Refusal.jobId]: AUTH_FAIL_REASONS[Refusal.jobId],
  [Refusal.token]: AUTH_FAIL_REASONS[Refusal.token],
  [Refusal.rank]: 'rank not expected',
  [Refusal.duplicate]: 'duplicate connection',
  [Refusal.version]: 'protocol version mismatch',
  [Refusal.world]: 'world size or channel count mismatch',
};

/**
 * Opens a link over `pipe`. `expect` is the peer we dialled (connector) or undefined (acceptor,
 * which learns the peer from HELLO and asks `admit`). `linked` rejects with AUTH_FAILED /
 * PROTOCOL_ERROR / CONNECTION_CLOSED / CONNECT_FAILED (after telling the peer why); after it
 * resolves, the link's failures go to hooks.broken and its close to hooks.closed.
 */
export function openLink<L>(
  pipe: Pipe,
  id: Identity,
  expect: { peer: number; channel: number } | undefined,
  hooks: LinkHooks<L>,
  timeoutMs: number,
  made: (peer: number, channel: number, reader: FrameReader) => L,
): Opening<L> {
  const admit = hooks.admit;
  const connector = expect !== undefined;
  const challenge = new Challenge(
    id.token,
    id.jobId,
    AUTH_LABEL,
    connector ? ['connect', 'accept'] : ['accept', 'connect'],
  );
  const own = (channel: number): Hello => ({
    version: VERSION,
    jobId: id.jobId,
    rank: id.rank,
    size: id.size,
    channel,
    nchannels: id.nchannels,
    nonce: challenge.nonce,
  });
  let peer: Hello | undefined;
  const who = () =>
    peer
      ? `rank ${peer.rank} (channel ${peer.channel})`
      : expect
        ? `rank ${expect.peer} (channel ${expect.channel})`
        : 'a peer';
  /** Both proofs of this link, bound to who dialled, who accepted, and the channel. */
  const proofs = (p: Hello) =>
    challenge.proofs(
      p.nonce,
      connector ? authContext(id.rank, p.rank, p.channel) : authContext(p.rank, id.rank, p.channel),
    );

  let finished = false;
  let linked = false; // the handshake succeeded: failures now break the link
  let link: L | undefined;
  /** Both proofs, once computed: ours to send, and the peer's to check. */
  let mine: Proofs | undefined;
  let settle!: { resolve: (l: L) => void; reject: (e: WebcclError) => void };
  const done = new Promise<L>((resolve, reject) => (settle = { resolve, reject }));

  const finish = (e?: WebcclError) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    if (e) {
      reader.close();
      pipe.destroy();
      settle.reject(e);
    } else settle.resolve(link!);
  };
  const refuse = (reason: number, detail: string) => {
    if (!pipe.destroyed)
      pipe.end(encodeHandshake({ type: 'refuse', reason, message: `${REFUSAL_TEXT[reason]}: ${detail}` }));
    finished = true; // the pipe ends gracefully so the REFUSE reaches the peer
    clearTimeout(timer);
    reader.close();
    const t: { unref?: () => void } = setTimeout(() => pipe.destroy(), 1000);
    t.unref?.();
    settle.reject(
      new WebcclError(refusalCode(reason), `refused ${who()}: ${REFUSAL_TEXT[reason]}: ${detail}`, {
        peer: peer?.rank,
        reason,
      }),
    );
  };
  const checkHello = (h: Hello): void => {
    peer = h;
    if (h.version !== VERSION) throw new Refused(Refusal.version, `we speak version ${VERSION}, the peer ${h.version}`);
    challenge.checkJob(h.jobId);
    if (h.size !== id.size || h.nchannels !== id.nchannels)
      throw new Refused(
        Refusal.world,
        `we have size ${id.size} x ${id.nchannels} channels, the peer ${h.size} x ${h.nchannels}`,
      );
    if (connector && (h.rank !== expect.peer || h.channel !== expect.channel))
      throw new Refused(
        Refusal.rank,
        `dialled rank ${expect.peer} channel ${expect.channel}, reached rank ${h.rank} channel ${h.channel}`,
      );
    if (!connector) {
      if (h.channel >= id.nchannels)
        throw new Refused(Refusal.rank, `channel ${h.channel} is not in 0..${id.nchannels - 1}`);
      const why = admit(h.rank, h.channel);
      if (why)
        throw new Refused(
          why === 'duplicate' ? Refusal.duplicate : Refusal.rank,
          `rank ${h.rank} channel ${h.channel}: ${why}`,
        );
    }
  };
  const onFrame = (m: Handshake): void => {
    if (m.type === 'abort') {
      if (!linked) throw new WebcclError('PROTOCOL_ERROR', `an ABORT from ${who()} during the handshake`);
      return hooks.aborted(peer!.rank, m.message);
    }
    if (m.type === 'refuse') {
      return finish(
        new WebcclError(refusalCode(m.reason), `${who()} refused the connection: ${m.message}`, {
          peer: peer?.rank ?? expect?.peer,
          reason: m.reason,
        }),
      );
    }
    if (!peer) {
      if (m.type !== 'hello') throw new WebcclError('PROTOCOL_ERROR', `${m.type} before HELLO`);
      checkHello(m);
      if (!connector) pipe.write(encodeHandshake({ type: 'hello', ...own(m.channel) }));
      // Both proofs are computed now, asynchronously; what the peer sends meanwhile waits in
      // the reader, so its PROOF (and any DATA right behind it) is checked the moment it is read.
      hold();
      proofs(m).then(
        (p) => {
          if (finished) return;
          mine = p;
          if (connector) pipe.write(encodeHandshake({ type: 'proof', mac: p.mine }));
          release();
        },
        (e: unknown) => fail(e),
      );
      return;
    }
    if (m.type !== 'proof') throw new WebcclError('PROTOCOL_ERROR', `a second HELLO from ${who()}`);
    Challenge.check(mine!.theirs, m.mac, who());
    if (!connector) {
      const why = admit(peer.rank, peer.channel);
      if (why) throw new Refused(Refusal.duplicate, `rank ${peer.rank} channel ${peer.channel}: ${why}`);
      pipe.write(encodeHandshake({ type: 'proof', mac: mine!.mine }));
    }
    reader.ready();
    linked = true;
    link = made(peer.rank, peer.channel, reader);
    finish();
  };
  const hold = () => {
    reader.hold();
    pipe.pause();
  };
  const release = () => {
    pipe.resume();
    try {
      reader.release();
    } catch (e) {
      fail(e);
    }
  };
  const reader = new FrameReader({
    handshake: onFrame,
    data: (tag, length) => hooks.sink(peer!.rank, tag, length),
  });
  /** Ends the handshake (or breaks the link) with `e`, telling the peer why if we refuse it. */
  const fail = (e: unknown) => {
    if (e instanceof Refused) return refuse(e.reason, e.detail);
    const err = WebcclError.is(e) ? e : new WebcclError('PROTOCOL_ERROR', String(e));
    const wrapped = new WebcclError(err.code, `${linked ? 'link to' : 'handshake with'} ${who()}: ${err.reason}`, {
      ...err.details,
      peer: peer?.rank,
    });
    if (!linked) return finish(wrapped);
    reader.close();
    pipe.destroy();
    hooks.broken(peer!.rank, wrapped);
  };
  const timer = setTimeout(
    () => finish(new WebcclError('CONNECT_FAILED', `no handshake with ${who()} within ${timeoutMs} ms`)),
    Math.max(1, Math.min(timeoutMs, 0x7fffffff)),
  );
  if (connector) pipe.write(encodeHandshake({ type: 'hello', ...own(expect.channel) }));
  return {
    linked: done,
    target: (spare) => reader.target(spare),
    received: (buf, n) => {
      try {
        reader.received(buf, n);
      } catch (e) {
        fail(e);
      }
    },
    violated: (message) => fail(new WebcclError('PROTOCOL_ERROR', message)),
    closed: () => {
      const e = new WebcclError(
        'CONNECTION_CLOSED',
        `${who()} closed the connection${linked ? '' : ' during the handshake'}`,
        { peer: peer?.rank },
      );
      if (linked && link !== undefined) hooks.closed(link, e);
      else finish(e);
    },
  };
}
