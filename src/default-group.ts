// The module-level calls of a script (torch.distributed's shape): collectives on the default
// world communicator that initCommGroup (index.ts) made, or on the group an `o.group` names,
// awaited and rejecting rather than throwing.

import { Communicator } from './api/communicator.js';
import type {
  AllGatherOptions,
  AllReduceOptions,
  AllToAllOptions,
  BarrierOptions,
  BroadcastOptions,
  CommunicatorOptions,
  P2pOptions,
  ReduceOptions,
  ReduceScatterOptions,
  RootedOptions,
} from './api/options.js';
import { fail, WebcclError } from './core/errors.js';
import { showValue } from './core/options.js';
import type { BufferArg } from './engine/buffers.js';
import type { Work } from './engine/work.js';

let world: Communicator | undefined;

/** The world communicator once initCommGroup has made it. */
export const currentWorld = (): Communicator | undefined => world;

/** initCommGroup's world: the communicator the module-level calls run on. */
export function setWorld(c: Communicator): Communicator {
  world = c;
  return c;
}

function requireWorld(what: string): Communicator {
  return world ?? fail('NOT_INITIALIZED', `${what}: call await initCommGroup() first`);
}

/** The world's communicator, as initCommGroup returned it. Throws `NOT_INITIALIZED` before initCommGroup. */
export const getCommunicator = (): Communicator => requireWorld('getCommunicator');
/** This rank's world rank, 0..getWorldSize()-1 (torch's get_rank). Throws `NOT_INITIALIZED` before initCommGroup. */
export const getRank = (): number => requireWorld('getRank').rank;
/** How many ranks the world has (torch's get_world_size). Throws `NOT_INITIALIZED` before initCommGroup. */
export const getWorldSize = (): number => requireWorld('getWorldSize').size;

/** Runs a collective; every error, argument checks included, arrives as a rejection. */
function promised(issue: () => Work): Promise<void> {
  try {
    return issue().wait();
  } catch (e) {
    return Promise.reject(e);
  }
}

/**
 * Module-level calls take `{ group }` (a communicator createGroup or split made) beside their own options; default: the
 * world.
 */
export interface GroupOption {
  group?: Communicator;
}

/** The communicator a module-level call runs on, and its options without `group`. */
function target<O>(what: string, o: (O & GroupOption) | undefined): [Communicator, O | undefined] {
  // the communicator checks the rest
  if (typeof o !== 'object' || o === null || !('group' in o)) return [requireWorld(what), o];
  const { group, ...rest } = o;
  if (group === undefined) return [requireWorld(what), rest as O];
  if (!(group instanceof Communicator)) {
    const why =
      group === null ? ' (createGroup resolves null on the ranks outside the group: only its members may use it)' : '';
    fail(
      'INVALID_ARGUMENT',
      `${what}: option group must be a Communicator that createGroup or split made, got ${showValue(group)}${why}`,
      { option: 'group', value: group },
    );
  }
  return [group, rest as O];
}

/** A module-level call's options: its collective's, and `group`. */
export type WithGroup<O> = O & GroupOption;

/**
 * Reduces `x` across the world's ranks (or `o.group`'s), in place: {@link Communicator.allReduce}
 * on the world communicator, awaited. The promise resolves once this rank's result is in `x` (or
 * `o.out`) and rejects, never throws, with a WebcclError: `NOT_INITIALIZED` before initCommGroup,
 * the method's codes for bad arguments, the op's failure.
 *
 * @example
 * ```js
 * const x = new Float32Array(1024).fill(getRank());
 * await allReduce(x, { op: Max });                 // every rank: getWorldSize() - 1
 * await allReduce(grad, { op: Avg, group: dp });   // on a group createGroup made
 * ```
 */
export const allReduce = (x: BufferArg, o?: WithGroup<AllReduceOptions>): Promise<void> =>
  promised(() => on('allReduce', o, (c, p) => c.allReduce(x, p)));
/**
 * {@link allReduce}, returning the op's Work at once to overlap it with compute: complete it with
 * wait(work) or await. Unlike allReduce it throws bad arguments (and `NOT_INITIALIZED`) at once.
 */
export const allReduceAsync = (x: BufferArg, o?: WithGroup<AllReduceOptions>): Work =>
  on('allReduceAsync', o, (c, p) => c.allReduce(x, p));
/**
 * Gathers every rank's `input` (n elements) into `out` (size × n elements) on every rank, in rank
 * order (torch's all_gather_into_tensor): {@link Communicator.allGather} on the world (or
 * `o.group`), awaited; it rejects, never throws. `input` may be this rank's own block of `out`.
 *
 * @example
 * ```js
 * const out = new Float32Array(4 * getWorldSize());
 * await allGather(out, new Float32Array(4).fill(getRank())); // out: 0,0,0,0, 1,1,1,1, ...
 * ```
 */
export const allGather = (out: BufferArg, input: BufferArg, o?: WithGroup<AllGatherOptions>): Promise<void> =>
  promised(() => on('allGather', o, (c, p) => c.allGather(out, input, p)));
/** {@link Communicator.reduceScatter} on the world (or `o.group`), awaited; it rejects, never throws. */
export const reduceScatter = (out: BufferArg, input: BufferArg, o?: WithGroup<ReduceScatterOptions>): Promise<void> =>
  promised(() => on('reduceScatter', o, (c, p) => c.reduceScatter(out, input, p)));
/**
 * Copies the root's `x` (`o.root`, default 0) into every other rank's `x`:
 * {@link Communicator.broadcast} on the world (or `o.group`), awaited; it rejects, never throws.
 *
 * @example
 * ```js
 * const weights = getRank() === 0 ? initialWeights() : new Float32Array(n);
 * await broadcast(weights, { root: 0 });            // every rank holds rank 0's weights
 * ```
 */
export const broadcast = (x: BufferArg, o?: WithGroup<BroadcastOptions>): Promise<void> =>
  promised(() => on('broadcast', o, (c, p) => c.broadcast(x, p)));
/** {@link Communicator.reduce} on the world (or `o.group`), awaited; it rejects, never throws. */
export const reduce = (x: BufferArg, o?: WithGroup<ReduceOptions>): Promise<void> =>
  promised(() => on('reduce', o, (c, p) => c.reduce(x, p)));
/** {@link Communicator.allToAll} on the world (or `o.group`), awaited; it rejects, never throws. */
export const allToAll = (out: BufferArg, input: BufferArg, o?: WithGroup<AllToAllOptions>): Promise<void> =>
  promised(() => on('allToAll', o, (c, p) => c.allToAll(out, input, p)));
/** {@link Communicator.gather} on the world (or `o.group`), awaited; `out` may be null off the root. */
export const gather = (out: BufferArg | null, input: BufferArg, o?: WithGroup<RootedOptions>): Promise<void> =>
  promised(() => on('gather', o, (c, p) => c.gather(out, input, p)));
/** {@link Communicator.scatter} on the world (or `o.group`), awaited; `input` may be null off the root. */
export const scatter = (out: BufferArg, input: BufferArg | null, o?: WithGroup<RootedOptions>): Promise<void> =>
  promised(() => on('scatter', o, (c, p) => c.scatter(out, input, p)));
/** {@link Communicator.send} on the world (or `o.group`): resolves once `peer`'s matching recv has taken `x`. */
export const send = (x: BufferArg, peer: number, o?: WithGroup<P2pOptions>): Promise<void> =>
  promised(() => on('send', o, (c, p) => c.send(x, peer, p)));
/** {@link Communicator.recv} on the world (or `o.group`): resolves once `x` holds what `peer` sent. */
export const recv = (x: BufferArg, peer: number, o?: WithGroup<P2pOptions>): Promise<void> =>
  promised(() => on('recv', o, (c, p) => c.recv(x, peer, p)));
/** {@link Communicator.barrier} on the world (or `o.group`): resolves once every rank has called it. */
export const barrier = (o?: WithGroup<BarrierOptions>): Promise<void> =>
  promised(() => on('barrier', o, (c, p) => c.barrier(p)));

/** Runs `call` on the communicator `o.group` names (the world by default). */
function on<O, R>(what: string, o: WithGroup<O> | undefined, call: (c: Communicator, o: O | undefined) => R): R {
  const [c, rest] = target<O>(what, o);
  return call(c, rest);
}

/**
 * A group of the world's ranks (numbers or 'rankN' strings): every rank calls it
 * with the same list; members get the group's communicator, the others null.
 */
export function createGroup(
  ranks: readonly (number | string)[],
  o?: CommunicatorOptions,
): Promise<Communicator | null> {
  try {
    return requireWorld('createGroup').createGroup(ranks, o);
  } catch (e) {
    return Promise.reject(e);
  }
}

/** Completes a handle from an *Async call; a bad handle is a rejection too. */
export function wait(handle: Work): Promise<void> {
  if (typeof (handle as Partial<Work> | null)?.wait !== 'function') {
    return Promise.reject(
      new WebcclError(
        'INVALID_ARGUMENT',
        `wait: expected the Work handle an *Async call returned, got ${showValue(handle)}`,
      ),
    );
  }
  return handle.wait();
}
