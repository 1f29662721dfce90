// The state of one network progress thread, in a small block of the node heap that its rank
// allocates before starting it: whether it runs (PROGRESS_* of postboxes.ts), once it ended why, and
// the bell it sleeps on. A node of several ranks has one such thread per rank beside the node's
// shared-memory progress thread, so none of them may use the node header's own progress word,
// reason or bell (on a shared bell, every op posted on the node woke every thread of it).
import { freshBuffer, freshI32 } from '../core/fresh-buffer.js';
import { readReasonText, writeReasonText } from '../core/reason-text.js';
import { REASON_BYTES } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';
import { PROGRESS_GONE, PROGRESS_RUNNING, PROGRESS_STOPPING, postboxTable, wakePostboxes } from './postboxes.js';

const H = { STATE: 0, BELL: 4, REASON: 64 } as const;
const HUB_BYTES = H.REASON + REASON_BYTES;

/** A hub in the node heap, its thread not yet running. */
/**
 * A started network progress thread: `stop()` ends it (the rank's ops must have ended); `hub`, its state block (this
 * file).
 */
export interface NetProgress {
  hub: number;
  stop(): Promise<void>;
}

export function newHub(ctx: RankContext): number {
  const hub = ctx.heap.alloc(HUB_BYTES);
  new Uint8Array(freshBuffer(ctx.core.memory), hub, HUB_BYTES).fill(0);
  return hub;
}

/** The word holding the thread's state (to wait on). */
export const hubStateAt = (hub: number): number => (hub + H.STATE) >> 2;
/** The word the thread sleeps on. */
export const hubBellAt = (hub: number): number => (hub + H.BELL) >> 2;

/** Wakes the thread (a post, a new or closing postbox, an abort, a stop). */
export function ringHub(memory: WebAssembly.Memory, hub: number): void {
  const i32 = freshI32(memory);
  Atomics.add(i32, hubBellAt(hub), 1);
  Atomics.notify(i32, hubBellAt(hub));
}

/** Asks a running thread to end (it writes its trace, then says it is gone); false if it was not running. */
export function askHubToStop(memory: WebAssembly.Memory, hub: number): boolean {
  if (!moveHub(memory, hub, PROGRESS_RUNNING, PROGRESS_STOPPING)) return false;
  ringHub(memory, hub);
  return true;
}

export function hubState(memory: WebAssembly.Memory, hub: number): number {
  return Atomics.load(freshI32(memory), hubStateAt(hub));
}

/** Moves the state from `from` to `to`; whether it was `from`. */
export function moveHub(memory: WebAssembly.Memory, hub: number, from: number, to: number): boolean {
  const i32 = freshI32(memory);
  const ok = Atomics.compareExchange(i32, hubStateAt(hub), from, to) === from;
  if (ok) Atomics.notify(i32, hubStateAt(hub));
  return ok;
}

/** Why the thread ended ('' while it runs, or when it ended as asked). */
export function hubReason(memory: WebAssembly.Memory, hub: number): string {
  return readReasonText(memory, hub + H.REASON);
}

/**
 * Records that the thread has ended (`why` when it failed) and wakes whoever waits for it: its
 * rank's ops (their postboxes' DONE words) and a process exit waiting for its trace.
 */
export function hubEnded(memory: WebAssembly.Memory, hub: number, why: string): void {
  const i32 = freshI32(memory);
  const was = Atomics.exchange(i32, hubStateAt(hub), PROGRESS_GONE);
  if (why && was !== PROGRESS_GONE) writeReasonText(memory, hub + H.REASON, why);
  Atomics.notify(i32, hubStateAt(hub));
  const table = postboxTable(i32);
  if (table) wakePostboxes(i32, table);
}

/** What to undo, on the rank's thread, if a network thread ends before its rank is done with it (by memory and hub). */
const lostHooks = new WeakMap<WebAssembly.Memory, Map<number, Set<() => void>>>();

/** Runs `fn` if the thread of `hub` is lost; returns the call that takes it back. */
export function onThreadLost(memory: WebAssembly.Memory, hub: number, fn: () => void): () => void {
  const byHub = lostHooks.get(memory) ?? lostHooks.set(memory, new Map()).get(memory)!;
  const fns = byHub.get(hub) ?? byHub.set(hub, new Set()).get(hub)!;
  fns.add(fn);
  return () => fns.delete(fn);
}

/** The thread of `hub` has ended (`lost`: before its rank was done with it). */
export function netThreadExited(memory: WebAssembly.Memory, hub: number, lost: boolean): void {
  const byHub = lostHooks.get(memory);
  const fns = byHub?.get(hub);
  byHub?.delete(hub);
  if (lost) for (const fn of fns ?? []) fn();
}
