// Runs one op across nodes on its working memory, with the allReduce schedule the engine chose:
// the flat ring or doubling over every rank, the tree, or the hierarchical schedule, whose node
// phase meets this node's ranks over shared memory and whose ranks across nodes run a flat one.

import { doublingAllReduce } from '../algorithms/doubling.js';
import type { Group, Mem, Span } from '../algorithms/group.js';
import { hierarchicalAllReduce } from '../algorithms/hierarchical.js';
import { ringAllReduce } from '../algorithms/ring.js';
import { treeAllReduce } from '../algorithms/tree.js';
import type { RankContext } from '../engine/context.js';
import type { NodeMates } from '../engine/node-mates.js';
import { flatAlgo } from '../tuner/net-tuner.js';
import type { Arena } from './arena.js';
import { type Kernels, workingMemory } from './memory.js';
import type { NetOp } from './net-op.js';
import { nodePhase } from './node-phase.js';
import { runNetOp } from './ops.js';
import type { NetSchedule } from './schedule.js';

/** What running an op takes of its engine. */
export interface Execution {
  ctx: RankContext;
  kernels: Kernels;
  arena: Arena;
  schedule: NetSchedule;
  /** This node's ranks of the communicator (undefined: none but this rank). */
  local: NodeMates | undefined;
  /** The engine's deadline, for ops issued without their own. */
  timeoutMs: number;
  /** The world ranks `members` as the group `op`'s schedule runs on. */
  group(members: number[], op: NetOp): Group;
}

/** Runs the op's schedule on its working memory; the allReduce algorithm is the engine's choice (op.algo). */
export function execute(op: NetOp, x: Execution): Promise<void> {
  const m = workingMemory(x.ctx.core.memory, x.kernels, x.arena, op.spec);
  const world = x.group(x.schedule.worldRanks, op);
  return runNetOp(op.spec, {
    m,
    world,
    kernels: x.kernels,
    allReduce: (w, from) => allReduce(op, x, { m, world, w, from }),
  });
}

/** Of `from` into `w` when given: the flat schedules read it in place, the others after a copy. */
function allReduce(op: NetOp, x: Execution, on: { m: Mem; world: Group; w: Span; from?: Span }): Promise<void> {
  const { m, world, w, from } = on;
  const { schedule } = x;
  const { topo } = schedule;
  // `how`: the op's own schedule over every rank; without it, the one the model picks for `g`.
  const flat = (g: Group, mm: Mem, s: Span, how?: { algo: 'ring' | 'doubling'; from?: Span; piece: number }) => {
    const algo = how?.algo ?? flatAlgo(s.count * mm.elemBytes, g.size, topo.sharing, topo.channels);
    return algo === 'ring'
      ? ringAllReduce(g, mm, s, how?.from, how?.piece ?? schedule.piece(s.count * mm.elemBytes, g.size))
      : doublingAllReduce(g, mm, s, how?.from);
  };
  if (op.algo !== 'tree' && op.algo !== 'hierarchical')
    return flat(world, m, w, { algo: op.algo as 'ring' | 'doubling', from, piece: op.piece });
  if (from) m.copy(w.addr, from.addr, w.count);
  if (op.algo === 'tree') return treeAllReduce(world, m, w);
  return hierarchicalAllReduce(
    nodePhase({
      local: x.local,
      nodeRanks: schedule.nodeRanks,
      ctx: x.ctx,
      dtype: op.spec.dtype,
      op: op.spec.op,
      timeoutMs: op.spec.timeoutMs ?? x.timeoutMs,
      layout: op.spec.layout,
    }),
    x.group(schedule.interRanks, op),
    m,
    w,
    (g, mm, s) => flat(g, mm, s),
  );
}
