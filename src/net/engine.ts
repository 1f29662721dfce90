// The network engine: the communicator's ranks span several nodes. Each op runs one schedule of
// src/algorithms over the transport, in the order issued, on working memory inside the node's
// wasm memory (buffers from comm.alloc() are used in place, others are copied in and out once),
// so the kernels reduce each piece where it lands. Ranks on this node meet over shared memory
// through `local`, the node's own communicator, in the hierarchical schedule.
// When an op fails, the engine names the rank at fault (net/account.ts, net/blame.ts): a message
// no receive of this rank can take means the ranks disagree (MISMATCH on every rank, naming the
// field); a deadline follows the chain of waiting ranks to the one that stalls it; and every peer
// is told why in an ABORT, so each names the first cause rather than the neighbour that passed
// it on.

import { WebcclError, within } from '../core/errors.js';
import { enabled, log } from '../core/log.js';
import type { RankContext } from '../engine/context.js';
import { countDone, type Engine, isP2p, type OpCounters, type OpSpec } from '../engine/engine.js';
import { FlightRecorder } from '../engine/flight-recorder.js';
import type { NetWorld } from '../engine/job.js';
import { loopEngines } from '../engine/loop-ops.js';
import type { NodeMates } from '../engine/node-mates.js';
import { opLine } from '../engine/op-line.js';
import { Work, type WorkDriver } from '../engine/work.js';
import type { AbortInfo, Tag } from '../transport/transport.js';
import { NET_ALGORITHMS } from '../tuner/net-tuner.js';
import { FaultAccount } from './account.js';
import { Arena } from './arena.js';
import { fieldsOf } from './blame.js';
import { nodeStall, type Waiting, withDeadline } from './deadline.js';
import { type Execution, execute } from './execute.js';
import type { Kernels } from './memory.js';
import { expectedFrom, type NetOp, netOp } from './net-op.js';
import { NetP2p } from './p2p.js';
import { isP2pSpace, p2pSpace } from './p2p-space.js';
import { isDisagreement, PeerTraffic } from './peer-traffic.js';
import { type NetOpAlgo, NetSchedule } from './schedule.js';

const trace = enabled('TRACE');

/** What a network engine runs on. */
export interface NetEngineParts {
  /** This rank's node: its wasm core, heap and memory, where ops' working memory lies. */
  ctx: RankContext;
  world: NetWorld;
  /** This node's ranks of the communicator, for the hierarchical schedule's node phase (undefined: none). */
  local: NodeMates | undefined;
  counters: OpCounters;
  /** The communicator's algorithm option, as given. */
  algo: unknown;
  /** The deadline of ops issued without their own. */
  timeoutMs: number;
}

export class NetEngine implements Engine, WorkDriver {
  private readonly queue: NetOp[] = [];
  private tail: Promise<void> = Promise.resolve();
  private seq = 0;
  /** The number of the op that started last (-1: none yet). */
  private started = -1;
  private broken?: WebcclError;
  private readonly arena: Arena;
  /** The topology and each op's schedule, piece size and ways (net/schedule.ts). */
  private readonly schedule: NetSchedule;
  private readonly byAlgorithm: Record<string, number> = Object.fromEntries(NET_ALGORITHMS.map((a) => [a, 0]));
  /** The messages of running ops: the ranks their receives await, the sends not yet settled. */
  private readonly traffic: PeerTraffic;
  /** What running an op takes of this engine (net/execute.ts). */
  private readonly execution: Execution;
  readonly flight: FlightRecorder;
  /**
   * Told when an op starts and when the ranks it awaits change (the network progress thread publishes them to its
   * rank).
   */
  onProgress?: (startedSeq: number, awaited: () => number[]) => void;
  /** Who is at fault when an op fails: disagreements and peers' ABORTs (net/account.ts). */
  private readonly account: FaultAccount;
  /** Point-to-point ops: outside the collective order, in a tag space of their own. */
  private readonly p2p: NetP2p;

  private readonly world: NetWorld;
  private readonly local: NodeMates | undefined;
  private readonly counters: OpCounters;
  private readonly timeoutMs: number;

  constructor(parts: NetEngineParts) {
    const { ctx, world, local, timeoutMs } = parts;
    this.world = world;
    this.local = local;
    this.counters = parts.counters;
    this.timeoutMs = timeoutMs;
    this.schedule = new NetSchedule({ ...world, channels: world.transport.channels }, parts.algo);
    this.arena = new Arena(ctx.heap);
    this.traffic = new PeerTraffic(
      world.transport,
      world.rank,
      () => this.onProgress?.(this.started, () => this.awaitedRanks()),
      (e) => this.account.disagreed(e.details.seq as number, e.details.peer as number),
    );
    this.execution = {
      ctx,
      kernels: ctx.core.exports as unknown as Kernels,
      arena: this.arena,
      schedule: this.schedule,
      local,
      timeoutMs,
      group: (members, op) => this.traffic.group(members, op),
    };
    this.flight = new FlightRecorder(world.rank, () => this.awaitedRanks());
    this.p2p = new NetP2p(world.transport, p2pSpace(), timeoutMs, {
      broke: (e) => this.fail(e),
      done: (w, failed) => {
        if (failed) this.counters.failed++;
        else countDone(this.counters, w);
      },
    });
    this.account = new FaultAccount(world, () => this.broken !== undefined);
    world.transport.watch?.({
      unexpected: (peer, tag) => this.unexpected(peer, tag),
      aborted: (e) => this.account.peerAborted(e),
    });
    loopEngines.add(this);
  }

  submit(spec: OpSpec): Work {
    if (this.broken) throw this.broken;
    if (isP2p(spec.name)) {
      const w = this.p2p.submit(spec);
      if (spec.trace) w.trace = spec.trace.issue(w, 'direct');
      this.flight.submitted(w, spec, 'direct');
      return w;
    }
    const algo = this.algorithmOf(spec);
    // Numbered by whoever issues it when it does (a rank that hands some ops to its network
    // progress thread numbers them all): ops it skips ran on the thread's connections.
    const seq = this.advance(spec.seq);
    const work = new Work(
      spec.name,
      seq,
      this,
      false,
      'cannot complete an op across nodes, which needs the event loop',
    );
    work.timing.issuedAt = performance.now();
    if (spec.trace) work.trace = spec.trace.issue(work, algo);
    const op = netOp(spec, work, algo, this.schedule);
    this.account.remember(seq, fieldsOf(spec, algo, op.piece));
    op.done = this.tail = this.tail.then(() => this.run(op));
    this.queue.push(op);
    this.flight.submitted(work, spec, algo);
    // A peer's message for this op may have come first: one with another signature means the
    // ranks disagree (a rank that takes no message in this op would never look at it).
    const held = this.world.transport
      .held?.()
      .find((h) => h.tag.seq === op.seq >>> 0 && !isP2pSpace(h.tag.space) && h.tag.comm !== expectedFrom(op, h.peer));
    if (held) this.account.disagreed(op.seq, held.peer);
    return work;
  }

  /**
   * The collective `spec`, number `seq`, runs elsewhere (on the network progress thread's
   * connections): its fields are kept all the same, so that a peer that ran it here is told
   * which field the two disagree on (they routed it apart because they disagree on its count).
   */
  ranElsewhere(spec: OpSpec, seq: number, algo: string): void {
    this.advance(seq);
    this.account.remember(seq, fieldsOf(spec, algo));
    const held = this.world.transport.held?.().find((h) => h.tag.seq === seq >>> 0 && !isP2pSpace(h.tag.space));
    if (held) this.disagreedOutside(seq, held.peer);
  }

  /**
   * Ranks disagree on op `seq`: with no op of its own pending, the engine fails with the verdict all the same (its
   * rank's other path may wait on it).
   */
  private disagreedOutside(seq: number, peer: number): void {
    this.account.disagreed(seq, peer);
    // (an op pending here fails through the transport's abort, and names itself)
    if (!this.queue.length) void this.account.dispute?.verdict.then((e) => this.fail(e));
  }

  /**
   * The number of the next op (`given`, or the next in line). A message held for a number this
   * rank skips came from a peer that ran that op here while this rank ran it elsewhere.
   */
  private advance(given: number | undefined): number {
    const seq = given ?? this.seq;
    if (seq > this.seq) {
      const skipped = this.world.transport
        .held?.()
        .find((h) => h.tag.seq >= this.seq >>> 0 && h.tag.seq < seq >>> 0 && !isP2pSpace(h.tag.space));
      if (skipped) queueMicrotask(() => this.disagreedOutside(skipped.tag.seq, skipped.peer));
    }
    this.seq = Math.max(this.seq, seq + 1);
    return seq;
  }

  /** Told once when the engine fails (with the error its ops fail with). */
  onBroken?: (err: WebcclError) => void;

  /** Fails every pending op with `err` and tells every peer, as a failure found here would. */
  failWith(err: WebcclError): void {
    this.fail(err);
  }

  /** Sends and receives not yet settled. */
  p2pPending(): number {
    return this.p2p.pending();
  }

  /**
   * The schedule a collective runs; a call's algorithm option is refused here as in submit() (an
   * engine that hands the op to another thread asks first, and names it in its records).
   */
  algorithmOf(spec: OpSpec): NetOpAlgo {
    return this.schedule.algorithmOf(spec);
  }

  /** The ranks whose message some pending receive awaits, in order. */
  awaitedRanks(): number[] {
    return this.traffic.awaitedRanks();
  }

  pending(): number {
    return this.queue.length + this.p2p.pending();
  }

  /** Ops that can move now: the head of the collective queue (the others wait for it) and every send and recv. */
  movable(): number {
    return (this.queue.length ? 1 : 0) + this.p2p.pending();
  }

  algorithms(): Record<string, number> {
    return { ...this.byAlgorithm };
  }

  abort(reason: string): void {
    const r = this.world.rank;
    this.fail(new WebcclError('ABORTED', `communicator aborted on rank ${r}: ${reason}`, { by: r, reason }), {
      code: 'ABORTED',
      reason,
      user: true,
    });
  }

  failure(): WebcclError | undefined {
    return this.broken;
  }

  close(): void {
    loopEngines.delete(this);
    this.broken ??= new WebcclError('ABORTED', 'communicator destroyed');
    this.world.transport.close();
    // A send of a failed op may still sit in a socket's queue, reading its scratch: freed now,
    // that memory could be reused and its new contents sent in the old op's frame.
    this.traffic.afterSends(() => this.arena.release());
  }

  progress(w: Work, block: boolean): void {
    if (block && !w.settled)
      throw new WebcclError(
        'UNSUPPORTED',
        `${w.name} #${w.seq}: an op across nodes completes on the event loop; await it instead of waitSync()`,
      );
  }

  progressAsync(w: Work): Promise<void> {
    return this.queue.find((q) => q.work === w)?.done ?? Promise.resolve();
  }

  // ---------------------------------------------------------------- running one op

  private async run(op: NetOp): Promise<void> {
    const { spec, work } = op;
    try {
      if (this.broken) throw this.broken;
      work.timing.startedAt = performance.now();
      this.started = op.seq;
      this.onProgress?.(op.seq, () => this.awaitedRanks());
      spec.check?.atStart(op.seq);
      await withDeadline(execute(op, this.execution), this.deadlineOf(op), () => this.awaitedRanks());
      spec.check?.atEnd(op.seq);
      this.arena.reset();
      // A message of this op that no receive took: its sender disagreed (never report success).
      const left = this.world.transport.held?.().find((h) => h.tag.seq === op.seq >>> 0 && !isP2pSpace(h.tag.space));
      if (left)
        throw new WebcclError('MISMATCH', `rank ${left.peer} sent a message for op #${op.seq} that no receive took`, {
          seq: op.seq,
          peer: left.peer,
        });
      work.settle();
      countDone(this.counters, work);
      if (spec.name === 'allReduce') this.byAlgorithm[op.algo]++;
      if (trace)
        log(
          'TRACE',
          `rank ${this.world.rank}: ${opLine({ ...spec, seq: op.seq, algo: op.algo })} done in ${(work.durationMs * 1000).toFixed(1)} us`,
        );
    } catch (e) {
      this.counters.failed++;
      let err = WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e));
      if (err !== this.broken) {
        // A receive that met another signature in its slot (the mailbox), or a message left
        // over: the ranks disagree.
        if (isDisagreement(err)) this.account.disagreed(err.details.seq as number, err.details.peer as number);
        if (!this.account.dispute && err.code === 'ABORTED' && err.details.via === 'shm')
          err = await this.account.networkAccount(err);
        // (the network's account may be a disagreement, which the verdict states with its field)
        if (this.account.dispute) err = await this.account.dispute.verdict;
        else if (err.code === 'TIMEOUT' && !('awaited' in err.details))
          err = await nodeStall(err, this.deadlineOf(op), this.schedule.nodeRanks);
      }
      // The transport's messages start with this rank's number, which the context already says.
      const inner = new WebcclError(err.code, err.reason.replace(/^rank \d+: /, ''), err.details);
      this.fail(err === this.broken ? err : within(inner, `${spec.name} #${op.seq} on rank ${this.world.rank}`));
    } finally {
      this.queue.splice(this.queue.indexOf(op), 1);
    }
  }

  /** Op `op` as its deadline sees it. */
  private deadlineOf(op: NetOp): Waiting {
    return {
      store: this.world.store,
      rank: this.world.rank,
      seq: op.seq,
      timeoutMs: op.spec.timeoutMs ?? this.timeoutMs,
    };
  }

  /** Unusable from here: every pending op fails, and every peer is told why. */
  private fail(err: WebcclError, info?: AbortInfo): void {
    if (!this.broken) {
      this.broken = err;
      log('WARN', err.message);
      this.world.transport.abort(info ?? this.account.abortInfoOf(err));
      if (this.schedule.topo.perNode > 1)
        this.local?.abort(`rank ${this.world.rank} failed: ${err.reason} (${err.code})`);
      this.onBroken?.(err);
    }
    for (const q of this.queue) q.work.settle(err);
    this.p2p.fail(err);
    this.flight.broke(err);
  }

  // ---------------------------------------------------------------- naming the rank at fault

  /**
   * A payload came from `peer` with no receive posted: fine for an op not issued yet, or one
   * issued with the same signature; a disagreement for an issued op of another signature, or for
   * an op already complete (no receive will ever take it).
   */
  private unexpected(peer: number, tag: Tag): boolean {
    if (this.broken) return true;
    if (isP2pSpace(tag.space)) return false; // held for a recv not posted yet
    const op = this.queue.find((q) => q.seq >>> 0 === tag.seq);
    if (op ? expectedFrom(op, peer) === tag.comm : tag.seq >= this.seq >>> 0) return false;
    queueMicrotask(() => this.disagreedOutside(tag.seq, peer));
    return true;
  }
}
