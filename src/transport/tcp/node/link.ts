// One TCP connection of the mesh (Node only): the handshake of wire/link-frames.ts from either end, with
// mutual HMAC proof of the job's token (wire/auth.ts) before any data frame is accepted, then ordered writes
// that honour backpressure (a write that returns false waits for 'drain' before the next).
// A refused handshake is a WebcclError on this side and a REFUSE frame naming it on the other.
import * as net from 'node:net';
import { WebcclError } from '../../../core/errors.js';
import { AUTH_FAIL_REASONS, Challenge, Refused, type Proofs } from '../../../wire/auth.js';
import { TLS_NOTICE } from '../../../wire/node/secure-socket.js';
import type { Sink, Tag } from '../../transport.js';
import {
  AUTH_LABEL, Refusal, VERSION, authContext, encodeDataHeader, encodeHandshake, refusalCode,
  type Handshake, type Hello,
} from '../../../wire/link-frames.js';
import { FrameReader } from '../../../wire/link-reader.js';

export interface Identity {
  jobId: string;
  token: Uint8Array;
  rank: number;
  size: number;
  nchannels: number;
}

const REFUSAL_TEXT: Record<number, string> = {
  [Refusal.jobId]: AUTH_FAIL_REASONS[Refusal.jobId], [Refusal.token]: AUTH_FAIL_REASONS[Refusal.token],
  [Refusal.rank]: 'rank not expected', [Refusal.duplicate]: 'duplicate connection',
  [Refusal.version]: 'protocol version mismatch', [Refusal.world]: 'world size or channel count mismatch',
};

/** What a secure end sends before TLS: a plain peer takes it for a REFUSE and shows why. */
export const LINK_TLS_NOTICE = encodeHandshake({ type: 'refuse', reason: Refusal.tls, message: TLS_NOTICE });

/** Payloads up to this size are copied behind their header and written once. */
const SMALL = 16 * 1024;

/** Bytes a dialled socket reads while no payload is being filled (headers, handshake). */
const SPARE_BYTES = 64 * 1024;

/** Where a dialled socket's reads go, once its handshake has a FrameReader. */
interface Feed {
  /** Where the next read goes; `spare` when no payload is being filled. */
  target(spare: Uint8Array): Uint8Array;
  received(buf: Uint8Array, n: number): void;
}

/**
 * Dials `host:port` with reads that land where the link's FrameReader says (Node's `onread`):
 * a payload goes from the kernel straight into the receive posted for it, with no Buffer per
 * read and no copy in JS. Only a dialled socket can read this way, which is why the mesh
 * carries data from the accepting end to the dialling end (see TcpTransport). TLS decrypts in
 * Node, so a secure link (`direct` false) reads through 'data' events and `attach` is undefined.
 */
export function dialDirect(host: string, port: number, direct = true): { socket: net.Socket; attach?(f: Feed): void } {
  if (!direct) return { socket: net.connect({ host, port }) };
  let feed: Feed | undefined;
  const spare = new Uint8Array(SPARE_BYTES);
  const socket = net.connect({
    host, port,
    onread: {
      buffer: () => feed?.target(spare) ?? spare,
      callback: (n: number, buf: Uint8Array) => {
        feed?.received(buf, n);
        return true;
      },
    },
  });
  return { socket, attach: (f) => (feed = f) };
}

/** An authenticated connection to `peer` on `channel`; `dialled` when this end connected. */
export class Link {
  private queue: Promise<void> = Promise.resolve();
  /** The peer closed it. */
  closed = false;

  constructor(readonly socket: net.Socket, readonly reader: FrameReader, readonly peer: number, readonly channel: number, readonly dialled: boolean) {}

  /** Writes one data frame after those before it; resolves once the socket has taken it. */
  write(tag: Tag, payload: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue = this.queue.then(async () => {
        const s = this.socket;
        if (s.destroyed) return reject(new WebcclError('CONNECTION_CLOSED', `link to rank ${this.peer} is closed`));
        const header = encodeDataHeader(tag, payload.length);
        const done = (err?: Error | null) => (err ? reject(new WebcclError('CONNECTION_CLOSED', `write to rank ${this.peer} failed: ${err.message}`)) : resolve());
        let ok: boolean;
        if (payload.length <= SMALL) {
          const bytes = new Uint8Array(header.length + payload.length); // one write for a small frame
          bytes.set(header);
          bytes.set(payload, header.length);
          ok = s.write(bytes, done);
        } else {
          // Header and payload leave in one writev: a header written alone (Nagle is off) is a
          // segment, a system call and a wake-up of the reader of its own, for 21 bytes.
          s.cork();
          s.write(header);
          ok = s.write(payload, done);
          s.uncork();
        }
        if (!ok && !s.destroyed) {
          await new Promise<void>((r) => {
            const go = () => { s.off('drain', go); s.off('close', go); r(); };
            s.on('drain', go);
            s.on('close', go);
          });
        }
      });
    });
  }
}

/** What the transport tells a link: who may connect, where data goes, whom to tell of a break. */
export interface Hooks {
  /** Why `peer` may not connect on `channel` ('duplicate', or another reason), or undefined. */
  admit(peer: number, channel: number): string | undefined;
  sink(peer: number, tag: Tag, length: number): Sink;
  broken(peer: number, e: WebcclError): void;
  /** The peer closed this connection (after everything it sent on it has arrived). */
  closed(link: Link, e: WebcclError): void;
  /** The peer failed and says why before it closes. */
  aborted(peer: number, message: string): void;
}

/**
 * Runs the handshake on a fresh socket. `expect` is the peer we dialled (connector) or
 * undefined (acceptor, which learns the peer from HELLO and asks `admit`). Resolves with the
 * Link, whose data then flows to hooks.sink and whose failure goes to hooks.broken; rejects with
 * AUTH_FAILED / PROTOCOL_ERROR / CONNECTION_CLOSED / CONNECT_FAILED, after telling the peer why.
 */
export function handshake(socket: net.Socket, id: Identity, expect: { peer: number; channel: number } | undefined, hooks: Hooks, timeoutMs: number,
                          direct?: (f: Feed) => void): Promise<Link> {
  const admit = hooks.admit;
  const connector = expect !== undefined;
  const challenge = new Challenge(id.token, id.jobId, AUTH_LABEL, connector ? ['connect', 'accept'] : ['accept', 'connect']);
  const own = (channel: number): Hello => ({ version: VERSION, jobId: id.jobId, rank: id.rank, size: id.size, channel, nchannels: id.nchannels, nonce: challenge.nonce });
  let peer: Hello | undefined;
  const who = () => (peer ? `rank ${peer.rank} (channel ${peer.channel})` : expect ? `rank ${expect.peer} (channel ${expect.channel})` : 'a peer');
  /** Both proofs of this link, bound to who dialled, who accepted, and the channel. */
  const proofs = (p: Hello) => challenge.proofs(p.nonce, connector ? authContext(id.rank, p.rank, p.channel) : authContext(p.rank, id.rank, p.channel));

  return new Promise<Link>((resolve, reject) => {
    let finished = false;
    let linked = false; // the handshake succeeded: failures now break the link
    let link: Link | undefined;
    /** Both proofs, once computed: ours to send, and the peer's to check. */
    let mine: Proofs | undefined;
    const finish = (e?: WebcclError, link?: Link) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (e) {
        reader.close();
        socket.destroy();
        reject(e);
      } else resolve(link!);
    };
    const refuse = (reason: number, detail: string) => {
      if (!socket.destroyed) socket.end(encodeHandshake({ type: 'refuse', reason, message: `${REFUSAL_TEXT[reason]}: ${detail}` }));
      finished = true; // the socket ends gracefully so the REFUSE reaches the peer
      clearTimeout(timer);
      reader.close();
      setTimeout(() => socket.destroy(), 1000).unref();
      reject(new WebcclError(refusalCode(reason), `refused ${who()}: ${REFUSAL_TEXT[reason]}: ${detail}`, { peer: peer?.rank, reason }));
    };
    const checkHello = (h: Hello): void => {
      peer = h;
      if (h.version !== VERSION) throw new Refused(Refusal.version, `we speak version ${VERSION}, the peer ${h.version}`);
      challenge.checkJob(h.jobId);
      if (h.size !== id.size || h.nchannels !== id.nchannels) throw new Refused(Refusal.world, `we have size ${id.size} x ${id.nchannels} channels, the peer ${h.size} x ${h.nchannels}`);
      if (connector && (h.rank !== expect.peer || h.channel !== expect.channel)) throw new Refused(Refusal.rank, `dialled rank ${expect.peer} channel ${expect.channel}, reached rank ${h.rank} channel ${h.channel}`);
      if (!connector) {
        if (h.channel >= id.nchannels) throw new Refused(Refusal.rank, `channel ${h.channel} is not in 0..${id.nchannels - 1}`);
        const why = admit(h.rank, h.channel);
        if (why) throw new Refused(why === 'duplicate' ? Refusal.duplicate : Refusal.rank, `rank ${h.rank} channel ${h.channel}: ${why}`);
      }
    };
    const onFrame = (m: Handshake): void => {
      if (m.type === 'abort') {
        if (!linked) throw new WebcclError('PROTOCOL_ERROR', `an ABORT from ${who()} during the handshake`);
        return hooks.aborted(peer!.rank, m.message);
      }
      if (m.type === 'refuse') {
        return finish(new WebcclError(refusalCode(m.reason), `${who()} refused the connection: ${m.message}`, { peer: peer?.rank ?? expect?.peer, reason: m.reason }));
      }
      if (!peer) {
        if (m.type !== 'hello') throw new WebcclError('PROTOCOL_ERROR', `${m.type} before HELLO`);
        checkHello(m);
        if (!connector) socket.write(encodeHandshake({ type: 'hello', ...own(m.channel) }));
        // Both proofs are computed now, asynchronously; what the peer sends meanwhile waits in
        // the reader, so its PROOF (and any DATA right behind it) is checked the moment it is read.
        hold();
        proofs(m).then((p) => {
          if (finished) return;
          mine = p;
          if (connector) socket.write(encodeHandshake({ type: 'proof', mac: p.mine }));
          release();
        }, (e: unknown) => fail(e));
        return;
      }
      if (m.type !== 'proof') throw new WebcclError('PROTOCOL_ERROR', `a second HELLO from ${who()}`);
      Challenge.check(mine!.theirs, m.mac, who());
      if (!connector) {
        const why = admit(peer.rank, peer.channel);
        if (why) throw new Refused(Refusal.duplicate, `rank ${peer.rank} channel ${peer.channel}: ${why}`);
        socket.write(encodeHandshake({ type: 'proof', mac: mine!.mine }));
      }
      linkUp(peer);
    };
    const hold = () => {
      reader.hold();
      socket.pause();
    };
    const release = () => {
      socket.resume();
      try {
        reader.release();
      } catch (e) {
        fail(e);
      }
    };
    const linkUp = (p: Hello) => {
      reader.ready();
      linked = true;
      finish(undefined, (link = new Link(socket, reader, p.rank, p.channel, connector)));
    };
    const reader = new FrameReader({
      handshake: onFrame,
      data: (tag, length) => hooks.sink(peer!.rank, tag, length),
    });
    /** Ends the handshake (or breaks the link) with `e`, telling the peer why if we refuse it. */
    const fail = (e: unknown) => {
      if (e instanceof Refused) return refuse(e.reason, e.detail);
      const err = WebcclError.is(e) ? e : new WebcclError('PROTOCOL_ERROR', String(e));
      const wrapped = new WebcclError(err.code, `${linked ? 'link to' : 'handshake with'} ${who()}: ${err.reason}`, { ...err.details, peer: peer?.rank });
      if (!linked) return finish(wrapped);
      reader.close();
      socket.destroy();
      hooks.broken(peer!.rank, wrapped);
    };
    const onBytes = (buf: Uint8Array, n: number) => {
      try {
        reader.received(buf, n);
      } catch (e) {
        fail(e);
      }
    };
    const onClose = () => {
      const e = new WebcclError('CONNECTION_CLOSED', `${who()} closed the connection${linked ? '' : ' during the handshake'}`, { peer: peer?.rank });
      if (linked && link) hooks.closed(link, e);
      else finish(e);
    };
    const timer = setTimeout(() => finish(new WebcclError('CONNECT_FAILED', `no handshake with ${who()} within ${timeoutMs} ms`)), Math.max(1, Math.min(timeoutMs, 0x7fffffff)));
    if (direct) direct({ target: (spare) => reader.target(spare), received: onBytes });
    else socket.on('data', (chunk: Buffer) => onBytes(chunk, chunk.length));
    socket.on('close', onClose);
    socket.on('error', () => {}); // 'close' follows
    if (connector) socket.write(encodeHandshake({ type: 'hello', ...own(expect.channel) }));
  });
}
