// The messages of this rank's running ops across nodes, as the schedules see them: a Group per op
// whose sends and receives carry the op's tags. It counts the ranks its receives await (a
// deadline names them) and the sends the socket may still read from the arena (freed after them).

import type { Group } from '../algorithms/group.js';
import { WebcclError } from '../core/errors.js';
import type { Transport } from '../transport/transport.js';
import { expectedFrom, type NetOp } from './net-op.js';

export class PeerTraffic {
  /** Ranks whose message some pending receive awaits, with how many receives await each. */
  private readonly awaited = new Map<number, number>();
  /**
   * Sends whose bytes the socket may not have taken yet: they still read the arena, so it is
   * freed only once they settle (a failed op leaves them behind; see afterSends).
   */
  private readonly sending = new Set<Promise<void>>();

  /**
   * `changed` is told whenever the ranks awaited change; `disagreed`, at once, of a receive that
   * met a message of another signature (its schedule may await another receive first, one whose
   * message never comes when ranks disagree: no rank a root, nothing else arrives).
   */
  constructor(
    private readonly transport: Transport,
    private readonly rank: number,
    private readonly changed: () => void,
    private readonly disagreed: (e: WebcclError) => void = () => undefined,
  ) {}

  /** The ranks whose message some pending receive awaits, in order. */
  awaitedRanks(): number[] {
    return [...this.awaited.keys()].sort((a, b) => a - b);
  }

  /** Runs `then` once no send may still read the arena: at once when none is pending. */
  afterSends(then: () => void): void {
    if (!this.sending.size) then();
    else void Promise.allSettled([...this.sending]).then(then);
  }

  /** The world ranks `members`, in that order, as the group `op`'s schedule runs on. */
  group(members: number[], op: NetOp): Group {
    const t = this.transport;
    const tag = (comm: number, step: number) => ({ comm, seq: op.seq >>> 0, step, ways: op.ways });
    const awaited = this.awaited;
    return {
      rank: members.indexOf(this.rank),
      size: members.length,
      lanes: Math.min(op.ways ?? Number.POSITIVE_INFINITY, t.channels ?? 1),
      send: (peer, step, data) => {
        const sent = t.send(members[peer], tag(op.pairs?.to(members[peer]) ?? op.signature, step), data);
        this.sending.add(sent);
        void sent.then(
          () => this.sending.delete(sent),
          () => this.sending.delete(sent),
        );
        return sent;
      },
      recv: (peer, step, into) => {
        const r = members[peer];
        awaited.set(r, (awaited.get(r) ?? 0) + 1);
        this.changed();
        const got = t.recv(r, tag(expectedFrom(op, r), step), into).finally(() => {
          op.work.joined(); // the op's first message from a peer: its wait for peers ends
          const n = awaited.get(r)! - 1;
          if (n) awaited.set(r, n);
          else awaited.delete(r);
          this.changed();
        });
        got.catch((e) => {
          if (isDisagreement(e)) this.disagreed(e);
        });
        return got;
      },
    };
  }
}

/** A receive's failure that says the ranks disagree (a message of another signature in its slot), not a peer's word. */
export function isDisagreement(e: unknown): e is WebcclError {
  return WebcclError.is(e) && e.code === 'MISMATCH' && typeof e.details.seq === 'number' && e.details.by === undefined;
}
