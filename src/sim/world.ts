// N virtual ranks as tasks of one event loop. Each runs its part of an op (async code over
// Groups, exactly as on a real transport) while messages cross the simulated network; the
// driver fires the events of one virtual instant, lets every microtask they woke run, and
// jumps to the next instant. Faults end each rank's part the way the real engine would: a
// crashed peer is CONNECTION_CLOSED naming it, a frozen one a TIMEOUT naming it at the virtual
// deadline, a rank that fails tells the others (ABORTED naming it). Nothing can hang: when no
// event is left before the deadline, every rank still waiting times out.
//
// The clock moves in windows of virtual time no longer than the least latency between nodes:
// no message sent in a window can arrive in it, so the messages between nodes are settled at
// its end (src/sim/network.ts), and a run split over threads (a Border per thread, each running
// some nodes' ranks) only needs to meet the others there.
import type { Group } from '../algorithms/group.js';
import { WebcclError } from '../core/errors.js';
import type { Border } from './border.js';
import { afterMicrotasks, EventQueue } from './events.js';
import { MinHeap } from './heap.js';
import { Mailboxes } from './mailboxes.js';
import { type Crossing, checkFault, checkTopology, crossing, type Fault, leftBefore, Network } from './network.js';
import type { Failure, Message, RankOutcome, RankPart, RankScope, SimOptions, SimResult } from './types.js';

/** Tag spaces: the groups of one op (the world, a node, the ranks at one place of every node). */
const SPACES = 4;
const DEFAULT_TIMEOUT_US = 300e6;
const NEVER = new Promise<never>(() => undefined);
const DONE = Promise.resolve();

const ignore = (): void => undefined;

/**
 * One executor for every receive's promise: it hands its resolve function over through
 * `captured`, which the caller reads at once (the executor runs synchronously), so a receive
 * makes no closure of its own.
 */
let captured: (() => void) | undefined;
const captureResolve = (resolve: () => void): void => {
  captured = resolve;
};

type State = 'running' | RankOutcome['state'];

/** Runs `part` on every rank, or with `border` on the ranks of one thread's share. */
export async function simulate(o: SimOptions, part: RankPart, border?: Border): Promise<SimResult> {
  return new Simulation(o, border).run(part);
}

class Simulation {
  private now = 0;
  private readonly queue = new EventQueue();
  private readonly net: Network;
  private readonly n: number;
  private readonly mail = new Mailboxes();
  private readonly state: State[];
  private readonly outcomes: RankOutcome[];
  private running: number;
  private readonly deadline: number;
  private messages = 0;
  private bytes = 0;
  private hash = 0;
  private readonly trace?: Message[];
  /** Messages each rank has sent so far (each message's number among its sender's). */
  private readonly sent: Float64Array;
  /** Messages between nodes bound here that have not yet entered their receiver's interface, in the order they left. */
  private readonly crossings = new MinHeap<Crossing>(leftBefore);
  /** The same, bound for another thread's ranks; and failures its ranks must hear. */
  private outbound: Crossing[] = [];
  private failures: Failure[] = [];
  /** The ranks this simulation runs (all, or a thread's share), and whether it runs each. */
  private readonly mine: number[];
  private readonly owned: Uint8Array;
  /** The window of virtual time being run: [start, end), or the instant start when the lookahead is 0. */
  private windowStart = -Infinity;
  private windowEnd = -Infinity;

  constructor(
    private readonly o: SimOptions,
    private readonly border?: Border,
  ) {
    checkTopology(o);
    const jitter = o.jitter ?? 0;
    if (!(jitter >= 0 && Number.isFinite(jitter)))
      throw new WebcclError('INVALID_ARGUMENT', `simulate: jitter must be a finite number ≥ 0, got ${jitter}`);
    for (const f of o.faults ?? []) checkFault(f, o.ranks);
    this.n = o.ranks;
    this.net = new Network(o, jitter, o.seed ?? 1, o.faults ?? []);
    this.state = new Array<State>(this.n).fill('running');
    this.outcomes = Array.from({ length: this.n }, (_, rank) => ({ rank, state: 'done' as const, atUs: 0 }));
    this.owned = new Uint8Array(this.n);
    this.mine = [];
    for (let r = 0; r < this.n; r++) {
      if (border && !border.owns(r)) continue;
      this.owned[r] = 1;
      this.mine.push(r);
    }
    this.running = this.mine.length;
    this.sent = new Float64Array(this.n);
    this.deadline = o.timeoutUs ?? DEFAULT_TIMEOUT_US;
    if (o.trace) this.trace = [];
  }

  async run(part: RankPart): Promise<SimResult> {
    for (const f of this.o.faults ?? []) this.schedule(f);
    for (const r of this.mine) {
      const scope = this.scope(r);
      part(scope).then(
        () => this.settle(r, 'done'),
        (e: unknown) => this.failed(r, asError(e), true),
      );
    }
    const lookahead = this.net.lookahead();
    for (;;) {
      await afterMicrotasks();
      const t = this.queue.nextTime;
      if (t < this.windowEnd || t === this.windowStart) {
        this.fire(t);
        continue;
      }
      const { next, running } = this.closeWindow();
      if (!running) break;
      if (next > this.deadline) {
        this.now = Math.max(this.now, this.deadline);
        this.timeOut();
        this.windowStart = this.windowEnd = -Infinity;
        continue;
      }
      this.windowStart = next;
      this.windowEnd = next + lookahead;
    }
    const mine = this.mine.map((r) => this.outcomes[r]);
    return {
      timeUs: mine.reduce((m, x) => (x.state === 'done' ? Math.max(m, x.atUs) : m), 0),
      outcomes: mine,
      messages: this.messages,
      bytes: this.bytes,
      traceHash: this.hash >>> 0,
      ...(this.trace && { trace: this.trace }),
    };
  }

  /** Fires the events of instant `t`, in their order (src/sim/events.ts). */
  private fire(t: number): void {
    this.now = t;
    while (this.queue.nextTime === t) {
      const e = this.queue.pop()!;
      if (e.fire) e.fire(e);
      else this.deliver(e.dst, e.key, e.payload, e.bytes);
      this.queue.release(e);
    }
  }

  /**
   * The window is over: the messages between nodes that left their senders' interfaces before
   * its end enter their receivers', in the order they left (every such message is known now:
   * one sent later leaves later), and are delivered when they arrive (after the window). Returns
   * when the next window starts (the next event, or the next message to enter) and how many
   * ranks still run, over every thread.
   */
  private closeWindow(): { next: number; running: number } {
    if (!this.border) {
      this.enterInterfaces();
      return { next: Math.min(this.crossings.peek()?.out ?? Infinity, this.queue.nextTime), running: this.running };
    }
    // With other threads: one meeting, before the messages enter, so the next window's start
    // is a lower bound: a message entering now arrives no sooner than out + wire + α.
    const ready: Crossing[] = [];
    let next = this.queue.nextTime;
    for (let c = this.crossings.peek(); c && this.settles(c); c = this.crossings.peek()) {
      ready.push(this.crossings.pop()!);
      next = Math.min(next, c.out + c.wire + c.alpha);
    }
    next = Math.min(next, this.crossings.peek()?.out ?? Infinity);
    for (const c of this.outbound) next = Math.min(next, this.settles(c) ? c.out + c.wire + c.alpha : c.out);
    const met = this.border.meet(this.outbound, this.failures, next, this.running);
    this.outbound = [];
    this.failures = [];
    for (const c of ready) this.crossings.push(c);
    for (const c of met.crossings) this.crossings.push(c);
    for (const f of met.failures) this.hear(f);
    this.enterInterfaces();
    return met;
  }

  /** Whether a message between nodes left within the window: it enters its receiver's interface at the window's end. */
  private settles(c: Crossing): boolean {
    return c.out < this.windowEnd || c.out === this.windowStart;
  }

  /** The waiting messages that left before the window's end enter their receivers' interfaces, in order. */
  private enterInterfaces(): void {
    for (let c = this.crossings.peek(); c && this.settles(c); c = this.crossings.peek()) {
      this.crossings.pop();
      const arrives = this.net.enter(c);
      this.note(c.src, c.dst, c.bytes, c.sentAt, arrives);
      this.queue.delivery(arrives, c.src, c.seq, c.dst, c.key, c.payload, c.bytes);
    }
  }

  // ---------------------------------------------------------------- groups over the network

  private scope(rank: number): RankScope {
    return {
      rank,
      size: this.n,
      perNode: this.net.perNode,
      group: (space, members) => this.group(rank, space, members),
    };
  }

  private group(me: number, space: number, members?: readonly number[]): Group {
    const world = (r: number) => (members ? members[r] : r);
    const rank = members ? members.indexOf(me) : me;
    if (rank < 0 || space < 0 || space >= SPACES)
      throw new WebcclError('INTERNAL', `simulate: rank ${me} is not in the group it asked for`);
    return {
      rank,
      size: members ? members.length : this.n,
      send: (peer, step, data) => this.send(me, world(peer), this.key(me, space, step), data),
      recv: (peer, step, into) => this.recv(me, world(peer), this.key(world(peer), space, step), into),
      // A send here settles at once (DONE, or never, or refused): when it went, the pair
      // settles as its receive does, which is what Promise.all would wait for.
      exchange: (to, from, step, data, into) => {
        const sent = this.send(me, world(to), this.key(me, space, step), data);
        const got = this.recv(me, world(from), this.key(world(from), space, step), into);
        return sent === DONE ? got : Promise.all([sent, got]);
      },
    };
  }

  /** A message's mailbox key at its receiver: its sender, tag space and step. */
  private key(src: number, space: number, step: number): number {
    return (step * SPACES + space) * this.n + src;
  }

  private send(src: number, dst: number, key: number, data: Uint8Array): Promise<void> {
    if (this.state[src] !== 'running') return NEVER;
    if (dst < 0 || dst >= this.n || !Number.isInteger(dst))
      return Promise.reject(
        new WebcclError('INTERNAL', `simulate: rank ${src} sent to rank ${dst}, outside the world`),
      );
    const bytes = data.byteLength;
    // Copied now: the sender may reuse its buffer once the send completes, before delivery.
    const payload = this.o.mode === 'data' ? data.slice() : null;
    const seq = this.sent[src]++;
    if (this.net.nodeOf(src) === this.net.nodeOf(dst)) {
      const arrives = this.net.inside(this.now, src, dst, bytes, seq);
      this.note(src, dst, bytes, this.now, arrives);
      this.queue.delivery(arrives, src, seq, dst, key, payload, bytes);
    } else {
      const c = crossing(src, dst, bytes, seq);
      c.sentAt = this.now;
      c.key = key;
      c.payload = payload;
      this.net.leave(this.now, c);
      if (this.owned[dst]) this.crossings.push(c);
      else this.outbound.push(c);
    }
    // The send completes at once, as a socket with room in its buffer takes the bytes: the
    // links it reserved serialize what follows, and the receiver waits for the arrival.
    return DONE;
  }

  private deliver(dst: number, key: number, payload: Uint8Array | null, bytes: number): void {
    if (this.state[dst] !== 'running') return;
    const mail = this.mail;
    const i = mail.find(dst, key);
    if (i < 0) {
      mail.add(dst, key, null, null, payload, bytes);
      return;
    }
    const into = mail.into(i);
    if (!into) {
      // Two messages under one tag: no receive can tell them apart.
      const peer = key % this.n;
      this.failed(
        dst,
        new WebcclError('MISMATCH', `rank ${peer} sent two messages under one tag to rank ${dst}`, { peer }),
        true,
      );
      return;
    }
    const resolve = mail.resolve(i)!;
    mail.remove(i);
    this.take(dst, key, into, resolve, payload, bytes);
  }

  private recv(me: number, src: number, key: number, into: Uint8Array): Promise<void> {
    if (this.state[me] !== 'running') return NEVER;
    const mail = this.mail;
    const i = mail.find(me, key);
    if (i >= 0 && !mail.into(i)) {
      const payload = mail.payload(i);
      const bytes = mail.bytes(i);
      mail.remove(i);
      return this.take(me, key, into, ignore, payload, bytes) ? DONE : NEVER;
    }
    if (i >= 0)
      return Promise.reject(
        new WebcclError('INTERNAL', `simulate: rank ${me} posted two receives for one message of rank ${src}`),
      );
    const p = new Promise<void>(captureResolve);
    mail.add(me, key, into, captured!, null, 0);
    return p;
  }

  /** Hands a message to its receive; a length the receiver did not expect is a disagreement. */
  private take(
    me: number,
    key: number,
    into: Uint8Array,
    resolve: () => void,
    payload: Uint8Array | null,
    bytes: number,
  ): boolean {
    if (bytes !== into.byteLength) {
      const peer = key % this.n;
      this.failed(
        me,
        new WebcclError('MISMATCH', `rank ${peer} sent ${bytes} bytes where rank ${me} expected ${into.byteLength}`, {
          peer,
          bytes,
          expected: into.byteLength,
        }),
        true,
      );
      return false;
    }
    if (payload) into.set(payload);
    resolve();
    return true;
  }

  /**
   * Counts a message and adds it to the trace hash: a sum of each message's hash, so the order messages are noted in
   * (which threads change) does not count.
   */
  private note(src: number, dst: number, bytes: number, sentAt: number, arrives: number): void {
    this.messages++;
    this.bytes += bytes;
    let h = 0x811c9dc5;
    h = Math.imul(h ^ src, 0x01000193);
    h = Math.imul(h ^ dst, 0x01000193);
    h = Math.imul(h ^ (bytes | 0), 0x01000193);
    h = Math.imul(h ^ (Math.round(sentAt * 1000) | 0), 0x01000193);
    h = Math.imul(h ^ (Math.round(arrives * 1000) | 0), 0x01000193);
    this.hash = (this.hash + (h ^ (h >>> 16))) | 0;
    this.trace?.push({ src, dst, bytes, sendUs: sentAt, arriveUs: arrives });
  }

  // ---------------------------------------------------------------- ends of a rank's part

  private settle(r: number, state: RankOutcome['state'], error?: WebcclError): boolean {
    if (this.state[r] !== 'running') return false;
    this.state[r] = state;
    this.outcomes[r] = { rank: r, state, atUs: this.now, ...(error && { error }) };
    this.running--;
    return true;
  }

  /** Rank `r` fails with `e`; when the cause is its own, the others hear it as the real engine's ABORT. */
  private failed(r: number, e: WebcclError, tellOthers: boolean): void {
    if (!this.settle(r, 'failed', e) || !tellOthers) return;
    this.toOthers(
      r,
      new WebcclError('ABORTED', `rank ${r} failed: ${e.reason} (${e.code})`, { by: r, reason: e.reason }),
    );
  }

  /** Every rank but `from` still running fails with `e`, one latency later (ranks on other threads too). */
  private toOthers(from: number, e: WebcclError): void {
    const far: Failure = { atUs: this.now + this.o.inter.latencyUs, from, error: e };
    this.queue.at(this.now + this.o.intra.latencyUs, () => this.failAll(from, e, true));
    this.queue.at(far.atUs, () => this.failAll(from, e, false));
    if (this.mine.length < this.n) this.failures.push(far);
  }

  /** This thread's ranks but `from`, on its node (`near`) or on the others, fail with `e`. */
  private failAll(from: number, e: WebcclError, near: boolean): void {
    const node = this.net.nodeOf(from);
    for (const p of this.mine) if (p !== from && (this.net.nodeOf(p) === node) === near) this.failed(p, e, false);
  }

  /** A failure another thread's rank told this thread's (at a time past the window: a latency between nodes). */
  private hear(f: Failure): void {
    this.queue.at(f.atUs, () => this.failAll(f.from, f.error, false));
  }

  private schedule(f: Fault): void {
    if (f.kind === 'slow') return; // the network applies it to every message
    this.queue.at(f.atUs, () => {
      if (f.kind === 'stop') {
        this.settle(f.rank, 'stopped');
      } else if (f.kind === 'crash') {
        if (!this.settle(f.rank, 'stopped')) return;
        const c = f.rank;
        this.toOthers(
          c,
          new WebcclError('CONNECTION_CLOSED', `rank ${c} closed its connections (it ended or died)`, { peer: c }),
        );
      } else {
        const [a, b] = f.ranks;
        const closed = (peer: number) =>
          new WebcclError('CONNECTION_CLOSED', `the connection to rank ${peer} closed`, { peer });
        this.failed(a, closed(b), true);
        this.failed(b, closed(a), true);
      }
    });
  }

  /** The deadline: every rank still running fails, naming the frozen ranks (or whom it awaits). */
  private timeOut(): void {
    const stopped = this.outcomes.filter((x) => x.state === 'stopped').map((x) => x.rank);
    for (const r of this.mine) {
      if (this.state[r] !== 'running') continue;
      const awaited = this.awaited(r);
      const missing = stopped.length ? stopped : awaited;
      const who = missing.length ? `; rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} did not arrive` : '';
      this.settle(
        r,
        'failed',
        new WebcclError(
          'TIMEOUT',
          `timed out after ${this.deadline / 1000} ms waiting for ranks ${awaited.join(', ')}${who}`,
          { missing, awaited },
        ),
      );
    }
  }

  private awaited(r: number): number[] {
    const from = new Set(this.mail.receivesOf(r).map((key) => key % this.n));
    return [...from].sort((a, b) => a - b);
  }
}

const asError = (e: unknown): WebcclError => (WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e)));
