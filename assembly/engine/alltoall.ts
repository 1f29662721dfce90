// allToAll over shared memory: rank i's block j goes to rank j's block i.
//
// Per chunk s (C elements of every block, C = slot / n): every rank stages piece s of each of
// its n blocks into its slot (unless its input is shared) and posts; once all have posted,
// rank i copies piece i of every rank's slot to its output. Per rank and chunk: n·C in, n·C
// out; one synchronisation. Shared inputs are read in place (in-place-read.ts): when every
// input is, each rank copies its n blocks straight from the peers' inputs in one step, then
// one synchronisation releases the buffers (n·S/n = S bytes copied per rank, once).
// Per-peer counts add a first step that publishes and checks them (alltoall-counts.ts).

import { countsHandshake, peerOff, perPeer, recvCount, recvOff, sendCount, sendOff } from './alltoall-counts';
import { chunkLoop, claim } from './chunk-loop';
import {
  chunksDone,
  finalSync,
  M_UNDECIDED,
  modeOf,
  peerInput,
  pieceLen,
  setMode,
  stagesOwnInput,
} from './in-place-read';
import { D_CHUNK, D_COMM, D_COUNT, D_MODE, D_NRANKS, D_RANK, field, ST_DONE, slotAddr } from './shm-map';
import { elemSize, stageIn, stageOut } from './stage';

function stagePieces(desc: usize, s: u32, t: u32): i32 {
  if (!stagesOwnInput(desc)) return ST_DONE;
  const slot = slotAddr(<usize>field(desc, D_COMM), field(desc, D_RANK), t);
  const chunk = field(desc, D_CHUNK);
  const n = field(desc, D_NRANKS);
  const es = elemSize(desc);
  for (let j: u32 = 0; j < n; j++) {
    if (!claim(desc, j)) continue;
    const len = pieceLen(sendCount(desc, j), chunk, s);
    const r = stageIn(desc, sendOff(desc, j) + s * chunk, len, slot + <usize>(j * chunk) * es);
    if (r != ST_DONE) return r;
  }
  return ST_DONE;
}

function decide(desc: usize, s: u32, t: u32): i32 {
  // Per-peer counts decided in their handshake.
  if (s == 0 && field(desc, D_MODE) == M_UNDECIDED)
    setMode(desc, modeOf(desc, 0, field(desc, D_NRANKS)), field(desc, D_COUNT));
  return ST_DONE;
}

function takePieces(desc: usize, s: u32, t: u32): i32 {
  const comm = <usize>field(desc, D_COMM);
  const chunk = field(desc, D_CHUNK);
  const n = field(desc, D_NRANKS);
  const me = field(desc, D_RANK);
  const es = elemSize(desc);
  for (let j: u32 = 0; j < n; j++) {
    if (!claim(desc, j)) continue;
    const len = pieceLen(recvCount(desc, j), chunk, s);
    const peer = peerInput(desc, j);
    const src =
      peer != 0 ? peer + <usize>(peerOff(desc, j) + s * chunk) * es : slotAddr(comm, j, t) + <usize>(me * chunk) * es;
    const r = stageOut(desc, recvOff(desc, j) + s * chunk, len, src);
    if (r != ST_DONE) return r;
  }
  return ST_DONE;
}

export function directAllToAll(desc: usize): i32 {
  if (perPeer(desc) && field(desc, D_MODE) == M_UNDECIDED) {
    const r = countsHandshake(desc);
    if (r != ST_DONE) return r;
  }
  if (!chunksDone(desc)) {
    const r = chunkLoop(desc, stagePieces, decide, takePieces);
    if (r != ST_DONE) return r;
  }
  return finalSync(desc);
}
