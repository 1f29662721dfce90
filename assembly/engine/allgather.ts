// Direct allGather over shared memory.
//
// Per chunk of the per-rank input: every rank copies its chunk into its slot and posts; once
// all have posted, each rank copies every rank's slot to that rank's place in its output.
// Per rank and chunk of C bytes: C copied in, n·C copied out; one synchronisation.
import { D_COUNT, D_NRANKS, D_PHASE, D_RANK, D_STEP, D_SUB, ST_DONE, commOf, field, setField, slotAddr } from './layout';
import { checkSignatures, post, stepNo, waitAll, writeSignature } from './sync';
import { stageIn, stageOut } from './stage';
import { P_NEXT, P_OUT, P_POST, P_STAGE, P_WAIT, chunkLen, chunkOff, nextChunk, setPhase } from './step';

export function directAllGather(desc: usize): i32 {
  const comm = commOf(desc);
  const n = field(desc, D_NRANKS);
  const me = field(desc, D_RANK);
  const count = field(desc, D_COUNT);
  while (true) {
    const s = field(desc, D_STEP);
    const t = stepNo(desc, s + 1);
    const off = chunkOff(desc, s);
    const len = chunkLen(desc, s);
    let phase = field(desc, D_PHASE);
    if (phase == P_STAGE) {
      setPhase(desc, P_POST);
      const r = stageIn(desc, off, len, slotAddr(comm, me, t));
      if (r != ST_DONE) return r;
      phase = P_POST;
    }
    if (phase == P_POST) {
      if (s == 0) writeSignature(desc);
      post(desc, t);
      setPhase(desc, (phase = P_WAIT));
    }
    if (phase == P_WAIT) {
      let r = waitAll(desc, t);
      if (r != ST_DONE) return r;
      if (s == 0) {
        r = checkSignatures(desc);
        if (r != ST_DONE) return r;
      }
      setPhase(desc, (phase = P_OUT));
    }
    if (phase == P_OUT) {
      for (let j = field(desc, D_SUB); j < n; j++) {
        setField(desc, D_SUB, j + 1);
        const r = stageOut(desc, j * count + off, len, slotAddr(comm, j, t));
        if (r != ST_DONE) return r;
      }
      setPhase(desc, P_NEXT);
    }
    const r = nextChunk(desc, 1, 0);
    if (r >= 0) return r;
  }
}
