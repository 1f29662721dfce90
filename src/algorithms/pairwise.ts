// Pairwise-exchange allToAll: in step k (1..n-1) each rank sends its block for rank+k and
// receives the block of rank-k, so every step pairs each rank with one sender and one receiver
// and each byte crosses the wire once (n-1 messages per rank, no forwarding). Blocks may differ
// in size per peer (per-peer counts); each is cut into pieces of at most PIECE_BYTES that travel
// independently. Every receive is posted up front into its final place, so a piece lands where
// it belongs whenever it arrives; the sends go out in step order, `window` steps at a time.
// A message is sent even for an empty block: every rank hears from every other in the op, so a
// disagreement on the counts between two ranks reaches both (see net/blame.ts, pairSignatures).
import { awaitedLater, type Group, type Mem, mod, piecesOf, type Span } from './group.js';

/**
 * Steps whose sends are in flight at once: all of them (on TCP each peer has its own link).
 * Measured, 4 processes over loopback, 4 MiB: 8.6–13.3 ms all at once, 14.0–27.4 ms one step at
 * a time (bench/net/ops.mjs).
 */
export const PAIRWISE_WINDOW = Number.MAX_SAFE_INTEGER;

/**
 * send[j] of this rank ends in recv[i] of rank j, where i is this rank. send[rank] and
 * recv[rank] must hold the same count (the caller checks it); other ranks' counts must agree
 * pairwise (send[j] here = recv[i] on rank j), which the transport's signatures enforce.
 */
export async function pairwiseAllToAll(
  g: Group,
  m: Mem,
  send: Span[],
  recv: Span[],
  window = PAIRWISE_WINDOW,
): Promise<void> {
  const n = g.size;
  const me = g.rank;
  if (send[me].count) m.copy(recv[me].addr, send[me].addr, send[me].count);
  if (n === 1) return;
  // Piece j of step k: tags stay apart for any number of pieces.
  const tagStep = (k: number, j: number) => j * n + k;
  const arriving: Promise<void>[] = [];
  for (let k = 1; k < n; k++) {
    const from = mod(me - k, n);
    piecesOf(recv[from], m.elemBytes).forEach((p, j) =>
      arriving.push(awaitedLater(g.recv(from, tagStep(k, j), m.view(p.addr, p.count)))),
    );
  }
  const lanes = Math.min(window, n - 1);
  const lane = async (first: number): Promise<void> => {
    for (let k = first; k < n; k += lanes) {
      const to = mod(me + k, n);
      await Promise.all(
        piecesOf(send[to], m.elemBytes).map((p, j) => awaitedLater(g.send(to, tagStep(k, j), m.view(p.addr, p.count)))),
      );
    }
  };
  await Promise.all([...Array.from({ length: lanes }, (_, i) => lane(1 + i)), ...arriving]);
}
