// Point-to-point send/recv over the transport: src/algorithms/p2p.ts's protocol over a group
// whose messages ride in tag { space: the communicator's p2p space, seq: the user's tag, step }.
// The k-th message with tag t between two ranks (in one direction) is step 2k, so the
// transport's Mailbox matches the k-th recv with the k-th send exactly (and refuses a payload of
// another length); the receiver answers on step 2k + 1 with its outcome and its size, and the
// send completes (or fails with SIZE_MISMATCH) when that answer comes. Payloads that arrive
// before their recv are held by the Mailbox within its limits.

import type { Group } from '../algorithms/group.js';
import { p2pRecv, p2pSend } from '../algorithms/p2p.js';
import { WebcclError } from '../core/errors.js';
import type { OpSpec } from '../engine/engine.js';
import { opText, type P2pOp, p2pTimeout, sizeMismatch } from '../engine/p2p-errors.js';
import { Work, type WorkDriver } from '../engine/work.js';
import type { Transport } from '../transport/transport.js';

interface NetP2pOp {
  op: P2pOp;
  work: Work;
  done: Promise<void>;
}

export interface NetP2pHooks {
  /** A failure that breaks the communicator (anything but a size disagreement). */
  broke(e: WebcclError): void;
  done(work: Work, failed: boolean): void;
}

export class NetP2p implements WorkDriver {
  private seq = 0;
  private readonly ops = new Set<NetP2pOp>();
  /** Messages so far by `${peer}:${tag}`, sent and received. */
  private readonly sent = new Map<string, number>();
  private readonly received = new Map<string, number>();
  private failure?: WebcclError;

  constructor(
    private readonly t: Transport,
    private readonly space: number,
    private readonly timeoutMs: number,
    private readonly hooks: NetP2pHooks,
  ) {}

  pending(): number {
    return this.ops.size;
  }

  submit(s: OpSpec): Work {
    const name = s.name as 'send' | 'recv';
    const op: P2pOp = { name, seq: this.seq++, rank: this.t.rank, peer: s.peer!, tag: s.tag ?? 0 };
    const work = new Work(name, op.seq, this, false, 'cannot complete an op across nodes, which needs the event loop');
    work.timing.issuedAt = work.timing.startedAt = performance.now();
    if (this.failure) {
      work.settle(this.failure);
      return work;
    }
    const counts = name === 'send' ? this.sent : this.received;
    const key = `${op.peer}:${op.tag}`;
    const k = counts.get(key) ?? 0;
    counts.set(key, k + 1);
    const g = this.groupOf(op.tag);
    const running = name === 'send' ? this.send(g, op, k, s.input!.bytes) : this.recv(g, op, k, s.output!.bytes);
    const p: NetP2pOp = { op, work, done: Promise.resolve() };
    this.ops.add(p);
    p.done = this.withDeadline(op, running, s.timeoutMs ?? this.timeoutMs).then(
      () => this.settle(p),
      (e: unknown) => this.settle(p, WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e))),
    );
    return work;
  }

  /** The messages of user tag `tag`: the p2p space, seq = tag, step = the protocol's. */
  private groupOf(tag: number): Group {
    const t = this.t;
    const at = (step: number) => ({ comm: 0, seq: tag, step, space: this.space });
    return {
      rank: t.rank,
      size: t.size,
      send: (peer, step, data) => t.send(peer, at(step), data),
      recv: (peer, step, into) => t.recv(peer, at(step), into),
    };
  }

  private async send(g: Group, op: P2pOp, k: number, bytes: Uint8Array): Promise<void> {
    const answer = await p2pSend(g, op.peer, k, bytes);
    if (!answer.taken) throw sizeMismatch(op, bytes.byteLength, answer.bytes);
  }

  private async recv(g: Group, op: P2pOp, k: number, into: Uint8Array): Promise<void> {
    // The Mailbox skips a payload of another length with SIZE_MISMATCH: both sides fail, naming both sizes.
    const short = (e: unknown) => WebcclError.is(e) && e.code === 'SIZE_MISMATCH';
    try {
      await p2pRecv(g, op.peer, k, into, (sent) => this.answered(sent), short);
    } catch (e) {
      if (!short(e)) throw e;
      throw sizeMismatch(op, (e as WebcclError).details.got as number, into.byteLength);
    }
  }

  /**
   * The receiver's answer goes without waiting for the wire: the recv is complete once its
   * buffer holds the data, and a link that fails meanwhile fails the communicator anyway.
   */
  private answered(sent: Promise<void>): void {
    sent.catch((e: unknown) => {
      if (WebcclError.is(e) && !this.failure) this.hooks.broke(e);
    });
  }

  private withDeadline(op: P2pOp, running: Promise<void>, ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(p2pTimeout(op, ms)), ms);
    });
    running.catch(() => undefined); // a failure after the deadline is the deadline's consequence
    return Promise.race([running, expired]).finally(() => clearTimeout(timer));
  }

  private settle(p: NetP2pOp, err?: WebcclError): void {
    if (!this.ops.delete(p)) return;
    if (err && err.code !== 'SIZE_MISMATCH' && err.code !== 'TIMEOUT' && !err.reason.startsWith(opText(p.op))) {
      err = new WebcclError(err.code, `${opText(p.op)}: ${err.reason}`, err.details);
    }
    p.work.settle(this.failure ?? err);
    this.hooks.done(p.work, p.work.failure !== undefined);
    if (err && err.code !== 'SIZE_MISMATCH') this.hooks.broke(err);
  }

  /** The communicator is unusable: every pending op fails with `err`. */
  fail(err: WebcclError): void {
    this.failure ??= err;
    for (const p of this.ops) {
      p.work.settle(err);
      this.hooks.done(p.work, true);
    }
    this.ops.clear();
  }

  progress(w: Work, block: boolean): void {
    if (block && !w.settled)
      throw new WebcclError(
        'UNSUPPORTED',
        `${w.name} #${w.seq}: an op across nodes completes on the event loop; await it instead of waitSync()`,
      );
  }

  progressAsync(w: Work): Promise<void> {
    for (const p of this.ops) if (p.work === w) return p.done;
    return Promise.resolve();
  }
}
