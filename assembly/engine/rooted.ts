// Broadcast, reduce and barrier over shared memory: one synchronisation per chunk.
//
// broadcast: the root copies a chunk of its buffer into its slot; every rank posts (that post
//   also tells the root the slot it reuses four steps later has been read); once all have
//   posted, non-roots (and an out-of-place root) copy the root's slot to their output. Per
//   chunk: C in at the root, C out elsewhere.
// reduce: every rank copies its chunk into its slot; the root reduces all slots into its
//   output (a direct allReduce whose result only the root keeps).
// barrier: one step with no data.

import { chunkLoop, claim, noHook } from './chunk-loop';
import { D_COMM, D_IN_PLACE, D_RANK, D_ROOT, field, ST_DONE, slotAddr } from './shm-map';
import { outputResult, reduceSlots, resultAddr, stageOut, stageOwnChunk } from './stage';
import { chunkLen, chunkOff } from './step';

@inline
function isRoot(desc: usize): bool {
  return field(desc, D_RANK) == field(desc, D_ROOT);
}

function rootStages(desc: usize, s: u32, t: u32): i32 {
  return isRoot(desc) ? stageOwnChunk(desc, s, t) : ST_DONE;
}

/** Everyone but an in-place root copies the root's slot to its output. */
function takeRootSlot(desc: usize, s: u32, t: u32): i32 {
  if ((isRoot(desc) && field(desc, D_IN_PLACE) != 0) || !claim(desc, 0)) return ST_DONE;
  const slot = slotAddr(<usize>field(desc, D_COMM), field(desc, D_ROOT), t);
  return stageOut(desc, chunkOff(desc, s), chunkLen(desc, s), slot);
}

function rootReduces(desc: usize, s: u32, t: u32): i32 {
  if (isRoot(desc)) reduceSlots(desc, t, 0, resultAddr(desc, s), chunkLen(desc, s));
  return ST_DONE;
}

function rootOutputs(desc: usize, s: u32, t: u32): i32 {
  return isRoot(desc) ? outputResult(desc, s, t) : ST_DONE;
}

export function directBroadcast(desc: usize): i32 {
  return chunkLoop(desc, rootStages, noHook, takeRootSlot);
}

export function directReduce(desc: usize): i32 {
  return chunkLoop(desc, stageOwnChunk, rootReduces, rootOutputs);
}

/** One step with no data (the op's count is 0, so its single chunk is empty). */
export function barrier(desc: usize): i32 {
  return chunkLoop(desc, noHook, noHook, noHook);
}
