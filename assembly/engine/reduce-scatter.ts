// Direct reduceScatter over shared memory.
//
// The input holds n blocks of `count` elements; rank i's output is the reduction of block i
// over all ranks. Per chunk (C elements of every block): every rank copies its n chunk pieces
// into its slot and posts; once all have posted, rank i reduces piece i of every slot into
// its output. Per rank and chunk: n·C copied in, n·C read, C written; one synchronisation.
import { D_COUNT, D_NRANKS, D_OUT, D_PHASE, D_RANK, D_STEP, D_SUB, ST_DONE, commOf, field, scratchAddr, setField, slotAddr } from './layout';
import { checkSignatures, post, stepNo, waitAll, writeSignature } from './sync';
import { elemSize, reduceTable, setSource, stageIn, stageOut } from './stage';
import { P_NEXT, P_OUT, P_POST, P_STAGE, P_WAIT, chunkLen, chunkOff, nextChunk, setPhase } from './step';

export function directReduceScatter(desc: usize): i32 {
  const comm = commOf(desc);
  const n = field(desc, D_NRANKS);
  const me = field(desc, D_RANK);
  const count = field(desc, D_COUNT);
  const es = elemSize(desc);
  while (true) {
    const s = field(desc, D_STEP);
    const t = stepNo(desc, s + 1);
    const off = chunkOff(desc, s);
    const len = chunkLen(desc, s);
    const out = <usize>field(desc, D_OUT);
    const dst = out != 0 ? out + <usize>off * es : scratchAddr(comm, me);
    let phase = field(desc, D_PHASE);
    if (phase == P_STAGE) {
      const slot = slotAddr(comm, me, t);
      for (let j = field(desc, D_SUB); j < n; j++) {
        setField(desc, D_SUB, j + 1);
        const r = stageIn(desc, j * count + off, len, slot + <usize>(j * len) * es);
        if (r != ST_DONE) return r;
      }
      setPhase(desc, (phase = P_POST));
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
      for (let i: u32 = 0; i < n; i++) setSource(desc, i, slotAddr(comm, i, t) + <usize>(me * len) * es);
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
