// Direct allGather over shared memory.
//
// Per chunk of the per-rank input: every rank copies its chunk into its slot and posts; once
// all have posted, each rank copies every rank's slot to that rank's block of its output.
// Per rank and chunk of C bytes: C copied in, n·C copied out; one synchronisation.
import { D_COMM, D_COUNT, D_NRANKS, ST_DONE, field, slotAddr } from './layout';
import { chunkLoop, claim, noHook } from './chunk-loop';
import { chunkLen, chunkOff } from './step';
import { stageOut, stageOwnChunk } from './stage';

function gatherOut(desc: usize, s: u32, t: u32): i32 {
  const comm = <usize>field(desc, D_COMM);
  const count = field(desc, D_COUNT);
  const off = chunkOff(desc, s);
  const len = chunkLen(desc, s);
  const n = field(desc, D_NRANKS);
  for (let j: u32 = 0; j < n; j++) {
    if (!claim(desc, j)) continue;
    const r = stageOut(desc, j * count + off, len, slotAddr(comm, j, t));
    if (r != ST_DONE) return r;
  }
  return ST_DONE;
}

export function directAllGather(desc: usize): i32 {
  return chunkLoop(desc, stageOwnChunk, noHook, gatherOut);
}
