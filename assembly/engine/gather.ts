// Gather and scatter over shared memory: one synchronisation per chunk, sources read in place
// when they are comm.alloc() buffers (in-place-read.ts).
//
// gather: every rank stages its chunk into its slot (unless its input is shared); once all
//   have posted, the root copies each rank's chunk to that rank's block of its output. Per
//   chunk of C bytes: C in on every rank, n·C out at the root.
// scatter: the root stages chunk s of each of its n blocks into its slot (n pieces of C/n
//   elements), unless its input is shared; once all have posted, rank i copies piece i to its
//   output. Per chunk: C in at the root, C/n out on every rank. With a shared root input every
//   rank copies its whole block from it in one step.

import { chunkLoop, claim } from './chunk-loop';
import {
  chunksDone,
  copyEveryBlockOut,
  decideEveryInput,
  finalSync,
  modeOf,
  peerInput,
  setMode,
  stagesOwnInput,
  stageUnlessShared,
} from './in-place-read';
import { D_COMM, D_COUNT, D_RANK, D_ROOT, field, ST_DONE, slotAddr } from './shm-map';
import { elemSize, stageOut, stagePieces } from './stage';
import { chunkLen, chunkOff } from './step';

@inline
function isRoot(desc: usize): bool {
  return field(desc, D_RANK) == field(desc, D_ROOT);
}

// ---- gather

function rootCollects(desc: usize, s: u32, t: u32): i32 {
  return isRoot(desc) ? copyEveryBlockOut(desc, s, t) : ST_DONE;
}

export function directGather(desc: usize): i32 {
  if (!chunksDone(desc)) {
    const r = chunkLoop(desc, stageUnlessShared, decideEveryInput, rootCollects);
    if (r != ST_DONE) return r;
  }
  return finalSync(desc);
}

// ---- scatter

function rootStagesPieces(desc: usize, s: u32, t: u32): i32 {
  return isRoot(desc) && stagesOwnInput(desc) ? stagePieces(desc, s, t) : ST_DONE;
}

function decideScatter(desc: usize, s: u32, t: u32): i32 {
  const root = field(desc, D_ROOT);
  if (s == 0) setMode(desc, modeOf(desc, root, root + 1), field(desc, D_COUNT));
  return ST_DONE;
}

function takeOwnPiece(desc: usize, s: u32, t: u32): i32 {
  if (!claim(desc, 0)) return ST_DONE;
  const root = field(desc, D_ROOT);
  const me = field(desc, D_RANK);
  const off = chunkOff(desc, s);
  const len = chunkLen(desc, s);
  const es = elemSize(desc);
  const peer = peerInput(desc, root);
  const src =
    peer != 0
      ? peer + <usize>(me * field(desc, D_COUNT) + off) * es
      : slotAddr(<usize>field(desc, D_COMM), root, t) + <usize>(me * len) * es;
  return stageOut(desc, off, len, src);
}

export function directScatter(desc: usize): i32 {
  if (!chunksDone(desc)) {
    const r = chunkLoop(desc, rootStagesPieces, decideScatter, takeOwnPiece);
    if (r != ST_DONE) return r;
  }
  return finalSync(desc);
}
