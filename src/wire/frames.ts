// Splitting a byte stream into whole frames (browser-safe). A named-state loop: `header` gathers
// the 5 header bytes, then asks the protocol the largest body this kind may carry here (-1: the
// kind is not accepted now) and refuses the frame before allocating its body; `body` fills it;
// `closed` ignores everything (after a violation, or once the owner closes). While the owner
// holds the parser (a handshake computing its proofs, which is asynchronous), the bytes after the
// frame it is answering wait, unparsed, until it releases them. The TCP transport's
// reader, which lands payloads in posted receives, has its own loop over the same checks.
import { HEADER_BYTES, protocolError, readHeader } from './bytes.js';
import { HeldBytes } from './held-bytes.js';
import { overLimit } from './limits.js';

/** What the parser asks of the protocol above it. */
export interface FrameRules {
  /** The largest body a frame of `kind` may announce now; -1 when the kind is not expected. */
  maxBody(kind: number): number;
  /** The kind's name in error texts. */
  name(kind: number): string;
}

export class FrameParser {
  private state: 'header' | 'body' | 'closed' = 'header';
  private readonly header = new Uint8Array(HEADER_BYTES);
  private have = 0;
  private kind = 0;
  private body = new Uint8Array(0);
  /** Bytes that arrived while held, in order (kept by reference: pushed chunks are not reused). */
  private readonly waiting = new HeldBytes();

  constructor(
    private readonly rules: FrameRules,
    private readonly onFrame: (kind: number, body: Uint8Array) => void,
  ) {}

  close(): void {
    this.state = 'closed';
    this.waiting.clear();
  }

  /** Parses nothing more (after the frame being delivered) until release(). */
  hold(): void {
    this.waiting.hold();
  }

  /** Parses what arrived while held; throws as push() does. */
  release(): void {
    for (const chunk of this.waiting.release()) this.push(chunk);
  }

  /**
   * Feeds bytes; throws PROTOCOL_ERROR (and closes) on a frame that breaks a limit. The caller
   * must not reuse `chunk`: while held, the parser keeps it as it is.
   */
  push(chunk: Uint8Array): void {
    if (this.waiting.held) {
      if (this.state !== 'closed') this.waiting.keep(chunk);
      return;
    }
    let at = 0;
    while (at < chunk.length && this.state !== 'closed') {
      const into = this.state === 'header' ? this.header : this.body;
      const n = Math.min(into.length - this.have, chunk.length - at);
      into.set(chunk.subarray(at, at + n), this.have);
      this.have += n;
      at += n;
      if (this.state === 'header' && this.have === HEADER_BYTES) this.startBody();
      if (this.state === 'body' && this.have === this.body.length) {
        this.state = 'header';
        this.have = 0;
        this.onFrame(this.kind, this.body);
        // The owner may have held (or closed) the parser while it took the frame.
        if (this.waiting.held) return this.push(chunk.subarray(at));
      }
    }
  }

  private startBody(): void {
    const { kind, length } = readHeader(this.header);
    const max = this.rules.maxBody(kind);
    if (max < 0) this.violation(`a ${this.rules.name(kind)} frame is not expected here`);
    if (length > max) this.violation(overLimit(this.rules.name(kind), length, max));
    this.kind = kind;
    this.body = new Uint8Array(length);
    this.have = 0;
    this.state = 'body';
  }

  private violation(message: string): never {
    this.state = 'closed';
    return protocolError(message);
  }
}
