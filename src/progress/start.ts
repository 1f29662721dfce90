// Starting and stopping a node's progress thread. Starting a thread is the platform's business
// (Node's worker_threads, a page's module Web Worker): each entry registers a starter here, and
// createNode calls it. The thread is started by whoever creates the node (a launcher, a test, a
// page's main thread), never by a rank: a thread a rank started would end with that rank, with
// its peers' ops still in hand.
import { freshI32 } from '../core/fresh-buffer.js';
import { log } from '../core/log.js';
import type { NodeHandle } from '../core/node.js';
import { writeReasonText } from '../core/reason-text.js';
import { N, NODE_BASE } from '../core/shm-map.js';
import {
  PROGRESS_GONE,
  PROGRESS_NONE,
  PROGRESS_RUNNING,
  PROGRESS_STARTING,
  PROGRESS_STOPPING,
  postboxTable,
  ringProgress,
  T,
  wakePostboxes,
} from './postboxes.js';

/** A started progress thread: `stop()` ends it (the node's ranks must have ended their ops). */
export interface ProgressThread {
  stop(): Promise<void>;
}

/** `env`: the environment the thread reads its WEBCCL_* settings from (default: this process's). */
export type ProgressStarter = (
  node: NodeHandle,
  ended: (why: string) => void,
  env?: Record<string, string | undefined>,
) => ProgressThread;

const STARTER = Symbol.for('webccl.progressStarter');
const threads = new WeakMap<WebAssembly.Memory, ProgressThread>();

interface Registered {
  start: ProgressStarter;
  /** The thread's script loads after start() returns (a page's): the node says STARTING until it runs. */
  loadsLater: boolean;
}

export function registerProgressStarter(start: ProgressStarter, o: { loadsLater?: boolean } = {}): void {
  (globalThis as Record<symbol, Registered>)[STARTER] = { start, loadsLater: o.loadsLater ?? false };
}

/** Starts the node's progress thread where the platform can; false where it cannot. */
export function startProgressThread(node: NodeHandle, env?: Record<string, string | undefined>): boolean {
  const got = (globalThis as Record<symbol, Registered | undefined>)[STARTER];
  if (!got) return false;
  const i32 = freshI32(node.memory);
  // Marked before the thread runs: ranks may post to it from the first op on. A script loaded
  // later may fail to load: until the thread says it runs, ranks wait to choose (progressSettled).
  Atomics.store(i32, (NODE_BASE + N.PROGRESS) >> 2, got.loadsLater ? PROGRESS_STARTING : PROGRESS_RUNNING);
  threads.set(
    node.memory,
    got.start(node, (why) => progressEnded(node.memory, why), env),
  );
  return true;
}

/**
 * A thread announced as STARTING whose script never ran (it failed to load): the node has no
 * progress thread, so its ranks run their ops themselves, as on a node made without one. No
 * rank has handed it an op (ranks wait while it is STARTING), so nothing is lost.
 */
export function progressNotStarted(memory: WebAssembly.Memory, why: string): boolean {
  if (!leaveStarting(memory)) return false;
  log('WARN', `the node's progress thread did not start (${why}): its ranks run their ops themselves, while they wait`);
  return true;
}

/**
 * STARTING -> NONE (the node goes on without the thread), waking the ranks that wait to choose; false if it was not
 * STARTING.
 */
function leaveStarting(memory: WebAssembly.Memory): boolean {
  const i32 = freshI32(memory);
  if (
    Atomics.compareExchange(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_STARTING, PROGRESS_NONE) !== PROGRESS_STARTING
  )
    return false;
  Atomics.notify(i32, (NODE_BASE + N.PROGRESS) >> 2);
  return true;
}

/**
 * Ends the node's progress thread, if this thread started one: it is asked to end (it writes
 * its trace), and ended by force if it does not within a moment. Ops it still held fail on
 * their ranks (ABORTED, details.progressThread).
 */
export async function stopProgressThread(node: NodeHandle): Promise<void> {
  const t = threads.get(node.memory);
  if (!t) return;
  threads.delete(node.memory);
  const i32 = freshI32(node.memory);
  Atomics.compareExchange(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_RUNNING, PROGRESS_STOPPING);
  leaveStarting(node.memory); // stopped before its script ran: it never will, and no rank handed it anything
  ringProgress(node.memory, i32);
  await t.stop();
}

/**
 * Records that the progress thread has ended (`why` when it failed) and wakes every rank that
 * waits for it, so that each fails the ops it had handed over instead of waiting for them.
 */
export function progressEnded(memory: WebAssembly.Memory, why: string): void {
  const i32 = freshI32(memory);
  const was = Atomics.exchange(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_GONE);
  const table = postboxTable(i32);
  if (!table) return;
  if (why && was !== PROGRESS_GONE) writeReasonText(memory, table + T.REASON, why);
  wakePostboxes(i32, table);
}

/** Whether the node's progress thread was announced and has not yet said that it runs. */
export const progressStarting = (memory: WebAssembly.Memory): boolean =>
  Atomics.load(freshI32(memory), (NODE_BASE + N.PROGRESS) >> 2) === PROGRESS_STARTING;

/**
 * Waits (blocking: a worker's rank choosing its engine) until a STARTING progress thread runs or
 * is known not to, at most `ms`; where the thread cannot block, returns at once.
 */
export function waitProgressSettled(memory: WebAssembly.Memory, ms: number, canBlock: boolean): void {
  const i32 = freshI32(memory);
  const until = performance.now() + ms;
  while (canBlock && progressStarting(memory) && performance.now() < until)
    Atomics.wait(i32, (NODE_BASE + N.PROGRESS) >> 2, PROGRESS_STARTING, Math.min(50, until - performance.now()));
}

/** The same without blocking (initCommGroup, which may run on a page's main thread). */
export async function progressSettled(memory: WebAssembly.Memory, ms: number): Promise<void> {
  const i32 = freshI32(memory);
  const until = performance.now() + ms;
  while (progressStarting(memory) && performance.now() < until) {
    const r = Atomics.waitAsync(
      i32,
      (NODE_BASE + N.PROGRESS) >> 2,
      PROGRESS_STARTING,
      Math.min(50, until - performance.now()),
    );
    if (r.async) await r.value;
  }
}
