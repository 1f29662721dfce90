// The hand-off of a communicator's checked call to its engine: refuses an op whose buffers an
// op not yet waited for still holds, plans layout conversions, draws the op on the trace,
// submits it, and then holds its buffers, counts it and has its errors name the group.
// communicator.ts checks each call's arguments and comes here last.
import { DTYPE_SIZE, type Dtype, type ReduceOp } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import type { Kind } from '../core/shm-map.js';
import { OpTrace, type TraceTrack } from '../core/trace.js';
import type { Buf } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import type { Engine, OpCounters, OpSpec } from '../engine/engine.js';
import { checkMode, InputCheck } from '../engine/input-check.js';
import { inGroup, type Placement } from '../engine/placement.js';
import type { Work } from '../engine/work.js';
import { type ConversionCounters, planLayouts, WIRE_SIGNATURE } from '../layouts/plan.js';
import { noPartialOverlap } from './arguments.js';
import { BuffersInFlight } from './in-flight.js';
import type { P2pOptions } from './options.js';

/** What the hand-off needs of its communicator. */
export interface IssueParts {
  ctx: RankContext;
  engine: Engine;
  rank: number;
  size: number;
  acrossNodes: boolean;
  placement: Placement;
  counters: OpCounters;
  conversions: ConversionCounters;
  /** WEBCCL_TRACE: the rank's track, where its ops are drawn. */
  track: TraceTrack | undefined;
}

/** The options enqueue() reads (every op's timeoutMs; tensor ops' wire layout). */
type IssueOptions = { timeoutMs?: number; wireLayout?: unknown; [WIRE_SIGNATURE]?: number };

/** An op for enqueue(): its fields as the engine takes them, with defaults for what most ops leave out. */
export interface IssuedOp {
  name: Kind;
  /** The call's algorithm option (allReduce). */
  algo?: unknown;
  /** Default: the input's dtype, else the output's; u8 without buffers (barrier). */
  dtype?: Dtype;
  /** Default 'sum' (ops that reduce nothing ignore it). */
  op?: ReduceOp;
  /** Elements per rank. Default: the input's count, else the output's; 0 without buffers. */
  count?: number;
  /** The root, or a send's or recv's peer. Default 0. */
  root?: number;
  input?: Buf | null;
  output?: Buf | null;
  /** The call's options. */
  options: IssueOptions;
  /** A send's or recv's peer and tag. */
  peer?: number;
  tag?: number;
  /** allToAll's per-peer counts (count is then 0). */
  counts?: OpSpec['counts'];
}

export class OpIssue {
  /** The buffers of ops the caller has not yet seen end (BUFFER_BUSY). */
  readonly inFlight = new BuffersInFlight();
  /** WEBCCL_CHECK=1: fail an op whose buffers the caller writes while it is in flight. */
  private readonly checkInputs = checkMode();

  constructor(private readonly p: IssueParts) {}

  /** A collective (or a send/recv that needs the full way: see p2p()). */
  enqueue(d: IssuedOp): Work {
    const { name, algo, op = 'sum', root = 0, options: o } = d;
    const input = d.input ?? null;
    const output = d.output ?? null;
    const dtype = d.dtype ?? (input ?? output)?.dtype ?? 'u8';
    const count = d.count ?? (input ?? output)?.count ?? 0;
    const p = this.p;
    if (input && output) noPartialOverlap(name, input, output, p.rank, p.size);
    this.admit(name, input, output, count);
    const check = this.checkInputs && input ? new InputCheck(name, input, output) : undefined;
    // Tensors with layouts may run on converted copies (layouts/plan.ts); plain buffers as they are.
    const laidOut =
      input?.layout !== undefined ||
      output?.layout !== undefined ||
      o.wireLayout !== undefined ||
      o[WIRE_SIGNATURE] !== undefined;
    const elems = d.counts ? d.counts.send.reduce((a, c) => a + c, 0) : count;
    const plan = laidOut
      ? planLayouts(
          {
            core: p.ctx.core,
            heap: p.ctx.heap,
            rank: p.rank,
            size: p.size,
            counters: p.conversions,
            acrossNodes: p.acrossNodes,
          },
          name,
          input,
          output,
          o.wireLayout,
          o[WIRE_SIGNATURE],
        )
      : undefined;
    let work: Work;
    try {
      work = p.engine.submit({
        name,
        algo,
        dtype,
        op,
        count: plan?.count ?? count,
        root,
        input: plan ? plan.input : input,
        output: plan ? plan.output : output,
        timeoutMs: o.timeoutMs,
        check,
        layout: plan?.layout,
        shape: plan?.shape,
        relayout: plan?.relayout,
        trace: p.track && this.opTrace(d, dtype, elems),
        // Fields listed, not spread: a spread makes a slow dictionary object (microseconds an op).
        peer: d.peer,
        tag: d.tag,
        counts: d.counts,
      });
    } catch (e) {
      plan?.finish(e);
      throw e;
    }
    if (plan) work.beforeSettle((e) => plan.finish(e));
    return this.issued(work, input, output, elems * DTYPE_SIZE[dtype]);
  }

  /**
   * send and recv: straight to the engine's sendRecv, without the steps only collectives take,
   * unless the op needs them (a tensor layout, WEBCCL_CHECK, WEBCCL_TRACE) or the engine takes
   * send and recv only as specs (across nodes). A ping-pong pays every step per message.
   */
  p2p(name: 'send' | 'recv', b: Buf, peer: number, o: P2pOptions): Work {
    const input = name === 'send' ? b : null,
      output = name === 'send' ? null : b;
    const tag = o.tag ?? 0;
    const engine = this.p.engine;
    if (!engine.sendRecv || b.layout !== undefined || this.checkInputs || this.p.track !== undefined)
      return this.enqueue({ name, root: peer, input, output, options: o, peer, tag });
    this.admit(name, input, output, b.count);
    return this.issued(engine.sendRecv(name, b, peer, tag, o.timeoutMs), input, output, b.bytes.byteLength);
  }

  /** Refuses an op whose buffers an op not yet waited for still holds, or that is too long. */
  private admit(name: Kind, input: Buf | null, output: Buf | null, count: number): void {
    const busy = (input && this.inFlight.heldBy(input)) || (output && this.inFlight.heldBy(output));
    if (busy)
      fail(
        'BUFFER_BUSY',
        `${name}: a buffer is still in use by ${busy}, which has not been waited for; wait for it (or a later op) first`,
      );
    if (count > 0x7fffffff) fail('INVALID_ARGUMENT', `${name}: count ${count} exceeds 2^31-1 elements`);
  }

  /** An op the engine took: its group names itself in its errors, its buffers are held, it is counted. */
  private issued(work: Work, input: Buf | null, output: Buf | null, bytes: number): Work {
    const { placement, rank, counters } = this.p;
    if (placement.group) work.label((e) => inGroup(e, placement, rank));
    this.inFlight.add(work, input, output);
    counters.ops++;
    counters.bytes += bytes;
    return work;
  }

  /** WEBCCL_TRACE: an op's args on this rank's track (the engine adds seq and algorithm). */
  private opTrace(d: IssuedOp, dtype: Dtype, elems: number): OpTrace {
    const p = this.p;
    return new OpTrace(p.track!, {
      // (a job across nodes also has each node's own communicator, for the hierarchical node phase)
      collective: d.name,
      bytes: elems * DTYPE_SIZE[dtype],
      dtype,
      communicator: p.ctx.worldRank !== undefined && !p.acrossNodes ? 'node' : p.placement.id,
      ranks: p.size,
      ...(d.peer !== undefined && { peer: d.peer, tag: d.tag }),
    });
  }
}
