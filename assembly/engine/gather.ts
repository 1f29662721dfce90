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
import { D_COMM, D_COUNT, D_NRANKS, D_RANK, D_ROOT, ST_DONE, field, slotAddr } from './shm-map';
import { chunkLoop, claim } from './chunk-loop';
import { chunkLen, chunkOff } from './step';
import { elemSize, stageIn, stageOut, stageOwnChunk } from './stage';
import { chunksDone, finalSync, modeOf, peerInput, setMode, stagesOwnInput } from './in-place-read';

@inline function isRoot(desc: usize): bool {
  return field(desc, D_RANK) == field(desc, D_ROOT);
}

// ---- gather

function stageUnlessShared(desc: usize, s: u32, t: u32): i32 {
  return stagesOwnInput(desc) ? stageOwnChunk(desc, s, t) : ST_DONE;
}

function decideGather(desc: usize, s: u32, t: u32): i32 {
  if (s == 0) setMode(desc, modeOf(desc, 0, field(desc, D_NRANKS)), field(desc, D_COUNT));
  return ST_DONE;
}

function rootCollects(desc: usize, s: u32, t: u32): i32 {
  if (!isRoot(desc)) return ST_DONE;
  const comm = <usize>field(desc, D_COMM);
  const count = field(desc, D_COUNT);
  const off = chunkOff(desc, s);
  const len = chunkLen(desc, s);
  const n = field(desc, D_NRANKS);
  const es = elemSize(desc);
  for (let j: u32 = 0; j < n; j++) {
    if (!claim(desc, j)) continue;
    const peer = peerInput(desc, j);
    const r = stageOut(desc, j * count + off, len, peer != 0 ? peer + <usize>off * es : slotAddr(comm, j, t));
    if (r != ST_DONE) return r;
  }
  return ST_DONE;
}

export function directGather(desc: usize): i32 {
  if (!chunksDone(desc)) {
    const r = chunkLoop(desc, stageUnlessShared, decideGather, rootCollects);
    if (r != ST_DONE) return r;
  }
  return finalSync(desc);
}

// ---- scatter

function rootStagesPieces(desc: usize, s: u32, t: u32): i32 {
  if (!isRoot(desc) || !stagesOwnInput(desc)) return ST_DONE;
  const slot = slotAddr(<usize>field(desc, D_COMM), field(desc, D_RANK), t);
  const count = field(desc, D_COUNT);
  const off = chunkOff(desc, s);
  const len = chunkLen(desc, s);
  const n = field(desc, D_NRANKS);
  for (let j: u32 = 0; j < n; j++) {
    if (!claim(desc, j)) continue;
    const r = stageIn(desc, j * count + off, len, slot + <usize>(j * len) * elemSize(desc));
    if (r != ST_DONE) return r;
  }
  return ST_DONE;
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
  const src = peer != 0
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
