// What a mesh of links (mesh.ts) needs from whatever carries its bytes (browser-safe, no node:):
// a carrier listens and dials, runs the link handshake (wire/link-handshake.ts) over each new
// connection, and hands the mesh authenticated links. The mesh owns everything above that:
// which link carries what, the mailboxes, abort, a peer gone, the connect deadline.
// Carriers today: TCP (transport/tcp/node), WebSocket (transport/ws/node) and a page's own
// WebSocket (transport/ws/page-carrier.ts), which can only dial.
import type { WebcclError } from '../../core/errors.js';
import type { Identity, LinkHooks } from '../../wire/link-handshake.js';
import type { FrameReader } from '../../wire/link-reader.js';
import type { Tag } from '../transport.js';

export interface Address {
  host: string;
  port: number;
}

/**
 * The address a rank that cannot listen publishes (a browser page's): peers that listen wait
 * for its dial, and two such ranks meet through the relay of the serving process.
 */
export const DIAL_ONLY: Address = { host: '', port: 0 };
export const isDialOnly = (a: Address): boolean => a.port === 0 && a.host === '';

/** One authenticated connection, as the carrier writes to it. */
export interface Conn {
  /** Writes one data frame after those before it; resolves once the carrier has taken it. */
  write(tag: Tag, payload: Uint8Array): Promise<void>;
  /** Sends a whole frame now (an ABORT), between data frames, never inside one. */
  post(frame: Uint8Array): void;
  /** Sends `frame` after everything queued and closes gracefully, so that the peer reads it. */
  end(frame: Uint8Array): void;
  /** Bytes can still be sent. */
  readonly writable: boolean;
}

/** An authenticated connection to `peer` on `channel`; `dialled` when this end connected. */
export class Link {
  /** The peer closed it. */
  closed = false;

  readonly peer: number;
  readonly channel: number;
  readonly dialled: boolean;

  constructor(
    readonly conn: Conn,
    readonly reader: FrameReader,
    at: { peer: number; channel: number; dialled: boolean },
  ) {
    this.peer = at.peer;
    this.channel = at.channel;
    this.dialled = at.dialled;
  }

  write(tag: Tag, payload: Uint8Array): Promise<void> {
    return this.conn.write(tag, payload);
  }
}

/** What the transport tells a link: who may connect, where data goes, whom to tell of a break. */
export type Hooks = LinkHooks<Link>;

/** What the mesh gives its carrier: who this rank is, the link hooks, where accepted links go. */
export interface MeshSide {
  readonly id: Identity;
  readonly hooks: Hooks;
  /** How long an accepted connection may take to prove itself before it is closed. */
  readonly handshakeMs: number;
  /** The mesh has failed: close what arrives. */
  failed(): boolean;
  /** A proven link, dialled or accepted. */
  attach(link: Link): void;
  /** An incoming connection was refused (logged or reported by the mesh). */
  refused(e: WebcclError, remote: string): void;
}

export interface Carrier {
  /** 'tcp' or 'ws': what WEBCCL_TRANSPORT names. */
  readonly name: string;
  /** Binds `host:port` (0: any free port) and opens each accepted connection for `side`. */
  listen(host: string, port: number, side: MeshSide): Promise<Address>;
  /**
   * One attempt to reach `peer` on `channel` at `a`: the link once both ends are proven, or a
   * string saying why the peer could not be reached (the mesh retries until its deadline).
   * Rejects when the handshake fails (AUTH_FAILED, PROTOCOL_ERROR, ...).
   */
  dial(a: Address, expect: { peer: number; channel: number }, deadline: number, side: MeshSide): Promise<Link | string>;
  /**
   * Where this carrier cannot listen (a page), one attempt to meet `peer` (also dial-only) on
   * `channel` through the relay: both dial it, the relay pairs them, and the link handshake runs
   * end to end, `connector` (the lower rank) saying HELLO first. Absent: pairs of dial-only
   * ranks are unsupported. Resolves like dial.
   */
  relay?(
    expect: { peer: number; channel: number },
    connector: boolean,
    deadline: number,
    side: MeshSide,
  ): Promise<Link | string>;
  /** Closes one connection at once (a link the mesh has no place for). */
  drop(conn: Conn): void;
  /** Lets the process exit while connections are open. */
  unref(): void;
  /**
   * Stops listening and closes every connection. `lingering` ones (every one with 'all') stay
   * open a while after what was ended on them has left, so that the peer reads this rank's ABORT.
   */
  shutdown(lingering: ReadonlySet<Conn> | 'all'): void;
}
