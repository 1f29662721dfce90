// Recursive doubling allreduce: log2(n) exchanges of the whole buffer, for small messages where
// latency, not bandwidth, decides (a ring needs 2(n-1) steps). Ranks beyond the largest power of
// two first fold their data into a partner and get the result back at the end. Partners combine
// the same two values in either order, and the reductions commute exactly, so every rank ends
// with bit-identical results.
import { exchange, type Group, type Mem, type Span } from './group.js';

/**
 * With `from` (as long as `buf`, not overlapping it), of `from` into `buf`: this rank's data is
 * read from `from` until its first reduction writes `buf`, so nothing is copied first.
 */
export async function doublingAllReduce(g: Group, m: Mem, buf: Span, from?: Span): Promise<void> {
  const p2 = 1 << Math.floor(Math.log2(g.size));
  const extra = g.size - p2;
  const data = m.view(buf.addr, buf.count);
  if (g.size === 1) {
    if (from) m.copy(buf.addr, from.addr, buf.count);
    return;
  }
  const scratch = m.scratch(buf.count);
  const into = m.view(scratch, buf.count);
  const last = Math.log2(p2) + 1; // step of the final hand-back
  /** Where this rank's running value is: `from` until the first reduction into `buf`. */
  let mine = from ?? buf;
  const combine = () => {
    if (mine === buf) m.reduce(buf.addr, scratch, buf.count);
    else m.reduceFrom(buf.addr, mine.addr, scratch, buf.count);
    mine = buf;
  };
  if (g.rank >= p2) {
    await g.send(g.rank - p2, 0, m.view(mine.addr, buf.count));
    await g.recv(g.rank - p2, last, data);
    return;
  }
  if (g.rank < extra) {
    await g.recv(g.rank + p2, 0, into);
    combine();
  }
  for (let mask = 1, step = 1; mask < p2; mask <<= 1, step++) {
    const partner = g.rank ^ mask;
    await exchange(g, partner, partner, step, m.view(mine.addr, buf.count), into);
    combine();
  }
  if (g.rank < extra) await g.send(g.rank + p2, last, data);
}
