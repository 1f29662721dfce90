// Flags, waits and op signatures: the synchronisation every step loop is built from.
//
// A step is "post step t, then wait until every rank has posted t"; each rank's flag holds the
// last step it posted. Posting is a plain store, and waiting polls the n flags, as long as
// nobody sleeps. A rank that has spun for D_SPIN polls hands back to JS (ST_BLOCKED), which
// registers in C_SLEEPERS and blocks on the communicator's doorbell; from then on a poster
// that finds every rank at its step rings the doorbell (bump + notify). So a sleeper wakes
// once per step, not once per late peer (which matters when ranks outnumber cores), and the
// spinning path pays no read-modify-write. Both sides store, then load the other's word
// (sequentially consistent), so either the poster sees the sleeper or the sleeper sees the post.

import {
  C_ABORT,
  C_DOORBELL,
  C_NODE,
  C_SLEEPERS,
  D_ALGO,
  D_BASE,
  D_CHUNK,
  D_COMM,
  D_COUNT,
  D_DTYPE,
  D_ERR,
  D_ERR_FIELD,
  D_ERR_RANK_A,
  D_ERR_RANK_B,
  D_ERR_VAL_A,
  D_ERR_VAL_B,
  D_IN,
  D_KEEP_IN,
  D_KIND,
  D_LAYOUT,
  D_NRANKS,
  D_OP,
  D_OUT,
  D_PHASE,
  D_RANK,
  D_ROOT,
  D_SEQ,
  D_SHAPE,
  D_SPIN,
  D_STEPS_USED,
  D_WAIT_VAL,
  E_ABORTED,
  E_MISMATCH,
  E_RELAYOUT,
  field,
  flagAddr,
  NODE_ABORT,
  S_ALGO,
  S_CHUNK,
  S_COMPARED,
  S_COUNT,
  S_DTYPE,
  S_IN,
  S_KIND,
  S_LAYOUT,
  S_OP,
  S_OUT,
  S_ROOT,
  S_SEQ,
  S_SHAPE,
  SIG_SHAPE_FIELD,
  ST_BLOCKED,
  ST_DONE,
  ST_ERROR,
  setField,
  sigAddr,
} from './shm-map';
import { P_STAGE, P_WAIT, setPhase } from './step';

/** Whether every rank of the communicator has posted step t (wrap-safe). */
function allReached(comm: usize, n: u32, t: u32): bool {
  for (let r: u32 = 0; r < n; r++) {
    if (atomic.load<i32>(flagAddr(comm, r)) - <i32>t < 0) return false;
  }
  return true;
}

/** Posts step `t` for this rank, ringing the doorbell if it completes a step someone sleeps on. */
export function post(desc: usize, t: u32): void {
  const comm = <usize>field(desc, D_COMM);
  atomic.store<i32>(flagAddr(comm, field(desc, D_RANK)), <i32>t);
  if (atomic.load<i32>(comm + C_SLEEPERS) != 0 && allReached(comm, field(desc, D_NRANKS), t)) {
    atomic.add<i32>(comm + C_DOORBELL, 1);
    atomic.notify(comm + C_DOORBELL, -1);
  }
}

/** The flag step number of the op's k-th step (k from 1). */
@inline
export function stepNo(desc: usize, k: u32): u32 {
  return field(desc, D_BASE) + k;
}

function aborted(desc: usize): bool {
  const comm = <usize>field(desc, D_COMM);
  if (atomic.load<i32>(comm + C_ABORT) != 0) return true;
  return atomic.load<i32>(<usize>load<u32>(comm + C_NODE) + NODE_ABORT) != 0;
}

/**
 * Waits until every rank has posted step t. A step every rank has reached completes even if the
 * communicator was aborted since: the abort came after the last post, and a rank that raised it
 * may have seen what the step decided (a MISMATCH, reported on every rank, then its script
 * failed and its launcher aborted the node); a rank descheduled in this loop meanwhile must see
 * the same, not ABORTED. The next wait sees the abort.
 */
export function waitAll(desc: usize, t: u32): i32 {
  const comm = <usize>field(desc, D_COMM);
  const n = field(desc, D_NRANKS);
  let spins = field(desc, D_SPIN);
  while (true) {
    if (allReached(comm, n, t)) return ST_DONE;
    if (aborted(desc)) {
      setField(desc, D_ERR, E_ABORTED);
      return ST_ERROR;
    }
    if (spins == 0) {
      setField(desc, D_WAIT_VAL, t);
      return ST_BLOCKED;
    }
    spins--;
  }
}

/** Publishes what this rank believes the op is: its peers check it against their own. */
export function writeSignature(desc: usize): void {
  const sig = sigAddr(<usize>field(desc, D_COMM), field(desc, D_RANK), field(desc, D_SEQ));
  store<u32>(sig + S_SEQ, field(desc, D_SEQ));
  store<u32>(sig + S_KIND, field(desc, D_KIND));
  store<u32>(sig + S_ALGO, field(desc, D_ALGO));
  store<u32>(sig + S_DTYPE, field(desc, D_DTYPE));
  store<u32>(sig + S_OP, field(desc, D_OP));
  store<u32>(sig + S_COUNT, field(desc, D_COUNT));
  store<u32>(sig + S_ROOT, field(desc, D_ROOT));
  store<u32>(sig + S_CHUNK, field(desc, D_CHUNK));
  store<u32>(sig + S_LAYOUT, field(desc, D_LAYOUT));
  // An input kept (D_KEEP_IN) is published as none: peers then take it from the slot it is staged in.
  store<u32>(sig + S_IN, field(desc, D_KEEP_IN) != 0 ? 0 : field(desc, D_IN));
  store<u32>(sig + S_OUT, field(desc, D_OUT));
  store<u32>(sig + S_SHAPE, field(desc, D_SHAPE));
}

/** Signature field indices (u32 words) that tensors of one shape in two layouts may differ in. */
const I_ALGO: u32 = S_ALGO >> 2;
const I_LAYOUT: u32 = S_LAYOUT >> 2;
const I_COUNT: u32 = S_COUNT >> 2;

function disagree(desc: usize, code: i32, fieldIndex: u32, r: u32, a: u32, b: u32): i32 {
  setField(desc, D_ERR, code);
  setField(desc, D_ERR_FIELD, fieldIndex);
  setField(desc, D_ERR_RANK_A, 0);
  setField(desc, D_ERR_RANK_B, r);
  setField(desc, D_ERR_VAL_A, a);
  setField(desc, D_ERR_VAL_B, b);
  setField(desc, D_STEPS_USED, 1);
  return ST_ERROR;
}

/**
 * Compares every rank's signature with rank 0's (so that every rank reports the same pair).
 * Call after a wait that saw every rank post the op's first step: on a mismatch the op ends
 * there, having used that one step, on every rank alike.
 *
 * Tensors (S_SHAPE not 0) of one logical shape that differ only in layout (and so perhaps in
 * physical count and the algorithm that count chose) are no mismatch: the op ends the same way
 * with E_RELAYOUT, and every rank runs it again with its data converted to row-major
 * (layouts/plan.ts). A disagreement on anything else wins over it, so every rank reaches the
 * same verdict from the same records. Two tensors of different logical shapes, or a tensor and
 * a plain buffer (S_SHAPE 0), fail on 'shape' even in one layout, as across nodes (where the
 * shape is part of the signature hash).
 */
export function checkSignatures(desc: usize): i32 {
  const comm = <usize>field(desc, D_COMM);
  const n = field(desc, D_NRANKS);
  const seq = field(desc, D_SEQ);
  const ref = sigAddr(comm, 0, seq);
  const refShape = load<u32>(ref + S_SHAPE);
  let relayoutRank: u32 = 0;
  for (let r: u32 = 1; r < n; r++) {
    const sig = sigAddr(comm, r, seq);
    const shape = load<u32>(sig + S_SHAPE);
    const tensors = refShape != 0; // (and shape, once it equals refShape)
    let first: i32 = -1;
    let layoutOnly = true; // every differing field is the layout, the count or the algorithm
    let layoutDiffers = false;
    for (let i: u32 = 0; i < S_COMPARED; i++) {
      if (load<u32>(ref + ((<usize>i) << 2)) == load<u32>(sig + ((<usize>i) << 2))) continue;
      if (first < 0) first = <i32>i;
      if (i == I_LAYOUT) layoutDiffers = true;
      else if (i != I_ALGO && i != I_COUNT) layoutOnly = false;
    }
    if (shape != refShape && (first < 0 || layoutOnly))
      return disagree(desc, E_MISMATCH, SIG_SHAPE_FIELD, r, refShape, shape);
    if (first < 0) continue;
    if (tensors && layoutOnly && layoutDiffers) {
      // (the shapes are equal here)
      if (relayoutRank == 0) relayoutRank = r;
      continue;
    }
    const i = <u32>first;
    return disagree(desc, E_MISMATCH, i, r, load<u32>(ref + ((<usize>i) << 2)), load<u32>(sig + ((<usize>i) << 2)));
  }
  if (relayoutRank != 0) {
    return disagree(
      desc,
      E_RELAYOUT,
      I_LAYOUT,
      relayoutRank,
      load<u32>(ref + S_LAYOUT),
      load<u32>(sigAddr(comm, relayoutRank, seq) + S_LAYOUT),
    );
  }
  return ST_DONE;
}

/** Whether every rank has posted step t: JS asks this just before it sleeps. */
/**
 * A handshake step: sign (with whatever the caller staged in its slot before) and post step t
 * once, wait for every rank, and compare the signatures. Resumable: call again while BLOCKED.
 */
export function signedStep(desc: usize, t: u32): i32 {
  if (field(desc, D_PHASE) == P_STAGE) {
    writeSignature(desc);
    post(desc, t);
    setPhase(desc, P_WAIT);
  }
  const r = waitAll(desc, t);
  return r != ST_DONE ? r : checkSignatures(desc);
}

export function stepReached(desc: usize, t: u32): bool {
  return allReached(<usize>field(desc, D_COMM), field(desc, D_NRANKS), t);
}

/** Polls of an empty loop, for JS to calibrate D_SPIN against a clock. */
export function spinProbe(desc: usize, polls: u32): u32 {
  const f = flagAddr(<usize>field(desc, D_COMM), field(desc, D_RANK));
  let acc: u32 = 0;
  for (let i: u32 = 0; i < polls; i++) acc += <u32>atomic.load<i32>(f) + <u32>aborted(desc);
  return acc;
}
