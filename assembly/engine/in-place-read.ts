// Reading a peer's data straight from its own buffer.
//
// A rank whose input is a comm.alloc() buffer (its signature's S_IN is not 0) never stages it
// through its slot: its peers copy from that buffer directly, one copy per byte. Staging still
// serves ranks whose input is an ordinary JS array. Decided on every rank alike from the
// signatures (compared at the op's first step):
//   M_SLOTS   no source is shared: every byte goes through the slots (one sync per chunk)
//   M_MIXED   some are: those are read in place, the rest staged, chunk by chunk
//   M_DIRECT  every source is: no chunking, each rank copies everything it needs in one step
// Whenever a source is read in place, the op ends with one more synchronisation: its owner
// must not return (and let the caller reuse the buffer) while a peer may still read it. So a
// rank may keep its input to itself (D_KEEP_IN, set by JS for small ops when ranks outnumber
// cores, where each synchronisation costs a round of sleeps and wake-ups): it stages it as
// an ordinary array would be, and publishes no address.

import { claim } from './chunk-loop';
import {
  commOf,
  D_CHUNK,
  D_COMM,
  D_COUNT,
  D_IN,
  D_KEEP_IN,
  D_MODE,
  D_NCHUNKS,
  D_NRANKS,
  D_PHASE,
  D_SEQ,
  D_STEP,
  D_STEPS_USED,
  field,
  S_IN,
  ST_DONE,
  setField,
  sigAddr,
  slotAddr,
} from './shm-map';
import { elemSize, stageOut, stageOwnChunk } from './stage';
import { chunkLen, chunkOff, P_STAGE, P_WAIT, setPhase } from './step';
import { post, stepNo, waitAll } from './sync';

export const M_UNDECIDED: u32 = 0;
export const M_SLOTS: u32 = 1;
export const M_MIXED: u32 = 2;
export const M_DIRECT: u32 = 3;

/** Rank r's input address for this op, 0 when it is not in shared memory. */
@inline
export function peerInput(desc: usize, r: u32): usize {
  return <usize>load<u32>(sigAddr(commOf(desc), r, field(desc, D_SEQ)) + S_IN);
}

/** The mode for sources[0..k) (rank numbers), once every signature is in. */
export function modeOf(desc: usize, first: u32, end: u32): u32 {
  let shared: u32 = 0;
  for (let r = first; r < end; r++) if (peerInput(desc, r) != 0) shared++;
  return shared == 0 ? M_SLOTS : shared == end - first ? M_DIRECT : M_MIXED;
}

/**
 * Records the mode; M_DIRECT turns the op into one chunk as long as a whole block (every rank
 * decides the same, so chunk boundaries still agree).
 */
export function setMode(desc: usize, mode: u32, block: u32): void {
  setField(desc, D_MODE, mode);
  if (mode != M_DIRECT) return;
  setField(desc, D_CHUNK, max<u32>(block, 1));
  setField(desc, D_NCHUNKS, 1);
}

/** Whether this rank stages its own input (it does unless peers read it in place). */
@inline
export function stagesOwnInput(desc: usize): bool {
  return field(desc, D_IN) == 0 || field(desc, D_KEEP_IN) != 0;
}

/** Whether the chunks are all done (the loop then only has the final synchronisation left). */
@inline
export function chunksDone(desc: usize): bool {
  return field(desc, D_STEP) >= field(desc, D_NCHUNKS);
}

/** The closing synchronisation after the chunks, when a source was read in place. */
export function finalSync(desc: usize): i32 {
  if (field(desc, D_MODE) == M_SLOTS) return ST_DONE;
  const k = field(desc, D_NCHUNKS) + 1;
  const t = stepNo(desc, k);
  if (field(desc, D_PHASE) == P_STAGE) {
    post(desc, t);
    setPhase(desc, P_WAIT);
  }
  const r = waitAll(desc, t);
  if (r != ST_DONE) return r;
  setField(desc, D_STEPS_USED, k);
  return ST_DONE;
}

/** Elements of a block of `count` that chunk s (of `chunk` elements) covers. */
@inline
export function pieceLen(count: u32, chunk: u32, s: u32): u32 {
  const off = s * chunk;
  return count > off ? min(chunk, count - off) : 0;
}

@inline
export function blockCount(desc: usize): u32 {
  return field(desc, D_COUNT);
}

// ---- chunk-loop hooks shared by allGather and gather (every rank's input goes to n blocks)

/** Stages this rank's chunk unless its input is read in place. */
export function stageUnlessShared(desc: usize, s: u32, t: u32): i32 {
  return stagesOwnInput(desc) ? stageOwnChunk(desc, s, t) : ST_DONE;
}

/** At the first chunk: how every rank's input is read (all n ranks are sources). */
export function decideEveryInput(desc: usize, s: u32, t: u32): i32 {
  if (s == 0) setMode(desc, modeOf(desc, 0, field(desc, D_NRANKS)), field(desc, D_COUNT));
  return ST_DONE;
}

/**
 * Copies chunk s of every rank's input (from its slot, or its shared input) to that rank's block of this rank's output.
 */
export function copyEveryBlockOut(desc: usize, s: u32, t: u32): i32 {
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
