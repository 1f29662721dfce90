// Field offsets of the shared structures the step loops read and write. src/core/shm-map.ts
// mirrors every number here; a test checks that the two agree.

// ---- node header (one per shared memory; at NODE_BASE, above the module's static data)
export const NODE_MAGIC: u32 = 0; // 'WCCL'
export const NODE_ABORT: u32 = 12; // 0, or 1 + the rank (or 0xffff: launcher) that aborted the node

// ---- op descriptor: one per (communicator, rank); the only state of a running op.
export const D_KIND: u32 = 0;
export const D_ALGO: u32 = 4;
export const D_DTYPE: u32 = 8;
export const D_OP: u32 = 12;
export const D_COUNT: u32 = 16; // elements: per rank (allGather input, reduceScatter output) or whole buffer
export const D_ROOT: u32 = 20;
export const D_RANK: u32 = 24;
export const D_NRANKS: u32 = 28;
export const D_IN: u32 = 32; // address of the input when it lives in shared memory, else 0 (JS copies in)
export const D_OUT: u32 = 36; // same for the output
export const D_CHUNK: u32 = 40; // elements per chunk (per rank segment for reduceScatter)
export const D_NCHUNKS: u32 = 44;
export const D_STEP: u32 = 48; // index of the chunk (or phase step) being worked on
export const D_PHASE: u32 = 52; // where inside that step the loop resumes
export const D_BASE: u32 = 56; // the flag value every rank had posted when the op began
export const D_SEQ: u32 = 60; // op sequence number on this communicator
export const D_IO_OFF: u32 = 64; // a copy request: element offset into the user buffer
export const D_IO_ADDR: u32 = 68; //                 shared-memory address
export const D_IO_LEN: u32 = 72; //                  elements
export const D_LAYOUT: u32 = 76; // the wire layout of tensors (0: row-major or none), compared as a signature field
export const D_WAIT_VAL: u32 = 80; // when blocked: the step every rank must reach
export const D_ERR: u32 = 84;
export const D_ERR_FIELD: u32 = 88;
export const D_ERR_RANK_A: u32 = 92;
export const D_ERR_RANK_B: u32 = 96;
export const D_ERR_VAL_A: u32 = 100;
export const D_ERR_VAL_B: u32 = 104;
export const D_SPIN: u32 = 108; // polls of a flag before the loop hands the wait to JS
export const D_COMM: u32 = 112; // address of the communicator block
export const D_IN_PLACE: u32 = 116; // 1: the output is the input (JS knows, even for buffers outside shared memory)
// 0 until the op decides how it reads its peers (twoshot-allreduce.ts, in-place-read.ts)
export const D_MODE: u32 = 120;
export const D_STEPS_USED: u32 = 124; // flag steps the op consumed (set when done)
export const D_SUB: u32 = 128; // index inside a step that issues several copy requests
// tensors: a hash of the logical shape behind the count (0: plain buffers), see checkSignatures
export const D_SHAPE: u32 = 132;
// 1: the input is not offered for in-place reads (staged through the slot instead: one synchronisation fewer)
export const D_KEEP_IN: u32 = 140;
// JS only: added to the signed sequence number after a run again in row-major (the loops leave it alone)
export const D_SIG_SHIFT: u32 = 136;
export const D_TABLE: u32 = 192; // scratch table of source addresses for reduceK (MAX_RANKS u32)
export const DESC_BYTES: u32 = 448;
export const MAX_RANKS: u32 = 64;

// ---- communicator block
export const C_ABORT: u32 = 0; // 0, or 1 + the rank that aborted this communicator
export const C_ABORT_CODE: u32 = 4;
export const C_NRANKS: u32 = 8;
export const C_SLOT_BYTES: u32 = 12;
export const C_NODE: u32 = 16; // address of the node header (for its abort word)
export const C_ABORT_CLAIM: u32 = 24; // JS only: taken by the rank that writes the abort's code and reason
export const C_DOORBELL: u32 = 64; // bumped (and notified) when the last rank reaches a step someone sleeps on
export const C_SLEEPERS: u32 = 96; // ranks blocked in Atomics.wait on the doorbell
export const C_REASON: u32 = 128; // JS only: the abort's reason text
export const C_HEADER_BYTES: u32 = 384;
export const FLAG_STRIDE: u32 = 64; // one cache line per rank flag: the last step it posted
export const SIG_BYTES: u32 = 64; // one signature record; two per rank (op sequence parity)
export const SLOT_BUFFERS: u32 = 4; // slot data written at step t is read during t and t+1; reuse at t+4

// signature record fields (u32)
export const S_SEQ: u32 = 0;
export const S_KIND: u32 = 4;
export const S_ALGO: u32 = 8;
export const S_DTYPE: u32 = 12;
export const S_OP: u32 = 16;
export const S_LAYOUT: u32 = 20; // before the count: tensors of two layouts may differ in count too
export const S_COUNT: u32 = 24;
export const S_ROOT: u32 = 28;
export const S_CHUNK: u32 = 32;
export const S_IN: u32 = 36;
export const S_OUT: u32 = 40;
export const S_SHAPE: u32 = 44; // compared apart (checkSignatures): only when both ranks hold tensors
// JS only: f64 wall-clock ms the rank started the op (src/shm/joined.ts); the loops leave it alone
export const S_START: u32 = 48;
export const S_COMPARED: u32 = 9; // fields S_SEQ..S_CHUNK must agree on every rank
export const SIG_SHAPE_FIELD: u32 = 9; // D_ERR_FIELD of a disagreement on the logical shape

// step-loop results
export const ST_DONE: i32 = 0;
export const ST_BLOCKED: i32 = 1;
export const ST_NEED_IN: i32 = 2;
export const ST_NEED_OUT: i32 = 3;
export const ST_ERROR: i32 = 4;

// error codes in D_ERR
export const E_MISMATCH: i32 = 1;
export const E_ABORTED: i32 = 2;
// allToAll: a rank's recvCounts[j] is not rank j's sendCounts[i] (ranks/values in D_ERR_*)
export const E_SIZE_MISMATCH: i32 = 3;
// tensors of one logical shape in different layouts: JS runs the op again in row-major
export const E_RELAYOUT: i32 = 4;

// collective kinds and algorithms
export const K_ALLREDUCE: u32 = 1;
export const K_ALLGATHER: u32 = 2;
export const K_REDUCESCATTER: u32 = 3;
export const K_BROADCAST: u32 = 4;
export const K_REDUCE: u32 = 5;
export const K_BARRIER: u32 = 6;
export const K_ALLTOALL: u32 = 7;
export const K_GATHER: u32 = 8;
export const K_SCATTER: u32 = 9;
export const K_SEND: u32 = 10; // send/recv never reach a step loop; their codes name them in records
export const K_RECV: u32 = 11;
export const A_DIRECT: u32 = 0;
export const A_TWOSHOT: u32 = 1;

@inline
export function field(desc: usize, f: u32): u32 {
  return load<u32>(desc + f);
}
@inline
export function setField(desc: usize, f: u32, v: u32): void {
  store<u32>(desc + f, v);
}

@inline
export function commOf(desc: usize): usize {
  return <usize>field(desc, D_COMM);
}
@inline
export function flagAddr(comm: usize, rank: u32): usize {
  return comm + C_HEADER_BYTES + <usize>rank * FLAG_STRIDE;
}
@inline
export function sigAddr(comm: usize, rank: u32, seq: u32): usize {
  const n = load<u32>(comm + C_NRANKS);
  return comm + C_HEADER_BYTES + <usize>n * FLAG_STRIDE + (<usize>rank * 2 + (seq & 1)) * SIG_BYTES;
}
@inline
export function descAddr(comm: usize, rank: u32): usize {
  const n = load<u32>(comm + C_NRANKS);
  return comm + C_HEADER_BYTES + <usize>n * (FLAG_STRIDE + 2 * SIG_BYTES) + <usize>rank * DESC_BYTES;
}
@inline
function dataBase(comm: usize): usize {
  const n = load<u32>(comm + C_NRANKS);
  return comm + C_HEADER_BYTES + <usize>n * (FLAG_STRIDE + 2 * SIG_BYTES + DESC_BYTES);
}
/** A rank's private scratch (never read by peers). */
@inline
export function scratchAddr(comm: usize, rank: u32): usize {
  return dataBase(comm) + <usize>rank * load<u32>(comm + C_SLOT_BYTES);
}
/** The slot a rank writes at flag step `step`; peers read it during that step and the next. */
@inline
export function slotAddr(comm: usize, rank: u32, step: u32): usize {
  const n = load<u32>(comm + C_NRANKS);
  const s = <usize>load<u32>(comm + C_SLOT_BYTES);
  return dataBase(comm) + <usize>n * s + (<usize>rank * SLOT_BUFFERS + (step & (SLOT_BUFFERS - 1))) * s;
}
