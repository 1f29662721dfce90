// Direct (one-shot) allReduce over shared memory.
//
// Per chunk: every rank copies its chunk into its slot and posts; once every rank has posted,
// each rank reduces all n slots in one pass (reduceK) into its own output. One
// synchronisation per chunk, so it is the small-message algorithm. Per rank and chunk of
// C bytes: C copied in, n·C read, C written.

import { chunkLoop } from './chunk-loop';
import { ST_DONE } from './shm-map';
import { outputResult, reduceSlots, resultAddr, stageOwnChunk } from './stage';
import { chunkLen } from './step';

function reduceChunk(desc: usize, s: u32, t: u32): i32 {
  reduceSlots(desc, t, 0, resultAddr(desc, s), chunkLen(desc, s));
  return ST_DONE;
}

export function directAllReduce(desc: usize): i32 {
  return chunkLoop(desc, stageOwnChunk, reduceChunk, outputResult);
}
