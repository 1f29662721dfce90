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
// STATE before NUM: the sender writes NUM before STATE, so a POSTED state with NUM = i is
// record i itself, never a later record in the same slot.
import { C } from '../../core/layout.js';

export const RECORDS = 128;
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
