// Broadcast, reduce and barrier over shared memory: one synchronisation per chunk.
//
// broadcast: the root copies a chunk of its buffer into its slot and posts; every rank posts
//   too (that post tells the root the slot it will reuse four steps later has been read);
//   once all have posted, non-roots copy the root's slot into their buffer. Bytes per rank
//   and chunk: C in at the root, C out elsewhere.
// reduce: every rank copies its chunk into its slot; the root reduces all slots into its
//   output (direct allReduce whose result only the root keeps).
// barrier: one step with no data.
import { D_NRANKS, D_OUT, D_PHASE, D_RANK, D_ROOT, D_STEP, D_STEPS_USED, ST_DONE, commOf, field, scratchAddr, setField, slotAddr } from './layout';
import { checkSignatures, post, stepNo, waitAll, writeSignature } from './sync';
import { elemSize, reduceTable, setSource, stageIn, stageOut } from './stage';
import { P_NEXT, P_OUT, P_POST, P_STAGE, P_WAIT, chunkLen, chunkOff, nextChunk, setPhase } from './step';

/** One chunk step shared by broadcast and reduce; `reducing` picks which. */
function rootedStep(desc: usize, reducing: bool): i32 {
  const comm = commOf(desc);
  const n = field(desc, D_NRANKS);
  const me = field(desc, D_RANK);
  const root = field(desc, D_ROOT);
  const es = elemSize(desc);
  while (true) {
    const s = field(desc, D_STEP);
    const t = stepNo(desc, s + 1);
    const off = chunkOff(desc, s);
    const len = chunkLen(desc, s);
    let phase = field(desc, D_PHASE);
    if (phase == P_STAGE) {
      setPhase(desc, P_POST);
      if (reducing || me == root) {
        const r = stageIn(desc, off, len, slotAddr(comm, me, t));
        if (r != ST_DONE) return r;
      }
      phase = P_POST;
    }
    if (phase == P_POST) {
      if (s == 0) writeSignature(desc);
      post(desc, t);
      setPhase(desc, (phase = P_WAIT));
    }
    const out = <usize>field(desc, D_OUT);
    const dst = out != 0 ? out + <usize>off * es : scratchAddr(comm, me);
    if (phase == P_WAIT) {
      let r = waitAll(desc, t);
      if (r != ST_DONE) return r;
      if (s == 0) {
        r = checkSignatures(desc);
        if (r != ST_DONE) return r;
      }
      if (reducing && me == root) {
        for (let i: u32 = 0; i < n; i++) setSource(desc, i, slotAddr(comm, i, t));
        reduceTable(desc, n, dst, len);
      }
      setPhase(desc, (phase = P_OUT));
    }
    if (phase == P_OUT) {
      setPhase(desc, P_NEXT);
      // broadcast: non-roots take the root's slot; reduce: only the root has a result.
      if (reducing ? me == root : me != root) {
        const r = stageOut(desc, off, len, reducing ? dst : slotAddr(comm, root, t));
        if (r != ST_DONE) return r;
      }
    }
    const r = nextChunk(desc, 1, 0);
    if (r >= 0) return r;
  }
}

export function directBroadcast(desc: usize): i32 {
  return rootedStep(desc, false);
}

export function directReduce(desc: usize): i32 {
  return rootedStep(desc, true);
}

export function barrier(desc: usize): i32 {
  const t = stepNo(desc, 1);
  if (field(desc, D_PHASE) == P_STAGE) {
    writeSignature(desc);
    post(desc, t);
    setPhase(desc, P_WAIT);
  }
  let r = waitAll(desc, t);
  if (r != ST_DONE) return r;
  r = checkSignatures(desc);
  if (r != ST_DONE) return r;
  setField(desc, D_STEPS_USED, 1);
  return ST_DONE;
}
