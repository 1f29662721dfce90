// The options of a communicator and of each of its collectives. A key that another collective
// knows is refused too (`op` on a broadcast, `algo` on an allGather): the call would ignore it,
// and the caller would believe it applied.

import { envNumber } from '../core/config.js';
import type { ReduceOp } from '../core/dtypes.js';
import { fail } from '../core/errors.js';
import { anything, checkOptions, integer, NO_OPTIONS, type OptionSpec, string, timeoutMs } from '../core/options.js';
import type { Layout } from '../core/tensor-layout.js';
import type { BufferArg } from '../engine/buffers.js';

// One type per collective, as COLLECTIVE_OPTIONS below checks them at run time: the compiler
// then refuses what the call would refuse (`broadcast(x, { op: 'max' })`).

/** Every collective's deadline. */
export interface DeadlineOption {
  /** Milliseconds every wait of the op may last (default: the communicator's). */
  timeoutMs?: number;
}

/** Collectives of tensors. */
export interface WireLayoutOption {
  /** The layout tensors cross in (every rank passes the same); each rank converts its own to it and back. */
  wireLayout?: Layout;
}

/** The options of allReduce: `op`, `algo`, `out` (out of place), `timeoutMs`, `wireLayout`. */
export interface AllReduceOptions extends DeadlineOption, WireLayoutOption {
  /** The reduction: 'sum' (default), 'prod', 'max', 'min', or 'avg' on float dtypes. */
  op?: ReduceOp;
  /**
   * An algorithm that suits the communicator (direct, twoshot on one node; ring, doubling, tree, hierarchical across
   * nodes: docs/algorithms.md).
   */
  algo?: string;
  /** Output buffer of an out-of-place allReduce. */
  out?: BufferArg;
}

/** The options of allGather: `timeoutMs`, `wireLayout`. */
export interface AllGatherOptions extends DeadlineOption, WireLayoutOption {}

/** The options of reduceScatter: `op`, `timeoutMs`, `wireLayout`. */
export interface ReduceScatterOptions extends DeadlineOption, WireLayoutOption {
  /** The reduction: 'sum' (default), 'prod', 'max', 'min', or 'avg' on float dtypes. */
  op?: ReduceOp;
}

/** The options of broadcast: `root`, `out` (out of place), `timeoutMs`, `wireLayout`. */
export interface BroadcastOptions extends DeadlineOption, WireLayoutOption {
  /** The rank whose buffer every rank receives, 0..size-1 (default 0; the same on every rank). */
  root?: number;
  /** Output buffer of an out-of-place broadcast. */
  out?: BufferArg;
}

/** The options of reduce: `op`, `root`, `out` (the root's, out of place), `timeoutMs`, `wireLayout`. */
export interface ReduceOptions extends DeadlineOption, WireLayoutOption {
  /** The reduction: 'sum' (default), 'prod', 'max', 'min', or 'avg' on float dtypes. */
  op?: ReduceOp;
  /** The rank that receives the reduction, 0..size-1 (default 0; the same on every rank). */
  root?: number;
  /** Output buffer of an out-of-place reduce (the root's). */
  out?: BufferArg;
}

/** gather and scatter. */
export interface RootedOptions extends DeadlineOption, WireLayoutOption {
  root?: number;
}

/** The options of barrier: `timeoutMs`. */
export interface BarrierOptions extends DeadlineOption {}

/** allToAll: with both counts, rank i sends sendCounts[j] elements to rank j (its blocks packed in rank order). */
export interface AllToAllOptions extends DeadlineOption {
  sendCounts?: number[];
  recvCounts?: number[];
}

/** The options of Communicator.allReduceCoalesced: every array of a list reduced in place, as one call. */
export interface AllReduceCoalescedOptions extends DeadlineOption {
  /** The reduction (default sum; avg on the float dtypes only). */
  op?: ReduceOp;
}

/**
 * The options of Communicator.broadcastCoalesced: every array of a list broadcast from the root, in place, as one call.
 */
export interface BroadcastCoalescedOptions extends DeadlineOption {
  /** The rank whose arrays every rank receives (default 0). */
  root?: number;
}

/** send/recv: messages between two ranks match by (peer, tag) in issue order. */
export interface P2pOptions extends DeadlineOption {
  tag?: number;
}

/**
 * Every key some collective takes: what the checks return. Callers pass the collective's own
 * type; this union stays for code written against it (each collective still refuses the keys
 * it does not take, at run time).
 */
export interface CollectiveOptions extends AllReduceOptions, BroadcastOptions, ReduceOptions {}

import { resolveProgressMode } from '../core/progress-mode.js';

/**
 * The options of a communicator (new Communicator, initCommGroup, and the calls that form groups,
 * whose groups inherit their parent's and override them with these).
 */
export interface CommunicatorOptions {
  /** The algorithm of its allReduces that name none (over WEBCCL_ALGO): one the communicator accepts. */
  algo?: string;
  /** Milliseconds every wait of its ops may last, 1..2147483647 (default WEBCCL_TIMEOUT_MS, else 300000). */
  timeoutMs?: number;
  /**
   * Who moves ops on one node along: 'thread' | 'caller' | 'auto' (see docs/progress.md; default
   * WEBCCL_PROGRESS, else auto).
   */
  progress?: string;
}

/** Largest send/recv tag (as MPI_TAG_UB must be at least 32767; ours is 2^31-1). */
export const MAX_TAG = 0x7fffffff;

/** `root` and `out` are checked by the communicator (the root's range is the communicator's size). */
const OP = { op: string },
  ROOT = { root: anything },
  OUT = { out: anything },
  DEADLINE = { timeoutMs };
/** Checked against the layouts by layouts/plan.ts. */
const WIRE = { wireLayout: string };

export const COLLECTIVE_OPTIONS = {
  allReduce: { ...OP, algo: string, ...OUT, ...DEADLINE, ...WIRE },
  allGather: { ...DEADLINE, ...WIRE },
  reduceScatter: { ...OP, ...DEADLINE, ...WIRE },
  broadcast: { ...ROOT, ...OUT, ...DEADLINE, ...WIRE },
  reduce: { ...OP, ...ROOT, ...OUT, ...DEADLINE, ...WIRE },
  barrier: { ...DEADLINE },
  allToAll: { sendCounts: anything, recvCounts: anything, ...DEADLINE },
  gather: { ...ROOT, ...DEADLINE, ...WIRE },
  scatter: { ...ROOT, ...DEADLINE, ...WIRE },
  send: { tag: integer(0, MAX_TAG), ...DEADLINE },
  recv: { tag: integer(0, MAX_TAG), ...DEADLINE },
} as const satisfies Record<string, OptionSpec>;

const ANY_COLLECTIVE = [...new Set(Object.values(COLLECTIVE_OPTIONS).flatMap((s) => Object.keys(s)))];

const EXAMPLE: Record<keyof typeof COLLECTIVE_OPTIONS, string> = {
  allReduce: "{ op: 'max' }",
  allGather: '{ timeoutMs: 60000 }',
  reduceScatter: "{ op: 'max' }",
  broadcast: '{ root: 0 }',
  reduce: "{ op: 'sum', root: 0 }",
  barrier: '{ timeoutMs: 60000 }',
  allToAll: '{ sendCounts: [1, 2], recvCounts: [2, 1] }',
  gather: '{ root: 0 }',
  scatter: '{ root: 0 }',
  send: '{ tag: 7 }',
  recv: '{ tag: 7 }',
};

/** The options of collective `name`, checked (refused with INVALID_ARGUMENT before anything moves). */
export function collectiveOptions(name: keyof typeof COLLECTIVE_OPTIONS, o: unknown): CollectiveOptions {
  if (o === undefined) return NO_OPTIONS; // (before the lookups below: a ping-pong pays them per message)
  return checkOptions<CollectiveOptions>(name, o, COLLECTIVE_OPTIONS[name], EXAMPLE[name], ANY_COLLECTIVE);
}

/**
 * The coalesced collectives' options: apart from COLLECTIVE_OPTIONS, whose collectives each run
 * as one op of the engines (a coalesced call runs as allReduces or broadcasts of buckets).
 */
export const COALESCED_OPTIONS = {
  allReduceCoalesced: { ...OP, ...DEADLINE },
  broadcastCoalesced: { ...ROOT, ...DEADLINE },
} as const satisfies Record<string, OptionSpec>;

/** The options of a coalesced collective, checked (a key of another collective is refused as not applying). */
export function coalescedOptions(
  name: keyof typeof COALESCED_OPTIONS,
  o: unknown,
): AllReduceCoalescedOptions & BroadcastCoalescedOptions {
  const example = name === 'allReduceCoalesced' ? "{ op: 'max' }" : '{ root: 0 }';
  return checkOptions(name, o, COALESCED_OPTIONS[name], example, ANY_COLLECTIVE);
}

export const COMMUNICATOR_OPTIONS = { algo: string, timeoutMs, progress: string } as const satisfies OptionSpec;

export function communicatorOptions(o: unknown): CommunicatorOptions {
  const opts = checkOptions<CommunicatorOptions>('Communicator', o, COMMUNICATOR_OPTIONS, '{ timeoutMs: 60000 }');
  if (opts.progress !== undefined) resolveProgressMode(opts.progress);
  return opts;
}

/**
 * WEBCCL_TIMEOUT_MS, held to the same range as the option: 0 would fail every op at once, and
 * past 2^31-1 ms Node's timers fire after 1 ms (a TIMEOUT at once across nodes).
 */
export function envTimeoutMs(): number | undefined {
  const v = envNumber('WEBCCL_TIMEOUT_MS');
  const expected = v === undefined ? undefined : timeoutMs(v);
  if (expected)
    fail('INVALID_ARGUMENT', `WEBCCL_TIMEOUT_MS=${v}: expected ${expected}`, {
      variable: 'WEBCCL_TIMEOUT_MS',
      value: v,
    });
  return v;
}
