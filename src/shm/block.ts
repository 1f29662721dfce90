// The communicator block of a group on one node: flags, signatures, descriptors and slots for
// its ranks, in the node heap (the world's block sits before the heap). One member allocates it
// and hands its address to the others; each member releases it when it destroys its
// communicator, and the last to do so frees it.
import { freshBuffer, freshI32 } from '../core/fresh-buffer.js';
import { C, commBlockBytes, NODE_BASE } from '../core/shm-map.js';
import { defaultSpinUs, type RankContext, setSpin } from '../engine/context.js';

/** A zeroed block for `nranks` ranks with the node's slot size, its header filled in. */
export function allocCommBlock(ctx: RankContext, nranks: number): number {
  const bytes = commBlockBytes(nranks, ctx.slotBytes);
  const addr = ctx.heap.allocShared(bytes); // its last member frees it, whoever allocated it
  // Blocks are reused: flags and signatures must start at zero, as the world block's do.
  const buffer = freshBuffer(ctx.core.memory);
  new Uint8Array(buffer, addr, bytes).fill(0);
  const i32 = new Int32Array(buffer);
  i32[(addr + C.NRANKS) >> 2] = nranks;
  i32[(addr + C.SLOT_BYTES) >> 2] = ctx.slotBytes;
  Atomics.store(i32, (addr + C.NODE) >> 2, NODE_BASE);
  return addr;
}

/** This member is done with the block at `addr`; the last of its `nranks` members frees it. */
export function releaseCommBlock(ctx: RankContext, addr: number, nranks: number): void {
  const i32 = freshI32(ctx.core.memory);
  if (Atomics.add(i32, (addr + C.RELEASED) >> 2, 1) + 1 === nranks) ctx.heap.free(addr);
}

/**
 * A rank's context for the group block at `addr`: its rank there and the node rank of every
 * member. Its spin budget is the group's own (a 2-rank group of a 4-rank world on 2 cores spins
 * as 2 ranks do), unless one was given.
 */
export function groupContext(ctx: RankContext, addr: number, rank: number, localOf: number[]): RankContext {
  const g: RankContext = { ...ctx, comm: addr, rank, size: localOf.length, localOf };
  if (!ctx.spinGiven) setSpin(g, defaultSpinUs(g.size, ctx.cores));
  return g;
}
