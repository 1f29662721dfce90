// The shared-memory layout of a node, mirrored from assembly/engine/shm-map.ts (a test checks
// that both agree). All offsets are bytes; every structure starts on a 64-byte line.
//
//   [0, NODE_BASE)      the wasm module's static data
//   node header         magic, version, nranks, abort word, heap lock, heap bounds,
//                       one "left" word per rank, the abort reason text
//   world comm block    header | flags (n lines) | signatures (2n) | descriptors (n) |
//                       scratch (n × slot) | slots (n × 4 × slot)
//   heap                comm.alloc() buffers; grows the memory on demand

export const NODE_BASE = 64 * 1024;
export const NODE_MAGIC_VALUE = 0x4c434357; // 'WCCL'
export const LAYOUT_VERSION = 2;
export const N = {
  MAGIC: 0,
  VERSION: 4,
  NRANKS: 8,
  ABORT: 12, // 0, or 1 + the rank that died (ABORT_BY_LAUNCHER: the launcher)
  ABORT_CODE: 16,
  HEAP_LOCK: 20,
  HEAP_START: 24,
  HEAP_TOP: 28,
  WORLD: 32, // address of the world communicator block
  GROWTHS: 36, // bumped after every memory.grow, so ranks renew their views without asking the memory
  ABORT_CLAIM: 40, // taken (0 -> 1) by whoever writes ABORT_CODE and REASON, before it publishes ABORT
  PROGRESS: 44, // the node's progress thread (src/progress/): 0 none, 1 running, 2 gone
  PROGRESS_BELL: 48, // bumped and notified when a rank posts an op for the progress thread (it sleeps on it)
  POSTBOXES: 52, // address of the progress thread's postbox table (0 until a rank first posts to it)
  // the doorbell word the progress thread sleeps on instead of PROGRESS_BELL (0: none); posts ring it too
  PROGRESS_SLEEP: 56,
  // 1 while the progress thread looks at every postbox at least every HOLD_MS unrung (a hold needs no ring), else 0
  PROGRESS_LOOK: 60,
  LEFT: 64, // MAX_RANKS words: 1 once that rank's thread has ended (its launcher sets it)
  REASON: 320, // why the node was aborted: REASON_BYTES of text (see core/reason-text.ts)
  HEADER_BYTES: 576,
} as const;
export const ABORT_BY_LAUNCHER = 0xffff;

export const D = {
  KIND: 0,
  ALGO: 4,
  DTYPE: 8,
  OP: 12,
  COUNT: 16,
  ROOT: 20,
  RANK: 24,
  NRANKS: 28,
  IN: 32,
  OUT: 36,
  CHUNK: 40,
  NCHUNKS: 44,
  STEP: 48,
  PHASE: 52,
  BASE: 56,
  SEQ: 60,
  IO_OFF: 64,
  IO_ADDR: 68,
  IO_LEN: 72,
  LAYOUT: 76,
  WAIT_VAL: 80,
  ERR: 84,
  ERR_FIELD: 88,
  ERR_RANK_A: 92,
  ERR_RANK_B: 96,
  ERR_VAL_A: 100,
  ERR_VAL_B: 104,
  SPIN: 108,
  COMM: 112,
  IN_PLACE: 116,
  MODE: 120,
  STEPS_USED: 124,
  SUB: 128,
  SHAPE: 132,
  KEEP_IN: 140, // 1: the input is not offered to peers for in-place reads, but staged (see shm-engine keepsInput)
  // JS only: added to every op's signed sequence number once an op ran again in row-major (shm-engine relayout)
  SIG_SHIFT: 136,
  TABLE: 192,
} as const;
export const DESC_BYTES = 448;
export const MAX_RANKS = 64;

export const C = {
  ABORT: 0,
  ABORT_CODE: 4,
  NRANKS: 8,
  SLOT_BYTES: 12,
  NODE: 16,
  ABORT_DETAIL: 20,
  ABORT_CLAIM: 24, // as N.ABORT_CLAIM, for this communicator's abort
  RELEASED: 28, // a group's block: members that have destroyed their communicator (the last frees it)
  SHRINK_CLAIM: 32, // taken (0 -> 1) by the first rank of a shrink(), which writes the two words below
  SHRINK_MASK: 36, // 2 words: bit r set when rank r is a member of the shrunk communicator
  SHRINK_BLOCK: 44, // the shrunk communicator's block, published last (0 until then)
  P2P_TABLE: 48, // JS only: address of the point-to-point channel table (0 until a rank first needs it)
  P2P_CLOSED: 52, // JS only: ranks whose engine has closed; the last one frees the table and its channels
  DOORBELL: 64,
  SLEEPERS: 96,
  REASON: 128, // the text an abort(reason) gave (see core/reason-text.ts)
  HEADER_BYTES: 384,
} as const;
/** Bytes of a reason-text area: a u32 byte length, then at most REASON_BYTES - 4 bytes of UTF-8. */
export const REASON_BYTES = 256;
export const FLAG_STRIDE = 64;
export const SIG_BYTES = 64;
/**
 * JS only, inside a signature record: the f64 wall-clock ms (performance.timeOrigin + now) at
 * which the rank started the op, written before its first step (see shm/joined.ts).
 */
export const SIG_START = 48;
export const SLOT_BUFFERS = 4;
/** Signature fields in the order checkSignatures compares them ('shape' last, and only between tensors). */
export const SIG_FIELDS = [
  'sequence number',
  'collective',
  'algorithm',
  'dtype',
  'op',
  'layout',
  'count',
  'root',
  'chunk size',
  'shape',
] as const;

export const ST = { DONE: 0, BLOCKED: 1, NEED_IN: 2, NEED_OUT: 3, ERROR: 4 } as const;
export const E = { MISMATCH: 1, ABORTED: 2, SIZE_MISMATCH: 3, RELAYOUT: 4 } as const;
export const KIND = {
  allReduce: 1,
  allGather: 2,
  reduceScatter: 3,
  broadcast: 4,
  reduce: 5,
  barrier: 6,
  allToAll: 7,
  gather: 8,
  scatter: 9,
  send: 10,
  recv: 11,
} as const;
export type Kind = keyof typeof KIND;
export const ALGO = { direct: 0, twoshot: 1 } as const;
export type Algo = keyof typeof ALGO;

/** Why a communicator or node was aborted (C.ABORT_CODE / N.ABORT_CODE). */
export const ABORT_REASON = { TIMEOUT: 1, PEER_DIED: 2, USER: 3, PEER_ERROR: 4 } as const;

export const align64 = (x: number): number => (x + 63) & ~63;

export function flagOffset(comm: number, rank: number): number {
  return comm + C.HEADER_BYTES + rank * FLAG_STRIDE;
}
/** The signature record of `rank` for op `seq` (two per rank, by the sequence number's parity). */
export function sigOffset(comm: number, nranks: number, rank: number, seq: number): number {
  return comm + C.HEADER_BYTES + nranks * FLAG_STRIDE + (rank * 2 + (seq & 1)) * SIG_BYTES;
}
export function descOffset(comm: number, nranks: number, rank: number): number {
  return comm + C.HEADER_BYTES + nranks * (FLAG_STRIDE + 2 * SIG_BYTES) + rank * DESC_BYTES;
}
/** A rank's private scratch area in a communicator block (slotBytes long). */
export function scratchOffset(comm: number, nranks: number, rank: number, slotBytes: number): number {
  return comm + C.HEADER_BYTES + nranks * (FLAG_STRIDE + 2 * SIG_BYTES + DESC_BYTES) + rank * slotBytes;
}
export function commBlockBytes(nranks: number, slotBytes: number): number {
  return align64(
    C.HEADER_BYTES + nranks * (FLAG_STRIDE + 2 * SIG_BYTES + DESC_BYTES) + nranks * slotBytes * (1 + SLOT_BUFFERS),
  );
}
