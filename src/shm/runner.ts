// Runs one op's step loop (assembly/engine) for this rank: calls advance() until it is done,
// serves its copy requests between JS buffers and shared memory, blocks on a flag when the
// loop has spun long enough, and turns a missed deadline or a failed check into a WebcclError.

import { WebcclError } from '../core/errors.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import { LEFT_AFTER_ABORT, LEFT_DIED } from '../core/node.js';
import { ABORT_REASON, C, D, flagOffset, N, NODE_BASE, ST } from '../core/shm-map.js';
import type { OpTrace } from '../core/trace.js';
import { WAIT_SLICE_MS } from '../core/waits.js';
import type { WasmCore } from '../core/wasm.js';
import { type Buf, wordsOf } from '../engine/buffers.js';
import { nowMs } from '../engine/clock.js';
import { abortErrorOf, deadRankOf, publishAbort } from './abort-words.js';
import { Doorbell } from './doorbell.js';
import { disagreement } from './mismatch.js';

export interface RunningOp {
  name: string;
  seq: number;
  desc: number;
  elemBytes: number;
  input: Buf | null; // copied in when its addr is 0
  output: Buf | null; // copied out when its addr is 0
  deadline: number; // nowMs() ms
  timeoutMs: number;
  /** WEBCCL_TRACE: where the op's sleeps and copies are drawn. */
  trace?: OpTrace;
}

/** Copies up to this many bytes element by element (a view for TypedArray.set costs ~20 ns more above). */
const SMALL_COPY = 32;
/** A whole buffer of more bytes than this is copied in with TypedArray.set (no view to make). */
const SMALL_WHOLE_COPY = 16;
/**
 * Word-aligned copies up to this many bytes go word by word: 64 bytes in 12 ns, against 18-27 ns
 * in and 50 ns out for TypedArray.set between a plain and a shared buffer (here); from 128 bytes
 * set() is faster.
 */
const WORD_COPY_MAX = 64;

export class ShmRunner {
  /**
   * The views of the memory views() hands out: one object, renewed in place (point-to-point calls it several times a
   * message).
   */
  private readonly current: { u8: Uint8Array; i32: Int32Array };
  private readonly advance: (desc: number) => number;
  readonly stepReached: (desc: number, t: number) => number;

  private growths = 0;
  private readonly nodeAbort = (NODE_BASE + N.ABORT) >> 2;
  private readonly commAbort: number;
  /** Where a rank that has waited long enough sleeps (shared with point-to-point ops). */
  readonly bell: Doorbell;

  /** `localOf[r]`: the node rank of communicator rank r (whose LEFT word says it has left); absent: not known. */
  constructor(
    readonly core: WasmCore,
    readonly comm: number,
    readonly rank: number,
    readonly nranks: number,
    private readonly localOf?: readonly number[],
  ) {
    const buffer = freshBuffer(core.memory);
    this.current = { u8: new Uint8Array(buffer), i32: new Int32Array(buffer) };
    this.advance = core.exports.advance as (desc: number) => number;
    this.stepReached = core.exports.stepReached as (desc: number, t: number) => number;
    this.commAbort = (comm + C.ABORT) >> 2;
    this.bell = new Doorbell(this.current.i32, comm);
  }

  /**
   * Views of the memory, renewed after any rank grew it (the heap counts growths in the node
   * header: reading one word is far cheaper than asking the memory for its buffer). A plain
   * read: an address from a block allocated after a growth reaches this rank through an atomic
   * load (a record, a descriptor), which orders this read after the count moved; an atomic
   * one cost a ping-pong ~10% of its time, at several calls a message.
   */
  views(): { u8: Uint8Array; i32: Int32Array } {
    const g = this.current.i32[(NODE_BASE + N.GROWTHS) >> 2];
    if (g !== this.growths) {
      this.growths = g;
      const buffer = freshBuffer(this.core.memory);
      this.current.u8 = new Uint8Array(buffer);
      this.current.i32 = new Int32Array(buffer);
    }
    return this.current;
  }

  /** Whether the node or this communicator has been aborted (cheap: two loads). */
  aborted(): boolean {
    const i32 = this.current.i32;
    return i32[this.nodeAbort] !== 0 || i32[this.commAbort] !== 0;
  }

  field(desc: number, f: number): number {
    return this.current.i32[(desc + f) >> 2] >>> 0;
  }

  /**
   * Advances `op`; returns true when done. Throws WebcclError on failure. `spinPolls` bounds
   * each wait's spinning before the loop hands back (then, with block, JS sleeps).
   */
  run(op: RunningOp, block: boolean, spinPolls: number): boolean {
    this.views().i32[(op.desc + D.SPIN) >> 2] = spinPolls;
    for (;;) {
      const st = this.advance(op.desc);
      if (st === ST.DONE) return true;
      if (st === ST.NEED_IN || st === ST.NEED_OUT) {
        this.copy(op, st === ST.NEED_IN);
        continue;
      }
      if (st === ST.ERROR) throw this.errorOf(op);
      if (!block) {
        // A caller that only polls never sleeps: it must learn here that the wait is hopeless,
        // and that the deadline has passed.
        const gone = this.departedBehind(this.current.i32[(op.desc + D.WAIT_VAL) >> 2]);
        if (gone >= 0) throw this.departed(op, gone);
        this.beforeDeadline(op);
        return false;
      }
      this.sleep(op);
    }
  }

  private copy(op: RunningOp, inward: boolean): void {
    const { u8 } = this.views();
    const off = this.field(op.desc, D.IO_OFF) * op.elemBytes;
    const len = this.field(op.desc, D.IO_LEN) * op.elemBytes;
    const addr = this.field(op.desc, D.IO_ADDR);
    const user = inward ? op.input!.bytes : op.output!.bytes;
    const t0 = op.trace ? nowMs() : 0;
    if (off + len > user.byteLength) {
      // A view whose ArrayBuffer was transferred while the op was in flight reads as empty.
      throw new WebcclError(
        'INVALID_ARGUMENT',
        `${op.name} #${op.seq}: its ${inward ? 'input' : 'output'} buffer was detached (transferred) while the op was in flight`,
        { detached: true },
      );
    }
    if (len <= WORD_COPY_MAX && ((addr | off | len) & 3) === 0) {
      const words = wordsOf(inward ? op.input! : op.output!);
      if (words !== null) {
        this.copyWords(words, off >> 2, addr >> 2, len >> 2, inward);
        op.trace?.step(inward ? 'copy in' : 'copy out', t0, nowMs());
        return;
      }
    }
    if (inward) {
      // The whole buffer (every op of one chunk) needs no view: TypedArray.set beats a loop from
      // 32 bytes; a few bytes, or a piece, a loop beats making a view for it.
      if (len === user.byteLength && len > SMALL_WHOLE_COPY) u8.set(user, addr);
      else if (len <= SMALL_COPY) for (let i = 0; i < len; i++) u8[addr + i] = user[off + i];
      else u8.set(user.subarray(off, off + len), addr);
    } else if (len <= SMALL_COPY) for (let i = 0; i < len; i++) user[off + i] = u8[addr + i];
    else user.set(u8.subarray(addr, addr + len), off);
    op.trace?.step(inward ? 'copy in' : 'copy out', t0, nowMs());
  }

  /** Copies `n` words between a user buffer's words (from word `at`) and the node memory (from word `to`). */
  private copyWords(words: Int32Array, at: number, to: number, n: number, inward: boolean): void {
    const i32 = this.current.i32;
    if (inward) for (let k = 0; k < n; k++) i32[to + k] = words[at + k];
    else for (let k = 0; k < n; k++) words[at + k] = i32[to + k];
  }

  /**
   * The last look before sleeping (taken once registered on the doorbell): null when the step
   * completed meanwhile (or other work moved), else how long to sleep. A rank that leaves from
   * here on rings the bell, and this rank looks again.
   */
  private lastLook(op: RunningOp, now: number, moved?: () => boolean, sliceMs = WAIT_SLICE_MS): number | null {
    const { i32 } = this.views();
    const step = i32[(op.desc + D.WAIT_VAL) >> 2];
    if (this.stepReached(op.desc, step) || moved?.()) return null;
    const gone = this.departedBehind(step);
    if (gone >= 0) throw this.departed(op, gone);
    return Math.min(sliceMs, op.deadline - now);
  }

  /**
   * A rank behind step `step` whose thread has ended (node header LEFT word), or -1: it will
   * never post the step. The LEFT words are by node rank (localOf maps this communicator's ranks).
   * `causes`: only ranks that left before the node was aborted, and not node rank `except`.
   */
  private departedBehind(step: number, causes?: { except: number }): number {
    const { i32 } = this.views();
    const localOf = this.localOf;
    if (!localOf) return -1;
    for (let r = 0; r < this.nranks; r++) {
      const left = Atomics.load(i32, (NODE_BASE + N.LEFT + 4 * localOf[r]) >> 2);
      if (left === 0 || i32[flagOffset(this.comm, r) >> 2] - step >= 0) continue;
      if (causes && (localOf[r] === causes.except || left === LEFT_AFTER_ABORT)) continue;
      return r;
    }
    return -1;
  }

  /**
   * The error of an op whose awaited `rank` has left. An abort says more when it comes from that
   * rank or its communicator (its reason); not when another rank died meanwhile, most likely of
   * this very departure (its op failed, its script exited): this op failed for `rank`.
   */
  private departed(
    op: { name: string; seq: number },
    rank: number,
    aborted = this.abortError(`${op.name} #${op.seq}`),
  ): WebcclError {
    const node = this.localOf?.[rank] ?? rank;
    const left = Atomics.load(this.views().i32, (NODE_BASE + N.LEFT + 4 * node) >> 2);
    const died = left === LEFT_DIED;
    const how = died ? 'died' : 'has left the job (its script ended)';
    const dead = deadRankOf(aborted);
    // (a rank that left after the abort left because of it: the abort is the cause)
    if (aborted && (dead < 0 || dead === node || left === LEFT_AFTER_ABORT)) return aborted;
    const since = aborted ? ` (since then: ${aborted.reason})` : '';
    return new WebcclError(
      'CONNECTION_CLOSED',
      `${op.name} #${op.seq} on rank ${this.rank}: rank ${rank} ${how} without joining this op${since}`,
      {
        rank,
        peer: rank,
        seq: op.seq,
        ...(died && { died }),
      },
    );
  }

  /** The time now, or a TIMEOUT error when the op's deadline has passed. */
  private beforeDeadline(op: RunningOp): number {
    const now = nowMs();
    if (now >= op.deadline) throw this.timeout(op);
    return now;
  }

  /**
   * Sleeps on the doorbell until the step the loop waits for completes (or a slice ends).
   * `moved` is asked at the last look: other work on the doorbell (point-to-point ops) that
   * made progress instead. `sliceMs`: the longest sleep before the loop looks again (the ops of
   * the thread's other communicators ring other doorbells: see thread-queues.ts).
   */
  sleep(op: RunningOp, moved?: () => boolean, sliceMs?: number): void {
    const now = this.beforeDeadline(op);
    this.bell.sleep(() => this.lastLook(op, now, moved, sliceMs));
    op.trace?.step('sleep', now, nowMs());
  }

  /** The same without blocking the thread (a browser's main thread may not block). */
  sleepAsync(op: RunningOp, moved?: () => boolean, sliceMs?: number): Promise<void> {
    const now = this.beforeDeadline(op);
    const slept = this.bell.sleepAsync(() => this.lastLook(op, now, moved, sliceMs));
    return op.trace ? slept.finally(() => op.trace!.step('sleep', now, nowMs())) : slept;
  }

  /** Ranks whose flag is behind this rank's (every wait follows this rank's own post). */
  missingRanks(): number[] {
    const { i32 } = this.views();
    const mine = i32[flagOffset(this.comm, this.rank) >> 2];
    const missing: number[] = [];
    for (let r = 0; r < this.nranks; r++) if (i32[flagOffset(this.comm, r) >> 2] - mine < 0) missing.push(r);
    return missing;
  }

  private timeout(op: RunningOp): WebcclError {
    const missing = this.missingRanks();
    this.abort(ABORT_REASON.TIMEOUT, missing[0] ?? -1);
    const who = missing.length
      ? `rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} did not arrive`
      : 'no rank arrived';
    return new WebcclError(
      'TIMEOUT',
      `${op.name} #${op.seq} on rank ${this.rank}: ${who} within ${op.timeoutMs} ms (WEBCCL_TIMEOUT_MS)`,
      { missing, seq: op.seq },
    );
  }

  /**
   * Aborts the communicator: every rank waiting in it wakes and fails its op, learning `code`,
   * `detail` and `text` (the reason an abort() gave). The first rank to claim the abort writes
   * them, then publishes the abort word; a later abort only rings again.
   */
  abort(code: number, detail: number, text: string = ''): void {
    publishAbort(this.views().i32, this.core.memory, this.comm, { by: this.rank, code, detail, text });
    this.bell.ring();
  }

  /**
   * Why the communicator or its node is aborted, or null. The communicator's abort comes first
   * when both are set: it is published before the rank that publishes it fails (a rank that
   * timed out, then ends), and it names the first cause (the rank it waited for).
   */
  abortError(what: string): WebcclError | null {
    return abortErrorOf(this.views().i32, this.core.memory, this.comm, what);
  }

  private errorOf(op: RunningOp): WebcclError {
    const what = `${op.name} #${op.seq}`;
    const f = (x: number) => this.field(op.desc, x);
    return (
      disagreement(what, f) ??
      this.abortedOp(op) ??
      new WebcclError('INTERNAL', `${what}: step loop failed with code ${f(D.ERR)}`)
    );
  }

  /**
   * Why `op` cannot go on once its node or communicator was aborted (null: neither was). When
   * the node aborted for a rank that died (its script failed, most likely of a departure this op
   * meets too), a rank that left without reaching this rank's next step is the first cause, as
   * when the op meets the departure while it waits (departed()).
   */
  abortedOp(op: { name: string; seq: number }): WebcclError | null {
    const aborted = this.abortError(`${op.name} #${op.seq}`);
    const dead = deadRankOf(aborted);
    if (dead >= 0) {
      const gone = this.departedBehind(this.views().i32[flagOffset(this.comm, this.rank) >> 2] + 1, { except: dead });
      if (gone >= 0) return this.departed(op, gone, aborted);
    }
    return aborted;
  }
}
