// Which authenticated link carries what between this rank and each peer (browser-safe): the
// inbound and outbound grid per peer and channel, the links accepted before connect knew which
// peers listen, and the channel a tag's frames ride, so that the mesh (mesh.ts) only routes.
import type { Tag } from '../transport.js';
import type { Link } from './carrier.js';

export class LinkTable {
  /** inbound[peer][channel]: dialled by this rank, carries the peer's data here. */
  readonly inbound: (Link | undefined)[][];
  /** outbound[peer][channel]: dialled by the peer, carries this rank's data there. */
  readonly outbound: (Link | undefined)[][];
  /** Which peers cannot listen, known from connect's addresses; until then accepted links wait in `early`. */
  private peerDialOnly?: boolean[];
  private readonly early: Link[] = [];

  constructor(
    private readonly rank: number,
    size: number,
    private readonly nchannels: number,
  ) {
    const none = () => Array.from({ length: size }, () => new Array<Link | undefined>(nchannels).fill(undefined));
    this.inbound = none();
    this.outbound = none();
  }

  /** Until connect has the addresses, whether an accepted link carries one direction or both is unknown. */
  get waiting(): boolean {
    return !this.peerDialOnly;
  }

  /** Holds a link accepted before connect. */
  hold(link: Link): void {
    this.early.push(link);
  }

  /** Records which peers cannot listen; returns the links held until then. */
  know(peerDialOnly: boolean[]): Link[] {
    this.peerDialOnly = peerDialOnly;
    return this.early.splice(0);
  }

  /**
   * Puts `link` in its slots (both directions when either end cannot listen); false when they
   * are taken already (a duplicate, for the carrier to drop).
   */
  place(link: Link, selfDialOnly: boolean): boolean {
    const { peer, channel } = link;
    const twoWay = selfDialOnly || this.peerDialOnly?.[peer] === true;
    const slots = twoWay ? [this.inbound, this.outbound] : [link.dialled ? this.inbound : this.outbound];
    if (slots.some((links) => links[peer][channel])) return false;
    for (const links of slots) links[peer][channel] = link;
    return true;
  }

  /** Whether `peer` has a link on `channel` accepted here already (placed or held). */
  accepted(peer: number, channel: number): boolean {
    return !!this.outbound[peer][channel] || this.early.some((l) => l.peer === peer && l.channel === channel);
  }

  /** Whether every link with `peer` is closed (or never came up). */
  allClosed(peer: number): boolean {
    return [...this.inbound[peer], ...this.outbound[peer]].every((l) => !l || l.closed);
  }

  /** The ranks whose links are not all up yet. */
  missing(): number[] {
    return this.inbound.flatMap((ls, p) =>
      p !== this.rank && (ls.some((l) => !l) || this.outbound[p].some((l) => !l)) ? [p] : [],
    );
  }

  /** The link that carries `tag`'s frames with `peer` on `links` (undefined until it is up). */
  carrying(peer: number, tag: Tag, links: (Link | undefined)[][]): Link | undefined {
    // Steps take the op's connections in turn (the ring's lanes travel side by side).
    const c = (tag.seq + tag.step) % (tag.ways ? Math.min(tag.ways, this.nchannels) : this.nchannels);
    return links[peer][c];
  }

  /** Every link, placed or held. */
  all(): (Link | undefined)[] {
    return [...this.inbound.flat(), ...this.outbound.flat(), ...this.early];
  }
}
