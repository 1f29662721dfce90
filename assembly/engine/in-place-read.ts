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
// must not return (and let the caller reuse the buffer) while a peer may still read it.
import {
  D_CHUNK, D_COUNT, D_IN, D_MODE, D_NCHUNKS, D_PHASE, D_SEQ, D_STEP, D_STEPS_USED, S_IN, ST_DONE,
  commOf, field, setField, sigAddr,
} from './shm-map';
import { post, stepNo, waitAll } from './sync';
import { P_STAGE, P_WAIT, setPhase } from './step';

export const M_UNDECIDED: u32 = 0;
export const M_SLOTS: u32 = 1;
export const M_MIXED: u32 = 2;
export const M_DIRECT: u32 = 3;

/** Rank r's input address for this op, 0 when it is not in shared memory. */
@inline export function peerInput(desc: usize, r: u32): usize {
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
@inline export function stagesOwnInput(desc: usize): bool {
  return field(desc, D_IN) == 0;
}

/** Whether the chunks are all done (the loop then only has the final synchronisation left). */
@inline export function chunksDone(desc: usize): bool {
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
@inline export function pieceLen(count: u32, chunk: u32, s: u32): u32 {
  const off = s * chunk;
  return count > off ? min(chunk, count - off) : 0;
}

@inline export function blockCount(desc: usize): u32 {
  return field(desc, D_COUNT);
}
