// Point-to-point send/recv in the node memory (channels and their table: shm/p2p-channel.ts). A
// send publishes a record in its channel to the peer and completes once the receiver has
// marked it TAKEN (shm/p2p-sends.ts). A recv takes, from its peer's channel, the first record with its tag that no
// earlier recv took, so the k-th recv with tag t takes the k-th send with tag t, whatever other
// tags do meanwhile.
//
// These ops keep no place in the collective order: whoever waits (on a p2p op or, through the
// engine, on a collective) moves both along, so two ranks that send to each other and then
// receive never deadlock. Waiting spins for the rank's spin budget, then sleeps on the
// communicator's doorbell, which every post rings when someone sleeps.

import { WebcclError } from '../core/errors.js';
import { KeepQueue } from '../core/keep-list.js';
import { ABORT_REASON, N, NODE_BASE } from '../core/shm-map.js';
import { WAIT_SLICE_MS } from '../core/waits.js';
import type { Buf } from '../engine/buffers.js';
import { nowMs } from '../engine/clock.js';
import type { RankContext } from '../engine/context.js';
import type { InputCheck } from '../engine/input-check.js';
import { opText, p2pTimeout, sizeMismatch } from '../engine/p2p-errors.js';
import { Work, type WorkDriver } from '../engine/work.js';
import { ChannelTable, INLINE, INLINE_AT, R, recordAt, STATE } from './p2p-channel.js';
import { type Pending, type SendOp, ShmSends } from './p2p-sends.js';
import type { ShmRunner } from './runner.js';

/** What the engine lends: moving its collectives along while a p2p op waits, and failing it all. */
export interface ShmP2pHooks {
  serve(): void;
  broke(e: WebcclError): void;
  done(work: Work, failed: boolean): void;
}

/** How often (ms) a polling loop looks at deadlines and departed peers. */
const CHECK_EVERY_MS = 1;
/**
 * Polls that found nothing to do between two looks at the clock for the deadlines (a read costs about as much as a
 * poll).
 */
const POLLS_PER_CLOCK = 8;
/** Tags whose emptied recv list is kept per peer. */
const MAX_IDLE_TAGS = 16;
/**
 * A blocking wait reads the clock (for its spin budget) once every this many polls + 1, the
 * first time only then: a ping-pong's message mostly arrives before, and each read costs about
 * as much as a poll (~55 ns here).
 */
const SPIN_CLOCK_MASK = 63;
/** A wait for the op issued last looks at its own peer only, but at everything every this many polls (2^k - 1). */
const FULL_POLL_MASK = 7;

export class ShmP2p implements WorkDriver {
  private readonly n: number;
  private readonly me: number;
  private seq = 0;
  private count = 0;
  private failure?: WebcclError;
  private readonly sends: ShmSends;
  /**
   * By peer: posted recvs by tag, in issue order, their number, and the first record of the peer's channel not known
   * taken.
   */
  private readonly recvs: Map<number, KeepQueue<Pending>>[];
  private readonly recvCount: number[];
  private readonly low: number[];
  private lastCheck = 0;
  private idlePolls = 0;
  private readonly table: ChannelTable;
  private readonly spinMs: number;
  private readonly copyBytes: (dst: number, src: number, bytes: number) => void;
  /** The op issued last: the one a program that waits at once (a ping-pong) waits for next. */
  private last: Pending | undefined;

  constructor(
    private readonly ctx: RankContext,
    private readonly runner: ShmRunner,
    private readonly hooks: ShmP2pHooks,
  ) {
    this.n = ctx.size;
    this.me = ctx.rank;
    const per = <T>(f: () => T) => Array.from({ length: this.n }, f);
    this.recvs = per(() => new Map());
    this.recvCount = per(() => 0);
    this.low = per(() => 0);
    this.table = new ChannelTable(ctx, runner);
    this.sends = new ShmSends(ctx, runner, this.table, (s, err) => this.settle(s, err));
    this.spinMs = ctx.spinUs / 1000;
    this.copyBytes = ctx.core.exports.copyBytes as (dst: number, src: number, bytes: number) => void;
  }

  pending(): number {
    return this.count;
  }

  /** `timeoutMs`: the op's deadline, from its issue; `check` (WEBCCL_CHECK): a send's input check. */
  submit(
    name: 'send' | 'recv',
    buf: Buf,
    peer: number,
    tag: number,
    timeoutMs: number,
    check: InputCheck | undefined,
  ): Work {
    const seq = this.seq++;
    const work = new Work(name, seq, this, this.ctx.canBlock);
    if (this.failure) {
      work.settle(this.failure);
      return work;
    }
    // A communicator aborted meanwhile (a peer's deadline passed): take nothing more from it.
    if (this.runner.aborted()) {
      const text = opText({ name, seq, rank: this.me, peer, tag });
      this.hooks.broke(this.runner.abortError(text) ?? new WebcclError('ABORTED', `${text}: communicator aborted`));
      work.settle(this.failure);
      return work;
    }
    this.count++;
    // The clock is read after the op is published or matched: a peer waits on that, not on this.
    // One object per op, its fields listed (a spread makes slow dictionary objects: microseconds an op).
    if (name === 'send') {
      const send: SendOp = {
        name,
        seq,
        rank: this.me,
        peer,
        tag,
        work,
        buf,
        deadline: Infinity,
        timeoutMs,
        num: -1,
        staged: 0,
        check,
      };
      this.sends.add(send);
      if (this.sends.publish(peer, this.me)) this.ring();
      send.deadline = this.issued(work) + timeoutMs;
      this.last = send;
    } else {
      const byTag = this.recvs[peer];
      const base: Pending = { name, seq, rank: this.me, peer, tag, work, buf, deadline: Infinity, timeoutMs };
      let list = byTag.get(tag);
      if (!list) byTag.set(tag, (list = new KeepQueue<Pending>()));
      list.push(base);
      this.recvCount[peer]++;
      this.matchRecvs(peer);
      base.deadline = this.issued(work) + timeoutMs;
      this.last = base;
    }
    return work;
  }

  /** Stamps the op's issue (and start) time, unless it completed at once (settle() stamped it); returns it. */
  private issued(work: Work): number {
    if (work.settled) return work.timing.startedAt;
    const now = nowMs();
    work.timing.issuedAt = work.timing.startedAt = now;
    return now;
  }

  // ---------------------------------------------------------------- progress

  /** Moves every pending op along once; true when something changed. */
  poll(): boolean {
    if (this.count === 0 || this.failure) return false;
    if (this.runner.aborted()) {
      this.hooks.broke(this.runner.abortError('send/recv') ?? new WebcclError('ABORTED', 'communicator aborted'));
      return true;
    }
    let moved = false;
    for (let p = 0; p < this.n; p++) {
      if (this.sends.busy(p)) moved = this.pumpSends(p) || moved;
      if (this.recvCount[p]) moved = this.matchRecvs(p) || moved;
    }
    // Deadlines matter only while nothing moves, and the clock is read every few idle polls.
    if (!moved && ++this.idlePolls >= POLLS_PER_CLOCK) {
      this.idlePolls = 0;
      const now = nowMs();
      if (now - this.lastCheck >= CHECK_EVERY_MS) {
        this.lastCheck = now;
        moved = this.checkDeadlines(now);
      }
    }
    return moved;
  }

  progress(w: Work, block: boolean): void {
    // Waiting for the op issued last (every wait of a ping-pong), most polls look only at its
    // peer's records, the ones that end it: a poll of everything costs several times as much,
    // and the message is noticed that much later. Everything still moves every few polls.
    const peer = block && this.last !== undefined && this.last.work === w ? this.last.peer : -1;
    let spinEnd = 0;
    for (let polls = 0; ; polls++) {
      if (peer < 0 || (polls & FULL_POLL_MASK) === 0) {
        this.poll();
        if (!w.settled) this.hooks.serve();
      } else this.pollPeer(peer);
      if (w.settled || !block) return;
      if ((polls & SPIN_CLOCK_MASK) !== SPIN_CLOCK_MASK) continue;
      const now = nowMs();
      if (spinEnd === 0) spinEnd = now + this.spinMs;
      else if (now >= spinEnd) this.sleep(w);
    }
  }

  async progressAsync(w: Work): Promise<void> {
    for (;;) {
      this.poll();
      if (!w.settled) this.hooks.serve();
      if (w.settled) return;
      await this.sleepAsync(w);
    }
  }

  /** The last look before sleeping (registered on the doorbell): null when an op moved meanwhile. */
  private lastLook(w: Work): number | null {
    if (this.poll() || w.settled) return null;
    return Math.max(0, Math.min(WAIT_SLICE_MS, this.earliestDeadline() - nowMs()));
  }

  private sleep(w: Work): void {
    this.runner.bell.sleep(() => this.lastLook(w));
  }

  private sleepAsync(w: Work): Promise<void> {
    return this.runner.bell.sleepAsync(() => this.lastLook(w));
  }

  private ring(): void {
    this.runner.bell.ringIfSleepers();
  }

  /** Moves the ops with `peer` along (not the deadlines, aborts or collectives poll() and serve look at). */
  private pollPeer(peer: number): void {
    if (this.sends.busy(peer)) this.pumpSends(peer);
    if (this.recvCount[peer]) this.matchRecvs(peer);
  }

  /** Moves the sends to `peer` along (shm/p2p-sends.ts), ringing when something changed. */
  private pumpSends(peer: number): boolean {
    const moved = this.sends.pump(peer, this.me);
    if (moved) this.ring();
    return moved;
  }

  // ---------------------------------------------------------------- receiving

  /** Hands records from `peer` to the recvs waiting for their tags, in record order. */
  private matchRecvs(peer: number): boolean {
    const ch = this.table.channel(peer, this.me, false);
    if (!ch) return false;
    let { i32 } = this.runner.views();
    // Records below `known` are published. The next record itself, posted with its number, says
    // so without the channel's count (a cache line fewer to fetch in a ping-pong).
    const low = this.low[peer];
    const next = recordAt(ch, low) >> 2;
    let known = Atomics.load(i32, next + R.STATE) === STATE.POSTED && i32[next + R.NUM] === low ? low + 1 : low;
    let moved = false;
    let below = true; // every record before i is known taken
    for (let i = low; this.recvCount[peer]; i++) {
      if (i >= known) {
        known = Atomics.load(i32, ch >> 2);
        if (i >= known) break;
      }
      const w = recordAt(ch, i) >> 2;
      const st = Atomics.load(i32, w + R.STATE);
      if (st !== STATE.POSTED || i32[w + R.NUM] !== i) {
        if (below) this.low[peer] = i + 1;
        continue;
      }
      const list = this.recvs[peer].get(i32[w + R.TAG]);
      if (!list?.length) {
        below = false;
        continue;
      }
      const r = list.shift()!;
      // An emptied list stays for the next recv of its tag (most programs use a few tags).
      if (!list.length && this.recvs[peer].size > MAX_IDLE_TAGS) this.recvs[peer].delete(r.tag);
      this.recvCount[peer]--;
      const sent = i32[w + R.BYTES];
      const want = r.buf.bytes.byteLength;
      let err: WebcclError | undefined;
      if (sent !== want) {
        i32[w + R.RECV_BYTES] = want;
        err = sizeMismatch(r, sent, want);
        Atomics.store(i32, w + R.STATE, STATE.SHORT);
      } else {
        const addr = i32[w + R.ADDR];
        this.deliver(r.buf, addr || (w << 2) + INLINE_AT, sent);
        i32 = this.runner.views().i32;
        Atomics.store(i32, w + R.STATE, STATE.TAKEN);
      }
      if (below) this.low[peer] = i + 1;
      this.settle(r, err);
      moved = true;
    }
    if (moved) this.ring();
    return moved;
  }

  private deliver(to: Buf, from: number, bytes: number): void {
    if (bytes === 0) return;
    if (to.addr) return this.copyBytes(to.addr, from, bytes);
    const u8 = this.runner.views().u8;
    if (bytes <= INLINE) for (let i = 0; i < bytes; i++) to.bytes[i] = u8[from + i];
    else to.bytes.set(u8.subarray(from, from + bytes));
  }

  // ---------------------------------------------------------------- deadlines and failures

  private *all(): Generator<Pending> {
    for (let p = 0; p < this.n; p++) {
      yield* this.sends.pending(p);
      for (const list of this.recvs[p].values()) yield* list;
    }
  }

  private earliestDeadline(): number {
    let t = Infinity;
    for (const o of this.all()) t = Math.min(t, o.deadline);
    return t;
  }

  /** Fails the communicator on a missed deadline, or when an op's peer has left. */
  private checkDeadlines(now: number): boolean {
    const i32 = this.runner.views().i32;
    const localOf = this.ctx.localOf;
    for (const o of this.all()) {
      if (now >= o.deadline) {
        this.runner.abort(ABORT_REASON.TIMEOUT, o.peer);
        this.hooks.broke(p2pTimeout(o, o.timeoutMs));
        return true;
      }
      // The LEFT words are by node rank (localOf maps this communicator's ranks: a group's too).
      if (Atomics.load(i32, (NODE_BASE + N.LEFT + 4 * localOf[o.peer]) >> 2) !== 0) {
        // A peer may post and then leave: take what it published before judging.
        if (o.name === 'recv' && this.matchRecvs(o.peer) && o.work.settled) continue;
        this.hooks.broke(
          new WebcclError(
            'CONNECTION_CLOSED',
            `${opText(o)}: rank ${o.peer} has left the job (its script ended) without matching it`,
            {
              rank: o.peer,
              peer: o.peer,
              tag: o.tag,
              seq: o.seq,
            },
          ),
        );
        return true;
      }
    }
    return false;
  }

  private settle(o: Pending, err?: WebcclError): void {
    this.count--;
    o.work.settle(err);
    const t = o.work.timing;
    if (Number.isNaN(t.startedAt)) t.issuedAt = t.startedAt = t.completedAt; // completed within its submit
    this.hooks.done(o.work, err !== undefined);
  }

  /** The communicator is unusable: every pending op fails with `err`. */
  fail(err: WebcclError): void {
    this.failure ??= err;
    for (const o of this.all()) o.work.settle(err);
    this.sends.dropUnposted();
    for (let p = 0; p < this.n; p++) {
      this.recvs[p].clear();
      this.recvCount[p] = 0;
    }
    this.count = 0;
  }

  /** Frees this rank's staged payloads; the last rank of the communicator to close frees the channels. */
  close(): void {
    this.sends.close();
    this.table.close();
  }
}
