// Two-shot allReduce over shared memory: a reduce-scatter then an allgather, both by direct
// reads of the peers' memory.
//
// Step 1 is a handshake: every rank publishes its signature, including where its buffers
// live. If every rank's input and output are in shared memory (comm.alloc), the op runs
// zero-copy on the users' own buffers:
//   A. rank i reduces segment i of every rank's input into segment i of its own output;
//      post, wait for all;
//   B. rank i copies segment j of rank j's output into its own, for every j ≠ i; post, wait
//      for all (nobody may touch its buffers while a peer still reads them).
// Otherwise the data is staged chunk by chunk through slots, two steps per chunk:
//   A. copy the chunk into the slot; post, wait; reduce segment i of every slot into segment i
//      of this rank's own slot (nobody else reads that segment of it during this step);
//   B. post, wait; copy every rank's segment of the result out.
// Per rank and chunk of C bytes, n ranks: C copied in, C read for the reduction, C/n written,
// C copied out: ~(3 + 1/n)·C against (n + 2)·C for direct, and two synchronisations.
import {
  D_IN, D_MODE, D_NRANKS, D_OUT, D_PHASE, D_RANK, D_STEP, D_STEPS_USED, D_SUB, D_SEQ,
  S_IN, S_OUT, ST_DONE, commOf, field, setField, sigAddr, slotAddr,
} from './layout';
import { checkSignatures, post, stepNo, waitAll, writeSignature } from './sync';
import { elemSize, reduceTable, setSource, stageIn, stageOut } from './stage';
import { P_NEXT, P_OUT, P_POST, P_STAGE, P_WAIT, chunkLen, chunkOff, nextChunk, segStart, setPhase } from './step';
import { D_COUNT, D_NCHUNKS } from './layout';

const MODE_UNDECIDED: u32 = 0;
const MODE_STAGED: u32 = 1;
const MODE_ZERO_COPY: u32 = 2;

function everyBufferShared(desc: usize): bool {
  const comm = commOf(desc);
  const seq = field(desc, D_SEQ);
  const n = field(desc, D_NRANKS);
  for (let r: u32 = 0; r < n; r++) {
    const sig = sigAddr(comm, r, seq);
    if (load<u32>(sig + S_IN) == 0 || load<u32>(sig + S_OUT) == 0) return false;
  }
  return true;
}

function handshake(desc: usize): i32 {
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
  setField(desc, D_MODE, everyBufferShared(desc) ? MODE_ZERO_COPY : MODE_STAGED);
  setPhase(desc, P_STAGE);
  return ST_DONE;
}

/** Zero-copy: phases A and B over the users' buffers, addresses from the signatures. */
function zeroCopy(desc: usize): i32 {
  const comm = commOf(desc);
  const n = field(desc, D_NRANKS);
  const me = field(desc, D_RANK);
  const seq = field(desc, D_SEQ);
  const count = field(desc, D_COUNT);
  const es = elemSize(desc);
  const tA = stepNo(desc, 2);
  const tB = stepNo(desc, 3);
  let phase = field(desc, D_PHASE);
  if (phase == P_STAGE) {
    const a = segStart(count, n, me);
    const b = segStart(count, n, me + 1);
    for (let r: u32 = 0; r < n; r++) setSource(desc, r, <usize>load<u32>(sigAddr(comm, r, seq) + S_IN) + <usize>a * es);
    reduceTable(desc, n, <usize>field(desc, D_OUT) + <usize>a * es, b - a);
    post(desc, tA);
    setPhase(desc, (phase = P_WAIT));
  }
  if (phase == P_WAIT) {
    const r = waitAll(desc, tA);
    if (r != ST_DONE) return r;
    const out = <usize>field(desc, D_OUT);
    for (let j: u32 = 0; j < n; j++) {
      if (j == me) continue;
      const a = segStart(count, n, j);
      const b = segStart(count, n, j + 1);
      const peerOut = <usize>load<u32>(sigAddr(comm, j, seq) + S_OUT);
      memory.copy(out + <usize>a * es, peerOut + <usize>a * es, <usize>(b - a) * es);
    }
    post(desc, tB);
    setPhase(desc, (phase = P_OUT));
  }
  const r = waitAll(desc, tB);
  if (r != ST_DONE) return r;
  setField(desc, D_STEPS_USED, 3);
  return ST_DONE;
}

/** Staged: two steps per chunk through the slots. */
function staged(desc: usize): i32 {
  const comm = commOf(desc);
  const n = field(desc, D_NRANKS);
  const me = field(desc, D_RANK);
  const es = elemSize(desc);
  while (true) {
    const s = field(desc, D_STEP);
    const tA = stepNo(desc, 2 + 2 * s);
    const tB = tA + 1;
    const off = chunkOff(desc, s);
    const len = chunkLen(desc, s);
    let phase = field(desc, D_PHASE);
    if (phase == P_STAGE) {
      setPhase(desc, P_POST);
      const r = stageIn(desc, off, len, slotAddr(comm, me, tA));
      if (r != ST_DONE) return r;
      phase = P_POST;
    }
    if (phase == P_POST) {
      post(desc, tA);
      setPhase(desc, (phase = P_WAIT));
    }
    if (phase == P_WAIT) {
      const r = waitAll(desc, tA);
      if (r != ST_DONE) return r;
      const a = segStart(len, n, me);
      const b = segStart(len, n, me + 1);
      for (let i: u32 = 0; i < n; i++) setSource(desc, i, slotAddr(comm, i, tA) + <usize>a * es);
      reduceTable(desc, n, slotAddr(comm, me, tA) + <usize>a * es, b - a);
      post(desc, tB);
      setPhase(desc, (phase = P_OUT));
    }
    if (phase == P_OUT) {
      const r = waitAll(desc, tB);
      if (r != ST_DONE) return r;
      // Copy each rank's reduced segment out; D_SUB remembers how far we got across requests.
      for (let j = field(desc, D_SUB); j < n; j++) {
        const a = segStart(len, n, j);
        const b = segStart(len, n, j + 1);
        setField(desc, D_SUB, j + 1);
        const q = stageOut(desc, off + a, b - a, slotAddr(comm, j, tA) + <usize>a * es);
        if (q != ST_DONE) return q;
      }
      setPhase(desc, P_NEXT);
    }
    const r = nextChunk(desc, 2, 1);
    if (r >= 0) return r;
  }
}

export function twoshotAllReduce(desc: usize): i32 {
  if (field(desc, D_MODE) == MODE_UNDECIDED) {
    const r = handshake(desc);
    if (r != ST_DONE) return r;
  }
  return field(desc, D_MODE) == MODE_ZERO_COPY ? zeroCopy(desc) : staged(desc);
}
