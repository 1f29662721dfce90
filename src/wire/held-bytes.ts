// Bytes that arrive while a reader's owner checks a frame asynchronously (the HMAC proofs of a
// handshake, computed by WebCrypto): kept in order, unparsed, and handed back when the owner
// releases the reader, so that nothing behind the frame is acted on before the check ends
// (browser-safe; used by the store's frame parser and the link reader alike).
export class HeldBytes {
  held = false;
  private chunks: Uint8Array[] = [];

  hold(): void {
    this.held = true;
  }

  /** Keeps `chunk` (by reference: copy it first if its buffer will be reused). */
  keep(chunk: Uint8Array): void {
    if (chunk.length) this.chunks.push(chunk);
  }

  clear(): void {
    this.chunks = [];
  }

  /** Ends the hold; returns what arrived meanwhile, in order, for the reader to parse. */
  release(): Uint8Array[] {
    this.held = false;
    const waiting = this.chunks;
    this.chunks = [];
    return waiting;
  }
}
