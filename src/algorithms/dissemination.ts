// Dissemination barrier: in round k every rank signals rank + 2^k and waits for rank - 2^k, so
// after ceil(log2 n) rounds each rank has heard, directly or not, from every other.
import { type Group, mod } from './group.js';

const EMPTY = new Uint8Array(0);

export async function disseminationBarrier(g: Group): Promise<void> {
  for (let d = 1, step = 0; d < g.size; d <<= 1, step++) {
    await Promise.all([
      g.send(mod(g.rank + d, g.size), step, EMPTY),
      g.recv(mod(g.rank - d, g.size), step, new Uint8Array(0)),
    ]);
  }
}
