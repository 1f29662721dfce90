// The MISMATCH of an op whose ranks disagree, as the step loop's signature check left it in the
// rank's descriptor (assembly/engine): which field, which two ranks and their values, shown in
// the caller's names (dtype and op names, layouts, per-peer counts) rather than their codes.

import { DTYPES, REDUCE_OPS } from '../core/dtypes.js';
import { WebcclError } from '../core/errors.js';
import { ALGO, D, E, KIND, SIG_FIELDS } from '../core/shm-map.js';
import { showLayoutSignature, showShapeClass } from '../core/tensor-layout.js';
import { PER_PEER } from './counts.js';

/**
 * The MISMATCH the descriptor holds (`f` reads a field of it, by its D offset), or null when
 * the op failed otherwise. `what`: the op, as errors name it.
 */
export function disagreement(what: string, f: (field: number) => number): WebcclError | null {
  if (f(D.ERR) === E.MISMATCH) {
    const field = SIG_FIELDS[f(D.ERR_FIELD)];
    const show = (v: number) => showSigValue(f(D.ERR_FIELD), v);
    const [ra, rb, va, vb] = [f(D.ERR_RANK_A), f(D.ERR_RANK_B), f(D.ERR_VAL_A), f(D.ERR_VAL_B)];
    return new WebcclError(
      'MISMATCH',
      `${what}: ranks disagree on the ${field}: rank ${ra} has ${show(va)}, rank ${rb} has ${show(vb)}`,
      {
        field,
        ranks: [ra, rb],
        values: [show(va), show(vb)],
      },
    );
  }
  if (f(D.ERR) === E.RELAYOUT) {
    // Tensors of one shape in different layouts: the engine runs the op again in row-major
    // (layouts/plan.ts relayout); this error surfaces only if it cannot, as the old MISMATCH.
    const [ra, rb, va, vb] = [f(D.ERR_RANK_A), f(D.ERR_RANK_B), f(D.ERR_VAL_A), f(D.ERR_VAL_B)];
    const values = [showLayoutSignature(va), showLayoutSignature(vb)];
    return new WebcclError(
      'MISMATCH',
      `${what}: ranks hold different layouts: rank ${ra} has ${values[0]}, rank ${rb} has ${values[1]}`,
      {
        field: 'layout',
        ranks: [ra, rb],
        values,
        relayout: true,
      },
    );
  }
  if (f(D.ERR) === E.SIZE_MISMATCH) {
    const [sender, receiver, sent, expected] = [f(D.ERR_RANK_A), f(D.ERR_RANK_B), f(D.ERR_VAL_A), f(D.ERR_VAL_B)];
    // Ranks that disagree: MISMATCH naming the pair, with the values as across nodes.
    return new WebcclError(
      'MISMATCH',
      `${what}: ranks disagree on the counts: rank ${sender} has sendCounts[${receiver}]=${sent}, rank ${receiver} has recvCounts[${sender}]=${expected}`,
      {
        field: 'counts',
        ranks: [sender, receiver],
        values: [`sendCounts[${receiver}]=${sent}`, `recvCounts[${sender}]=${expected}`],
      },
    );
  }
  return null;
}

function showSigValue(field: number, v: number): string {
  const name = (table: Record<string, number>) => Object.keys(table).find((k) => table[k] === v) ?? String(v);
  switch (SIG_FIELDS[field]) {
    case 'collective':
      return name(KIND);
    case 'algorithm':
      return name(ALGO);
    case 'dtype':
      return DTYPES[v] ?? String(v);
    case 'count':
      return v === PER_PEER ? 'per-peer counts' : String(v);
    case 'op':
      return REDUCE_OPS[v] ?? String(v);
    case 'layout':
      return showLayoutSignature(v);
    case 'shape':
      return showShapeClass(v);
    default:
      return String(v);
  }
}
