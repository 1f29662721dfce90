// The rows of a sweep, computed the same way by the launcher and by every rank: datatype ×
// op × size, in nccl-tests' order (sizes innermost).
import { type Dtype, FLOAT_DTYPES, type ReduceOp } from '../../core/dtypes.js';
import type { Algo } from '../../core/shm-map.js';
import type { NetAlgo } from '../../tuner/net-tuner.js';
import type { PerfOptions } from './args.js';
import { type Collective, HAS_IN_PLACE, HAS_ROOT, type Shape, shapeOf, sweepSizes } from './collectives.js';

/** What the ranks need of the options (structured-clonable, passed as one JSON argument). */
export interface RankSpec {
  collective: Collective;
  sizes: number[];
  dtypes: Dtype[];
  ops: ReduceOp[];
  root: number;
  algo: Algo | NetAlgo | undefined;
  iters: number | undefined;
  timeSec: number;
  reps: number;
  warmup: number;
  check: boolean;
  buffers: 'shm' | 'js';
  /** Ranks of the group the collective runs on (world ranks 0..group−1); undefined: the world. */
  group: number | undefined;
}

export interface PlannedRow {
  idx: number;
  dtype: Dtype;
  op: ReduceOp;
  root: number;
  shape: Shape;
}

export const PLACEMENTS = ['oop', 'ip'] as const;
export type Placement = (typeof PLACEMENTS)[number];

/** The placements a collective is timed in: out-of-place, and in-place where it has that form. */
export function placementsOf(coll: Collective): readonly Placement[] {
  return HAS_IN_PLACE[coll] ? PLACEMENTS : ['oop'];
}

export function rankSpec(o: PerfOptions): RankSpec {
  return {
    collective: o.collective,
    sizes: sweepSizes(o.minBytes, o.maxBytes, o.factor, o.stepBytes),
    dtypes: o.dtypes,
    ops: o.ops,
    root: o.root,
    algo: o.algo,
    iters: o.iters,
    timeSec: o.timeSec,
    reps: o.reps,
    warmup: o.warmup,
    check: o.check,
    buffers: o.buffers,
    group: o.group,
  };
}

export function planRows(spec: RankSpec, nranks: number): PlannedRow[] {
  const rows: PlannedRow[] = [];
  for (const dtype of spec.dtypes) {
    for (const op of spec.ops) {
      if (op === 'avg' && !FLOAT_DTYPES.has(dtype)) continue; // avg is for floats only
      for (const size of spec.sizes) {
        rows.push({
          idx: rows.length,
          dtype,
          op,
          root: HAS_ROOT[spec.collective] ? spec.root : -1,
          shape: shapeOf(spec.collective, dtype, nranks, size),
        });
      }
    }
  }
  return rows;
}
