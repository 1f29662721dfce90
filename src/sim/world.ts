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
// some nodes' ranks) only needs to meet the others there. How each rank's part ends is
// fates.ts's; the count and hash of the messages, tally.ts's.
import type { Group } from '../algorithms/group.js';
import { WebcclError } from '../core/errors.js';
import type { Border } from './border.js';
import { afterMicrotasks, EventQueue } from './events.js';
import { Fates } from './fates.js';
import { MinHeap } from './heap.js';
import { Mailboxes } from './mailboxes.js';
import { type Crossing, checkFault, checkTopology, crossing, leftBefore, Network } from './network.js';
import { Tally } from './tally.js';
import type { RankPart, RankScope, SimOptions, SimResult } from './types.js';

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
  private readonly fates: Fates;
  private readonly tally: Tally;
  private readonly deadline: number;
  /** Messages each rank has sent so far (each message's number among its sender's). */
  private readonly sent: Float64Array;
  /** Messages between nodes bound here that have not yet entered their receiver's interface, in the order they left. */
  private readonly crossings = new MinHeap<Crossing>(leftBefore);
  /** The same, bound for another thread's ranks. */
  private outbound: Crossing[] = [];
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
    this.owned = new Uint8Array(this.n);
    this.mine = [];
    for (let r = 0; r < this.n; r++) {
      if (border && !border.owns(r)) continue;
      this.owned[r] = 1;
      this.mine.push(r);
    }
    this.sent = new Float64Array(this.n);
    this.deadline = o.timeoutUs ?? DEFAULT_TIMEOUT_US;
    this.tally = new Tally(!!o.trace);
    const { net, queue, mail, mine, deadline } = this;
    this.fates = new Fates({ o, net, queue, mail, mine, deadline, now: () => this.now });
  }

  async run(part: RankPart): Promise<SimResult> {
    const { fates, tally } = this;
    for (const f of this.o.faults ?? []) fates.schedule(f);
    for (const r of this.mine) {
      const scope = this.scope(r);
      part(scope).then(
        () => fates.settle(r, 'done'),
        (e: unknown) => fates.failed(r, asError(e), true),
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
        fates.timeOut();
        this.windowStart = this.windowEnd = -Infinity;
        continue;
      }
      this.windowStart = next;
      this.windowEnd = next + lookahead;
    }
    const mine = this.mine.map((r) => fates.outcomes[r]);
    return {
      timeUs: mine.reduce((m, x) => (x.state === 'done' ? Math.max(m, x.atUs) : m), 0),
      outcomes: mine,
      messages: tally.messages,
      bytes: tally.bytes,
      traceHash: tally.hash,
      ...(tally.trace && { trace: tally.trace }),
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
      return {
        next: Math.min(this.crossings.peek()?.out ?? Infinity, this.queue.nextTime),
        running: this.fates.running,
      };
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
    const { fates } = this;
    const met = this.border.meet(this.outbound, fates.failures, next, fates.running);
    this.outbound = [];
    fates.failures = [];
    for (const c of ready) this.crossings.push(c);
    for (const c of met.crossings) this.crossings.push(c);
    for (const f of met.failures) fates.hear(f);
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
      this.tally.note(c.src, c.dst, c.bytes, c.sentAt, arrives);
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
    if (this.fates.state[src] !== 'running') return NEVER;
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
      this.tally.note(src, dst, bytes, this.now, arrives);
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
    if (this.fates.state[dst] !== 'running') return;
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
      this.fates.failed(
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
    if (this.fates.state[me] !== 'running') return NEVER;
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
      this.fates.failed(
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
}

const asError = (e: unknown): WebcclError => (WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e)));
