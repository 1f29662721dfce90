// A postbox of the network progress thread (net-host.ts): besides the words every postbox has
// (postboxes.ts), it names the communicator the thread must run its ops on — its tag space on the
// job's connections, its members' numbers there, this rank's place, the algorithm and deadline
// the rank chose — in a short text block in the node heap, written before the postbox is listed.
// An abort asked by the rank rides in a second block (its reason), published by its address.
import { freshBuffer, freshI32 } from '../core/fresh-buffer.js';
import { readReasonText, writeReasonText } from '../core/reason-text.js';
import { REASON_BYTES } from '../core/shm-map.js';
import type { RankContext } from '../engine/context.js';
import { ringHub } from './net-hub.js';
import { openPostbox } from './postbox-life.js';
import { L } from './postboxes.js';

export interface NetPostboxConfig {
  /** The communicator's tag space on the job's connections (0: the world). */
  space: number;
  /** Each member's rank on the connections. */
  members: number[];
  /** This rank's place among them. */
  rank: number;
  /** Each member's node (its schedules across nodes are chosen from them). */
  nodeOf: number[];
  /**
   * This node's members, when there are several: the communicator block in which the node's
   * network progress threads meet for the node phase of a hierarchical op (their own: the ranks
   * keep theirs for the ops they run), this rank's place there and the node rank of each member.
   */
  node?: { block: number; rank: number; localOf: number[] };
  /** The communicator's algorithm option (unchecked: the engine judges it). */
  commAlgo: unknown;
  timeoutMs: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The description block: its text's length, then the text. */
const TEXT_AT = 4;

/**
 * Opens a postbox for the communicator `c`, served by the network progress thread of world rank
 * `owner` (a node may hold several); returns it and the heap block of its description.
 */
export function openNetPostbox(
  ctx: RankContext,
  c: NetPostboxConfig,
  owner: number,
  hub: number,
): { postbox: number; config: number } {
  const text = encoder.encode(JSON.stringify(c));
  // Allocated before the postbox: the heap may grow the memory, and the postbox's views come after.
  const config = ctx.heap.alloc(TEXT_AT + text.length);
  const buffer = freshBuffer(ctx.core.memory);
  new Uint8Array(buffer, config + TEXT_AT, text.length).set(text);
  new Uint32Array(buffer, config, 1)[0] = text.length;
  try {
    const postbox = openPostbox(
      ctx,
      (i32, at) => {
        i32[(at + L.COMM) >> 2] = c.space;
        i32[(at + L.RANK) >> 2] = c.rank;
        i32[(at + L.SIZE) >> 2] = c.members.length;
        i32[(at + L.CONFIG) >> 2] = config;
        i32[(at + L.ABORT) >> 2] = 0;
      },
      () => ringHub(ctx.core.memory, hub),
      owner + 1,
    );
    return { postbox, config };
  } catch (e) {
    ctx.heap.free(config);
    throw e;
  }
}

export function readNetPostboxConfig(memory: WebAssembly.Memory, postbox: number): NetPostboxConfig {
  const buffer = freshBuffer(memory);
  const at = new Int32Array(buffer)[(postbox + L.CONFIG) >> 2];
  const len = new Uint32Array(buffer, at, 1)[0];
  return JSON.parse(decoder.decode(new Uint8Array(buffer, at + TEXT_AT, len).slice())) as NetPostboxConfig;
}

/** The rank aborts the postbox's communicator: the thread (of `hub`) aborts its engine, which tells every peer. */
export function askAbort(ctx: RankContext, postbox: number, reason: string, hub: number): number {
  const block = ctx.heap.alloc(REASON_BYTES);
  writeReasonText(ctx.core.memory, block, reason);
  const i32 = freshI32(ctx.core.memory);
  if (Atomics.compareExchange(i32, (postbox + L.ABORT) >> 2, 0, block) !== 0) {
    ctx.heap.free(block); // asked already
    return 0;
  }
  ringHub(ctx.core.memory, hub);
  return block;
}

/** The reason the rank asked the postbox's communicator to abort, once it has ('' before). */
export function abortAsked(memory: WebAssembly.Memory, postbox: number): string | undefined {
  const block = Atomics.load(freshI32(memory), (postbox + L.ABORT) >> 2);
  return block ? readReasonText(memory, block) : undefined;
}
