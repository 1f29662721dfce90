// Naming the rank at fault when an op across nodes fails, as one node does from shared memory:
//   Dispute    ranks disagree on an op: each rank's fields (collective, algorithm, the ring's
// piece size, dtype, op, layout, count, root, and allToAll's per-peer counts) travel in the ABORT frames, so
//              every rank names the field and both values once it has the fields of the two ranks
//              that disagree.
//   stallRoot  an op timed out: each timed-out rank publishes in the job's store whom it waits
//              for, and follows that chain to the first rank that published nothing (stopped,
//              or not at the op), as torch's monitored barrier would name it.
// Both are consulted only when an op has already failed; they cost nothing on success.
import { DTYPE_CODE, OP_CODE } from '../core/dtypes.js';
import { WebcclError } from '../core/errors.js';
import { KIND } from '../core/shm-map.js';
import { showLayoutSignature, showShapeClass } from '../core/tensor-layout.js';
import type { OpSpec } from '../engine/engine.js';
import type { JobStore } from '../engine/job.js';

/**
 * What every rank must agree on for an op, under shm-runner's field names, in the order a
 * disagreement is named: the schedule and its piece size last, as they follow from the others
 * (ranks whose counts differ often pick different schedules too; the count is the cause).
 */
export const FIELDS = [
  'collective',
  'dtype',
  'op',
  'layout',
  'shape',
  'count',
  'root',
  'counts',
  'algorithm',
  'piece',
] as const;
export type OpFields = Record<(typeof FIELDS)[number], string>;

/** `piece`: the ring allReduce's piece size, 0 for other schedules (the ring's tags count pieces). */
export function fieldsOf(s: OpSpec, algo: string, piece = 0): OpFields {
  const reduces = s.name === 'allReduce' || s.name === 'reduce' || s.name === 'reduceScatter';
  const counts = s.counts ? `${s.counts.send.join(',')}/${s.counts.recv.join(',')}` : '-';
  return {
    collective: s.name,
    algorithm: algo,
    piece: piece ? `${piece} bytes` : '-',
    dtype: s.dtype,
    op: reduces ? s.op : '-',
    layout: showLayoutSignature(s.layout ?? 0),
    shape: showShapeClass(s.shape ?? 0),
    count: String(s.count),
    root: String(s.root),
    counts,
  };
}

/** Each network schedule's number in the signature. */
const ALGO_CODE: Record<string, number> = {
  ring: 1,
  doubling: 2,
  hierarchical: 3,
  chain: 4,
  dissemination: 5,
  pairwise: 6,
  direct: 7,
  tree: 8,
};

/** FNV-1a of `values` (u32 each, little-endian bytes), continuing from `h`. */
function fnv(h: number, values: number[]): number {
  for (const v of values) {
    for (let b = 0; b < 4; b++) h = Math.imul(h ^ ((v >>> (8 * b)) & 0xff), 0x01000193);
  }
  return h >>> 0;
}

/**
 * FNV-1a over the op's kind, dtype, reduction, count, root, schedule, wire layout and (tensors) logical
 * shape: a plain buffer beside a tensor, or tensors of two shapes, disagree. Messages carry it in
 * the tag's communicator field, so a receive meets a message of the same (seq, step) with a
 * different signature when ranks disagree, and both fail with MISMATCH instead of exchanging
 * data that does not fit.
 */
export function signatureOf(s: OpSpec, algo: string, piece = 0): number {
  // allToAll's counts ride in each message's own signature (pairSignatures), not here: equal
  // blocks of n and per-peer counts of n everywhere are the same exchange.
  const count = s.name === 'allToAll' ? 0 : s.count;
  return fnv(0x811c9dc5, [
    KIND[s.name],
    DTYPE_CODE[s.dtype],
    OP_CODE[s.op],
    count,
    s.root,
    ALGO_CODE[algo] ?? 0,
    s.layout ?? 0,
    s.shape ?? 0,
    ...(piece ? [piece] : []),
  ]);
}

/** The signature of the messages an op sends to each peer, and of those it expects from each. */
export interface PairSignatures {
  to(peer: number): number;
  from(peer: number): number;
}

/**
 * allToAll: ranks agree on no count as a whole, only pairwise (what rank i sends rank j is what
 * rank j receives from i). The message from i to j carries the counts of both directions
 * between them, (i → j, j → i), and j expects its own view of the same two; a disagreement in
 * either direction then shows at both ends, so both ranks fail with MISMATCH (a length check
 * alone would fail the receiver and let the sender complete).
 */
export function pairSignatures(s: OpSpec, base: number): PairSignatures | undefined {
  if (s.name !== 'allToAll') return undefined;
  const sends = (p: number) => s.counts?.send[p] ?? s.count;
  const recvs = (p: number) => s.counts?.recv[p] ?? s.count;
  return { to: (p) => fnv(base, [sends(p), recvs(p)]), from: (p) => fnv(base, [recvs(p), sends(p)]) };
}

/** Per-peer counts of a fields record ('-' for equal blocks). */
function countsOf(f: OpFields): { send: string[]; recv: string[] } | undefined {
  if (!f.counts || f.counts === '-') return undefined;
  const [send, recv] = f.counts.split('/').map((t) => t.split(','));
  return { send, recv };
}

/**
 * Whether ranks a and b disagree on `field`, and the two values to name. Per-peer counts differ
 * between ranks by design: they disagree only when what a sends b is not what b expects from a
 * (or the other way round).
 */
function differ(
  field: (typeof FIELDS)[number],
  a: number,
  fa: OpFields,
  b: number,
  fb: OpFields,
): [string, string] | undefined {
  if (field !== 'counts') return fa[field] !== fb[field] ? [fa[field], fb[field]] : undefined;
  const ca = countsOf(fa),
    cb = countsOf(fb);
  if (!ca || !cb) return fa.counts !== fb.counts ? [fa.counts, fb.counts] : undefined;
  if (ca.send[b] !== cb.recv[a]) return [`sendCounts[${b}]=${ca.send[b]}`, `recvCounts[${a}]=${cb.recv[a]}`];
  if (ca.recv[b] !== cb.send[a]) return [`recvCounts[${b}]=${ca.recv[b]}`, `sendCounts[${a}]=${cb.send[a]}`];
  return undefined;
}

/** How long a rank waits for the other side's fields before it names no field. */
const EVIDENCE_GRACE_MS = 2000;

/**
 * A disagreement on op `seq`: the fields known of each rank (its own, and those ABORT frames
 * carried). The verdict names the first field on which two known ranks differ, as soon as two
 * such ranks are known, or says less once the grace has passed.
 */
export class Dispute {
  private readonly fields = new Map<number, OpFields>();
  /** The MISMATCH error this rank raises. */
  readonly verdict: Promise<WebcclError>;
  private complete!: () => void;

  constructor(
    readonly seq: number,
    private readonly by?: number,
  ) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    // The timer is ref'd: the failing op awaits the verdict, so the process must wait for it.
    this.verdict = new Promise<void>((resolve) => {
      this.complete = () => {
        clearTimeout(timer);
        resolve();
      };
      timer = setTimeout(resolve, EVIDENCE_GRACE_MS);
    }).then(() => this.judge());
  }

  /** Adds what a rank knows (its own fields, or those an ABORT carried). */
  learn(fields: Record<number, OpFields | undefined> | undefined): void {
    for (const [r, f] of Object.entries(fields ?? {})) {
      if (f && typeof f === 'object' && Number.isInteger(Number(r)))
        this.fields.set(Number(r), this.fields.get(Number(r)) ?? f);
    }
    if (this.pair()) this.complete();
  }

  /** Fields to send on: `mine` and, once known, those of a rank that differs (an ABORT carries two). */
  evidence(mine: number): Record<number, OpFields> {
    const p = this.pair();
    const ranks = p
      ? [...new Set([mine, ...p.ranks])].filter((r) => this.fields.has(r)).slice(0, 2)
      : [...this.fields.keys()].slice(0, 2);
    if (p && !ranks.includes(p.ranks[1]) && !ranks.includes(p.ranks[0])) ranks.splice(0, 2, ...p.ranks);
    return Object.fromEntries(ranks.map((r) => [r, this.fields.get(r)!]));
  }

  /** Two known ranks that differ, the lower first, and the first field they differ on. */
  private pair(): { ranks: [number, number]; field: (typeof FIELDS)[number]; values: [string, string] } | undefined {
    const known = [...this.fields.keys()].sort((x, y) => x - y);
    for (const a of known) {
      for (const b of known) {
        if (b <= a) continue;
        for (const field of FIELDS) {
          const values = differ(field, a, this.fields.get(a)!, b, this.fields.get(b)!);
          if (values) return { ranks: [a, b], field, values };
        }
      }
    }
    return undefined;
  }

  private judge(): WebcclError {
    const from = this.by === undefined ? {} : { by: this.by };
    const p = this.pair();
    if (!p)
      return new WebcclError(
        'MISMATCH',
        `ranks disagree on op #${this.seq}'s collective, count, dtype, op, root, counts, algorithm or layout`,
        { seq: this.seq, ranks: [...this.fields.keys()], ...from },
      );
    const [a, b] = p.ranks;
    const values = p.values;
    return new WebcclError(
      'MISMATCH',
      `ranks disagree on the ${p.field} of op #${this.seq}: rank ${a} has ${values[0]}, rank ${b} has ${values[1]}`,
      { field: p.field, ranks: [a, b], values, seq: this.seq, ...from },
    );
  }
}

/** How long a timed-out rank waits for each rank of the chain to say whom it waits for. */
export const stallGraceMs = (timeoutMs: number): number => Math.min(5000, Math.max(1000, timeoutMs / 2));

/** The TIMEOUT message's account of the stall (empty when it is just the ranks waited for). */
export function stallText({ missing, chain }: { missing: number[]; chain: number[] }): string {
  if (!chain.length) return '';
  return `; the stall starts at rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} (waits: ${[...chain, ...missing].join(' -> ')}; it has not reached this op, or is stopped)`;
}

/**
 * The ranks at the root of a stall seen from `rank`, which waits for `awaited` in op `seq`.
 * `chain` lists the ranks waiting on each other up to it (empty when the answer is just the
 * ranks waited for: no store, a store that cannot say at the first step, or a cycle of ranks
 * waiting on each other).
 */
export async function stallRoot(
  store: JobStore | undefined,
  rank: number,
  seq: number,
  awaited: number[],
  graceMs: number,
): Promise<{ missing: number[]; chain: number[] }> {
  const direct = { missing: awaited, chain: [] };
  if (!store || !awaited.length) return direct;
  const key = (r: number) => `webccl/stall/${r}`;
  await bounded(store.set(key(rank), JSON.stringify({ seq, awaited })), graceMs);
  const chain = [rank];
  for (let at = awaited[0]; !chain.includes(at); ) {
    const entry = await lookup(store, key(at), graceMs);
    // A store that stops answering mid-chain (it goes with rank 0, which may have failed and
    // ended by now) still leaves the deepest rank known: the one the last answer named.
    if (entry === null) return chain.length > 1 ? { missing: [at], chain } : direct;
    if (entry === undefined) return { missing: [at], chain };
    chain.push(at);
    const next = (entry as { awaited?: number[] }).awaited ?? [];
    if (!next.length) return { missing: [at], chain: chain.slice(0, -1) };
    at = next[0];
  }
  return direct;
}

/** The JSON value at `key`: undefined when not set within `ms`, null when the store cannot answer. */
async function lookup(store: JobStore, key: string, ms: number): Promise<unknown> {
  let answer: unknown = null;
  await bounded(
    store.get(key, { timeoutMs: Math.round(ms) }).then(
      (v) => {
        answer = JSON.parse(new TextDecoder().decode(v));
      },
      (e) => {
        answer = WebcclError.is(e) && e.code === 'STORE_TIMEOUT' ? undefined : null;
      },
    ),
    ms + 1000,
  );
  return answer;
}

/**
 * Settles when `p` does or after `ms` (the store goes with rank 0). Its timer is ref'd: a rank
 * whose op awaits this must not exit for want of anything else keeping the event loop alive
 * (the store's socket is unref'd).
 */
function bounded(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<void>((ok) => {
    timer = setTimeout(ok, ms);
  });
  return Promise.race([
    p.then(
      () => undefined,
      () => undefined,
    ),
    late,
  ]).finally(() => clearTimeout(timer));
}
