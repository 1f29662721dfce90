// Buffers for payloads that arrive before their receive is posted (transport.ts Mailbox). A
// collective repeated in a loop sends the same lengths again and again, and a fresh buffer per
// early payload costs a zeroed allocation and its page faults on every op: a network progress
// thread, which posts its receives once the op reaches it, met an early payload on nearly every
// message (at 1 MiB, 5% of the thread's CPU in allocating them). A buffer handed back once its
// payload was copied out is kept for the next payload of the same length, a few per length, up
// to a byte budget shared by the transport's peers.

export class HoldBuffers {
  private readonly free = new Map<number, Uint8Array[]>();
  private bytes = 0;

  constructor(
    private readonly maxBytes = 64 * 1024 * 1024,
    private readonly perLength = 4,
  ) {}

  /** A buffer of `length` bytes; a kept one holds an old payload, which the new one overwrites whole. */
  take(length: number): Uint8Array {
    const kept = this.free.get(length)?.pop();
    if (kept === undefined) return new Uint8Array(length);
    this.bytes -= length;
    return kept;
  }

  /** A buffer taken here that nothing refers to any more. */
  give(b: Uint8Array): void {
    const n = b.length;
    if (n === 0 || this.bytes + n > this.maxBytes) return;
    let list = this.free.get(n);
    if (list === undefined) this.free.set(n, (list = []));
    if (list.length >= this.perLength) return;
    list.push(b);
    this.bytes += n;
  }
}
