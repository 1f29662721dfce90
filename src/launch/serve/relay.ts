// The relay of `webccl serve` (Node only): browsers cannot listen, so two pages' ranks reach
// each other through the serve process. Each rank opens a WebSocket to
//   /webccl-relay?job=<jobId>&from=<its rank>&to=<peer rank>&channel=<c>[&mesh=<m>]
// and the relay pairs (from=a, to=b, c, m) with (from=b, to=a, c, m) (m names one of the job's
// meshes: a shrunk communicator's has its own), then forwards binary messages
// between the two, in order, both ways. It never reads them: the ranks run the link handshake
// (wire/link-handshake.ts, HELLO/PROOF with the job token) end to end through it: the relay
// holds no token and cannot pass for a rank, and a socket that does not hold the token pairs
// with a peer whose handshake then refuses it. The query names a slot, not an identity.
//
// Limits, all checked before bytes are held or sent on:
// - the query is checked before the upgrade: 400 when malformed, 404 for another job, 503 when
//   MAX_WAITING sockets already wait for their partners;
// - a socket waiting for its partner may send at most HELD_LIMIT bytes, which are held in order
//   and flushed to the partner when it arrives (1009 above that; a text message is 1003);
// - a second socket for a slot already taken is closed with 1008, and so is a socket left
//   without a partner for pairTimeoutMs;
// - each message is at most the links' largest (CHUNK) plus a margin, refused by `ws` from its
//   announced length before it is buffered;
// - a sender is paused while its partner has more than HIGH_WATER bytes unsent.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import { CHUNK } from '../../transport/ws/messages.js';
import { refuseUpgrade, type UpgradeHandler } from '../../wire/nodejs/upgrade-routes.js';

export { RELAY_PATH } from '../../transport/ws/page-carrier.js';
/** The largest message relayed: a link's largest (a payload chunk) and a margin. */
export const RELAY_MAX_MESSAGE = CHUNK + 64;
/** Bytes a socket may send before its partner arrives. */
export const HELD_LIMIT = 64 * 1024;
/** Unsent bytes at a receiver above which its sender is paused. */
const HIGH_WATER = 4 << 20;
/** Sockets waiting for their partners, at most (more are refused with 503). */
export const MAX_WAITING = 4096;
/** The largest rank and channel a query may name. */
const MAX_RANK = 65535;
const MAX_CHANNEL = 63;
/** How long a socket closed because its partner went may take to finish its close handshake. */
const CLOSE_GRACE_MS = 5_000;

export interface RelayOptions {
  /** The served job: upgrades naming another get a 404. */
  jobId: string;
  /** How long a socket may wait for its partner (default 60 s). */
  pairTimeoutMs?: number;
  /** Waiting sockets at most (default MAX_WAITING). */
  maxWaiting?: number;
}

export interface RelayStats {
  /** Sockets waiting for their partners. */
  waiting: number;
  /** Pairs forwarding. */
  pairs: number;
  /** Bytes forwarded since the relay started (held bytes count once flushed). */
  bytesForwarded: number;
}

export interface Relay {
  /** The upgrade handler of RELAY_PATH (see upgrade-routes.ts). */
  handle: UpgradeHandler;
  stats(): RelayStats;
  /** Terminates every socket and clears every timer. */
  close(): void;
}

/** One socket of the relay: the slot it claims, and its partner once paired. */
interface End {
  readonly ws: WebSocket;
  readonly slot: string;
  readonly partnerSlot: string;
  readonly label: string;
  partner?: End;
  /** Messages sent before the partner arrived, in order. */
  held: Buffer[];
  heldBytes: number;
  timer?: ReturnType<typeof setTimeout>;
  /** Paused because the partner's unsent bytes are over HIGH_WATER. */
  paused: boolean;
  /** Counted in `waiting`: open, unpaired, not closing. */
  waiting: boolean;
  /** Closing or closed: pairs with no one, forwards nothing more. */
  done: boolean;
  /** Its 'close' event has come. */
  closed: boolean;
}

/** `mesh` names one of the job's meshes (a shrunk communicator builds its own), so their links pair apart. */
interface Query {
  from: number;
  to: number;
  channel: number;
  mesh: string;
}

/** The query's ranks and channel, or why it is malformed. */
function parseQuery(q: URLSearchParams): Query | string {
  const ints: number[] = [];
  for (const [name, max] of [
    ['from', MAX_RANK],
    ['to', MAX_RANK],
    ['channel', MAX_CHANNEL],
  ] as const) {
    const all = q.getAll(name);
    if (all.length !== 1) return `${name} must be given once`;
    if (!/^\d{1,5}$/.test(all[0]) || Number(all[0]) > max) return `${name} must be an integer in 0..${max}`;
    ints.push(Number(all[0]));
  }
  const [from, to, channel] = ints;
  if (from === to) return 'from and to must differ';
  const meshes = q.getAll('mesh');
  if (meshes.length > 1 || (meshes.length === 1 && !/^[\w./:-]{1,64}$/.test(meshes[0])))
    return 'mesh must be given at most once, 1..64 characters of [A-Za-z0-9_./:-]';
  return { from, to, channel, mesh: meshes[0] ?? '' };
}

const slotOf = (from: number, to: number, channel: number, mesh: string) => `${mesh}|${from}>${to}#${channel}`;

/** Starts a relay for `jobId`; route its `handle` at RELAY_PATH. */
export function startRelay(o: RelayOptions): Relay {
  const pairTimeoutMs = o.pairTimeoutMs ?? 60_000;
  const maxWaiting = o.maxWaiting ?? MAX_WAITING;
  const wss = new WebSocketServer({ noServer: true, maxPayload: RELAY_MAX_MESSAGE, perMessageDeflate: false });
  /** Every live socket by the slot it claims, waiting or paired. */
  const slots = new Map<string, End>();
  const graceTimers = new Set<ReturnType<typeof setTimeout>>();
  let waiting = 0;
  let pairs = 0;
  let bytesForwarded = 0;
  let closed = false;

  const handle: UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => {
    if (closed) return refuseUpgrade(socket, '503 Service Unavailable');
    const jobs = url.searchParams.getAll('job');
    if (jobs.length !== 1) return refuseUpgrade(socket, '400 Bad Request');
    const q = parseQuery(url.searchParams);
    if (typeof q === 'string') return refuseUpgrade(socket, '400 Bad Request');
    if (jobs[0] !== o.jobId) return refuseUpgrade(socket, '404 Not Found');
    // Over the cap, only a socket whose partner waits is let in: it adds no waiter.
    if (waiting >= maxWaiting && !slots.get(slotOf(q.to, q.from, q.channel, q.mesh))?.waiting)
      return refuseUpgrade(socket, '503 Service Unavailable');
    wss.handleUpgrade(req, socket, head, (ws) => admit(ws, q));
  };

  function admit(ws: WebSocket, q: Query): void {
    const label = `rank ${q.from} to rank ${q.to} channel ${q.channel}`;
    const end: End = {
      ws,
      label,
      slot: slotOf(q.from, q.to, q.channel, q.mesh),
      partnerSlot: slotOf(q.to, q.from, q.channel, q.mesh),
      held: [],
      heldBytes: 0,
      paused: false,
      waiting: false,
      done: false,
      closed: false,
    };
    ws.on('message', (data: Buffer, isBinary: boolean) => received(end, data, isBinary));
    ws.on('error', (e: Error & { code?: string }) => {
      // `ws` has closed a socket that broke the protocol (a message over maxPayload: 1009) with
      // its own code; any other error is the socket's, which has nothing left to say.
      if (!e.code?.startsWith('WS_ERR_')) ws.terminate();
    });
    ws.on('close', () => gone(end));
    if (closed) return void ws.terminate();
    if (slots.has(end.slot)) return finish(end, 1008, `duplicate: ${label} is already connected`);
    slots.set(end.slot, end);
    const partner = slots.get(end.partnerSlot);
    if (partner && !partner.done && !partner.partner) return pair(partner, end);
    end.waiting = true;
    waiting++;
    end.timer = setTimeout(() => finish(end, 1008, 'no partner'), pairTimeoutMs);
  }

  /** Joins a waiting socket with its arriving partner and hands over what it held. */
  function pair(first: End, second: End): void {
    clearTimeout(first.timer);
    stopWaiting(first);
    pairs++;
    first.partner = second;
    second.partner = first;
    for (const m of first.held) forward(first, m);
    first.held = [];
    first.heldBytes = 0;
  }

  function received(end: End, data: Buffer, isBinary: boolean): void {
    if (end.done) return;
    if (!isBinary) return finish(end, 1003, 'binary messages only');
    if (end.partner) return forward(end, data);
    end.heldBytes += data.length;
    if (end.heldBytes > HELD_LIMIT)
      return finish(end, 1009, `over ${HELD_LIMIT} bytes sent before the partner arrived`);
    end.held.push(data);
  }

  /** Sends `data` from `from` to its partner; pauses `from` while the partner's queue is long. */
  function forward(from: End, data: Buffer): void {
    const to = from.partner!;
    if (to.done) return;
    bytesForwarded += data.length;
    to.ws.send(data, { binary: true }, () => {
      // Sends complete in order: the last one's callback sees the queue drained.
      if (from.paused && to.ws.bufferedAmount <= HIGH_WATER) {
        from.paused = false;
        from.ws.resume();
      }
    });
    if (!from.paused && to.ws.bufferedAmount > HIGH_WATER) {
      from.paused = true;
      from.ws.pause();
    }
  }

  function stopWaiting(end: End): void {
    if (!end.waiting) return;
    end.waiting = false;
    waiting--;
  }

  /** Closes `end` with `code` (after what was sent to it) and forwards nothing more from it. */
  function finish(end: End, code: number, reason: string): void {
    if (end.done) return;
    end.done = true;
    clearTimeout(end.timer);
    stopWaiting(end);
    // Its slot is free at once: a rank that retries (a rerun, a rank restarted) need not wait
    // for this socket's close handshake, and a socket that is done forwards nothing.
    if (slots.get(end.slot) === end) slots.delete(end.slot);
    if (closed) return void end.ws.terminate(); // the relay is closing: no timer may outlive it
    // A paused socket would never read its peer's answering close frame.
    if (end.paused) end.ws.resume();
    end.ws.close(code, reason);
    const grace = setTimeout(() => {
      graceTimers.delete(grace);
      end.ws.terminate();
    }, CLOSE_GRACE_MS);
    graceTimers.add(grace);
    end.ws.once('close', () => {
      clearTimeout(grace);
      graceTimers.delete(grace);
    });
  }

  /** A socket closed: forget it, and close its partner once what was forwarded to it has left. */
  function gone(end: End): void {
    clearTimeout(end.timer);
    stopWaiting(end);
    end.done = true;
    end.closed = true;
    if (slots.get(end.slot) === end) slots.delete(end.slot);
    const partner = end.partner;
    if (!partner) return;
    if (!partner.closed) pairs--; // the first of the two to close ends the pair
    finish(partner, 1000, 'partner closed');
  }

  return {
    handle,
    stats: () => ({ waiting, pairs, bytesForwarded }),
    close: () => {
      closed = true;
      for (const end of slots.values()) clearTimeout(end.timer);
      for (const t of graceTimers) clearTimeout(t);
      graceTimers.clear();
      for (const ws of wss.clients) ws.terminate();
      wss.close();
    },
  };
}
