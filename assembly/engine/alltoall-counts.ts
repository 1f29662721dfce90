// allToAll's block geometry: equal blocks (D_COUNT elements each), or per-peer counts.
//
// With per-peer counts D_COUNT holds PER_PEER and JS writes this rank's counts into its
// scratch before the op: sendCounts[n], recvCounts[n]. The handshake (the op's first step)
// publishes them in this rank's slot; after it every rank checks the whole matrix (rank i's
// recvCounts[j] against rank j's sendCounts[i], in the same order on every rank, so that all
// report the same pair), and derives what it keeps for the op: its own send and receive
// offsets (scratch, after the counts) and, for each peer j, where j's block for it starts in
// j's input (the descriptor's table). Peers never read another rank's scratch: the slot of
// the handshake step stays theirs to read until every rank posts the step after it.

import { M_DIRECT, modeOf, setMode } from './in-place-read';
import {
  D_BASE,
  D_CHUNK,
  D_COMM,
  D_COUNT,
  D_ERR,
  D_ERR_RANK_A,
  D_ERR_RANK_B,
  D_ERR_VAL_A,
  D_ERR_VAL_B,
  D_MODE,
  D_NCHUNKS,
  D_NRANKS,
  D_PHASE,
  D_RANK,
  D_STEPS_USED,
  D_TABLE,
  E_SIZE_MISMATCH,
  field,
  ST_DONE,
  ST_ERROR,
  scratchAddr,
  setField,
  slotAddr,
} from './shm-map';
import { P_STAGE, setPhase } from './step';
import { signedStep, stepNo } from './sync';

export const PER_PEER: u32 = 0xffffffff;
const T_SEND: u32 = 0;
const T_RECV: u32 = 1;
const T_SEND_OFF: u32 = 2;
const T_RECV_OFF: u32 = 3;

@inline
export function perPeer(desc: usize): bool {
  return field(desc, D_COUNT) == PER_PEER;
}

@inline
function tableAt(desc: usize, table: u32, j: u32): usize {
  const scratch = scratchAddr(<usize>field(desc, D_COMM), field(desc, D_RANK));
  return scratch + ((<usize>(table * field(desc, D_NRANKS) + j)) << 2);
}

/** Elements this rank sends to rank j. */
export function sendCount(desc: usize, j: u32): u32 {
  return perPeer(desc) ? load<u32>(tableAt(desc, T_SEND, j)) : field(desc, D_COUNT);
}
/** Elements this rank receives from rank j. */
export function recvCount(desc: usize, j: u32): u32 {
  return perPeer(desc) ? load<u32>(tableAt(desc, T_RECV, j)) : field(desc, D_COUNT);
}
/** Where the block for rank j starts in this rank's input. */
export function sendOff(desc: usize, j: u32): u32 {
  return perPeer(desc) ? load<u32>(tableAt(desc, T_SEND_OFF, j)) : j * field(desc, D_COUNT);
}
/** Where the block from rank j goes in this rank's output. */
export function recvOff(desc: usize, j: u32): u32 {
  return perPeer(desc) ? load<u32>(tableAt(desc, T_RECV_OFF, j)) : j * field(desc, D_COUNT);
}
/** Where rank j's block for this rank starts in j's input. */
export function peerOff(desc: usize, j: u32): u32 {
  return perPeer(desc) ? load<u32>(desc + D_TABLE + ((<usize>j) << 2)) : field(desc, D_RANK) * field(desc, D_COUNT);
}

function sizeMismatch(desc: usize, sender: u32, receiver: u32, sent: u32, expected: u32): i32 {
  setField(desc, D_ERR, E_SIZE_MISMATCH);
  setField(desc, D_ERR_RANK_A, sender);
  setField(desc, D_ERR_RANK_B, receiver);
  setField(desc, D_ERR_VAL_A, sent);
  setField(desc, D_ERR_VAL_B, expected);
  setField(desc, D_STEPS_USED, 1);
  return ST_ERROR;
}

/**
 * Step 1 of a per-peer allToAll: publish the counts, check the matrix, fix the chunking.
 * Leaves D_BASE one step on, so the chunk loop's steps follow the handshake's.
 */
export function countsHandshake(desc: usize): i32 {
  const comm = <usize>field(desc, D_COMM);
  const n = field(desc, D_NRANKS);
  const me = field(desc, D_RANK);
  const t = stepNo(desc, 1);
  // The counts travel in this rank's slot beside its signature.
  if (field(desc, D_PHASE) == P_STAGE)
    memory.copy(slotAddr(comm, me, t), tableAt(desc, T_SEND, 0), (<usize>(2 * n)) << 2);
  const r = signedStep(desc, t);
  if (r != ST_DONE) return r;
  let most: u32 = 0;
  for (let i: u32 = 0; i < n; i++) {
    const recv = slotAddr(comm, i, t) + ((<usize>n) << 2);
    for (let j: u32 = 0; j < n; j++) {
      const sent = load<u32>(slotAddr(comm, j, t) + ((<usize>i) << 2));
      const expected = load<u32>(recv + ((<usize>j) << 2));
      if (sent != expected) return sizeMismatch(desc, j, i, sent, expected);
      most = max(most, sent);
    }
  }
  let so: u32 = 0;
  let ro: u32 = 0;
  for (let j: u32 = 0; j < n; j++) {
    store<u32>(tableAt(desc, T_SEND_OFF, j), so);
    store<u32>(tableAt(desc, T_RECV_OFF, j), ro);
    so += load<u32>(tableAt(desc, T_SEND, j));
    ro += load<u32>(tableAt(desc, T_RECV, j));
    const peer = slotAddr(comm, j, t);
    let before: u32 = 0;
    for (let k: u32 = 0; k < me; k++) before += load<u32>(peer + ((<usize>k) << 2));
    store<u32>(desc + D_TABLE + ((<usize>j) << 2), before);
  }
  const mode = modeOf(desc, 0, n);
  if (mode == M_DIRECT) setMode(desc, mode, most);
  else {
    setField(desc, D_MODE, mode);
    const chunk = field(desc, D_CHUNK);
    setField(desc, D_NCHUNKS, max<u32>(1, (most + chunk - 1) / chunk));
  }
  setField(desc, D_BASE, field(desc, D_BASE) + 1);
  setPhase(desc, P_STAGE);
  return ST_DONE;
}
