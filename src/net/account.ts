// The network engine's account of a failure (its pieces are in net/blame.ts): ranks that
// disagree on an op, found from a message no receive of this rank can take or from a peer's
// ABORT, end with MISMATCH on every rank naming the field (the first disagreement is the one
// every rank reports); a failure heard through the node's shared memory waits briefly for the
// failing rank's own ABORT over the network; and what this rank's peers are told when it fails.
import type { WebcclError } from '../core/errors.js';
import type { NetWorld } from '../engine/job.js';
import type { AbortInfo } from '../transport/transport.js';
import { Dispute, type OpFields } from './blame.js';

/** Ops whose fields are kept, to name the field when a peer says it disagrees on one of them. */
const RECENT_OPS = 32;
/** How long a rank that hears of a failure through shared memory waits for the network's account. */
const NETWORK_ACCOUNT_MS = 300;

export class FaultAccount {
  /** Set once ranks are known to disagree on an op: its verdict is the error every failing op raises. */
  dispute?: Dispute;
  /** The fields of the last RECENT_OPS ops, by seq. */
  private readonly recent = new Map<number, OpFields>();
  /** The first ABORT a peer sent over the network, and who waits for one. */
  private peerAbort?: WebcclError;
  private readonly peerAbortWaiters: ((e: WebcclError) => void)[] = [];

  /** `broken`: whether the engine has failed already (a disagreement found later changes nothing). */
  constructor(
    private readonly world: NetWorld,
    private readonly broken: () => boolean,
  ) {}

  /** Op `seq`'s fields, kept for RECENT_OPS ops. */
  remember(seq: number, fields: OpFields): void {
    this.recent.set(seq, fields);
    this.recent.delete(seq - RECENT_OPS);
  }

  /**
   * Ranks disagree on op `seq` (`peer` with this rank, or as a peer's ABORT says): every peer
   * hears it at once, with this rank's fields and a differing rank's when known, so that each
   * rank names the field and both values as soon as it has two ranks' fields that differ.
   */
  disagreed(seq: number, peer: number, heard?: { by: number; fields?: Record<number, OpFields> }): void {
    if (this.broken()) return;
    const r = this.world.rank;
    this.dispute ??= new Dispute(seq, heard?.by);
    const d = this.dispute;
    if (d.seq !== seq) return; // the first disagreement is the one every rank reports
    d.learn({ [r]: this.recent.get(seq) });
    d.learn(heard?.fields);
    const reason = heard
      ? `told by rank ${heard.by} that ranks disagree on op #${seq}`
      : `rank ${peer}'s messages for op #${seq} carry another signature than this rank's`;
    this.world.transport.abort({ code: 'MISMATCH', reason, details: { seq, fields: d.evidence(r) } });
  }

  /** A peer's ABORT: for a disagreement, this rank adds its own fields and tells the others. */
  peerAborted(e: WebcclError): void {
    if (!this.peerAbort) {
      this.peerAbort = e;
      for (const w of this.peerAbortWaiters.splice(0)) w(e);
    }
    const { seq, fields, by } = e.details as { seq?: unknown; fields?: Record<number, OpFields>; by: number };
    if (e.code === 'MISMATCH' && typeof seq === 'number') this.disagreed(seq, by, { by, fields });
  }

  /**
   * `nodeErr` came from this node's shared memory (a node mate failed, in the node phase): the
   * network carries the failing rank's own ABORT, with its world rank and reason, which every
   * peer was sent at the same time. Waits briefly for it.
   */
  networkAccount(nodeErr: WebcclError): Promise<WebcclError> {
    if (this.peerAbort) return Promise.resolve(this.peerAbort);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(nodeErr), NETWORK_ACCOUNT_MS);
      this.peerAbortWaiters.push((e) => {
        clearTimeout(timer);
        resolve(e);
      });
    });
  }

  /**
   * What peers are told when this rank fails with `err`: ABORTED naming this rank, or the rank
   * whose ABORT this failure came from (the first cause); a disagreement is MISMATCH on every
   * rank, with the fields this rank knows.
   */
  abortInfoOf(err: WebcclError): AbortInfo {
    const d = this.dispute;
    if (d)
      return { code: 'MISMATCH', reason: err.reason, details: { seq: d.seq, fields: d.evidence(this.world.rank) } };
    // Found by the node phase: the other nodes' ranks get the same field and values.
    const { field, ranks, values } = err.details;
    if (err.code === 'MISMATCH' && typeof field === 'string')
      return { code: 'MISMATCH', reason: err.reason, details: { field, ranks, values } };
    const { by, reason, user, missing, peer, gone } = err.details;
    if (err.code === 'ABORTED' && typeof by === 'number' && by !== this.world.rank && typeof reason === 'string') {
      return { code: 'ABORTED', reason, user: user === true, details: { by, missing, gone } };
    }
    // A rank whose connections closed (or who left the node) is gone: the peers hear whom (shrink() needs it).
    return {
      code: 'ABORTED',
      reason: err.reason,
      details: { missing, gone: err.code === 'CONNECTION_CLOSED' && Number.isInteger(peer) ? [peer] : undefined },
    };
  }
}
