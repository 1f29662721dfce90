// What a simulation takes and gives: the network and its faults (network.ts), the options of a
// run, what each rank's part sees, and each rank's outcome.
import type { Group } from '../algorithms/group.js';
import type { WebcclError } from '../core/errors.js';
import type { Fault, Topology } from './network.js';

export interface SimOptions extends Topology {
  /** 'data': messages carry bytes; 'size': only their lengths (nothing is copied). */
  mode: 'data' | 'size';
  /** Latency jitter: each message's α is scaled by 1 + jitter·u (default 0). */
  jitter?: number;
  seed?: number;
  faults?: readonly Fault[];
  /** The op's deadline, virtual microseconds (default 300 s, WEBCCL_TIMEOUT_MS's default). */
  timeoutUs?: number;
  /** Keep every message in the result (for tests; a large run would keep millions). */
  trace?: boolean;
}

export interface Message {
  src: number;
  dst: number;
  bytes: number;
  sendUs: number;
  arriveUs: number;
}

export interface RankOutcome {
  rank: number;
  state: 'done' | 'failed' | 'stopped';
  /** When it finished, failed or stopped. */
  atUs: number;
  error?: WebcclError;
}

export interface SimResult {
  /** When the last rank finished (every rank that did not fail or stop). */
  timeUs: number;
  outcomes: RankOutcome[];
  messages: number;
  bytes: number;
  /** A hash of every message's ends, size and times: equal runs have equal hashes. */
  traceHash: number;
  trace?: Message[];
}

/** What one rank's part of the op sees. */
export interface RankScope {
  readonly rank: number;
  readonly size: number;
  readonly perNode: number;
  /** The group of world ranks `members` (all of them when omitted), its tags in `space` (0..3). */
  group(space: number, members?: readonly number[]): Group;
}

export type RankPart = (scope: RankScope) => Promise<void>;

/** A failure every rank must hear by `atUs`, as it crosses between threads. */
export interface Failure {
  atUs: number;
  from: number;
  error: WebcclError;
}
