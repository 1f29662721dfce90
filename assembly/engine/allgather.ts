// Direct allGather over shared memory.
//
// Per chunk of the per-rank input: every rank copies its chunk into its slot and posts; once
// all have posted, each rank copies every rank's slot to that rank's block of its output.
// Per rank and chunk of C bytes: C copied in, n·C copied out; one synchronisation.
// A rank whose input is a comm.alloc() buffer is read in place instead (in-place-read.ts):
// when every input is, each rank copies the n blocks straight from the peers' inputs in one
// step (n·S bytes copied per rank, once), then one synchronisation releases the buffers.

import { chunkLoop } from './chunk-loop';
import { chunksDone, copyEveryBlockOut, decideEveryInput, finalSync, stageUnlessShared } from './in-place-read';
import { ST_DONE } from './shm-map';

export function directAllGather(desc: usize): i32 {
  if (!chunksDone(desc)) {
    const r = chunkLoop(desc, stageUnlessShared, decideEveryInput, copyEveryBlockOut);
    if (r != ST_DONE) return r;
  }
  return finalSync(desc);
}
