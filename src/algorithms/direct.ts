// Direct gather and scatter: the root exchanges each rank's block with that rank itself, in
// pieces of at most PIECE_BYTES, every receive posted up front into its final place. Each byte
// crosses the wire once, and the root's links to all ranks work at once.
// Zero-byte notices around the data make sure that no rank completes unless every rank agreed
// on the op (its signature rides in every message, so ranks that disagree on the root or the
// count meet a message they cannot take and fail with MISMATCH), that no rank waits for the
// deadline when they disagree, and that a sender cannot run ahead of its receivers:
//   every root says "ready" to every other rank at its start, so two ranks that both take
//   themselves for the root meet each other's notice instead of waiting for each other;
//   gather:  the others send their blocks at once; the root says "done" once it holds every
//            block, and the others complete on that (the root heard from all of them);
//   scatter: the others say "ready" at their start; the root sends the blocks once every rank
//            said so, and each rank completes when its block is in (the root heard from all).
// Measured over loopback (bench/net/ops.mjs, 2 processes): a root that sends at once makes
// receivers that have not started hold and copy its blocks (2 MiB scatter 1.4–1.8 ms, against
// 0.67–0.69 ms waiting for "ready"); gather's blocks go at once since waiting for the root's
// "ready" cost more (16 MiB 4.3–5.4 ms against 2.7–3.0 ms).
import { awaitedLater, type Group, type Mem, mod, piecesOf, type Span } from './group.js';

const READY_STEP = 0;
const DONE_STEP = 1;
/** Tag step of piece j of a block. */
const pieceStep = (j: number) => j + 2;

/** Ranks other than the root, from the one after it. */
const others = (g: Group, root: number) => Array.from({ length: g.size - 1 }, (_, i) => mod(root + 1 + i, g.size));

/** On the root, blocks[r] ends holding rank r's `mine`; `blocks` is null elsewhere. */
export async function directGather(g: Group, m: Mem, mine: Span, blocks: Span[] | null, root: number): Promise<void> {
  const none = m.view(mine.addr, 0);
  if (g.rank !== root) {
    const ready = awaitedLater(g.recv(root, READY_STEP, none));
    const done = awaitedLater(g.recv(root, DONE_STEP, none));
    await Promise.all(
      piecesOf(mine, m.elemBytes).map((p, j) => awaitedLater(g.send(root, pieceStep(j), m.view(p.addr, p.count)))),
    );
    await ready;
    return done;
  }
  const own = blocks![root];
  if (own.count && own.addr !== mine.addr) m.copy(own.addr, mine.addr, own.count);
  const pending: Promise<void>[] = [];
  for (const r of others(g, root)) {
    pending.push(awaitedLater(g.send(r, READY_STEP, none)));
    piecesOf(blocks![r], m.elemBytes).forEach((p, j) =>
      pending.push(awaitedLater(g.recv(r, pieceStep(j), m.view(p.addr, p.count)))),
    );
  }
  await Promise.all(pending);
  await Promise.all(others(g, root).map((r) => g.send(r, DONE_STEP, none)));
}

/** Every rank's `mine` ends holding blocks[rank] of the root; `blocks` is null elsewhere. */
export async function directScatter(g: Group, m: Mem, blocks: Span[] | null, mine: Span, root: number): Promise<void> {
  const none = m.view(mine.addr, 0);
  if (g.rank !== root) {
    const told = awaitedLater(g.send(root, READY_STEP, none));
    const ready = awaitedLater(g.recv(root, READY_STEP, none));
    await Promise.all(
      piecesOf(mine, m.elemBytes).map((p, j) => awaitedLater(g.recv(root, pieceStep(j), m.view(p.addr, p.count)))),
    );
    await told;
    return ready;
  }
  const peers = others(g, root);
  const told = peers.map((r) => awaitedLater(g.send(r, READY_STEP, none)));
  await Promise.all(peers.map((r) => awaitedLater(g.recv(r, READY_STEP, none))));
  const own = blocks![root];
  if (own.count && own.addr !== mine.addr) m.copy(mine.addr, own.addr, own.count);
  const sends: Promise<void>[] = [];
  for (const r of peers)
    piecesOf(blocks![r], m.elemBytes).forEach((p, j) =>
      sends.push(awaitedLater(g.send(r, pieceStep(j), m.view(p.addr, p.count)))),
    );
  await Promise.all([...told, ...sends]);
}
