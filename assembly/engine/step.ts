// Bookkeeping shared by the step loops: where a chunk starts and ends, moving to the next
// step, and finishing the op.
import { D_CHUNK, D_COUNT, D_NCHUNKS, D_PHASE, D_STEP, D_STEPS_USED, D_SUB, field, ST_DONE, setField } from './shm-map';

// Phases inside one step; a loop resumes at the phase it stored before handing back to JS.
export const P_STAGE: u32 = 0; // copy this rank's contribution into its slot
export const P_POST: u32 = 1; // publish it (flag = step number)
export const P_WAIT: u32 = 2; // wait for every rank, then compute
export const P_OUT: u32 = 3; // copy results out
export const P_NEXT: u32 = 4; // step finished

@inline
export function chunkOff(desc: usize, s: u32): u32 {
  return s * field(desc, D_CHUNK);
}
@inline
export function chunkLen(desc: usize, s: u32): u32 {
  const off = s * field(desc, D_CHUNK);
  return min(field(desc, D_CHUNK), field(desc, D_COUNT) - off);
}

@inline
export function setPhase(desc: usize, p: u32): void {
  setField(desc, D_PHASE, p);
  setField(desc, D_SUB, 0);
}

/** Moves to the next chunk; ST_DONE (with the flag steps used) after the last one, else -1. */
export function nextChunk(desc: usize, stepsPerChunk: u32, extraSteps: u32): i32 {
  const s = field(desc, D_STEP) + 1;
  setField(desc, D_STEP, s);
  setPhase(desc, P_STAGE);
  if (s < field(desc, D_NCHUNKS)) return -1;
  setField(desc, D_STEPS_USED, s * stepsPerChunk + extraSteps);
  return ST_DONE;
}

/**
 * Start of segment i when `len` elements are cut into `parts` near-equal segments. Segments
 * are whole multiples of 16 elements (but the last) so that vector loops stay aligned.
 */
@inline
export function segStart(len: u32, parts: u32, i: u32): u32 {
  const per = ((len + parts - 1) / parts + 15) & ~15;
  return min(len, per * i);
}
