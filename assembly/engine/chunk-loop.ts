// The loop shared by every algorithm that synchronises once per chunk:
//
//   stage   copy this rank's contribution to chunk s into its slot      (may ask JS to copy)
//   post    publish step t (and, on the first chunk, the op's signature)
//   wait    until every rank has posted t; on the first chunk, compare signatures
//   compute reduce, or nothing                                         (runs exactly once)
//   out     copy results to this rank's output                         (may ask JS to copy)
//
// An algorithm supplies the three hooks. A hook that issues copy requests claims each piece
// first (claim), so that when the loop resumes after JS served a request, it goes on with the
// next piece instead of asking again.
import { D_MODE, D_PHASE, D_STEP, D_SUB, field, ST_DONE, setField } from './shm-map';
import { nextChunk, P_NEXT, P_OUT, P_POST, P_STAGE, P_WAIT, setPhase } from './step';
import { checkSignatures, post, stepNo, waitAll, writeSignature } from './sync';

/** A hook gets the descriptor, the chunk index s and its flag step t. */
export type Hook = (desc: usize, s: u32, t: u32) => i32;

export function noHook(desc: usize, s: u32, t: u32): i32 {
  return ST_DONE;
}

export function chunkLoop(desc: usize, stage: Hook, compute: Hook, out: Hook): i32 {
  while (true) {
    const s = field(desc, D_STEP);
    // The first chunk carries the signature, unless a handshake step before the loop did (it
    // set D_MODE): signing again could publish fields the handshake has since adapted locally.
    const signs = s == 0 && field(desc, D_MODE) == 0;
    const t = stepNo(desc, s + 1);
    let phase = field(desc, D_PHASE);
    if (phase == P_STAGE) {
      const r = stage(desc, s, t);
      if (r != ST_DONE) return r;
      setPhase(desc, (phase = P_POST));
    }
    if (phase == P_POST) {
      if (signs) writeSignature(desc);
      post(desc, t);
      setPhase(desc, (phase = P_WAIT));
    }
    if (phase == P_WAIT) {
      let r = waitAll(desc, t);
      if (r != ST_DONE) return r;
      if (signs) {
        r = checkSignatures(desc);
        if (r != ST_DONE) return r;
      }
      compute(desc, s, t);
      setPhase(desc, (phase = P_OUT));
    }
    if (phase == P_OUT) {
      const r = out(desc, s, t);
      if (r != ST_DONE) return r;
      setPhase(desc, P_NEXT);
    }
    const r = nextChunk(desc, 1, 0);
    if (r >= 0) return r;
  }
}

/**
 * Marks piece j of the current phase as issued. False when it was issued before: the loop is
 * resuming after JS served that piece's copy request.
 */
@inline
export function claim(desc: usize, j: u32): bool {
  if (field(desc, D_SUB) > j) return false;
  setField(desc, D_SUB, j + 1);
  return true;
}
