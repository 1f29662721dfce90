// Two-shot allReduce over shared memory: a reduce-scatter then an allgather, both by direct
// reads of the peers' own buffers.
//
// Step 1 is a handshake: every rank publishes its signature, including where its buffers
// live. If every rank's input and output are in shared memory (comm.alloc), the op runs
// zero-copy on the users' buffers:
//   A. rank i reduces segment i of every rank's input into segment i of its own output;
//      post, wait for all;
//   B. rank i copies segment j of rank j's output into its own, for every j ≠ i; post, wait
//      for all (nobody may touch its buffers while a peer still reads them).
// Per rank, n ranks, S bytes: reads S and writes S/n in A, copies (n−1)/n·S in B; 3 steps.
// Otherwise the data must be copied through the slots anyway, and then the one-shot chunk
// loop is faster: measured with plain TypedArrays, the two copies between a JS buffer and
// shared memory (~10 GB/s each in V8) dominate, and staging the two-shot way only adds a
// synchronisation per chunk. So after the handshake the op continues as direct allReduce.

import { directAllReduce } from './direct-allreduce';
import {
  commOf,
  D_BASE,
  D_COUNT,
  D_MODE,
  D_NRANKS,
  D_OUT,
  D_PHASE,
  D_RANK,
  D_SEQ,
  D_STEPS_USED,
  field,
  S_IN,
  S_OUT,
  ST_DONE,
  setField,
  sigAddr,
} from './shm-map';
import { elemSize, reduceTable, setSource } from './stage';
import { P_OUT, P_STAGE, P_WAIT, segStart, setPhase } from './step';
import { post, signedStep, stepNo, waitAll } from './sync';

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
  const r = signedStep(desc, stepNo(desc, 1));
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

export function twoshotAllReduce(desc: usize): i32 {
  if (field(desc, D_MODE) == MODE_UNDECIDED) {
    const r = handshake(desc);
    if (r != ST_DONE) return r;
    // The handshake used the op's first step: the one-shot chunks start after it.
    if (field(desc, D_MODE) == MODE_STAGED) setField(desc, D_BASE, field(desc, D_BASE) + 1);
  }
  return field(desc, D_MODE) == MODE_ZERO_COPY ? zeroCopy(desc) : directAllReduce(desc);
}
