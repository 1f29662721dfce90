// Flags, waits and op signatures: the synchronisation every step loop is built from.
//
// A step is "post step t, then wait until every rank has posted t". Each rank's flag holds the
// last step it posted (it names the ranks that are missing when a deadline passes); the
// communicator's arrivals counter counts every post of every rank. No rank posts t+1 before
// all have posted t, so arrivals >= n·t exactly when every rank has reached t, and the last
// rank to arrive at a step is the one whose increment makes it n·t: it alone wakes the
// sleepers, so a waiter wakes once per step, not once per late peer (which matters when ranks
// outnumber cores). Waits spin for D_SPIN polls, then hand back to JS (ST_BLOCKED), which
// sleeps on the counter with Atomics.wait and calls the loop again.
import {
  C_ABORT, C_ARRIVALS, C_NODE, D_ALGO, D_BASE, D_CHUNK, D_COUNT, D_DTYPE, D_IN, D_KIND, D_OP, D_OUT, D_ROOT,
  S_ALGO, S_CHUNK, S_COUNT, S_DTYPE, S_IN, S_KIND, S_OP, S_OUT, S_ROOT, S_SEQ,
  D_COMM, D_ERR, D_ERR_FIELD, D_ERR_RANK_A, D_ERR_RANK_B, D_ERR_VAL_A,
  D_ERR_VAL_B, D_NRANKS, D_RANK, D_SEQ, D_SPIN, D_WAIT_VAL, E_ABORTED, E_MISMATCH,
  NODE_ABORT, S_COMPARED, ST_BLOCKED, ST_DONE, ST_ERROR, field, flagAddr, setField, sigAddr,
} from './layout';

/** Posts step `t` for this rank; the last rank to reach t wakes everyone sleeping. */
export function post(desc: usize, t: u32): void {
  const comm = <usize>field(desc, D_COMM);
  atomic.store<i32>(flagAddr(comm, field(desc, D_RANK)), <i32>t);
  const target = field(desc, D_NRANKS) * t;
  const arrived = <u32>atomic.add<i32>(comm + C_ARRIVALS, 1) + 1;
  if (arrived == target) atomic.notify(comm + C_ARRIVALS, -1);
}

/** The flag step number of the op's k-th step (k from 1). */
@inline export function stepNo(desc: usize, k: u32): u32 {
  return field(desc, D_BASE) + k;
}

function aborted(desc: usize): bool {
  const comm = <usize>field(desc, D_COMM);
  if (atomic.load<i32>(comm + C_ABORT) != 0) return true;
  return atomic.load<i32>(<usize>load<u32>(comm + C_NODE) + NODE_ABORT) != 0;
}

/** Waits until every rank has posted step t. */
export function waitAll(desc: usize, t: u32): i32 {
  const counter = <usize>field(desc, D_COMM) + C_ARRIVALS;
  const target = field(desc, D_NRANKS) * t;
  let v = <u32>atomic.load<i32>(counter);
  if (<i32>(v - target) >= 0) return ST_DONE;
  let spins = field(desc, D_SPIN);
  while (true) {
    if (aborted(desc)) {
      setField(desc, D_ERR, E_ABORTED);
      return ST_ERROR;
    }
    v = <u32>atomic.load<i32>(counter);
    if (<i32>(v - target) >= 0) return ST_DONE;
    if (spins == 0) {
      setField(desc, D_WAIT_VAL, v);
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
  store<u32>(sig + S_IN, field(desc, D_IN));
  store<u32>(sig + S_OUT, field(desc, D_OUT));
}

/**
 * Compares every rank's signature with rank 0's (so that every rank reports the same pair).
 * Call after a wait that saw every rank post the op's first step.
 */
export function checkSignatures(desc: usize): i32 {
  const comm = <usize>field(desc, D_COMM);
  const n = field(desc, D_NRANKS);
  const seq = field(desc, D_SEQ);
  const ref = sigAddr(comm, 0, seq);
  for (let r: u32 = 1; r < n; r++) {
    const sig = sigAddr(comm, r, seq);
    for (let i: u32 = 0; i < S_COMPARED; i++) {
      const a = load<u32>(ref + (<usize>i << 2));
      const b = load<u32>(sig + (<usize>i << 2));
      if (a != b) {
        setField(desc, D_ERR, E_MISMATCH);
        setField(desc, D_ERR_FIELD, i);
        setField(desc, D_ERR_RANK_A, 0);
        setField(desc, D_ERR_RANK_B, r);
        setField(desc, D_ERR_VAL_A, a);
        setField(desc, D_ERR_VAL_B, b);
        return ST_ERROR;
      }
    }
  }
  return ST_DONE;
}

/** Polls of an empty loop, for JS to calibrate D_SPIN against a clock. */
export function spinProbe(desc: usize, polls: u32): u32 {
  const f = flagAddr(<usize>field(desc, D_COMM), field(desc, D_RANK));
  let acc: u32 = 0;
  for (let i: u32 = 0; i < polls; i++) acc += <u32>atomic.load<i32>(f) + <u32>aborted(desc);
  return acc;
}
