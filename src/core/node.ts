// A node: the ranks that share one WebAssembly.Memory. Whoever starts the node's ranks (the
// launcher, a test, a page) calls createNode (progress/create-node.ts) once and hands the handle
// to every rank; this file holds the handle and the node header's words anyone may set (a rank
// left, the node aborted).

import { fail } from './errors.js';
import { freshI32 } from './fresh-buffer.js';
import { showValue } from './options.js';
import { readReasonText, writeReasonText } from './reason-text.js';
import { ABORT_BY_LAUNCHER, ABORT_REASON, C, N, NODE_BASE } from './shm-map.js';

/** A job across nodes that a node's ranks join by dialling (createNode's `master`; bootstrap/page-job.ts checks it). */
export interface PageJob {
  /** The serving process: ws://HOST:P (its store at /store, its relay at /webccl-relay). */
  master: string;
  /** World rank of the node's rank 0 (the node's ranks are numbered consecutively). */
  firstRank: number;
  size: number;
  token: string;
  jobId: string;
}

/** What a rank needs to join its node; structured-clonable (postMessage / workerData). */
export interface NodeHandle {
  memory: WebAssembly.Memory;
  nranks: number;
  world: number;
  slotBytes: number;
  /** Random id of this node's memory: ranks that report the same key share memory. */
  key: string;
  /** The job across nodes this node's ranks join (createNode's `master`): its ranks dial, as a page's must. */
  job?: PageJob;
}

/** Bytes of one staging slot per rank when neither createNode's option nor WEBCCL_BUFFSIZE says. */
export const DEFAULT_SLOT_BYTES = 256 * 1024;

/** Refuses what is not a handle createNode made (a structured clone of one is fine). */
export function checkNodeHandle(where: string, node: unknown): asserts node is NodeHandle {
  const h = node as Partial<NodeHandle> | null;
  if (
    typeof h !== 'object' ||
    h === null ||
    !(h.memory instanceof WebAssembly.Memory) ||
    !Number.isInteger(h.nranks) ||
    !Number.isInteger(h.world)
  ) {
    fail(
      'INVALID_ARGUMENT',
      `${where}: node must be the handle createNode({ nranks }) returned, got ${showValue(node)}`,
    );
  }
}

/**
 * Marks the whole node aborted (a rank died) and wakes every rank sleeping on a flag, so that
 * each fails its current op instead of waiting for the dead one. `reason` (e.g. the rank's
 * error) reaches them in their error's message and details. The first abort wins; later ones
 * only wake the sleepers again.
 */
export function abortNode(handle: NodeHandle, deadRank: number | null, code: number, reason = ''): void {
  const i32 = freshI32(handle.memory);
  if (Atomics.compareExchange(i32, (NODE_BASE + N.ABORT_CLAIM) >> 2, 0, 1) === 0) {
    Atomics.store(i32, (NODE_BASE + N.ABORT_CODE) >> 2, code);
    writeReasonText(handle.memory, NODE_BASE + N.REASON, reason);
    Atomics.store(i32, (NODE_BASE + N.ABORT) >> 2, deadRank === null ? ABORT_BY_LAUNCHER : deadRank + 1);
  }
  ring(handle, i32);
}

/** Why a node was aborted: the node rank that died or aborted it (-1: the launcher), its reason, and both in words. */
export interface NodeAbortCause {
  by: number;
  reason: string;
  /** What error messages say: "rank 1 died", "aborted by the launcher (reason)", ... */
  text: string;
}

/** Why the node in `memory` was aborted (abortNode), or null when it was not. */
export function nodeAbortCause(memory: WebAssembly.Memory): NodeAbortCause | null {
  const i32 = freshI32(memory);
  const nodeBy = Atomics.load(i32, (NODE_BASE + N.ABORT) >> 2);
  if (nodeBy === 0) return null;
  const by = nodeBy === ABORT_BY_LAUNCHER ? -1 : nodeBy - 1;
  const who = by < 0 ? 'the launcher' : `rank ${by}`;
  const code = Atomics.load(i32, (NODE_BASE + N.ABORT_CODE) >> 2);
  const reason = readReasonText(memory, NODE_BASE + N.REASON);
  const why = code === ABORT_REASON.PEER_DIED ? `${who} died` : `aborted by ${who}`;
  return { by, reason, text: `${why}${reason ? ` (${reason})` : ''}` };
}

/**
 * The node header's LEFT word of a rank: its script ended, or it died (under a fault-tolerant
 * launch), or its script ended after the node was aborted (most likely its last op failed of the
 * abort: a consequence, never the first cause of another rank's failure).
 */
export const LEFT_ENDED = 1;
export const LEFT_DIED = 2;
export const LEFT_AFTER_ABORT = 3;

/**
 * Records that `rank`'s thread has ended (its script returned, or called process.exit(0)): a
 * peer waiting for it in an op it never joined fails at once, naming it, instead of waiting
 * out its deadline. Ops it had finished are not touched: its peers complete them.
 */
export function leaveNode(handle: NodeHandle, rank: number, how: 'ended' | 'died' = 'ended'): void {
  if (!Number.isInteger(rank) || rank < 0 || rank >= handle.nranks) {
    fail('INVALID_ARGUMENT', `leaveNode: rank ${rank} is outside the node's 0..${handle.nranks - 1} range`);
  }
  if (how !== 'ended' && how !== 'died')
    fail('INVALID_ARGUMENT', `leaveNode: how must be 'ended' or 'died', got ${showValue(how)}`);
  const i32 = freshI32(handle.memory);
  const aborted = Atomics.load(i32, (NODE_BASE + N.ABORT) >> 2) !== 0;
  const word = how === 'died' ? LEFT_DIED : aborted ? LEFT_AFTER_ABORT : LEFT_ENDED;
  Atomics.store(i32, (NODE_BASE + N.LEFT + 4 * rank) >> 2, word);
  ring(handle, i32);
}

/** Wakes every rank sleeping on the world communicator's doorbell, so it looks again. */
function ring(handle: NodeHandle, i32: Int32Array): void {
  Atomics.add(i32, (handle.world + C.DOORBELL) >> 2, 1);
  Atomics.notify(i32, (handle.world + C.DOORBELL) >> 2);
}
