// Every virtual rank's mailbox in one hash table keyed by (receiver, message key): a message
// that came before its receive, or a receive posted before its message. A 4,096-rank ring
// files and takes 33 M entries; in one table of flat arrays (open addressing, linear probing)
// that is no allocation per entry and a few cache lines in all, where a Map per rank meant
// thousands of hash tables scattered over the heap.

const EMPTY = -1;
const FIRST_CAPACITY = 1024;

export class Mailboxes {
  private mask = FIRST_CAPACITY - 1;
  private used = 0;
  private rank = new Int32Array(FIRST_CAPACITY).fill(EMPTY);
  private key = new Float64Array(FIRST_CAPACITY);
  private bytesOf = new Float64Array(FIRST_CAPACITY);
  /** A posted receive's buffer (null: the entry is a message that came first). */
  private intoOf: (Uint8Array | null)[] = new Array(FIRST_CAPACITY).fill(null);
  private resolveOf: ((() => void) | null)[] = new Array(FIRST_CAPACITY).fill(null);
  private payloadOf: (Uint8Array | null)[] = new Array(FIRST_CAPACITY).fill(null);

  /** The entry of (`rank`, `key`), or -1. */
  find(rank: number, key: number): number {
    for (let i = this.home(rank, key); ; i = (i + 1) & this.mask) {
      const r = this.rank[i];
      if (r === EMPTY) return -1;
      if (r === rank && this.key[i] === key) return i;
    }
  }

  /** Files an entry; (`rank`, `key`) must not be there already (find first). */
  add(
    rank: number,
    key: number,
    into: Uint8Array | null,
    resolve: (() => void) | null,
    payload: Uint8Array | null,
    bytes: number,
  ): void {
    if (2 * (this.used + 1) > this.mask + 1) this.grow();
    this.place(rank, key, into, resolve, payload, bytes);
  }

  into(i: number): Uint8Array | null {
    return this.intoOf[i];
  }

  resolve(i: number): (() => void) | null {
    return this.resolveOf[i];
  }

  payload(i: number): Uint8Array | null {
    return this.payloadOf[i];
  }

  bytes(i: number): number {
    return this.bytesOf[i];
  }

  /**
   * Takes entry `i` out. Linear probing without tombstones: each later entry of the run that
   * would no longer be found from its home slot moves back into the gap.
   */
  remove(i: number): void {
    const mask = this.mask;
    let gap = i;
    for (let j = (gap + 1) & mask; this.rank[j] !== EMPTY; j = (j + 1) & mask) {
      const h = this.home(this.rank[j], this.key[j]);
      // Entry j may stay unless its home lies cyclically outside (gap, j].
      const stays = gap <= j ? gap < h && h <= j : gap < h || h <= j;
      if (stays) continue;
      this.move(j, gap);
      gap = j;
    }
    this.rank[gap] = EMPTY;
    this.intoOf[gap] = null;
    this.resolveOf[gap] = null;
    this.payloadOf[gap] = null;
    this.used--;
  }

  /** The keys of `rank`'s posted receives (for a timeout's message; scans the whole table). */
  receivesOf(rank: number): number[] {
    const keys: number[] = [];
    for (let i = 0; i <= this.mask; i++) if (this.rank[i] === rank && this.intoOf[i]) keys.push(this.key[i]);
    return keys;
  }

  private home(rank: number, key: number): number {
    let h =
      Math.imul(rank, 0x9e3779b1) ^ Math.imul(key | 0, 0x85ebca6b) ^ Math.imul((key / 4294967296) | 0, 0xc2b2ae35);
    h ^= h >>> 15;
    h = Math.imul(h, 0x27d4eb2f);
    return (h ^ (h >>> 13)) & this.mask;
  }

  private place(
    rank: number,
    key: number,
    into: Uint8Array | null,
    resolve: (() => void) | null,
    payload: Uint8Array | null,
    bytes: number,
  ): void {
    let i = this.home(rank, key);
    while (this.rank[i] !== EMPTY) i = (i + 1) & this.mask;
    this.rank[i] = rank;
    this.key[i] = key;
    this.intoOf[i] = into;
    this.resolveOf[i] = resolve;
    this.payloadOf[i] = payload;
    this.bytesOf[i] = bytes;
    this.used++;
  }

  private move(from: number, to: number): void {
    this.rank[to] = this.rank[from];
    this.key[to] = this.key[from];
    this.intoOf[to] = this.intoOf[from];
    this.resolveOf[to] = this.resolveOf[from];
    this.payloadOf[to] = this.payloadOf[from];
    this.bytesOf[to] = this.bytesOf[from];
  }

  private grow(): void {
    const { rank, key, intoOf, resolveOf, payloadOf, bytesOf } = this;
    const capacity = 2 * rank.length;
    this.mask = capacity - 1;
    this.used = 0;
    this.rank = new Int32Array(capacity).fill(EMPTY);
    this.key = new Float64Array(capacity);
    this.bytesOf = new Float64Array(capacity);
    this.intoOf = new Array(capacity).fill(null);
    this.resolveOf = new Array(capacity).fill(null);
    this.payloadOf = new Array(capacity).fill(null);
    for (let i = 0; i < rank.length; i++)
      if (rank[i] !== EMPTY) this.place(rank[i], key[i], intoOf[i], resolveOf[i], payloadOf[i], bytesOf[i]);
  }
}
