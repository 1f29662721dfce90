// How each simulated rank's part ends: done, failed or stopped, at which virtual instant, and
// how a failure reaches the others the way the real engine's would (ABORTED naming the rank,
// CONNECTION_CLOSED for a crash, one latency later; a TIMEOUT at the deadline naming whom each
// rank still awaits), so that the driver (world.ts) only moves the clock and the messages.
import { WebcclError } from '../core/errors.js';
import type { EventQueue } from './events.js';
import type { Mailboxes } from './mailboxes.js';
import type { Fault, Network } from './network.js';
import type { Failure, RankOutcome, SimOptions } from './types.js';

export type State = 'running' | RankOutcome['state'];

/** What the fates read of their simulation. */
export interface FatesOf {
  readonly o: SimOptions;
  readonly net: Network;
  readonly queue: EventQueue;
  readonly mail: Mailboxes;
  /** The ranks this simulation runs (all, or a thread's share). */
  readonly mine: number[];
  /** The virtual deadline, µs. */
  readonly deadline: number;
  /** The virtual time now, µs. */
  now(): number;
}

export class Fates {
  readonly state: State[];
  readonly outcomes: RankOutcome[];
  /** This simulation's ranks still running. */
  running: number;
  /** Failures other threads' ranks must hear, since the threads last met. */
  failures: Failure[] = [];
  private readonly n: number;

  constructor(private readonly s: FatesOf) {
    this.n = s.o.ranks;
    this.state = new Array<State>(this.n).fill('running');
    this.outcomes = Array.from({ length: this.n }, (_, rank) => ({ rank, state: 'done' as const, atUs: 0 }));
    this.running = s.mine.length;
  }

  settle(r: number, state: RankOutcome['state'], error?: WebcclError): boolean {
    if (this.state[r] !== 'running') return false;
    this.state[r] = state;
    this.outcomes[r] = { rank: r, state, atUs: this.s.now(), ...(error && { error }) };
    this.running--;
    return true;
  }

  /** Rank `r` fails with `e`; when the cause is its own, the others hear it as the real engine's ABORT. */
  failed(r: number, e: WebcclError, tellOthers: boolean): void {
    if (!this.settle(r, 'failed', e) || !tellOthers) return;
    this.toOthers(
      r,
      new WebcclError('ABORTED', `rank ${r} failed: ${e.reason} (${e.code})`, { by: r, reason: e.reason }),
    );
  }

  /** A failure another thread's rank told this thread's (at a time past the window: a latency between nodes). */
  hear(f: Failure): void {
    this.s.queue.at(f.atUs, () => this.failAll(f.from, f.error, false));
  }

  schedule(f: Fault): void {
    if (f.kind === 'slow') return; // the network applies it to every message
    this.s.queue.at(f.atUs, () => {
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
  timeOut(): void {
    const stopped = this.outcomes.filter((x) => x.state === 'stopped').map((x) => x.rank);
    for (const r of this.s.mine) {
      if (this.state[r] !== 'running') continue;
      const awaited = this.awaited(r);
      const missing = stopped.length ? stopped : awaited;
      const who = missing.length ? `; rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} did not arrive` : '';
      this.settle(
        r,
        'failed',
        new WebcclError(
          'TIMEOUT',
          `timed out after ${this.s.deadline / 1000} ms waiting for ranks ${awaited.join(', ')}${who}`,
          { missing, awaited },
        ),
      );
    }
  }

  /** Every rank but `from` still running fails with `e`, one latency later (ranks on other threads too). */
  private toOthers(from: number, e: WebcclError): void {
    const now = this.s.now();
    const far: Failure = { atUs: now + this.s.o.inter.latencyUs, from, error: e };
    this.s.queue.at(now + this.s.o.intra.latencyUs, () => this.failAll(from, e, true));
    this.s.queue.at(far.atUs, () => this.failAll(from, e, false));
    if (this.s.mine.length < this.n) this.failures.push(far);
  }

  /** This thread's ranks but `from`, on its node (`near`) or on the others, fail with `e`. */
  private failAll(from: number, e: WebcclError, near: boolean): void {
    const node = this.s.net.nodeOf(from);
    for (const p of this.s.mine) if (p !== from && (this.s.net.nodeOf(p) === node) === near) this.failed(p, e, false);
  }

  private awaited(r: number): number[] {
    const from = new Set(this.s.mail.receivesOf(r).map((key) => key % this.n));
    return [...from].sort((a, b) => a - b);
  }
}
