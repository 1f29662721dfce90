// Direct (one-shot) allReduce over shared memory.
//
// Per chunk: every rank copies its chunk into its slot and posts; once every rank has posted,
// each rank reduces all n slots in one pass (reduceK) into its own output. One
// synchronisation per chunk, so it is the small-message algorithm. Per rank and chunk of
// C bytes: C copied in, n·C read, C written; no data crosses a flag twice.
import { D_NRANKS, D_OUT, D_RANK, D_STEP, ST_DONE, field } from './layout';
import { scratchAddr, slotAddr, commOf } from './layout';
import { checkSignatures, post, stepNo, waitAll, writeSignature } from './sync';
import { elemSize, reduceTable, setSource, stageIn, stageOut } from './stage';
import { P_NEXT, P_OUT, P_POST, P_STAGE, P_WAIT, chunkLen, chunkOff, nextChunk, setPhase } from './step';
import { D_PHASE } from './layout';

export function directAllReduce(desc: usize): i32 {
  const comm = commOf(desc);
  const n = field(desc, D_NRANKS);
  const me = field(desc, D_RANK);
  while (true) {
    const s = field(desc, D_STEP);
    const t = stepNo(desc, s + 1);
    const off = chunkOff(desc, s);
    const len = chunkLen(desc, s);
    const out = <usize>field(desc, D_OUT);
    const dst = out != 0 ? out + <usize>off * elemSize(desc) : scratchAddr(comm, me);
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
      for (let i: u32 = 0; i < n; i++) setSource(desc, i, slotAddr(comm, i, t));
      reduceTable(desc, n, dst, len);
      setPhase(desc, (phase = P_OUT));
    }
    if (phase == P_OUT) {
      setPhase(desc, P_NEXT);
      const r = stageOut(desc, off, len, dst);
      if (r != ST_DONE) return r;
    }
    const r = nextChunk(desc, 1, 0);
    if (r >= 0) return r;
  }
}
