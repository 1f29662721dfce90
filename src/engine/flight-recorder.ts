// The flight recorder: each communicator's last N ops (WEBCCL_FLIGHT_RECORDER, default 64, 0
// turns it off), so that a hang names what every rank was doing, as torch's NCCL flight
// recorder does. An op costs one reused ring slot and a few field writes at submit; its state,
// times and error are read from its Work only when the record is read. On the first TIMEOUT or
// ABORTED that breaks the communicator the record is printed once at WARN, and
// comm.flightRecord() returns it at any time.

import { envNumber } from '../core/config.js';
import { WebcclError } from '../core/errors.js';
import { log } from '../core/log.js';
import type { Buf } from './buffers.js';
import type { OpSpec } from './op-spec.js';
import type { Work } from './work.js';

export const DEFAULT_FLIGHT_RECORDER_OPS = 64;
/** More slots than anyone reads: a larger setting is refused rather than allocated. */
const MAX_FLIGHT_RECORDER_OPS = 1 << 16;

/** Where an op of the flight record stands: issued and not started, started, done, or failed. */
export type FlightState = 'queued' | 'started' | 'done' | 'failed';

/** One op in comm.flightRecord(): plain data, a copy. Times are performance.now() in ms (NaN until reached). */
export interface FlightEntry {
  collective: string;
  seq: number;
  /** The op's count (OpSpec.count); allToAll with per-peer counts: the elements this rank sends. */
  count: number;
  dtype: string;
  op: string;
  root: number;
  algorithm: string;
  /** Ranks the op waits on (while it runs), or that it was missing or aborted by (once it failed). */
  peers: number[];
  state: FlightState;
  issuedAt: number;
  startedAt: number;
  completedAt: number;
  /** The error code it failed with, else null. */
  error: string | null;
}

/** A ring slot, reused once the ring wraps: the op's fields, copied at submit (never its buffers). */
interface Slot {
  work: Work;
  collective: string;
  count: number;
  dtype: string;
  op: string;
  root: number;
  algorithm: string;
}

function capacityFromEnv(): number {
  const n = envNumber('WEBCCL_FLIGHT_RECORDER') ?? DEFAULT_FLIGHT_RECORDER_OPS;
  if (!Number.isInteger(n) || n > MAX_FLIGHT_RECORDER_OPS) {
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `WEBCCL_FLIGHT_RECORDER=${n} is not an integer in 0..${MAX_FLIGHT_RECORDER_OPS}`,
    );
  }
  return n;
}

export class FlightRecorder {
  private readonly slots: Slot[] = [];
  private issued = 0;
  private printed = false;

  /**
   * `rank` names this rank in the printed table; `waitingOn` lists the ranks a running op
   * awaits (asked only when the record is read).
   */
  constructor(
    private readonly rank: number,
    private readonly waitingOn: () => number[] = () => [],
    readonly capacity = capacityFromEnv(),
  ) {}

  /** An op was submitted (the engine's one hook per op; send and recv: submittedP2p). */
  submitted(work: Work, s: OpSpec, algorithm: string): void {
    if (this.capacity === 0) return;
    this.fill(
      work,
      s.name,
      s.counts ? s.counts.send.reduce((a, c) => a + c, 0) : s.count,
      s.dtype,
      s.op,
      s.root,
      algorithm,
    );
  }

  /** A send or recv was submitted (its peer in the root column). */
  submittedP2p(work: Work, buf: Buf, peer: number): void {
    if (this.capacity === 0) return;
    this.fill(work, work.name, buf.count, buf.dtype, 'sum', peer, 'direct');
  }

  /** Takes the next ring slot (reused once the ring wraps). */
  private fill(
    work: Work,
    collective: string,
    count: number,
    dtype: string,
    op: string,
    root: number,
    algorithm: string,
  ): void {
    const i = this.issued++ % this.capacity;
    const slot = this.slots[i];
    if (!slot) {
      this.slots.push({ work, collective, count, dtype, op, root, algorithm });
      return;
    }
    slot.work = work;
    slot.collective = collective;
    slot.count = count;
    slot.dtype = dtype;
    slot.op = op;
    slot.root = root;
    slot.algorithm = algorithm;
  }

  /** Prints nothing: another record (of the engine that hands this one its ops) prints them all. */
  mute(): void {
    this.printed = true;
  }

  /** The communicator broke with `e`: on the first TIMEOUT or ABORTED, prints the record once. */
  broke(e: WebcclError): void {
    if (this.printed || this.capacity === 0 || (e.code !== 'TIMEOUT' && e.code !== 'ABORTED')) return;
    this.printed = true;
    log('WARN', this.format(e));
  }

  /** The last ops, oldest first, as plain objects. */
  record(): FlightEntry[] {
    const n = this.slots.length;
    const first = this.issued > n ? this.issued % n : 0;
    return Array.from({ length: n }, (_, k) => this.entry(this.slots[(first + k) % n]));
  }

  private entry(s: Slot): FlightEntry {
    const w = s.work;
    const failure = w.failure;
    const started = !Number.isNaN(w.timing.startedAt);
    const state: FlightState = failure ? 'failed' : w.settled ? 'done' : started ? 'started' : 'queued';
    return {
      collective: s.collective,
      seq: w.seq,
      count: s.count,
      dtype: s.dtype,
      op: s.op,
      root: s.root,
      algorithm: s.algorithm,
      peers: failure ? peersOf(failure) : state === 'started' ? this.waitingOn() : [],
      state,
      issuedAt: w.timing.issuedAt,
      startedAt: w.timing.startedAt,
      completedAt: w.timing.completedAt,
      error: failure?.code ?? null,
    };
  }

  /** A compact table, times in ms relative to the oldest op's issue. */
  format(e?: WebcclError): string {
    const rows = this.record();
    const t0 = rows[0]?.issuedAt ?? 0;
    const ms = (t: number) => (Number.isNaN(t) ? '-' : (t - t0).toFixed(1));
    const table = [
      [
        'seq',
        'collective',
        'count',
        'dtype',
        'op',
        'root',
        'algo',
        'state',
        'issued',
        'started',
        'completed',
        'peers',
        'error',
      ],
      ...rows.map((r) => [
        String(r.seq),
        r.collective,
        String(r.count),
        r.dtype,
        r.op,
        String(r.root),
        r.algorithm,
        r.state,
        ms(r.issuedAt),
        ms(r.startedAt),
        ms(r.completedAt),
        r.peers.join(',') || '-',
        r.error ?? '-',
      ]),
    ];
    const widths = table[0].map((_, c) => Math.max(...table.map((row) => row[c].length)));
    const lines = table.map(
      (row) =>
        `  ${row
          .map((v, c) => v.padEnd(widths[c]))
          .join(' ')
          .trimEnd()}`,
    );
    const why = e ? ` after ${e.code}` : '';
    return `rank ${this.rank}: flight record${why}, last ${rows.length} of ${this.issued} ops, oldest first (times in ms from the first):\n${lines.join('\n')}`;
  }
}

/**
 * The ranks a failure names: those a TIMEOUT was missing, the rank missing when another rank's
 * timeout reached this one as ABORTED, else the rank that aborted.
 */
function peersOf(e: WebcclError): number[] {
  const { missing, by, cause, detail } = e.details;
  const rank = (r: unknown): r is number => Number.isInteger(r) && (r as number) >= 0;
  if (Array.isArray(missing)) return missing.filter(rank);
  if (cause === 'timeout' && rank(detail)) return [detail];
  return rank(by) ? [by] : [];
}
