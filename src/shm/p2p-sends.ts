// The sending half of point-to-point in the node memory (shm/p2p.ts has the rest): per peer, the
// sends not yet published (the peer's channel ring was full) and the published ones awaiting
// their outcome. A send publishes a record: the payload inline for a few bytes, the sender's own
// comm.alloc() buffer in place, or else a copy in a heap block (staging-pool.ts); it ends once
// the receiver marks the record TAKEN, or SHORT when the sizes differ.
import { WebcclError } from '../core/errors.js';
import { KeepList, KeepQueue } from '../core/keep-list.js';
import type { Buf } from '../engine/buffers.js';
import type { RankContext } from '../engine/context.js';
import type { InputCheck } from '../engine/input-check.js';
import { type P2pOp, sizeMismatch } from '../engine/p2p-errors.js';
import type { Work } from '../engine/work.js';
import { type ChannelTable, INLINE, INLINE_AT, R, recordAt, STATE } from './p2p-channel.js';
import type { ShmRunner } from './runner.js';
import { StagingPool } from './staging-pool.js';

/** A send or recv not yet ended (the op itself: one object per op, as a ping-pong pays per message). */
export interface Pending extends P2pOp {
  work: Work;
  buf: Buf;
  deadline: number;
  timeoutMs: number;
}

export interface SendOp extends Pending {
  /** Its record's number once published. */
  num: number;
  /** A heap block holding a copy of the payload (0: none). */
  staged: number;
  check: InputCheck | undefined;
}

export class ShmSends {
  /** By peer: sends not yet published, and published ones awaiting their outcome. */
  private readonly unposted: KeepQueue<SendOp>[];
  private readonly posted: KeepList<SendOp>[];
  private readonly nextNum: number[];
  private readonly staging: StagingPool;

  /** `settle` ends a send (with its error, if any). */
  constructor(
    ctx: RankContext,
    private readonly runner: ShmRunner,
    private readonly table: ChannelTable,
    private readonly settle: (s: SendOp, err?: WebcclError) => void,
  ) {
    const per = <T>(f: () => T) => Array.from({ length: ctx.size }, f);
    this.unposted = per(() => new KeepQueue<SendOp>());
    this.posted = per(() => new KeepList<SendOp>());
    this.nextNum = per(() => 0);
    this.staging = new StagingPool(ctx.heap);
  }

  add(s: SendOp): void {
    this.unposted[s.peer].push(s);
  }

  /** Whether any send to `peer` is pending. */
  busy(peer: number): boolean {
    return this.posted[peer].length > 0 || this.unposted[peer].length > 0;
  }

  /** Every pending send to `peer`. */
  *pending(peer: number): Generator<SendOp> {
    yield* this.unposted[peer];
    yield* this.posted[peer];
  }

  /**
   * Reads the outcome of published sends, then publishes waiting ones while the ring has room; true when something
   * changed.
   */
  pump(peer: number, me: number): boolean {
    const ended = this.outcomes(peer, me);
    return this.publish(peer, me) || ended;
  }

  /** Ends the published sends to `peer` whose receiver has marked them; true when one ended. */
  private outcomes(peer: number, me: number): boolean {
    let moved = false;
    const posted = this.posted[peer];
    if (posted.length) {
      const { i32 } = this.runner.views();
      const ch = this.table.channel(me, peer, false);
      let kept = 0;
      for (let i = 0; i < posted.length; i++) {
        const s = posted.at(i);
        const rec = recordAt(ch, s.num) >> 2;
        const st = Atomics.load(i32, rec + R.STATE);
        if (st === STATE.TAKEN || st === STATE.SHORT) {
          const err = st === STATE.SHORT ? sizeMismatch(s, s.buf.bytes.byteLength, i32[rec + R.RECV_BYTES]) : undefined;
          this.unstage(s);
          Atomics.store(i32, rec + R.STATE, STATE.FREE);
          this.settle(s, err ?? checkAtEnd(s));
          moved = true;
        } else posted.set(kept++, s);
      }
      if (kept !== posted.length) posted.truncate(kept);
    }
    return moved;
  }

  /**
   * Publishes the sends to `peer` not yet published while its ring has room; true when one was
   * published or failed. Alone at issue, so that a burst of sends does not read the outcome of
   * every earlier one for each new one.
   */
  publish(peer: number, me: number): boolean {
    let moved = false;
    const posted = this.posted[peer];
    const waiting = this.unposted[peer];
    if (waiting.length) {
      const ch = this.table.channel(me, peer, true);
      let published = false;
      let { i32 } = this.runner.views();
      while (waiting.length) {
        const s = waiting.peek()!;
        const num = this.nextNum[peer];
        const rec = recordAt(ch, num);
        if (Atomics.load(i32, (rec >> 2) + R.STATE) !== STATE.FREE) break;
        let addr: number;
        try {
          addr = this.stage(s, rec);
        } catch (e) {
          // No room to stage the payload (the node memory is full): this send fails alone.
          waiting.shift();
          this.settle(s, WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e)));
          moved = true;
          continue;
        }
        if (s.staged) i32 = this.runner.views().i32; // staging may have grown the memory
        const w = rec >> 2;
        // Plain stores: the atomic store of the state below publishes them all.
        i32[w + R.NUM] = num;
        i32[w + R.TAG] = s.tag;
        i32[w + R.BYTES] = s.buf.bytes.byteLength;
        i32[w + R.ADDR] = addr;
        Atomics.store(i32, w + R.STATE, STATE.POSTED);
        s.num = num;
        this.nextNum[peer] = num + 1;
        waiting.shift();
        posted.push(s);
        published = true;
      }
      if (published) {
        Atomics.store(i32, ch >> 2, this.nextNum[peer]);
        moved = true;
      }
    }
    return moved;
  }

  /**
   * Forgets the sends never published (the communicator failed); published payloads stay until close(): a receiver may
   * be reading one now.
   */
  dropUnposted(): void {
    for (const l of this.unposted) l.clear();
  }

  /** Frees this rank's staged payloads. */
  close(): void {
    for (const l of this.posted) for (const s of l) this.unstage(s);
    this.staging.release();
  }

  /**
   * Where the receiver finds the payload: 0 (inline, copied into the record now), the sender's alloc() buffer, or a
   * staged copy.
   */
  private stage(s: SendOp, rec: number): number {
    const bytes = s.buf.bytes.byteLength;
    if (s.buf.addr) return s.buf.addr;
    if (bytes <= INLINE) {
      const { u8 } = this.runner.views();
      const at = rec + INLINE_AT;
      const from = s.buf.bytes;
      for (let i = 0; i < bytes; i++) u8[at + i] = from[i];
      return 0;
    }
    s.staged = this.staging.take(bytes);
    this.runner.views().u8.set(s.buf.bytes, s.staged);
    return s.staged;
  }

  private unstage(s: SendOp): void {
    if (s.staged) this.staging.give(s.staged, s.buf.bytes.byteLength);
    s.staged = 0;
  }
}

/** The send's input check at its end (the buffer changed while in flight), as an error. */
function checkAtEnd(s: SendOp): WebcclError | undefined {
  try {
    s.check?.atEnd(s.seq);
    return undefined;
  } catch (e) {
    return e as WebcclError;
  }
}
