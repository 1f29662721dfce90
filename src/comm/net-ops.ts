// What each collective does around its network schedule: where its working memory lies (an
// alloc() buffer in place, or a region the input is copied into and the output out of), which
// schedule of src/algorithms runs on it, and the avg scaling. The engine decides the order of
// ops, deadlines and blame; this file only moves one op's data.
import type { Group, Mem, Span } from '../algorithms/group.js';
import { ringAllGather, ringReduceScatter } from '../algorithms/ring.js';
import { chainBroadcast, chainReduce } from '../algorithms/chain.js';
import { disseminationBarrier } from '../algorithms/dissemination.js';
import { pairwiseAllToAll } from '../algorithms/pairwise.js';
import { directGather, directScatter } from '../algorithms/direct.js';
import { type Kernels, copyIn, copyOut, region, scale } from './net-memory.js';
import type { OpSpec } from './engine.js';

export interface NetOpContext {
  m: Mem;
  /** The communicator's ranks as the schedules see them. */
  world: Group;
  kernels: Kernels;
  /** The engine's allReduce on `w` (it chooses the algorithm). */
  allReduce(w: Span): Promise<void>;
}

export async function runNetOp(spec: OpSpec, c: NetOpContext): Promise<void> {
  const { name, dtype, count: n, root, input, output } = spec;
  const { m, world, kernels } = c;
  const blocks = (w: Span) => Array.from({ length: world.size }, (_, i) => ({ addr: w.addr + i * n * m.elemBytes, count: n }));
  switch (name) {
    case 'allReduce': {
      const w = region(m, output, n);
      copyIn(m, w, input!);
      await c.allReduce(w);
      if (spec.op === 'avg') scale(kernels, dtype, w, 1 / world.size);
      return copyOut(m, w, output!);
    }
    case 'broadcast': {
      const w = region(m, output, n);
      if (world.rank === root) copyIn(m, w, input!);
      await chainBroadcast(world, m, w, root);
      return copyOut(m, w, output!);
    }
    case 'reduce': {
      // Only the root's output changes: other ranks reduce in scratch, not in their input.
      const w = world.rank === root ? region(m, output, n) : { addr: m.scratch(n), count: n };
      copyIn(m, w, input!);
      await chainReduce(world, m, w, root);
      if (world.rank !== root) return;
      if (spec.op === 'avg') scale(kernels, dtype, w, 1 / world.size);
      return copyOut(m, w, output!);
    }
    case 'allGather': {
      const w = region(m, output, n * world.size);
      copyIn(m, blocks(w)[world.rank], input!);
      await ringAllGather(world, m, blocks(w));
      return copyOut(m, w, output!);
    }
    case 'reduceScatter': {
      const w = { addr: m.scratch(n * world.size), count: n * world.size };
      copyIn(m, w, input!);
      await ringReduceScatter(world, m, blocks(w));
      const mine = blocks(w)[world.rank];
      if (spec.op === 'avg') scale(kernels, dtype, mine, 1 / world.size);
      if (output!.addr) m.copy(output!.addr, mine.addr, n);
      else copyOut(m, mine, output!);
      return;
    }
    case 'barrier':
      return disseminationBarrier(world);
    case 'allToAll': {
      const c = spec.counts ?? { send: Array<number>(world.size).fill(n), recv: Array<number>(world.size).fill(n) };
      const src = region(m, input, total(c.send));
      copyIn(m, src, input!);
      const dst = region(m, output, total(c.recv));
      await pairwiseAllToAll(world, m, packed(src, c.send, m.elemBytes), packed(dst, c.recv, m.elemBytes));
      return copyOut(m, dst, output!);
    }
    case 'gather': {
      const mine = region(m, input, n);
      copyIn(m, mine, input!);
      if (world.rank !== root) return directGather(world, m, mine, null, root);
      const w = region(m, output, n * world.size);
      await directGather(world, m, mine, blocks(w), root);
      return copyOut(m, w, output!);
    }
    case 'scatter': {
      const mine = region(m, output, n);
      const w = world.rank === root ? region(m, input, n * world.size) : undefined;
      if (w) copyIn(m, w, input!);
      await directScatter(world, m, w ? blocks(w) : null, mine, root);
      return copyOut(m, mine, output!);
    }
  }
}

const total = (counts: number[]): number => counts.reduce((a, c) => a + c, 0);

/** Blocks of `counts[i]` elements packed in rank order from `w`. */
function packed(w: Span, counts: number[], elemBytes: number): Span[] {
  let at = w.addr;
  return counts.map((count) => {
    const s = { addr: at, count };
    at += count * elemBytes;
    return s;
  });
}
