// Reading a connection's frames (link-frames.ts) from a byte stream (browser-safe, no node:): a
// named-state loop that checks each frame's kind and length against its limit before it
// allocates a byte, and writes a data payload straight into the buffer the matching receive
// posted.

import { HEADER_BYTES, protocolError, readHeader } from './bytes.js';
import { HeldBytes } from './held-bytes.js';
import { overLimit } from './limits.js';
import {
  decodeHandshake,
  type FrameTag,
  type Handshake,
  KIND_NAMES,
  Kind,
  maxHandshakeBody,
  TAG_BYTES,
} from './link-frames.js';

/**
 * Where a data frame's payload goes: into a buffer (then `done`), or nowhere. The buffer's owner
 * sets `cancelled` when it gives the buffer up mid-payload (its op failed): the rest of the
 * payload is then skipped, for the buffer may already hold other data. It sets `moveTo` when
 * the payload was going into a hold buffer (no receive yet) and its receive is now posted: the
 * reader copies what has arrived into `moveTo` and writes the rest there, rather than all of it
 * into the hold buffer and then a second time into the receive.
 */
export type Sink = { into: Uint8Array; done: () => void; cancelled?: boolean; moveTo?: Uint8Array } | { skip: true };

/** A payload this large is worth an extra read to land in place from its first byte. */
const LARGE_PAYLOAD = 64 * 1024;

export interface ReaderEvents {
  /** A whole handshake frame (while the handshake is on), or an ABORT (after it). */
  handshake(m: Handshake): void;
  /** A data frame's tag and payload length: where to put it (may throw to end the link). */
  data(tag: FrameTag, length: number): Sink;
}

/**
 * Splits a byte stream into frames. Named states: `header` gathers 5 bytes and checks kind and
 * length; `handshake` fills a small handshake body; `tag` gathers a data frame's 16-byte tag and
 * asks where its payload goes; `payload` writes into that sink; `skip` discards a payload no
 * receive can take; `closed` ignores everything (after a violation, or once the owner closes).
 */
export class FrameReader {
  private state: 'header' | 'handshake' | 'tag' | 'payload' | 'skip' | 'closed' = 'header';
  private readonly head = new Uint8Array(HEADER_BYTES + TAG_BYTES);
  private have = 0;
  private kind = 0;
  private length = 0;
  private into: Uint8Array = new Uint8Array(0);
  private done: () => void = () => {};
  /** The sink of the payload being filled (see Sink.cancelled and Sink.moveTo). */
  private sink?: { cancelled?: boolean; moveTo?: Uint8Array };
  private handshaking = true;
  /** Payload length of the last data frame. */
  private lastLength = 0;
  /** The link is checking a handshake frame (asynchronously): later bytes wait here. */
  private readonly waiting = new HeldBytes();

  constructor(private readonly on: ReaderEvents) {}

  /** The handshake is over: from the next frame on, only DATA is accepted. */
  ready(): void {
    this.handshaking = false;
  }

  close(): void {
    this.state = 'closed';
    this.waiting.clear();
  }

  /** Parses nothing more (after the handshake frame being delivered) until release(). */
  hold(): void {
    this.waiting.hold();
  }

  /** Parses what arrived while held; throws as push() does. */
  release(): void {
    for (const chunk of this.waiting.release()) this.push(chunk);
  }

  /**
   * Where the next bytes read from the socket should land: straight into the receive whose
   * payload is being filled (the kernel copies into it; nothing is copied again), else `spare`.
   */
  target(spare: Uint8Array): Uint8Array {
    if (this.waiting.held) return spare;
    this.followSink();
    if (this.state === 'payload') return this.into.subarray(this.have);
    // After a large payload, read just the next frame's header (one more small read) so that a
    // large payload after it lands in place too, rather than its start through `spare`.
    if (this.lastLength >= LARGE_PAYLOAD && (this.state === 'header' || this.state === 'tag'))
      return spare.subarray(0, this.want() - this.have);
    return spare;
  }

  /** `n` bytes were read into `buf`, which target() returned. */
  received(buf: Uint8Array, n: number): void {
    if (
      this.state === 'payload' &&
      buf.buffer === this.into.buffer &&
      buf.byteOffset === this.into.byteOffset + this.have
    ) {
      this.have += n;
      if (this.have === this.length) this.step();
      return;
    }
    this.push(buf.subarray(0, n), true);
  }

  /**
   * Feeds bytes; throws PROTOCOL_ERROR (and closes) on a frame that breaks a limit. `reused`:
   * the caller will overwrite `chunk` (a read's spare buffer), so bytes held back are copied.
   */
  push(chunk: Uint8Array, reused = false): void {
    const keep = (b: Uint8Array) => {
      if (this.state !== 'closed') this.waiting.keep(reused ? b.slice() : b);
    };
    if (this.waiting.held) return keep(chunk);
    let at = 0;
    while (at < chunk.length && this.state !== 'closed') {
      if (this.waiting.held) return keep(chunk.subarray(at));
      this.followSink();
      const want = this.want();
      const n = Math.min(want - this.have, chunk.length - at);
      if (this.state === 'header' || this.state === 'tag') this.head.set(chunk.subarray(at, at + n), this.have);
      else if (this.state !== 'skip') this.into.set(chunk.subarray(at, at + n), this.have);
      this.have += n;
      at += n;
      if (this.have === want) this.step();
    }
  }

  private want(): number {
    switch (this.state) {
      case 'header':
        return HEADER_BYTES;
      case 'tag':
        return HEADER_BYTES + TAG_BYTES;
      default:
        return this.length;
    }
  }

  /** The current state's bytes are complete: move on. */
  private step(): void {
    const v = new DataView(this.head.buffer);
    switch (this.state) {
      case 'header': {
        const { kind, length: len } = readHeader(this.head);
        this.kind = kind;
        const name = KIND_NAMES[this.kind] ?? `kind ${this.kind}`;
        if (this.kind === Kind.data && !this.handshaking) {
          if (len < TAG_BYTES) this.violation(`a DATA frame of ${len} bytes is shorter than its tag`);
          this.state = 'tag';
          this.length = len - TAG_BYTES;
          return;
        }
        const max = this.handshaking || this.kind === Kind.abort ? maxHandshakeBody(this.kind) : -1;
        if (max < 0)
          this.violation(`a ${name} frame is not expected ${this.handshaking ? 'during the handshake' : 'after it'}`);
        if (len > max) this.violation(overLimit(name, len, max));
        return this.begin('handshake', new Uint8Array(len), len);
      }
      case 'tag': {
        const tag = {
          comm: v.getUint32(5, true),
          seq: v.getUint32(9, true),
          step: v.getUint32(13, true),
          space: v.getUint32(17, true),
        };
        this.lastLength = this.length;
        const sink = this.on.data(tag, this.length);
        if ('skip' in sink) return this.begin('skip', this.into, this.length);
        this.done = sink.done;
        this.sink = sink;
        return this.begin('payload', sink.into, this.length);
      }
      case 'handshake': {
        const body = this.into;
        this.begin('header', this.into, 0);
        return this.on.handshake(decodeHandshake(this.kind, body));
      }
      case 'payload': {
        const done = this.done;
        this.begin('header', new Uint8Array(0), 0);
        return done();
      }
      case 'skip':
        return this.begin('header', new Uint8Array(0), 0);
    }
  }

  /**
   * A payload whose receive gave its buffer up: the bytes still to come are skipped, never
   * written where the buffer was (its memory may belong to another op by now). A held payload
   * whose receive was posted meanwhile: what arrived moves into the receive, the rest lands there.
   */
  private followSink(): void {
    if (this.state !== 'payload' || !this.sink) return;
    if (this.sink.cancelled) {
      this.state = 'skip';
      return;
    }
    const to = this.sink.moveTo;
    if (!to) return;
    this.sink.moveTo = undefined;
    to.set(this.into.subarray(0, this.have));
    this.into = to;
  }

  private begin(state: 'header' | 'handshake' | 'payload' | 'skip', into: Uint8Array, length: number): void {
    this.state = state;
    this.into = into;
    this.length = length;
    this.have = 0;
    if (state !== 'payload') this.sink = undefined;
    // An empty body is complete at once.
    if (state !== 'header' && length === 0) this.step();
  }

  private violation(message: string): never {
    this.state = 'closed';
    return protocolError(message);
  }
}
