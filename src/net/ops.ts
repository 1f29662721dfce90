// What each collective does around its network schedule: where its working memory lies (an
// alloc() buffer in place, or a region the input is copied into and the output out of), which
// schedule of src/algorithms runs on it, and the avg scaling. The engine decides the order of
// ops, deadlines and blame; this file only moves one op's data.

import { chainBroadcast, chainReduce } from '../algorithms/chain.js';
import { directGather, directScatter } from '../algorithms/direct.js';
import { disseminationBarrier } from '../algorithms/dissemination.js';
import type { Group, Mem, Span } from '../algorithms/group.js';
import { pairwiseAllToAll } from '../algorithms/pairwise.js';
import { ringAllGather, ringReduceScatter } from '../algorithms/ring.js';
import type { OpTrace } from '../core/trace.js';
import type { OpSpec } from '../engine/engine.js';
import { copyOut as copyFrom, copyIn as copyInto, type Kernels, region, scale as scaleBy } from './memory.js';

export interface NetOpContext {
  m: Mem;
  /** The communicator's ranks as the schedules see them. */
  world: Group;
  kernels: Kernels;
  /**
   * The engine's allReduce on `w` (it chooses the algorithm); with `from`, of `from` into `w`
   * (an input in the node memory, apart from the output: read in place, not copied first).
   */
  allReduce(w: Span, from?: Span): Promise<void>;
}

/**
 * Runs one phase of the op; with WEBCCL_TRACE, drawn as a step of the op ('copy in', 'exchange':
 * the schedule's sends and receives, 'scale', 'copy out'), a handful per op whatever its size.
 */
function phase<T>(trace: OpTrace | undefined, name: string, run: () => T): T {
  if (!trace) return run();
  const t0 = performance.now();
  const r = run();
  if (r instanceof Promise) return r.finally(() => trace.step(name, t0, performance.now())) as T;
  trace.step(name, t0, performance.now());
  return r;
}

export async function runNetOp(spec: OpSpec, c: NetOpContext): Promise<void> {
  const { name, dtype, count: n, root, input, output } = spec;
  const { m, world, kernels } = c;
  const tr = spec.trace;
  // Untraced, the phases are the plain functions (no closure per op).
  const copyIn: typeof copyInto = tr ? (...a) => phase(tr, 'copy in', () => copyInto(...a)) : copyInto;
  const copyOut: typeof copyFrom = tr ? (...a) => phase(tr, 'copy out', () => copyFrom(...a)) : copyFrom;
  const scale: typeof scaleBy = tr ? (...a) => phase(tr, 'scale', () => scaleBy(...a)) : scaleBy;
  const exchange = (run: () => Promise<void>) => (tr ? phase(tr, 'exchange', run) : run());
  const blocks = (w: Span) =>
    Array.from({ length: world.size }, (_, i) => ({ addr: w.addr + i * n * m.elemBytes, count: n }));
  switch (name) {
    case 'allReduce': {
      const w = region(m, output, n);
      // An input in the node memory apart from the output is read where it lies (the schedule's
      // first reduction writes the output); anything else is copied in first.
      const from = input!.addr && input!.addr !== w.addr ? { addr: input!.addr, count: n } : undefined;
      if (!from) copyIn(m, w, input!);
      await exchange(() => c.allReduce(w, from));
      if (spec.op === 'avg') scale(kernels, dtype, w, 1 / world.size);
      return copyOut(m, w, output!);
    }
    case 'broadcast': {
      const w = region(m, output, n);
      if (world.rank === root) copyIn(m, w, input!);
      await exchange(() => chainBroadcast(world, m, w, root));
      return copyOut(m, w, output!);
    }
    case 'reduce': {
      // Only the root's output changes: other ranks reduce in scratch, not in their input.
      const w = world.rank === root ? region(m, output, n) : { addr: m.scratch(n), count: n };
      copyIn(m, w, input!);
      await exchange(() => chainReduce(world, m, w, root));
      if (world.rank !== root) return;
      if (spec.op === 'avg') scale(kernels, dtype, w, 1 / world.size);
      return copyOut(m, w, output!);
    }
    case 'allGather': {
      const w = region(m, output, n * world.size);
      copyIn(m, blocks(w)[world.rank], input!);
      await exchange(() => ringAllGather(world, m, blocks(w)));
      return copyOut(m, w, output!);
    }
    case 'reduceScatter': {
      const w = { addr: m.scratch(n * world.size), count: n * world.size };
      copyIn(m, w, input!);
      await exchange(() => ringReduceScatter(world, m, blocks(w)));
      const mine = blocks(w)[world.rank];
      if (spec.op === 'avg') scale(kernels, dtype, mine, 1 / world.size);
      if (output!.addr) m.copy(output!.addr, mine.addr, n);
      else copyOut(m, mine, output!);
      return;
    }
    case 'barrier':
      return exchange(() => disseminationBarrier(world));
    case 'allToAll': {
      const c = spec.counts ?? { send: Array<number>(world.size).fill(n), recv: Array<number>(world.size).fill(n) };
      const src = region(m, input, total(c.send));
      copyIn(m, src, input!);
      const dst = region(m, output, total(c.recv));
      await exchange(() =>
        pairwiseAllToAll(world, m, packed(src, c.send, m.elemBytes), packed(dst, c.recv, m.elemBytes)),
      );
      return copyOut(m, dst, output!);
    }
    case 'gather': {
      const mine = region(m, input, n);
      copyIn(m, mine, input!);
      if (world.rank !== root) return exchange(() => directGather(world, m, mine, null, root));
      const w = region(m, output, n * world.size);
      await exchange(() => directGather(world, m, mine, blocks(w), root));
      return copyOut(m, w, output!);
    }
    case 'scatter': {
      const mine = region(m, output, n);
      const w = world.rank === root ? region(m, input, n * world.size) : undefined;
      if (w) copyIn(m, w, input!);
      await exchange(() => directScatter(world, m, w ? blocks(w) : null, mine, root));
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
