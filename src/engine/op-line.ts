// What a WEBCCL_DEBUG=TRACE line says of a finished op: only the fields that mean something for
// its kind. A barrier moves no data (no datatype, op or count); only reductions have an op; the
// rooted collectives name their root, send and recv their peer.
import type { Dtype, ReduceOp } from '../core/dtypes.js';

const REDUCING: ReadonlySet<string> = new Set(['allReduce', 'reduce', 'reduceScatter']);
const ROOTED: ReadonlySet<string> = new Set(['broadcast', 'reduce', 'gather', 'scatter']);

export interface OpLineFields {
  name: string;
  seq: number;
  algo: unknown;
  dtype: Dtype;
  op: ReduceOp;
  count: number;
  root: number;
  peer?: number;
}

/** "allReduce #3 ring f32 sum count 1024", "broadcast #4 chain u8 count 16 root 1", "barrier #0 dissemination". */
export function opLine(o: OpLineFields): string {
  const head = `${o.name} #${o.seq} ${String(o.algo)}`;
  if (o.name === 'barrier') return head;
  return `${head} ${o.dtype}${REDUCING.has(o.name) ? ` ${o.op}` : ''} count ${o.count}${ROOTED.has(o.name) ? ` root ${o.root}` : ''}${o.peer !== undefined ? ` peer ${o.peer}` : ''}`;
}
