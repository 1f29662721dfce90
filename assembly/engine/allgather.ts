// Direct allGather over shared memory.
//
// Per chunk of the per-rank input: every rank copies its chunk into its slot and posts; once
// all have posted, each rank copies every rank's slot to that rank's block of its output.
// Per rank and chunk of C bytes: C copied in, n·C copied out; one synchronisation.
// A rank whose input is a comm.alloc() buffer is read in place instead (in-place-read.ts):
// when every input is, each rank copies the n blocks straight from the peers' inputs in one
// step (n·S bytes copied per rank, once), then one synchronisation releases the buffers.
import { D_COMM, D_COUNT, D_NRANKS, ST_DONE, field, slotAddr } from './shm-map';
import { chunkLoop, claim } from './chunk-loop';
import { chunkLen, chunkOff } from './step';
import { elemSize, stageOut, stageOwnChunk } from './stage';
import { chunksDone, finalSync, modeOf, peerInput, setMode, stagesOwnInput } from './in-place-read';

function stageUnlessShared(desc: usize, s: u32, t: u32): i32 {
  return stagesOwnInput(desc) ? stageOwnChunk(desc, s, t) : ST_DONE;
}

function decide(desc: usize, s: u32, t: u32): i32 {
  if (s == 0) setMode(desc, modeOf(desc, 0, field(desc, D_NRANKS)), field(desc, D_COUNT));
  return ST_DONE;
}

function gatherOut(desc: usize, s: u32, t: u32): i32 {
  const comm = <usize>field(desc, D_COMM);
  const count = field(desc, D_COUNT);
  const off = chunkOff(desc, s);
  const len = chunkLen(desc, s);
  const n = field(desc, D_NRANKS);
  const es = elemSize(desc);
  for (let j: u32 = 0; j < n; j++) {
    if (!claim(desc, j)) continue;
    const peer = peerInput(desc, j);
    const src = peer != 0 ? peer + <usize>off * es : slotAddr(comm, j, t);
    const r = stageOut(desc, j * count + off, len, src);
    if (r != ST_DONE) return r;
  }
  return ST_DONE;
}

export function directAllGather(desc: usize): i32 {
  if (!chunksDone(desc)) {
    const r = chunkLoop(desc, stageUnlessShared, decide, gatherOut);
    if (r != ST_DONE) return r;
  }
  return finalSync(desc);
}
