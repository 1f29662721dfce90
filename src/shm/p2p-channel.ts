// The shared-memory layout of point-to-point messages, per communicator.
//
//   C.P2P_TABLE  address of the table: nranks × nranks u32, the channel from rank s to rank d at
//                [s × nranks + d] (0 until s first sends to d). Allocated from the node heap by
//                whichever rank first needs it (compare-and-swap; a loser frees its copy).
//   channel      allocated by its sender on its first send to that peer:
//                  line 0          u32 published: records posted so far
//                  RECORDS lines   a ring of records; record i sits in slot i % RECORDS
//   record       STATE, NUM (the record's number i), TAG, BYTES, ADDR (the payload; 0: inline,
//                at INLINE_AT), RECV_BYTES (the receiver's size on SHORT), and up to INLINE bytes
//
// A record's life: FREE → POSTED (sender, after every other field) → TAKEN or SHORT (receiver,
// after copying the payload out, or finding its buffer of another size) → FREE (sender, once it
// has read the outcome; only then may record i + RECORDS take the slot). The receiver reads
// STATE before NUM: the sender writes NUM (and the other fields, plainly) before STATE (an
// atomic store, which publishes them), so a POSTED state with NUM = i is record i itself, never
// a later record in the same slot; and NUM stays put while the record is POSTED (only the
// receiver ends that).
import { C } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';
import type { ShmRunner } from './runner.js';

export const RECORDS = 256;
export const RECORD_BYTES = 64;
export const CHANNEL_BYTES = 64 + RECORDS * RECORD_BYTES;
/** Payloads up to this many bytes ride inside the record (no heap block for small messages). */
export const INLINE = 32;
export const INLINE_AT = 32;

/** Word indexes inside a record. */
export const R = { STATE: 0, NUM: 1, TAG: 2, BYTES: 3, ADDR: 4, RECV_BYTES: 5 } as const;
export const STATE = { FREE: 0, POSTED: 1, TAKEN: 2, SHORT: 3 } as const;

export const tableWord = (comm: number): number => (comm + C.P2P_TABLE) >> 2;
export const closedWord = (comm: number): number => (comm + C.P2P_CLOSED) >> 2;
/** Byte address of record `num` of the channel at `ch`. */
export const recordAt = (ch: number, num: number): number => ch + 64 + (num % RECORDS) * RECORD_BYTES;

/** The communicator's channel table, as one rank sees it. */
export class ChannelTable {
  private readonly n: number;
  /** Channel addresses as found (s × n + d). */
  private readonly found: number[];

  constructor(
    private readonly ctx: RankContext,
    private readonly runner: ShmRunner,
  ) {
    this.n = ctx.size;
    this.found = new Array(this.n * this.n).fill(0);
  }

  /** The channel from `s` to `d`: 0 when it does not exist and `create` is false. */
  channel(s: number, d: number, create: boolean): number {
    const k = s * this.n + d;
    if (this.found[k]) return this.found[k];
    const table = this.table(create);
    if (!table) return 0;
    let ch = Atomics.load(this.runner.views().i32, (table >> 2) + k);
    if (!ch && create) {
      // Only its sender creates a channel: no race for the word.
      ch = this.zeroed(CHANNEL_BYTES);
      Atomics.store(this.runner.views().i32, (table >> 2) + k, ch);
    }
    this.found[k] = ch;
    return ch;
  }

  private table(create: boolean): number {
    const word = tableWord(this.ctx.comm);
    const t = Atomics.load(this.runner.views().i32, word);
    if (t || !create) return t;
    const mine = this.zeroed(this.n * this.n * 4);
    const had = Atomics.compareExchange(this.runner.views().i32, word, 0, mine);
    if (had === 0) return mine;
    this.ctx.heap.free(mine);
    return had;
  }

  private zeroed(bytes: number): number {
    const a = this.ctx.heap.allocShared(bytes); // the last rank to close frees it (close())
    this.runner.views().u8.fill(0, a, a + bytes);
    return a;
  }

  /** This rank is done with the communicator: the last rank to say so frees the channels and the table. */
  close(): void {
    const i32 = this.runner.views().i32;
    if (Atomics.add(i32, closedWord(this.ctx.comm), 1) + 1 !== this.n) return;
    Atomics.store(i32, closedWord(this.ctx.comm), 0); // a communicator made later on this block starts afresh
    const table = Atomics.exchange(i32, tableWord(this.ctx.comm), 0);
    if (!table) return;
    const chans: number[] = [];
    for (let k = 0; k < this.n * this.n; k++) if (i32[(table >> 2) + k]) chans.push(i32[(table >> 2) + k]);
    for (const ch of chans) this.ctx.heap.free(ch);
    this.ctx.heap.free(table);
  }
}
