// Pipelined chain broadcast and reduce: the buffer travels root → root+1 → … (or the other way
// for reduce) in pieces, so every link of the chain is busy at once and each rank forwards a
// piece as soon as it has it. Bandwidth-optimal for large buffers: each rank sends n bytes once.
//
// Zero-byte messages close the chain into a ring, so that every rank hears from a neighbour with
// the op's signature before it completes: ranks that disagree on the root (or anything else)
// then meet a message they cannot take and fail with MISMATCH at once, instead of each
// succeeding alone (two self-declared broadcast roots) or waiting for the deadline (two reduce
// roots, each waiting for the other; ranks that each name another rank as the root, where no
// data would flow at all).
//   broadcast: the last rank of the chain acks the root once it has every piece; the root
//              completes on that ack, so a root that completes knows every rank agreed. Each
//              other receiver tells its sender that it is ready, at its start. Between 2 ranks
//              the one receiver is the last: it acks at its start, so that a loop of broadcasts
//              pipelines (the root sends the next op's data while the ack travels).
//   reduce:    each receiver tells the rank it receives from that it is ready (at its start);
//              a sender completes once its receiver said so.
import {
  awaitedLater,
  cutInto,
  type Group,
  type Mem,
  mod,
  PIECE_BYTES,
  piecesOf,
  type Span,
  singleHopPieces,
} from './group.js';

/** buf on every rank ends equal to buf on `root`. */
export async function chainBroadcast(g: Group, m: Mem, buf: Span, root: number): Promise<void> {
  if (g.size === 1) return;
  const pos = mod(g.rank - root, g.size);
  const prev = mod(g.rank - 1, g.size);
  const next = mod(g.rank + 1, g.size);
  const last = g.size - 1;
  const two = g.size === 2;
  // Between 2 ranks nothing is forwarded: pieces pipeline nothing, but each connection takes one.
  const ps = two
    ? cutInto(buf, singleHopPieces(buf.count * m.elemBytes, g.lanes), m.elemBytes)
    : piecesOf(buf, m.elemBytes, PIECE_BYTES);
  const ackStep = ps.length;
  const readyStep = ps.length + 1;
  const none = m.view(buf.addr, 0);
  const acked = pos === 0 ? awaitedLater(g.recv(prev, ackStep, none)) : undefined;
  // (the next of the last rank is the root)
  const ackedEarly = two && pos === last ? awaitedLater(g.send(next, ackStep, none)) : undefined;
  const ready = !two && pos < last ? awaitedLater(g.recv(next, readyStep, none)) : undefined;
  const told = !two && pos > 0 ? awaitedLater(g.send(prev, readyStep, none)) : undefined;
  // Every receive is posted up front, so each piece lands in place as it arrives.
  const arriving = pos > 0 ? ps.map((p, k) => awaitedLater(g.recv(prev, k, m.view(p.addr, p.count)))) : [];
  const sends: Promise<void>[] = [];
  for (let k = 0; k < ps.length; k++) {
    if (pos > 0) await arriving[k];
    if (pos < last) sends.push(awaitedLater(g.send(next, k, m.view(ps[k].addr, ps[k].count))));
  }
  if (!two && pos === last) sends.push(g.send(next, ackStep, none));
  await Promise.all(sends);
  await ackedEarly;
  await told;
  await ready;
  await acked;
}

/** buf on `root` ends holding the reduction of every rank's buf; other ranks' buf is spent. */
export async function chainReduce(g: Group, m: Mem, buf: Span, root: number): Promise<void> {
  if (g.size === 1) return;
  const pos = mod(g.rank - root, g.size);
  const from = mod(g.rank + 1, g.size);
  const to = mod(g.rank - 1, g.size);
  const ps = piecesOf(buf, m.elemBytes);
  const readyStep = ps.length;
  const none = m.view(buf.addr, 0);
  const receives = pos < g.size - 1;
  const ready = pos > 0 ? awaitedLater(g.recv(to, readyStep, none)) : undefined;
  const told = receives ? awaitedLater(g.send(from, readyStep, none)) : undefined;
  const scratch = receives ? m.scratch(buf.count) : 0;
  const tmp = (p: Span) => scratch + (p.addr - buf.addr);
  const arriving = receives ? ps.map((p, k) => awaitedLater(g.recv(from, k, m.view(tmp(p), p.count)))) : [];
  const sends: Promise<void>[] = [];
  for (let k = 0; k < ps.length; k++) {
    const p = ps[k];
    if (receives) {
      await arriving[k];
      m.reduce(p.addr, tmp(p), p.count);
    }
    if (pos > 0) sends.push(awaitedLater(g.send(to, k, m.view(p.addr, p.count))));
  }
  await Promise.all(sends);
  await told;
  await ready;
}
