// The shared-memory postbox between the ranks of a node and its progress thread. A postbox is one
// communicator rank's queue of ops: a block in the node heap with a ring of slots. The rank
// writes an op into the next slot (its buffers' addresses in the node memory and the op's fields,
// as words: slot-codec.ts), then bumps POSTED and rings the node's progress bell; the progress
// thread takes it, runs it, writes the outcome into the same slot and bumps DONE (which the
// rank may sleep on). Every postbox is listed in one table per node, so the progress thread finds
// new postboxes without a message. Nothing here is posted with postMessage: it works the same
// between Node worker threads and between a page's Web Workers.

import type { ErrorCode } from '../core/errors.js';
import { freshBuffer, freshI32 } from '../core/fresh-buffer.js';
import { boundedUtf8 } from '../core/reason-text.js';
import type { Algo, Kind } from '../core/shm-map.js';
import { N, NODE_BASE, REASON_BYTES } from '../core/shm-map.js';
import type { OpSpec } from '../engine/engine.js';

/** An op as the rank posts it (the slot's JSON; its buffers' addresses ride beside it). */
export interface PostedOp {
  name: Kind;
  algo: Algo;
  dtype: OpSpec['dtype'];
  op: OpSpec['op'];
  count: number;
  root: number;
  counts?: OpSpec['counts'];
  timeoutMs: number;
  layout: number;
  seq: number;
  input: { count: number } | null;
  output: { count: number } | null;
  inPlace: boolean;
  /**
   * Epoch ms before which the progress thread leaves the op alone (auto mode): a rank that waits
   * right after issuing takes it back in that time and runs it itself, without a thread hop.
   */
  graceUntil: number;
  /** Tensors: the logical shape class behind `count` (OpSpec.shape). */
  shape: number;
  /** A tensor op already row-major on the wire: when ranks hold different layouts, it runs again as it is. */
  relayout: boolean;
}

/** What the progress thread writes back: when the op ran (epoch ms) and how it failed, if it did. */
export interface OpOutcome {
  startedAt: number;
  completedAt: number;
  /** When every rank the op needed had joined it (NaN: not known). */
  joinedAt: number;
  error?: { code: ErrorCode; message: string; details: Record<string, unknown> };
}

/** What a rank posts for `s` (its number, algorithm, deadline, grace and whether it runs in place). */
export function postedOp(
  s: OpSpec,
  seq: number,
  algo: Algo,
  timeoutMs: number,
  graceUntil: number,
  inPlace: boolean,
): PostedOp {
  return {
    name: s.name,
    algo,
    dtype: s.dtype,
    op: s.op,
    count: s.count,
    root: s.root,
    counts: s.counts,
    timeoutMs,
    layout: s.layout ?? 0,
    seq,
    shape: s.shape ?? 0,
    relayout: s.relayout !== undefined,
    graceUntil,
    input: s.input && { count: s.input.count },
    output: s.output && { count: s.output.count },
    inPlace,
  };
}

/** Postbox header words (byte offsets); the slots follow at L.SLOTS. */
export const L = {
  STATE: 0, // POSTBOX_OPEN, POSTBOX_CLOSING (the rank asks to detach), POSTBOX_DETACHED (the progress thread let go)
  COMM: 4, // the communicator block
  RANK: 8,
  SIZE: 12,
  SIMD: 16, // 1: run the postbox with the SIMD build of the core (as its rank does)
  POSTED: 20, // ops posted by the rank
  DONE: 24, // ops the progress thread has ended (their outcome is in their slot)
  // Postboxes of the network progress thread (net-host.ts) only:
  CONFIG: 28, // heap address of the communicator's description (text, see net-postbox.ts)
  ABORT: 32, // heap address of the reason its rank aborted it (0: not aborted)
  STARTED: 36, // 1 + the number of the op that started last (its rank's flight record says 'started')
  AWAITED: 40, // how many ranks the running op awaits; the first AWAITED_SHOWN of them follow
  AWAITED_LIST: 44,
  ABORT_SENT: 60, // 1 once the thread has aborted the communicator (its peers are told)
  LOCAL_OF: 64, // SIZE bytes: the node rank of each communicator rank
  // Postboxes of the node's progress thread only: an op held for its rank (thread-engine.ts hold),
  // written in slot POSTED but not counted; 0, or a tag that whoever takes the op moves to 0.
  HOLD: 128,
  HOLDS: 132, // ops its rank has held so far (the thread lingers while this moves: hosts/shm-host.ts LINGER_MS)
  SLOTS: 192,
} as const;
/** Ranks a postbox names as awaited (words 44..59). */
export const AWAITED_SHOWN = 4;
export const POSTBOX_OPEN = 0;
export const POSTBOX_CLOSING = 1;
export const POSTBOX_DETACHED = 2;

/**
 * The longest the node's progress thread leaves an op alone for its rank ('auto' progress): a
 * rank that waits at once takes it back in that time and runs it itself, without a hand-off; an
 * op left unwaited (its rank computes) starts on the thread after at most about this long.
 */
export const HOLD_MS = 0.25;

/** Ops a postbox holds at once; more wait on their rank until a slot frees. */
export const POSTBOX_SLOTS = 256;
/** Bytes of one slot: its state, two addresses, then the op's (or its outcome's) JSON. */
export const SLOT_BYTES = 4096;
const S = { STATE: 0, IN: 4, OUT: 8, TEXT: 12 } as const;
/** A slot's state: the rank posted the op; the progress thread took it; or the rank took it back first. */
export const SLOT_POSTED = 1;
export const SLOT_TAKEN = 2;
export const SLOT_RECLAIMED = 3;
/** The progress thread wrote the op's outcome. */
export const SLOT_ENDED = 4;
const TEXT_MAX = SLOT_BYTES - S.TEXT - 4;
export const POSTBOX_BYTES = L.SLOTS + POSTBOX_SLOTS * SLOT_BYTES;

export const MAX_POSTBOXES = 1024;
/**
 * The postbox table: a count of entries ever used, why the progress thread ended, then per entry
 * the postbox's address (0: free, ENTRY_RESERVED while it is being listed), a count of its
 * listings and unlistings (a postbox is unlisted before it is freed: a reader that finds the count
 * unchanged around its reads read a live postbox: stillListed), and whose thread serves it (0:
 * the node's shared-memory progress thread; 1 + a world rank: that rank's network thread).
 */
export const T = {
  HIGH: 0,
  REASON: 64,
  ENTRIES: 64 + REASON_BYTES,
  TURNS: 64 + REASON_BYTES + 4 * MAX_POSTBOXES,
  OWNERS: 64 + REASON_BYTES + 8 * MAX_POSTBOXES,
} as const;
export const TABLE_BYTES = T.OWNERS + 4 * MAX_POSTBOXES;
/** An entry claimed by a rank that has not yet written whose postbox it is. */
export const ENTRY_RESERVED = -1;

/** The postbox entry `k` of the table lists (0: none, or one being listed). */
export function postboxAt(i32: Int32Array, table: number, k: number): number {
  const postbox = Atomics.load(i32, (table + T.ENTRIES + 4 * k) >> 2);
  return postbox > 0 ? postbox : 0;
}

/** Entry `k`'s count of listings and unlistings: read before the entry, checked after (stillListed). */
export const turnAt = (i32: Int32Array, table: number, k: number): number =>
  Atomics.load(i32, (table + T.TURNS + 4 * k) >> 2);

/** Whose thread serves the postbox entry `k` lists (0: the node's shared-memory progress thread; 1 + a world rank). */
export const ownerAt = (i32: Int32Array, table: number, k: number): number =>
  Atomics.load(i32, (table + T.OWNERS + 4 * k) >> 2);

/**
 * Whether entry `k` still lists the postbox it listed at `turn`: a thread that reads another
 * rank's postbox (or its own after letting go of it) checks this after its reads, since a postbox
 * unlisted meanwhile may have been freed and its memory reused (garbage read as a postbox).
 */
export function stillListed(i32: Int32Array, table: number, k: number, turn: number): boolean {
  return turnAt(i32, table, k) === turn;
}

/**
 * A progress thread's look for the postboxes listed for it (`owner`: see T) that it does not host
 * yet (`known`): one its rank closed before the thread looked is let go of at once (its rank waits
 * to hear so); each open one goes to `open`, with a view that reaches it. `loopView` is the view
 * the thread's loop made before it looked: a rank may have grown the memory since, for the table
 * or a postbox (a megabyte each), which then lie past that view's end; a new view is made then.
 */
export function lookForPostboxes(
  memory: WebAssembly.Memory,
  loopView: Int32Array,
  owner: number,
  known: (postbox: number) => boolean,
  open: (i32: Int32Array, postbox: number) => void,
): void {
  let i32 = loopView;
  const table = postboxTable(i32);
  if (!table) return;
  if (table + TABLE_BYTES > i32.byteLength) i32 = freshI32(memory);
  const high = Atomics.load(i32, (table + T.HIGH) >> 2);
  for (let k = 0; k < high; k++) {
    const turn = turnAt(i32, table, k);
    const addr = postboxAt(i32, table, k);
    if (addr === 0 || known(addr) || ownerAt(i32, table, k) !== owner) continue;
    if (addr + POSTBOX_BYTES > i32.byteLength) i32 = freshI32(memory);
    const state = Atomics.load(i32, (addr + L.STATE) >> 2);
    // One this thread let go of may have been freed since (its memory reused): looked at next turn.
    if (!stillListed(i32, table, k, turn)) continue;
    if (state === POSTBOX_CLOSING) {
      Atomics.store(i32, (addr + L.STATE) >> 2, POSTBOX_DETACHED);
      Atomics.notify(i32, (addr + L.STATE) >> 2);
    } else if (state === POSTBOX_OPEN) open(i32, addr);
  }
}

/** Wakes whoever waits on any listed postbox (its ops' outcomes, its closing): the thread serving them has ended. */
export function wakePostboxes(i32: Int32Array, table: number): void {
  const high = Atomics.load(i32, (table + T.HIGH) >> 2);
  for (let k = 0; k < high; k++) {
    const postbox = postboxAt(i32, table, k);
    if (postbox) {
      Atomics.notify(i32, (postbox + L.DONE) >> 2);
      Atomics.notify(i32, (postbox + L.STATE) >> 2);
    }
  }
}

export const PROGRESS_NONE = 0;
export const PROGRESS_RUNNING = 1;
export const PROGRESS_GONE = 2;
/** Asked to end (its starter's stop()): it ends its loop, writes its trace, and says it is gone. */
export const PROGRESS_STOPPING = 3;
/**
 * Started where the thread's script loads later (a page's Web Worker): the thread marks itself
 * running when it begins; a script that fails to load leaves the node without one (NONE).
 */
export const PROGRESS_STARTING = 4;

export const slotAt = (postbox: number, n: number): number => postbox + L.SLOTS + (n % POSTBOX_SLOTS) * SLOT_BYTES;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Writes a slot: its two addresses and `value` as JSON (refused when it does not fit), then its state. */
export function writeSlot(
  memory: WebAssembly.Memory,
  slot: number,
  input: number,
  output: number,
  value: unknown,
  state = SLOT_POSTED,
): boolean {
  const bytes = encoder.encode(JSON.stringify(value));
  if (bytes.length > TEXT_MAX) return false;
  const buffer = freshBuffer(memory);
  const i32 = new Int32Array(buffer, slot, 4);
  i32[1] = input;
  i32[2] = output;
  i32[3] = bytes.length;
  new Uint8Array(buffer, slot + S.TEXT + 4, bytes.length).set(bytes);
  Atomics.store(i32, 0, state);
  return true;
}

export function slotState(memory: WebAssembly.Memory, slot: number): number {
  return Atomics.load(freshI32(memory), (slot + S.STATE) >> 2);
}

/**
 * Moves a slot from POSTED to `to` (TAKEN by the progress thread, RECLAIMED by its rank): whoever moves it first owns
 * the op.
 */
export function claimSlot(memory: WebAssembly.Memory, slot: number, to: number): boolean {
  return Atomics.compareExchange(freshI32(memory), (slot + S.STATE) >> 2, SLOT_POSTED, to) === SLOT_POSTED;
}

/** Writes an outcome, shortening its text rather than losing it (an error's details may be long). */
export function writeOutcomeText(
  memory: WebAssembly.Memory,
  slot: number,
  value: { error?: { message: string; details: unknown } },
): void {
  if (writeSlot(memory, slot, 0, 0, value, SLOT_ENDED) || !value.error) return;
  const short = {
    ...value,
    error: {
      ...value.error,
      details: { truncated: true },
      message: new TextDecoder().decode(boundedUtf8(value.error.message, 2048)),
    },
  };
  writeSlot(memory, slot, 0, 0, short, SLOT_ENDED);
}

export function readSlot<T>(memory: WebAssembly.Memory, slot: number): { input: number; output: number; value: T } {
  const buffer = freshBuffer(memory);
  const i32 = new Int32Array(buffer, slot, 4);
  const len = Math.min(i32[3], TEXT_MAX);
  // slice(): decoders may refuse views of shared memory.
  const text = decoder.decode(new Uint8Array(buffer, slot + S.TEXT + 4, len).slice());
  return { input: i32[1], output: i32[2], value: JSON.parse(text) as T };
}

/** The node's postbox table, or 0 when no rank has made one yet. */
export function postboxTable(i32: Int32Array): number {
  return Atomics.load(i32, (NODE_BASE + N.POSTBOXES) >> 2);
}

/**
 * Wakes the progress thread of the node in `memory` (it sleeps on the bell when it has nothing
 * to move); `i32`: a view of it the caller made just now.
 */
export function ringProgress(memory: WebAssembly.Memory, i32 = freshI32(memory)): void {
  Atomics.add(i32, (NODE_BASE + N.PROGRESS_BELL) >> 2, 1);
  Atomics.notify(i32, (NODE_BASE + N.PROGRESS_BELL) >> 2);
  // It may sleep on a communicator's doorbell instead (waiting for a rank that runs its own op).
  const other = Atomics.load(i32, (NODE_BASE + N.PROGRESS_SLEEP) >> 2) >> 2;
  if (!other) return;
  // A doorbell allocated since the view was made (another thread grew the memory meanwhile) lies
  // past its end: a new view reaches it. Should none yet, the ring is skipped, not thrown: the
  // thread looks again within DOORBELL_SLICE_MS of its sleep (hosts/shm-host.ts).
  const view = other < i32.length ? i32 : freshI32(memory);
  if (other >= view.length) return;
  Atomics.add(view, other, 1);
  Atomics.notify(view, other);
}

export function progressState(i32: Int32Array): number {
  return Atomics.load(i32, (NODE_BASE + N.PROGRESS) >> 2);
}
