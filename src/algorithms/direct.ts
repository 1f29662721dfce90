// Direct gather and scatter: the root exchanges each rank's block with that rank itself, in
// pieces of at most PIECE_BYTES, every receive posted up front into its final place. Each byte
// crosses the wire once, and the root's links to all ranks work at once.
// Every rank also hears from the other side before it completes (as chain.ts's reduce): the
// rank that receives data tells the one that sends it that it is ready, with a zero-byte message
// at its start. So a sender cannot run ahead of its receiver by more than one op (no pile-up in
// the receiver's mailbox), and ranks that disagree on the root or the count meet a message they
// cannot take and fail with MISMATCH, instead of one rank waiting for the deadline.
import { type Group, type Mem, type Span, awaitedLater, mod, piecesOf } from './group.js';

const READY_STEP = 0;
/** Tag step of piece j of a block. */
const pieceStep = (j: number) => j + 1;


/** Ranks other than the root, from the one after it (so the root's links start in a different order per root). */
const others = (g: Group, root: number) => Array.from({ length: g.size - 1 }, (_, i) => mod(root + 1 + i, g.size));

/** On the root, blocks[r] ends holding rank r's `mine`; `blocks` is null elsewhere. */
export async function directGather(g: Group, m: Mem, mine: Span, blocks: Span[] | null, root: number): Promise<void> {
  const none = m.view(mine.addr, 0);
  if (g.rank !== root) {
    const ready = awaitedLater(g.recv(root, READY_STEP, none));
    await Promise.all(piecesOf(mine, m.elemBytes).map((p, j) => awaitedLater(g.send(root, pieceStep(j), m.view(p.addr, p.count)))));
    return ready;
  }
  const own = blocks![root];
  if (own.count && own.addr !== mine.addr) m.copy(own.addr, mine.addr, own.count);
  const pending: Promise<void>[] = [];
  for (const r of others(g, root)) {
    pending.push(awaitedLater(g.send(r, READY_STEP, none)));
    piecesOf(blocks![r], m.elemBytes).forEach((p, j) => pending.push(awaitedLater(g.recv(r, pieceStep(j), m.view(p.addr, p.count)))));
  }
  await Promise.all(pending);
}

/** Every rank's `mine` ends holding blocks[rank] of the root; `blocks` is null elsewhere. */
export async function directScatter(g: Group, m: Mem, blocks: Span[] | null, mine: Span, root: number): Promise<void> {
  const none = m.view(mine.addr, 0);
  if (g.rank !== root) {
    const told = awaitedLater(g.send(root, READY_STEP, none));
    await Promise.all(piecesOf(mine, m.elemBytes).map((p, j) => awaitedLater(g.recv(root, pieceStep(j), m.view(p.addr, p.count)))));
    return told;
  }
  const own = blocks![root];
  if (own.count && own.addr !== mine.addr) m.copy(mine.addr, own.addr, own.count);
  const pending: Promise<void>[] = [];
  for (const r of others(g, root)) {
    pending.push(awaitedLater(g.recv(r, READY_STEP, none)));
    piecesOf(blocks![r], m.elemBytes).forEach((p, j) => pending.push(awaitedLater(g.send(r, pieceStep(j), m.view(p.addr, p.count)))));
  }
  await Promise.all(pending);
}
