// Recursive doubling allreduce: log2(n) exchanges of the whole buffer, for small messages where
// latency, not bandwidth, decides (a ring needs 2(n-1) steps). Ranks beyond the largest power of
// two first fold their data into a partner and get the result back at the end. Partners combine
// the same two values in either order, and the reductions commute exactly, so every rank ends
// with bit-identical results.
import { type Group, type Mem, type Span, exchange } from './group.js';

export async function doublingAllReduce(g: Group, m: Mem, buf: Span): Promise<void> {
  if (g.size === 1) return;
  const p2 = 1 << Math.floor(Math.log2(g.size));
  const extra = g.size - p2;
  const data = m.view(buf.addr, buf.count);
  const scratch = m.scratch(buf.count);
  const into = m.view(scratch, buf.count);
  const last = Math.log2(p2) + 1; // step of the final hand-back
  if (g.rank >= p2) {
    await g.send(g.rank - p2, 0, data);
    await g.recv(g.rank - p2, last, data);
    return;
  }
  if (g.rank < extra) {
    await g.recv(g.rank + p2, 0, into);
    m.reduce(buf.addr, scratch, buf.count);
  }
  for (let mask = 1, step = 1; mask < p2; mask <<= 1, step++) {
    const partner = g.rank ^ mask;
    await exchange(g, partner, partner, step, data, into);
    m.reduce(buf.addr, scratch, buf.count);
  }
  if (g.rank < extra) await g.send(g.rank + p2, last, data);
}
