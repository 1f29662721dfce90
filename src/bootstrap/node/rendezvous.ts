// Rendezvous of a job across nodes (Node only): world rank 0 serves the store at
// MASTER_ADDR:MASTER_PORT; every rank checks that all agree on the world size, publishes where
// its transport listens and which node memory it shares, waits for everyone (naming the ranks
// that have not come when the connect deadline passes), then builds the mesh over TCP or
// WebSocket (WEBCCL_TRANSPORT, on which every rank must agree).
// Knows nothing of collectives: it returns a connected transport and the node of every rank.
import { networkInterfaces } from 'node:os';
import { WebcclError, within } from '../../core/errors.js';
import { log } from '../../core/log.js';
import { RateLimitedLog } from '../../core/rate-log.js';
import { AUTH_FAIL_REASONS } from '../../wire/auth.js';
import { hostPort } from '../../wire/secrets.js';
import type { Address } from '../../transport/mesh/carrier.js';
import type { Mesh } from '../../transport/mesh/mesh.js';
import { type CarrierName, listenMesh } from './mesh-carrier.js';
import { StoreClient } from './store-client.js';
import { type StoreServer, refusalLine, startStoreServer } from './store-server.js';
import { isLoopback } from './job-secrets.js';
import type { WorldInit } from '../world.js';
import type { WireTls } from '../../wire/node/secure-socket.js';

export interface RendezvousOptions extends WorldInit {
  /** Equal for ranks that share memory (NodeHandle.key). */
  nodeKey: string;
  /** Connections per pair of ranks (WEBCCL_NCHANNELS). */
  nchannels: number;
  /** Interface whose address peers dial (WEBCCL_SOCKET_IFNAME). */
  ifname?: string;
  /** Deadline for every rank to arrive and the mesh to form (WEBCCL_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs: number;
  /** Run the store and the mesh over TLS (WEBCCL_TLS); plain when absent. */
  tls?: WireTls;
  /** What carries the mesh (WEBCCL_TRANSPORT; default tcp). */
  carrier?: CarrierName;
}

export interface Rendezvous {
  transport: Mesh;
  /** Node index of every world rank (ranks with the same index share memory). */
  nodeOf: number[];
  store: StoreClient;
  server?: StoreServer;
}

interface Card {
  host: string;
  port: number;
  node: string;
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);
/** How long rank 0 keeps the store up after failing, so the others can read why. */
const ABORT_GRACE_MS = 1000;

/** Where this rank's transport listens: loopback for a job on one machine, else a reachable address. */
export function listenHost(masterAddr: string, ifname: string | undefined, towardMaster: string): string {
  const v6 = masterAddr.includes(':');
  if (ifname) {
    const addrs = networkInterfaces()[ifname];
    if (!addrs?.length) throw new WebcclError('INVALID_ARGUMENT', `WEBCCL_SOCKET_IFNAME=${ifname}: no such interface (have ${Object.keys(networkInterfaces()).join(', ')})`);
    const pick = addrs.find((a) => (a.family === 'IPv6') === v6) ?? addrs[0];
    return pick.address;
  }
  if (isLoopback(masterAddr)) return v6 ? '::1' : '127.0.0.1';
  return towardMaster.replace(/^::ffff:/, '');
}

export async function rendezvous(o: RendezvousOptions): Promise<Rendezvous> {
  const deadline = Date.now() + o.connectTimeoutMs;
  const where = hostPort(o.masterAddr, o.masterPort);
  // A connection that claims this job but fails the token proof is most likely one of its ranks
  // with the wrong WEBCCL_TOKEN: rank 0 fails at once naming the ranks that have not joined,
  // rather than at the connect deadline. (Whom it claims to be is not trusted for anything else.)
  const refusals = new RateLimitedLog(`store ${where}: refused connections`);
  let wrongToken: string | undefined;
  const onReject = (r: { remote: string; kind: 'auth' | 'protocol'; reason: string }) => {
    if (r.kind === 'auth' && r.reason === AUTH_FAIL_REASONS[2]) wrongToken ??= r.remote;
    refusals.warn(refusalLine(where, r));
  };
  const server = o.rank === 0
    ? await startStoreServer({ host: o.masterAddr, port: o.masterPort, fd: o.storeFd, token: o.token, jobId: o.jobId, tls: o.tls, onReject }).catch((e: WebcclError) => {
        throw within(e, 'rank 0 cannot serve the rendezvous store');
      })
    : undefined;
  const store = await StoreClient.connect({ host: o.masterAddr, port: o.masterPort, token: o.token, jobId: o.jobId, timeoutMs: o.connectTimeoutMs, tls: o.tls }).catch((e: WebcclError) => {
    throw within(e, `rank ${o.rank} cannot reach the rendezvous store at ${where}`);
  });
  let transport: Mesh | undefined;
  try {
    await agreeOnSize(store, o);
    await agreeOnCarrier(store, o);
    transport = await listenMesh(o.carrier ?? 'tcp', {
      rank: o.rank, size: o.size, jobId: o.jobId, token: o.token, nchannels: o.nchannels, timeoutMs: o.connectTimeoutMs, tls: o.tls,
      host: listenHost(o.masterAddr, o.ifname, store.localAddress),
    });
    const card: Card = { host: transport.address.host, port: transport.address.port, node: o.nodeKey };
    await store.set(`rank/${o.rank}`, JSON.stringify(card));
    const cards = await gather(store, o, deadline, where, () => wrongToken);
    const keys = [...new Set(cards.map((c) => c.node))];
    const addresses: Address[] = cards.map((c) => ({ host: c.host, port: c.port }));
    log('INFO', `rank ${o.rank}/${o.size}: ${keys.length} node(s), mesh of ${o.nchannels} channel(s) per peer over ${transport.carrierName}, listening on ${hostPort(card.host, card.port)}${o.tls ? `, TLS keyed by the ${o.tls.keyedBy === 'token' ? 'job token' : 'certificates'}` : ''}`);
    await transport.connect(addresses);
    // From here the job's ops keep the process alive (their deadline timers); an idle mesh or
    // store must not keep a rank whose script has ended.
    for (const h of [transport, store, server]) h?.unref();
    return { transport, nodeOf: cards.map((c) => keys.indexOf(c.node)), store, server };
  } catch (e) {
    transport?.close();
    // Tell the ranks still waiting why this one gave up, so they fail now with the cause.
    // The peers raise ABORTED quoting this text: the code goes in words, not as a second suffix.
    const why = WebcclError.is(e) ? `${e.reason} (${e.code})` : e instanceof Error ? e.message : String(e);
    await store.set('abort', `rank ${o.rank}: ${why}`).then(() => store.add('aborted', 1)).catch(() => undefined);
    // Rank 0 serves the store: keep it up while the others poll for the cause (every 250 ms).
    if (server) await new Promise((r) => setTimeout(r, ABORT_GRACE_MS));
    void store.close();
    void server?.close();
    throw e;
  }
}

export interface MeshOptions {
  rank: number;
  size: number;
  jobId: string;
  token: string;
  nchannels: number;
  masterAddr: string;
  ifname?: string;
  tls?: WireTls;
  /** What carries the mesh (WEBCCL_TRANSPORT; default tcp). */
  carrier?: CarrierName;
  timeoutMs: number;
}

/**
 * A new mesh among `size` ranks of a job whose store is up (a communicator shrunk after a
 * failure): each listens, publishes its address under `prefix`, waits for the others' (naming
 * the ranks that do not come within the deadline) and connects.
 */
export async function meshAt(store: StoreClient, o: MeshOptions, prefix: string): Promise<Mesh> {
  const transport = await listenMesh(o.carrier ?? 'tcp', {
    rank: o.rank, size: o.size, jobId: o.jobId, token: o.token, nchannels: o.nchannels, timeoutMs: o.timeoutMs, tls: o.tls,
    host: listenHost(o.masterAddr, o.ifname, store.localAddress),
  });
  try {
    await store.set(`${prefix}/${o.rank}`, JSON.stringify(transport.address));
    const keys = Array.from({ length: o.size }, (_, r) => `${prefix}/${r}`);
    await store.wait(keys, o.timeoutMs).catch((e: unknown) => {
      if (!WebcclError.is(e) || e.code !== 'STORE_TIMEOUT') throw e;
      const missing = ((e.details.keys as string[]) ?? []).map((k) => Number(k.slice(prefix.length + 1)));
      throw new WebcclError('CONNECT_FAILED', `rank ${o.rank}: rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} of ${o.size} did not publish an address within ${o.timeoutMs} ms`, { missing });
    });
    const addresses = await Promise.all(keys.map(async (k) => JSON.parse(text(await store.get(k))) as Address));
    await transport.connect(addresses);
    transport.unref();
    return transport;
  } catch (e) {
    transport.close();
    throw e;
  }
}

/** The first rank to arrive sets the world size; a rank that disagrees fails, and says so. */
async function agreeOnSize(store: StoreClient, o: RendezvousOptions): Promise<void> {
  const mine = String(o.size);
  const agreed = await store.compareSet('world_size', null, mine);
  if (agreed !== null && text(agreed) !== mine) {
    throw new WebcclError('INVALID_ARGUMENT', `rank ${o.rank} was started with world size ${o.size}, but the job's ranks agreed on ${text(agreed)} (check WORLD_SIZE / -n on every node)`, { mine: o.size, agreed: Number(text(agreed)) });
  }
  if (o.rank >= o.size) throw new WebcclError('INVALID_ARGUMENT', `rank ${o.rank} is outside world size ${o.size}`);
}

/**
 * The first rank to arrive sets the carrier (WEBCCL_TRANSPORT); a rank with another fails naming
 * both, and the others fail on its ABORT (quoting it) rather than dialling a port that speaks
 * another protocol until the deadline.
 */
async function agreeOnCarrier(store: StoreClient, o: RendezvousOptions): Promise<void> {
  const mine = o.carrier ?? 'tcp';
  const agreed = await store.compareSet('transport', null, mine);
  if (agreed !== null && text(agreed) !== mine) {
    throw new WebcclError('INVALID_ARGUMENT', `rank ${o.rank} was started with WEBCCL_TRANSPORT=${mine}, but the job's ranks agreed on WEBCCL_TRANSPORT=${text(agreed)} (every rank of a job must use the same transport)`, { mine, agreed: text(agreed) });
  }
}

/** Every rank's card, polling for another rank's failure between waits. */
async function gather(store: StoreClient, o: RendezvousOptions, deadline: number, where: string, wrongToken: () => string | undefined): Promise<Card[]> {
  const keys = Array.from({ length: o.size }, (_, r) => `rank/${r}`);
  for (;;) {
    const remote = wrongToken();
    if (remote !== undefined) {
      const missing = await store.wait(keys, 0).then(() => [], (e) => ((WebcclError.is(e) && (e.details.keys as string[])) || []).map((k) => Number(k.slice(5))));
      if (missing.length) {
        const s = missing.length > 1 ? 's' : '';
        throw new WebcclError('AUTH_FAILED', `rank ${o.rank}: the store at ${where} refused ${remote}, which claimed this job with another token (token mismatch); rank${s} ${missing.join(', ')} of ${o.size} ha${missing.length > 1 ? 've' : 's'} not joined: check WEBCCL_TOKEN on ${missing.length > 1 ? 'them' : 'it'}`, { missing, remote });
      }
    }
    if ((await store.add('aborted', 0)) > 0) {
      throw new WebcclError('ABORTED', `rank ${o.rank}: the job failed during rendezvous (${text(await store.get('abort', { timeoutMs: 1000 }))})`);
    }
    try {
      await store.wait(keys, Math.min(250, Math.max(1, deadline - Date.now())));
      break;
    } catch (e) {
      if (WebcclError.is(e) && e.code === 'CONNECTION_CLOSED') {
        throw new WebcclError('CONNECTION_CLOSED', `rank ${o.rank}: the rendezvous store at ${where} closed while this rank waited for the others (rank 0, which serves it, failed or ended; see its output)`);
      }
      if (!WebcclError.is(e) || e.code !== 'STORE_TIMEOUT') throw e;
      if (Date.now() < deadline) continue;
      const missing = ((e.details.keys as string[]) ?? []).map((k) => Number(k.slice(5))).sort((a, b) => a - b);
      throw new WebcclError('CONNECT_FAILED', `rank ${o.rank}: rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} of ${o.size} did not join within ${Math.round(o.connectTimeoutMs)} ms (store at ${where})`, { missing });
    }
  }
  return Promise.all(keys.map(async (k) => JSON.parse(text(await store.get(k))) as Card));
}
