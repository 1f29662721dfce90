// Point-to-point over a Group: the k-th message of one tag between two ranks (one direction)
// rides on step 2k, and the receiver answers on step 2k + 1 with its outcome and the bytes its
// buffer holds, so that a send completes only once the receiver has the data, and a size the two
// disagree on fails both sides. The TCP engine's send/recv (src/net/p2p.ts) and the
// simulator's sendrecv run these two functions.
import type { Group } from './group.js';

/** The receiver's answer: u32 outcome (TAKEN or SHORT), u32 the bytes its buffer holds. */
const ANSWER_BYTES = 8;
const TAKEN = 0;
const SHORT = 1;

export interface P2pAnswer {
  /** Whether the receiver took the data (false: its buffer holds another size). */
  taken: boolean;
  /** The bytes the receiver's buffer holds. */
  bytes: number;
}

/** The k-th send to `peer`: resolves with the receiver's answer. */
export async function p2pSend(g: Group, peer: number, k: number, data: Uint8Array): Promise<P2pAnswer> {
  const reply = new Uint8Array(ANSWER_BYTES);
  const answered = g.recv(peer, 2 * k + 1, reply);
  answered.catch(() => undefined); // the send's own failure, if any, is the one reported
  await g.send(peer, 2 * k, data);
  await answered;
  const v = new DataView(reply.buffer);
  return { taken: v.getUint32(0, true) === TAKEN, bytes: v.getUint32(4, true) };
}

/**
 * The k-th recv from `peer`: resolves once `into` holds the data. The answer goes back without
 * waiting for the wire (`answering` gets its send, whose failure is the caller's to report).
 * When the group refuses a payload of another length (`isShort`), the answer says so and the
 * refusal is thrown.
 */
export async function p2pRecv(
  g: Group,
  peer: number,
  k: number,
  into: Uint8Array,
  answering: (sent: Promise<void>) => void,
  isShort: (e: unknown) => boolean,
): Promise<void> {
  const reply = new Uint8Array(ANSWER_BYTES);
  const v = new DataView(reply.buffer);
  v.setUint32(4, into.byteLength, true);
  try {
    await g.recv(peer, 2 * k, into);
  } catch (e) {
    if (!isShort(e)) throw e;
    v.setUint32(0, SHORT, true);
    answering(g.send(peer, 2 * k + 1, reply));
    throw e;
  }
  v.setUint32(0, TAKEN, true);
  answering(g.send(peer, 2 * k + 1, reply));
}
