// The ops a rank posts through its postbox and the outcomes its progress thread writes back, as
// words in the slot: a handful of numbers read and written in well under a microsecond. JSON
// (postboxes.ts writeSlot) cost about 3 µs each way, as much as a whole small collective, and every
// op a rank waits for at once is written to a slot (thread-engine.ts: it may be left unwaited).
// What the words cannot hold (per-peer counts, an algorithm option outside the known names, an
// error) still goes as JSON.
import { DTYPE_CODE, DTYPES, REDUCE_OPS } from '../core/dtypes.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import { KIND, type Kind } from '../core/shm-map.js';
import {
  type OpOutcome,
  type PostedOp,
  readSlot,
  SLOT_ENDED,
  SLOT_POSTED,
  writeOutcomeText,
  writeSlot,
} from './postboxes.js';

/**
 * The slot's i32 words (F64: the f64 words' first index, in f64 words); TEXT_LEN holds BINARY when the words follow,
 * else the JSON's length.
 */
const S = { STATE: 0, IN: 1, OUT: 2, TEXT_LEN: 3, F64: 2, I32: 12 } as const;
const BINARY = -1;
/** The f64 words at S.F64: the grace, deadline, number, count (numbers past 2^31 stay exact). */
const F = { GRACE: 0, TIMEOUT: 1, SEQ: 2, COUNT: 3 } as const;
/** The i32 words from S.I32 on. */
const W = {
  KIND: 0,
  ALGO: 1,
  DTYPE: 2,
  OP: 3,
  ROOT: 4,
  LAYOUT: 5,
  SHAPE: 6,
  FLAGS: 7,
  IN_COUNT: 8,
  OUT_COUNT: 9,
} as const;
const FLAG = { RELAYOUT: 1, IN_PLACE: 2, INPUT: 4, OUTPUT: 8 } as const;
/** An outcome's f64 words at S.F64. */
const O = { STARTED: 0, COMPLETED: 1, JOINED: 2 } as const;

/** Algorithm names that ride as a number (the call's option may name anything: the engine judges it). */
const ALGOS = [
  '',
  'direct',
  'twoshot',
  'ring',
  'doubling',
  'tree',
  'hierarchical',
  'chain',
  'pairwise',
  'dissemination',
] as const;
const KINDS = Object.keys(KIND) as Kind[];

/**
 * Views of the whole node memory, made once the postbox was allocated (its slots lie inside them:
 * a view of a shared memory stays valid as the memory grows, it only does not reach past where
 * it ended). A view per slot access cost more than the access.
 */
export interface SlotViews {
  i32: Int32Array;
  f64: Float64Array;
}

export function slotViews(memory: WebAssembly.Memory): SlotViews {
  const b = freshBuffer(memory);
  return { i32: new Int32Array(b), f64: new Float64Array(b, 0, b.byteLength >> 3) };
}

/** `v` when it reaches byte `end` of the memory, else views made now (the memory grew for what lies there). */
export function viewsReaching(memory: WebAssembly.Memory, v: SlotViews | undefined, end: number): SlotViews {
  return v && v.i32.byteLength >= end ? v : slotViews(memory);
}

/** The i32 index of `slot`'s first word, and that of its first f64 word (slots are 8-byte aligned). */
const at = (slot: number): { i: number; f: number } => ({ i: slot >> 2, f: (slot >> 3) + S.F64 });

/** Whether `p` is written as words (else as JSON, which only a slot's one writer may rewrite safely). */
export function fitsWords(p: PostedOp): boolean {
  return specFitsWords(p, p.algo);
}

/** The same for the op `s` to run with `algo`. */
export function specFitsWords(s: Pick<PostedOp, 'counts' | 'op'>, algo: unknown): boolean {
  return s.counts === undefined && ALGOS.includes((algo ?? '') as (typeof ALGOS)[number]) && REDUCE_OPS.includes(s.op);
}

/** Writes the op `p` into `slot`, then marks it posted; false when it fits neither way. */
export function writePosted(
  memory: WebAssembly.Memory,
  v: SlotViews,
  slot: number,
  input: number,
  output: number,
  p: PostedOp,
): boolean {
  if (!fitsWords(p)) return writeSlot(memory, slot, input, output, p);
  const algo = ALGOS.indexOf((p.algo ?? '') as (typeof ALGOS)[number]);
  const op = REDUCE_OPS.indexOf(p.op);
  const { i32, f64 } = v;
  const { i, f } = at(slot);
  i32[i + S.IN] = input;
  i32[i + S.OUT] = output;
  i32[i + S.TEXT_LEN] = BINARY;
  f64[f + F.GRACE] = p.graceUntil;
  f64[f + F.TIMEOUT] = p.timeoutMs;
  f64[f + F.SEQ] = p.seq;
  f64[f + F.COUNT] = p.count;
  const w = i + S.I32;
  i32[w + W.KIND] = KIND[p.name];
  i32[w + W.ALGO] = algo;
  i32[w + W.DTYPE] = DTYPE_CODE[p.dtype];
  i32[w + W.OP] = op;
  i32[w + W.ROOT] = p.root;
  i32[w + W.LAYOUT] = p.layout;
  i32[w + W.SHAPE] = p.shape;
  i32[w + W.FLAGS] =
    (p.relayout ? FLAG.RELAYOUT : 0) |
    (p.inPlace ? FLAG.IN_PLACE : 0) |
    (p.input ? FLAG.INPUT : 0) |
    (p.output ? FLAG.OUTPUT : 0);
  i32[w + W.IN_COUNT] = p.input?.count ?? 0; // (element counts of one memory: below 2^31)
  i32[w + W.OUT_COUNT] = p.output?.count ?? 0;
  Atomics.store(i32, i + S.STATE, SLOT_POSTED);
  return true;
}

export function readPosted(
  memory: WebAssembly.Memory,
  v: SlotViews,
  slot: number,
): { input: number; output: number; value: PostedOp } {
  const { i32, f64 } = v;
  const { i, f } = at(slot);
  if (i32[i + S.TEXT_LEN] !== BINARY) return readSlot<PostedOp>(memory, slot);
  const w = i + S.I32;
  const flags = i32[w + W.FLAGS];
  const algo = ALGOS[i32[w + W.ALGO]];
  const value: PostedOp = {
    name: KINDS[i32[w + W.KIND] - 1],
    algo: (algo || undefined) as PostedOp['algo'],
    dtype: DTYPES[i32[w + W.DTYPE]],
    op: REDUCE_OPS[i32[w + W.OP]],
    count: f64[f + F.COUNT],
    root: i32[w + W.ROOT],
    counts: undefined,
    timeoutMs: f64[f + F.TIMEOUT],
    layout: i32[w + W.LAYOUT],
    seq: f64[f + F.SEQ],
    shape: i32[w + W.SHAPE],
    relayout: (flags & FLAG.RELAYOUT) !== 0,
    graceUntil: f64[f + F.GRACE],
    inPlace: (flags & FLAG.IN_PLACE) !== 0,
    input: flags & FLAG.INPUT ? { count: i32[w + W.IN_COUNT] } : null,
    output: flags & FLAG.OUTPUT ? { count: i32[w + W.OUT_COUNT] } : null,
  };
  return { input: i32[i + S.IN], output: i32[i + S.OUT], value };
}

/** Renews the number of the op written as words in `slot` (a hold of the same op again: thread-engine.ts). */
export function renewPosted(v: SlotViews, slot: number, seq: number): void {
  v.f64[(slot >> 3) + S.F64 + F.SEQ] = seq;
}

/**
 * Writes an op's outcome into its slot (words, or JSON for an error, shortened rather than lost), then marks it ended.
 */
export function writeOutcome(memory: WebAssembly.Memory, v: SlotViews, slot: number, o: OpOutcome): void {
  if (o.error) return writeOutcomeText(memory, slot, o);
  const { i, f } = at(slot);
  v.i32[i + S.TEXT_LEN] = BINARY;
  v.f64[f + O.STARTED] = o.startedAt;
  v.f64[f + O.COMPLETED] = o.completedAt;
  v.f64[f + O.JOINED] = o.joinedAt;
  Atomics.store(v.i32, i + S.STATE, SLOT_ENDED);
}

export function readOutcome(memory: WebAssembly.Memory, v: SlotViews, slot: number): OpOutcome {
  const { i, f } = at(slot);
  if (v.i32[i + S.TEXT_LEN] !== BINARY) {
    // JSON writes a time never reached (NaN: an op that failed before it started) as null.
    const o = readSlot<OpOutcome>(memory, slot).value;
    return { ...o, startedAt: o.startedAt ?? NaN, completedAt: o.completedAt ?? NaN, joinedAt: o.joinedAt ?? NaN };
  }
  return { startedAt: v.f64[f + O.STARTED], completedAt: v.f64[f + O.COMPLETED], joinedAt: v.f64[f + O.JOINED] };
}
