// Mesh (browser-safe, no node:): the Transport interface over a full mesh of authenticated links,
// whatever carries them (carrier.ts). listen() binds through the carrier and starts answering
// handshakes; connect(addresses) dials every other rank on each of `nchannels` channels and waits
// for every other rank to dial in. Between two ranks that listen, data flows one way on each
// connection, from the accepting end to the dialling end (the TCP carrier reads a dialled socket
// straight into the posted receive). A rank that cannot listen (a page) publishes DIAL_ONLY: it
// dials each rank that listens, and one connection per channel carries both directions; two
// such ranks meet through the carrier's relay (the serving process), one connection each way too.
// Data frames of a tag always ride one channel (chosen from the tag, so tags spread over
// channels and one tag keeps its order). A protocol violation fails every pending and later send
// and recv and closes the mesh; a peer that closes all its connections (it ended or died) fails
// what is pending or later with that peer only. Connecting is connect.ts's, and which link
// carries what is link-table.ts's.
import { WebcclError } from '../../core/errors.js';
import { encodeHandshake, MAX_ABORT_TEXT_BYTES } from '../../wire/link-frames.js';
import type { Identity } from '../../wire/link-handshake.js';
import { checkSecrets } from '../../wire/secrets.js';
import { HoldBuffers } from '../hold-buffers.js';
import { DEFAULT_HOLD_LIMITS, type HoldLimits, Mailbox } from '../mailbox.js';
import {
  type AbortInfo,
  abortError,
  checkTag,
  encodeAbortInfo,
  type Tag,
  type Transport,
  type TransportWatcher,
} from '../transport.js';
import {
  type Address,
  type Carrier,
  type Conn,
  DIAL_ONLY,
  type Hooks,
  isDialOnly,
  type Link,
  type MeshSide,
} from './carrier.js';
import { MeshConnect } from './connect.js';
import { LinkTable } from './link-table.js';

export interface MeshOptions {
  rank: number;
  size: number;
  jobId: string;
  token: string | Uint8Array;
  /** Connections per pair of ranks (default 1). */
  nchannels?: number;
  /** Interface to listen on (default 127.0.0.1; '::1' for IPv6 loopback). */
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Deadline for the whole mesh, and for each handshake (default 30 s). */
  timeoutMs?: number;
  /** Payloads that arrive before their receive are held within these limits (per peer). */
  limits?: HoldLimits;
  /** Called for each refused incoming connection; without it, refusals are logged at WARN (a few per interval). */
  onReject?: (e: WebcclError, remote: string) => void;
  /** How long an accepted connection may take to prove the token before it is closed (default 5 s). */
  handshakeTimeoutMs?: number;
}

/** A legitimate peer proves itself within milliseconds of connecting; idle strangers are closed. */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 5000;
/**
 * How long a failed write waits before it fails the send: a peer that aborted has sent its
 * ABORT (on another connection) before it closed, and its reason is the better account.
 */
const WRITE_FAILURE_GRACE_MS = 500;

const bad = (message: string) => new WebcclError('INVALID_ARGUMENT', message);

export class Mesh implements Transport {
  readonly rank: number;
  readonly size: number;
  /** The bound listen address; publish it to the other ranks. */
  address: Address = DIAL_ONLY;
  private readonly id: Identity;
  private readonly timeoutMs: number;
  private readonly links: LinkTable;
  /** The table's grids (see LinkTable): inbound links carry the peers' data here, outbound ones ours there. */
  private readonly inbound: (Link | undefined)[][];
  private readonly outbound: (Link | undefined)[][];
  /** Why a peer is gone (it closed every connection), for its later operations. */
  private readonly gone: (WebcclError | undefined)[];
  private readonly boxes: Mailbox[];
  private readonly sending = new Set<(e: WebcclError) => void>();
  private readonly connecting: MeshConnect;
  private failure?: WebcclError;
  private watcher?: TransportWatcher;
  private abortSent = false;

  protected constructor(
    private readonly o: MeshOptions,
    protected readonly carrier: Carrier,
  ) {
    const nchannels = o.nchannels ?? 1;
    if (!Number.isInteger(o.size) || o.size < 1) throw bad(`size must be a positive integer, got ${o.size}`);
    if (!Number.isInteger(o.rank) || o.rank < 0 || o.rank >= o.size)
      throw bad(`rank ${o.rank} is not in 0..${o.size - 1}`);
    if (!Number.isInteger(nchannels) || nchannels < 1 || nchannels > 64)
      throw bad(`nchannels must be in 1..64, got ${nchannels}`);
    this.rank = o.rank;
    this.size = o.size;
    this.timeoutMs = o.timeoutMs ?? 30_000;
    this.id = { jobId: o.jobId, token: checkSecrets(o.token, o.jobId), rank: o.rank, size: o.size, nchannels };
    this.links = new LinkTable(o.rank, o.size, nchannels);
    this.inbound = this.links.inbound;
    this.outbound = this.links.outbound;
    this.gone = new Array(o.size).fill(undefined);
    const held = new HoldBuffers(); // (one budget for every peer's early payloads)
    this.boxes = Array.from({ length: o.size }, (_, p) => new Mailbox(p, o.limits ?? DEFAULT_HOLD_LIMITS, held));
    this.connecting = new MeshConnect(
      {
        rank: o.rank,
        size: o.size,
        nchannels,
        carrier,
        side: () => this.side,
        failure: () => this.failure,
        missing: () => this.links.missing(),
        attach: (link) => this.attach(link),
        fail: (e) => this.fail(e),
      },
      this.timeoutMs,
      o.onReject,
    );
  }

  /** Connections per pair (nchannels): an op's messages go on the first `tag.ways` of them, or on all. */
  get channels(): number {
    return this.id.nchannels;
  }

  /** The carrier's name: 'tcp' or 'ws'. */
  get carrierName(): string {
    return this.carrier.name;
  }

  /** Binds the carrier's listener and starts answering handshakes. */
  protected async bind(): Promise<void> {
    this.address = await this.carrier.listen(this.o.host ?? '127.0.0.1', this.o.port ?? 0, this.side);
  }

  /** Builds the mesh: dials every other rank, waits for each to dial in. `addresses[r]` is rank r's. */
  async connect(addresses: Address[]): Promise<void> {
    if (!Array.isArray(addresses) || addresses.length !== this.size)
      throw bad(`connect needs ${this.size} addresses, got ${addresses?.length}`);
    const deadline = Date.now() + this.timeoutMs;
    const peerDialOnly = addresses.map(isDialOnly);
    for (const link of this.links.know(peerDialOnly)) this.attach(link);
    await this.connecting.run(addresses, peerDialOnly, isDialOnly(this.address), deadline);
  }

  send(peer: number, tag: Tag, data: Uint8Array): Promise<void> {
    const link = this.route(peer, tag, data, this.outbound);
    if (this.failure) return Promise.reject(this.failure);
    if (this.gone[peer]) return Promise.reject(this.gone[peer]);
    // Settled by the write, or by the mesh failing first (fail() rejects every send in `sending`).
    return new Promise<void>((resolve, reject) => {
      const failed = (e: WebcclError) => {
        this.sending.delete(failed);
        reject(e);
      };
      this.sending.add(failed);
      link.write(tag, data).then(
        () => {
          this.sending.delete(failed);
          resolve();
        },
        (e: WebcclError) => setTimeout(() => failed(this.failure ?? this.gone[peer] ?? e), WRITE_FAILURE_GRACE_MS),
      );
    });
  }

  recv(peer: number, tag: Tag, into: Uint8Array): Promise<void> {
    this.route(peer, tag, into, this.inbound);
    return this.boxes[peer].post(tag, into);
  }

  /** Lets the process exit while links are open (ops in flight keep it alive with their deadline timers). */
  unref(): void {
    this.carrier.unref();
  }

  abort(why: string | AbortInfo): void {
    // Once: after failing on a peer's ABORT this rank still tells the others its own account.
    if (this.abortSent) return;
    this.abortSent = true;
    const info: AbortInfo = typeof why === 'string' ? { code: 'ABORTED', reason: why } : why;
    // End (not destroy) the links this rank sends on, so the ABORT reaches each peer first, and
    // keep reading the links peers send on: destroying them would fail the peers' writes
    // (EPIPE, ECONNRESET) before they read why. The ABORT goes on those too: nothing of ours is
    // queued there, so it leaves at once (the outbound ones may hold a payload before it, lost if
    // the process exits right after failing).
    const frame = encodeHandshake({ type: 'abort', message: encodeAbortInfo(info, MAX_ABORT_TEXT_BYTES) });
    const ending = new Set(this.outbound.flat());
    for (const ls of this.inbound)
      for (const l of ls) if (l && !ending.has(l) && !l.closed && l.conn.writable) l.conn.post(frame);
    for (const ls of this.outbound) for (const l of ls) if (l && !l.closed && l.conn.writable) l.conn.end(frame);
    const links = [...this.outbound, ...this.inbound].flat().flatMap((l) => (l ? [l.conn] : []));
    this.fail(
      new WebcclError(info.code, `rank ${this.rank}: aborted: ${info.reason}`, {
        ...info.details,
        by: this.rank,
        reason: info.reason,
      }),
      new Set(links),
    );
  }

  abortSpace(space: number, why: AbortInfo, peers?: readonly number[]): void {
    if (this.failure) return;
    const info = { ...why, space };
    const frame = encodeHandshake({ type: 'abort', message: encodeAbortInfo(info, MAX_ABORT_TEXT_BYTES) });
    // One link per peer carries it: the peer fails the space on its first ABORT for it.
    for (const [peer, ls] of this.outbound.entries()) {
      if (peers && !peers.includes(peer)) continue;
      const l = ls.find((x) => x && !x.closed && x.conn.writable);
      l?.conn.post(frame);
    }
    const e = new WebcclError(info.code, `rank ${this.rank}: aborted: ${info.reason}`, {
      ...info.details,
      by: this.rank,
      reason: info.reason,
      space,
    });
    for (const box of this.boxes) box.failSpace(space, e);
  }

  watch(w: TransportWatcher): void {
    this.watcher = w;
    for (const [p, box] of this.boxes.entries()) box.unexpected = (tag) => w.unexpected(p, tag);
  }

  held(): { peer: number; tag: Tag }[] {
    const out: { peer: number; tag: Tag }[] = [];
    for (let peer = 0; peer < this.boxes.length; peer++)
      for (const tag of this.boxes[peer].heldTags()) out.push({ peer, tag });
    return out;
  }

  departed(): number[] {
    return this.gone.flatMap((e, peer) => (e ? [peer] : []));
  }

  close(): void {
    this.fail(new WebcclError('CONNECTION_CLOSED', `rank ${this.rank}: transport closed`));
  }

  private route(peer: number, tag: Tag, data: Uint8Array, links: (Link | undefined)[][]): Link {
    if (!Number.isInteger(peer) || peer < 0 || peer >= this.size || peer === this.rank)
      throw bad(`peer ${peer} is not another rank in 0..${this.size - 1}`);
    if (!(data instanceof Uint8Array)) throw bad('data must be a Uint8Array');
    checkTag(tag);
    const link = this.links.carrying(peer, tag, links);
    if (!link && !this.failure)
      throw new WebcclError(
        'NOT_INITIALIZED',
        `rank ${this.rank} has no link to rank ${peer} yet (call connect first)`,
      );
    return link!;
  }

  private hooks: Hooks = {
    admit: (peer, channel) => {
      if (peer === this.rank || peer >= this.size)
        return `rank ${this.rank} accepts the other ranks of 0..${this.size - 1} only`;
      return this.links.accepted(peer, channel) ? 'duplicate' : undefined;
    },
    sink: (peer, tag, length) => this.boxes[peer].claim(tag, length),
    broken: (peer, e) => this.fail(new WebcclError(e.code, `rank ${this.rank}: ${e.reason}`, { peer })),
    // A peer that ends (or dies) closes its connections; what it sent before arrives first, so
    // a receive from it fails only once every channel is closed and nothing more can come.
    // Other peers' messages keep flowing: a rank that finished its last op may exit while
    // the others still complete theirs.
    closed: (link) => {
      if (this.failure || link.closed) return;
      link.closed = true;
      const peer = link.peer;
      if (this.gone[peer] || !this.links.allClosed(peer)) return;
      const e = new WebcclError(
        'CONNECTION_CLOSED',
        `rank ${this.rank}: rank ${peer} closed its connections (it ended or died)`,
        { peer },
      );
      this.gone[peer] = e;
      this.boxes[peer].ended(e);
    },
    // Links stay open a while: this rank may still send its own ABORT (its account of a
    // disagreement completes the peer's), and later ABORTs still reach the watcher.
    aborted: (peer, message) => {
      const e = abortError(peer, message);
      // A communicator's ABORT fails its space only; the links go on for the others.
      if (typeof e.details.space === 'number') for (const box of this.boxes) box.failSpace(e.details.space, e);
      else this.fail(e, 'all');
      this.watcher?.aborted(e);
    },
  };

  /** What the carrier sees of this mesh. */
  private get side(): MeshSide {
    return {
      id: this.id,
      hooks: this.hooks,
      handshakeMs: this.handshakeMs,
      failed: () => this.failure !== undefined,
      attach: (link) => this.attach(link),
      refused: (e, remote) => this.connecting.refused(e, remote),
    };
  }

  /** How long an accepted connection may take to prove itself (TLS and token), before it is closed. */
  private get handshakeMs(): number {
    return Math.min(this.timeoutMs, this.o.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS);
  }

  private attach(link: Link): void {
    // Accepted before connect: whether it carries one direction or both is known from the addresses.
    if (!this.failure && this.links.waiting) return this.links.hold(link);
    if (this.failure || !this.links.place(link, isDialOnly(this.address))) return this.carrier.drop(link.conn);
    this.connecting.changed();
  }

  /**
   * Fails every pending and later operation with `e`, and closes every link. `lingering` ones
   * stay open a while: the peer reads this rank's ABORT and closes first, and what it still sends
   * meanwhile is read and dropped (the mailboxes have failed).
   */
  private fail(e: WebcclError, lingering: ReadonlySet<Conn> | 'all' = new Set()): void {
    if (this.failure) return;
    this.failure = e;
    for (const box of this.boxes) box.fail(e);
    for (const reject of this.sending) reject(e);
    this.sending.clear();
    for (const l of this.links.all()) if (l && lingering !== 'all' && !lingering.has(l.conn)) l.reader.close();
    this.carrier.shutdown(lingering);
    this.connecting.changed();
  }
}
