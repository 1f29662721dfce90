// What a progress thread (hosts/shm-host.ts for shared memory, net-host.ts across nodes) does with the ops
// it takes from a postbox: the op as its engine takes it (buffers viewed in the node memory where the
// rank posted them), the handle of an op refused at once, and the outcome written back.

import { DTYPE_SIZE, type Dtype } from '../core/dtypes.js';
import { WebcclError } from '../core/errors.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import type { OpTrace } from '../core/trace.js';
import type { Buf } from '../engine/buffers.js';
import type { OpSpec } from '../engine/engine.js';
import { Work, type WorkDriver } from '../engine/work.js';
import type { OpOutcome, PostedOp } from '../progress/postboxes.js';

/** The driver of an op refused at once: it has settled, so nothing ever drives it. */
export const REFUSED: WorkDriver = { progress: () => undefined, progressAsync: async () => undefined };

/** The handle of an op that ends at once (its engine refused it: the communicator has failed). */
export function refusedWork(name: PostedOp['name'], seq: number, e?: unknown): Work {
  const w = new Work(name, seq, REFUSED, true);
  if (e !== undefined) w.timing.startedAt = performance.now();
  w.settle(e === undefined ? undefined : WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e)));
  return w;
}

/** The op posted (readPosted: the op, its buffers at `input` / `output` in `memory`) as an engine takes it. */
export function hostedSpec(
  memory: WebAssembly.Memory,
  posted: { input: number; output: number; value: PostedOp },
  trace: OpTrace | undefined,
): OpSpec {
  const { input, output, value: p } = posted;
  const view = (addr: number, count: number, dtype: Dtype): Buf => {
    const buffer = freshBuffer(memory);
    const bytes = new Uint8Array(buffer, addr, count * DTYPE_SIZE[dtype]);
    return { addr, dtype, count, bytes, memory: buffer, words: undefined };
  };
  const inBuf = p.input ? view(input, p.input.count, p.dtype) : null;
  const outBuf = p.inPlace ? inBuf : p.output ? view(output, p.output.count, p.dtype) : null;
  return {
    name: p.name,
    algo: p.algo,
    dtype: p.dtype,
    op: p.op,
    count: p.count,
    root: p.root,
    counts: p.counts,
    input: inBuf,
    output: outBuf,
    timeoutMs: p.timeoutMs,
    layout: p.layout,
    seq: p.seq,
    shape: p.shape,
    // Row-major already: when ranks hold different layouts, the op runs again on the same buffers.
    relayout: p.relayout ? () => ({ input: inBuf, output: outBuf, count: p.count }) : undefined,
    trace,
  };
}

/** What the rank reads back of an ended op: when it ran (epoch ms) and how it failed, if it did. */
export function outcomeOf(w: Work): OpOutcome {
  const err = w.failure;
  return {
    startedAt: performance.timeOrigin + w.timing.startedAt,
    completedAt: performance.timeOrigin + w.timing.completedAt,
    joinedAt: performance.timeOrigin + w.timing.joinedAt,
    ...(err && { error: { code: err.code, message: err.reason, details: err.details } }),
  };
}
