// The steps of a rendezvous every rank runs, whatever carries its store and its mesh
// (browser-safe, no node:): agree on the world size and the carrier, publish this rank's card
// (where its mesh listens, DIAL_ONLY for a page, and which node memory it shares), gather every
// card (naming the ranks that have not come when the deadline passes, and failing at once when
// another rank gave up), connect the mesh; on failure, tell the others why through the store.
// Node ranks run them from bootstrap/nodejs/rendezvous.ts, pages from page-rendezvous.ts.
import { WebcclError } from '../core/errors.js';
import { log } from '../core/log.js';
import type { Address } from '../transport/mesh/carrier.js';
import type { Mesh } from '../transport/mesh/mesh.js';
import { hostPort } from '../wire/secrets.js';
import type { StoreSession } from './store-session.js';

/** What every rank of a job says of itself at the rendezvous. */
export interface RendezvousSteps {
  rank: number;
  size: number;
  /** Equal for ranks that share memory (NodeHandle.key). */
  nodeKey: string;
  nchannels: number;
  /** Deadline for every rank to arrive and the mesh to form. */
  connectTimeoutMs: number;
  /** What carries the mesh: 'tcp' or 'ws' (every rank must agree). */
  carrier: string;
  /**
   * This rank offers to run its ops on a network progress thread of its own (taken when every
   * rank offers), in its progress mode: 'thread' for every collective, 'auto' to let the job
   * keep small ones on the ranks.
   */
  progress?: 'auto' | 'thread';
}

export interface Card {
  host: string;
  port: number;
  node: string;
  progress?: 'auto' | 'thread';
}

/**
 * What the meeting tells every rank: the node of each rank, and whether every rank offered a
 * progress thread ('thread': all for every op; 'auto': all, some leaving small ops to the ranks).
 */
export interface Met {
  nodeOf: number[];
  progress: false | 'auto' | 'thread';
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** Store key under which the ranks' network progress threads meet for a mesh of their own. */
export const NET_PROGRESS_MESH = 'netprogress';

/** Where a store served apart from the ranks (webccl serve) records a peer it refused for the token. */
export const WRONG_TOKEN_KEY = 'refused/token';

/** The address the store recorded under WRONG_TOKEN_KEY, if any. */
async function refusedByStore(store: StoreSession): Promise<string | undefined> {
  const there = await store.wait([WRONG_TOKEN_KEY], 0).then(
    () => true,
    () => false,
  );
  return there ? text(await store.get(WRONG_TOKEN_KEY, { timeoutMs: 1000 })) : undefined;
}

/**
 * Publishes this rank's card, waits for everyone's, connects `transport` to every rank; returns
 * the node index of every world rank (ranks with the same index share memory).
 */
export async function meetAndConnect(
  store: StoreSession,
  transport: Mesh,
  o: RendezvousSteps,
  deadline: number,
  where: string,
  wrongToken: () => string | undefined = () => undefined,
  notes = '',
): Promise<Met> {
  const card: Card = {
    host: transport.address.host,
    port: transport.address.port,
    node: o.nodeKey,
    ...(o.progress && { progress: o.progress }),
  };
  await store.set(`rank/${o.rank}`, JSON.stringify(card));
  const cards = await gather(store, o, deadline, where, wrongToken);
  const keys = [...new Set(cards.map((c) => c.node))];
  const addresses: Address[] = cards.map((c) => ({ host: c.host, port: c.port }));
  const at = card.port ? `listening on ${hostPort(card.host, card.port)}` : 'dialling only';
  log(
    'INFO',
    `rank ${o.rank}/${o.size}: ${keys.length} node(s), mesh of ${o.nchannels} channel(s) per peer over ${transport.carrierName}, ${at}${notes}`,
  );
  await transport.connect(addresses);
  const offers = cards.map((c) => c.progress);
  const progress = offers.every((p) => p === 'thread')
    ? 'thread'
    : offers.every((p) => p === 'thread' || p === 'auto')
      ? 'auto'
      : false;
  return { nodeOf: cards.map((c) => keys.indexOf(c.node)), progress };
}

/**
 * A new mesh among `size` ranks of a job whose store is up (a communicator shrunk after a
 * failure), `transport` made for it: publish its address under `prefix`, wait for the others'
 * (naming the ranks that do not come within the deadline), connect.
 */
export async function connectAt<T extends Mesh>(
  store: StoreSession,
  transport: T,
  o: { rank: number; size: number; timeoutMs: number },
  prefix: string,
): Promise<T> {
  try {
    await store.set(`${prefix}/${o.rank}`, JSON.stringify(transport.address));
    const keys = Array.from({ length: o.size }, (_, r) => `${prefix}/${r}`);
    await store.wait(keys, o.timeoutMs).catch((e: unknown) => {
      if (!WebcclError.is(e) || e.code !== 'STORE_TIMEOUT') throw e;
      const missing = ((e.details.keys as string[]) ?? []).map((k) => Number(k.slice(prefix.length + 1)));
      throw new WebcclError(
        'CONNECT_FAILED',
        `rank ${o.rank}: rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} of ${o.size} did not publish an address within ${o.timeoutMs} ms`,
        { missing },
      );
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

/** Tells the ranks still waiting at the rendezvous why this one gave up, so they fail now with the cause. */
export async function tellAbort(store: StoreSession, rank: number, e: unknown): Promise<void> {
  // The peers raise ABORTED quoting this text: the code goes in words, not as a second suffix.
  const why = WebcclError.is(e) ? `${e.reason} (${e.code})` : e instanceof Error ? e.message : String(e);
  await store
    .set('abort', `rank ${rank}: ${why}`)
    .then(() => store.add('aborted', 1))
    .catch(() => undefined);
}

/** The first rank to arrive sets the world size; a rank that disagrees fails, and says so. */
export async function agreeOnSize(store: StoreSession, o: RendezvousSteps): Promise<void> {
  const mine = String(o.size);
  const agreed = await store.compareSet('world_size', null, mine);
  if (agreed !== null && text(agreed) !== mine) {
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `rank ${o.rank} was started with world size ${o.size}, but the job's ranks agreed on ${text(agreed)} (check WORLD_SIZE / -n on every node)`,
      { mine: o.size, agreed: Number(text(agreed)) },
    );
  }
  if (o.rank >= o.size) throw new WebcclError('INVALID_ARGUMENT', `rank ${o.rank} is outside world size ${o.size}`);
}

/**
 * The first rank to arrive sets the carrier (WEBCCL_TRANSPORT); a rank with another fails naming
 * both, and the others fail on its ABORT (quoting it) rather than dialling a port that speaks
 * another protocol until the deadline.
 */
export async function agreeOnCarrier(store: StoreSession, o: RendezvousSteps): Promise<void> {
  const mine = o.carrier;
  const agreed = await store.compareSet('transport', null, mine);
  if (agreed !== null && text(agreed) !== mine) {
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `rank ${o.rank} was started with WEBCCL_TRANSPORT=${mine}, but the job's ranks agreed on WEBCCL_TRANSPORT=${text(agreed)} (every rank of a job must use the same transport)`,
      { mine, agreed: text(agreed) },
    );
  }
}

/** Every rank's card, polling for another rank's failure between waits. */
async function gather(
  store: StoreSession,
  o: RendezvousSteps,
  deadline: number,
  where: string,
  wrongToken: () => string | undefined,
): Promise<Card[]> {
  const keys = Array.from({ length: o.size }, (_, r) => `rank/${r}`);
  for (;;) {
    const remote = wrongToken() ?? (await refusedByStore(store));
    if (remote !== undefined) {
      const missing = await store.wait(keys, 0).then(
        () => [],
        (e) => ((WebcclError.is(e) && (e.details.keys as string[])) || []).map((k) => Number(k.slice(5))),
      );
      if (missing.length) {
        const s = missing.length > 1 ? 's' : '';
        throw new WebcclError(
          'AUTH_FAILED',
          `rank ${o.rank}: the store at ${where} refused ${remote}, which claimed this job with another token (token mismatch); rank${s} ${missing.join(', ')} of ${o.size} ha${missing.length > 1 ? 've' : 's'} not joined: check WEBCCL_TOKEN on ${missing.length > 1 ? 'them' : 'it'}`,
          { missing, remote },
        );
      }
    }
    if ((await store.add('aborted', 0)) > 0) {
      throw new WebcclError(
        'ABORTED',
        `rank ${o.rank}: the job failed during rendezvous (${text(await store.get('abort', { timeoutMs: 1000 }))})`,
      );
    }
    try {
      await store.wait(keys, Math.min(250, Math.max(1, deadline - Date.now())));
      break;
    } catch (e) {
      if (WebcclError.is(e) && e.code === 'CONNECTION_CLOSED') {
        throw new WebcclError(
          'CONNECTION_CLOSED',
          `rank ${o.rank}: the rendezvous store at ${where} closed while this rank waited for the others (rank 0, which serves it, failed or ended; see its output)`,
        );
      }
      if (!WebcclError.is(e) || e.code !== 'STORE_TIMEOUT') throw e;
      if (Date.now() < deadline) continue;
      const missing = ((e.details.keys as string[]) ?? []).map((k) => Number(k.slice(5))).sort((a, b) => a - b);
      throw new WebcclError(
        'CONNECT_FAILED',
        `rank ${o.rank}: rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} of ${o.size} did not join within ${Math.round(o.connectTimeoutMs)} ms (store at ${where})`,
        { missing },
      );
    }
  }
  return Promise.all(keys.map(async (k) => JSON.parse(text(await store.get(k))) as Card));
}
