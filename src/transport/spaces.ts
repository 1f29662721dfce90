// Tag spaces: many communicators over one transport. The world's connections are made once;
// each communicator (the world, every group) gets a view of them with its own rank numbering
// and its own tag space, so that two communicators' messages never meet in a receive even when
// their op sequence numbers and steps are equal. The view translates ranks and stamps the
// space; payloads that arrive before their receive are judged by the view of their space.
import { WebcclError } from '../core/errors.js';
import type { AbortInfo, Tag, Transport, TransportWatcher } from './transport.js';

import { commSpace, P2P_SPACE_BIT } from './transport.js';

export { P2P_SPACE_BIT } from './transport.js';

const SPACE_MASK = P2P_SPACE_BIT - 1;

export class TransportSpaces {
  private readonly watchers = new Map<number, { w: TransportWatcher; toMember: Map<number, number> }>();
  /** ABORTs of the whole job, and of communicators not watched yet, for those watched later. */
  private readonly worldAborts: WebcclError[] = [];
  private readonly unheard = new Map<number, WebcclError[]>();

  constructor(readonly base: Transport) {
    base.watch?.({
      unexpected: (peer, tag) => {
        // A point-to-point message waits for its recv, however late: it is never a disagreement.
        if ((tag.space ?? 0) & P2P_SPACE_BIT) return false;
        const v = this.watchers.get(commSpace(tag));
        const member = v?.toMember.get(peer);
        // A space nobody here has opened yet (a group this rank has not finished creating): hold it.
        return v !== undefined && member !== undefined ? v.w.unexpected(member, tag) : false;
      },
      // A communicator's ABORT reaches its own watcher; the world's ends every communicator.
      // One that comes before its communicator is watched (a network progress thread opens a
      // communicator at its rank's first op) is kept for it: the account it carries (the
      // fields ranks disagree on) must not be lost.
      aborted: (e) => {
        const space = e.details.space;
        if (typeof space !== 'number') {
          this.worldAborts.push(e);
          for (const { w } of [...this.watchers.values()]) w.aborted(e);
          return;
        }
        const v = this.watchers.get(space);
        if (v) v.w.aborted(e);
        else (this.unheard.get(space) ?? this.unheard.set(space, []).get(space)!).push(e);
      },
    });
  }

  /**
   * The view of communicator `space` whose rank i is world rank `members[i]` (this rank is
   * `rank` there). Sends and receives carry `space` added to the tag's own space field (0 for
   * collectives, P2P_SPACE_BIT for point-to-point).
   */
  open(space: number, members: readonly number[], rank: number): Transport {
    if (!Number.isInteger(space) || space < 0 || space > SPACE_MASK)
      throw new WebcclError('INTERNAL', `tag space ${space} is out of range`);
    const base = this.base;
    const toMember = new Map(members.map((w, i) => [w, i]));
    // (fields named: a spread of the tag was the largest single cost of a small op's issue)
    const stamp = (tag: Tag): Tag => ({
      comm: tag.comm,
      seq: tag.seq,
      step: tag.step,
      space: space + (tag.space ?? 0),
      ways: tag.ways,
    });
    const world = (peer: number) => {
      const w = members[peer];
      if (w === undefined)
        throw new WebcclError(
          'INVALID_ARGUMENT',
          `peer ${peer} is not a rank of this communicator (0..${members.length - 1})`,
        );
      return w;
    };
    let closed = false;
    return {
      rank,
      size: members.length,
      channels: base.channels,
      send: (peer, tag, data) => base.send(world(peer), stamp(tag), data),
      recv: (peer, tag, into) => base.recv(world(peer), stamp(tag), into),
      // Closing a view ends this communicator's use of the links, not the links.
      close: () => {
        if (closed) return;
        closed = true;
        if (space === 0) base.close();
        else this.watchers.delete(space);
      },
      // A group's failure ends the group, not the links the other communicators use.
      abort: (why: string | AbortInfo) => {
        if (space === 0 || !base.abortSpace) return base.abort(why);
        base.abortSpace(
          space,
          typeof why === 'string' ? { code: 'ABORTED', reason: why } : why,
          members.filter((w) => w !== members[rank]),
        );
      },
      watch: (w) => {
        this.watchers.set(space, { w, toMember });
        const early = [...this.worldAborts, ...(this.unheard.get(space) ?? [])];
        this.unheard.delete(space);
        for (const e of early) w.aborted(e);
      },
      /** Payloads of this communicator's collectives held (not its point-to-point messages). */
      departed: () =>
        (base.departed?.() ?? []).flatMap((w) => {
          const member = toMember.get(w);
          return member === undefined ? [] : [member];
        }),
      held: () => {
        const all = base.held?.();
        if (!all?.length) return []; // (asked at every op's issue and end: mostly none)
        return all.flatMap((h) => {
          const member = toMember.get(h.peer);
          return (h.tag.space ?? 0) === space && member !== undefined ? [{ peer: member, tag: h.tag }] : [];
        });
      },
    };
  }
}
