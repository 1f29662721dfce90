// Point-to-point send/recv over the transport. The k-th message with tag t between two ranks
// (in one direction) rides in tag { space: the communicator's p2p space, seq: t, step: 2k }, so
// the transport's Mailbox matches the k-th recv with the k-th send exactly (and refuses a payload
// of another length); the receiver answers on step 2k + 1 with its outcome and its size, and the
// send completes (or fails with SIZE_MISMATCH) when that answer comes. Payloads that arrive
// before their recv are held by the Mailbox within its limits.
import { WebcclError } from '../../core/errors.js';
import type { Tag, Transport } from '../../transport/transport.js';
import type { OpSpec } from '../engine.js';
import { Work, type WorkDriver } from '../work.js';
import { type P2pOp, opText, p2pTimeout, sizeMismatch } from './p2p-errors.js';

/** The receiver's answer: u32 outcome (TAKEN or SHORT), u32 the bytes its buffer holds. */
const ANSWER_BYTES = 8;
const TAKEN = 0;
const SHORT = 1;

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

  constructor(private readonly t: Transport, private readonly space: number, private readonly timeoutMs: number, private readonly hooks: NetP2pHooks) {}

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
    const data: Tag = { comm: 0, seq: op.tag, step: 2 * k, space: this.space };
    const answer: Tag = { ...data, step: 2 * k + 1 };
    const running = name === 'send' ? this.send(op, data, answer, s.input!.bytes) : this.recv(op, data, answer, s.output!.bytes);
    const p: NetP2pOp = { op, work, done: Promise.resolve() };
    this.ops.add(p);
    p.done = this.withDeadline(op, running, s.timeoutMs ?? this.timeoutMs).then(
      () => this.settle(p),
      (e: unknown) => this.settle(p, WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e))),
    );
    return work;
  }

  private async send(op: P2pOp, data: Tag, answer: Tag, bytes: Uint8Array): Promise<void> {
    const reply = new Uint8Array(ANSWER_BYTES);
    const answered = this.t.recv(op.peer, answer, reply);
    answered.catch(() => undefined); // the send's own failure, if any, is the one reported
    await this.t.send(op.peer, data, bytes);
    await answered;
    const v = new DataView(reply.buffer);
    if (v.getUint32(0, true) === SHORT) throw sizeMismatch(op, bytes.byteLength, v.getUint32(4, true));
  }

  private async recv(op: P2pOp, data: Tag, answer: Tag, into: Uint8Array): Promise<void> {
    const reply = new Uint8Array(ANSWER_BYTES);
    const v = new DataView(reply.buffer);
    v.setUint32(4, into.byteLength, true);
    try {
      await this.t.recv(op.peer, data, into);
    } catch (e) {
      if (!WebcclError.is(e) || e.code !== 'SIZE_MISMATCH') throw e;
      // The Mailbox skipped a payload of another length: both sides fail, naming both sizes.
      v.setUint32(0, SHORT, true);
      this.answer(op, answer, reply);
      throw sizeMismatch(op, e.details.got as number, into.byteLength);
    }
    v.setUint32(0, TAKEN, true);
    this.answer(op, answer, reply);
  }

  /**
   * Tells the sender the outcome without waiting for the wire: the recv is complete once its
   * buffer holds the data, and a link that fails meanwhile fails the communicator anyway.
   */
  private answer(op: P2pOp, tag: Tag, reply: Uint8Array): void {
    this.t.send(op.peer, tag, reply).catch((e: unknown) => {
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
    if (block && !w.settled) throw new WebcclError('UNSUPPORTED', `${w.name} #${w.seq}: an op across nodes completes on the event loop; await it instead of waitSync()`);
  }

  progressAsync(w: Work): Promise<void> {
    for (const p of this.ops) if (p.work === w) return p.done;
    return Promise.resolve();
  }
}
