// A rank's view of a job across nodes, as its rendezvous leaves it: the vocabulary a network
// engine, its fault account and a communicator's placement share.
import type { Transport } from '../transport/transport.js';

/** What stallRoot asks of the rendezvous store (the store client has it). */
export interface JobStore {
  set(key: string, value: string): Promise<void>;
  get(key: string, opts: { timeoutMs: number }): Promise<Uint8Array>;
  /** Resolves once every key is set; STORE_TIMEOUT (details.keys: the missing) after timeoutMs (0: look once). */
  wait(keys: string[], timeoutMs?: number): Promise<void>;
  /** Sets `key` to `desired` if it holds `expected` (null: absent); returns the value it holds after. */
  compareSet(key: string, expected: string | null, desired: string): Promise<Uint8Array | null>;
}

/** A rank's view of a job across nodes, as rendezvous leaves it. */
export interface NetWorld {
  rank: number;
  size: number;
  transport: Transport;
  /** Node index of every world rank: ranks with the same index share memory. */
  nodeOf: number[];
  /** The job's rendezvous store: consulted only when an op times out, to name the rank at fault. */
  store?: JobStore;
  /** Every rank runs on this machine (a loopback rendezvous): they share its cores. */
  oneHost?: boolean;
}
