// Rendezvous of a rank that cannot listen (browser-safe): a page's rank (or a Node rank told to
// dial only) meets its job at the store `webccl serve` hosts (ws://HOST:P/store), publishes
// DIAL_ONLY as its address, and connects: it dials every rank that listens (Node ranks, over
// WEBCCL_TRANSPORT=ws) and meets the other dial-only ranks through the relay on the same port
// (/webccl-relay). The same steps as a Node rank's (meet.ts), so every error reads the same.
import { WebcclError, within } from '../core/errors.js';
import { type PageSocketClass, RELAY_PATH } from '../transport/ws/page-carrier.js';
import { PageTransport } from '../transport/ws/page-transport.js';
import { agreeOnCarrier, agreeOnSize, meetAndConnect, tellAbort } from './meet.js';
import type { MetWorldOf, PageJob } from './page-job.js';
import { connectStoreWith, type WebSocketClass } from './store-websocket-client.js';

export const STORE_PATH = '/store';

export interface PageRendezvousOptions {
  job: PageJob;
  /** This rank's world rank. */
  rank: number;
  nodeKey: string;
  nchannels: number;
  connectTimeoutMs: number;
  /** The WebSocket class (default: the runtime's own). */
  WebSocket?: PageSocketClass;
  /** This rank offers a network progress thread of its own (RendezvousSteps.progress). */
  progress?: 'auto' | 'thread';
}

export async function pageRendezvous(o: PageRendezvousOptions): Promise<MetWorldOf<PageTransport>> {
  const { job } = o;
  const deadline = Date.now() + o.connectTimeoutMs;
  const Ws = o.WebSocket ?? (globalThis as { WebSocket?: PageSocketClass }).WebSocket;
  const store = await connectStoreWith(Ws as WebSocketClass | undefined, {
    url: job.master + STORE_PATH,
    token: job.token,
    jobId: job.jobId,
    timeoutMs: o.connectTimeoutMs,
  }).catch((e: WebcclError) => {
    throw within(e, `rank ${o.rank} cannot reach the rendezvous store at ${job.master}${STORE_PATH}`);
  });
  let transport: PageTransport | undefined;
  try {
    const steps = {
      rank: o.rank,
      size: job.size,
      nodeKey: o.nodeKey,
      nchannels: o.nchannels,
      connectTimeoutMs: o.connectTimeoutMs,
      carrier: 'ws',
      progress: o.progress,
    };
    await agreeOnSize(store, steps);
    await agreeOnCarrier(store, steps);
    transport = PageTransport.create({
      rank: o.rank,
      size: job.size,
      jobId: job.jobId,
      token: job.token,
      nchannels: o.nchannels,
      timeoutMs: o.connectTimeoutMs,
      relay: job.master + RELAY_PATH,
      WebSocket: Ws,
    });
    const { nodeOf, progress } = await meetAndConnect(store, transport, steps, deadline, job.master);
    // From here the job's ops keep a Node process alive (their deadline timers), not idle connections.
    transport.unref();
    store.unref();
    return { transport, nodeOf, store, progress };
  } catch (e) {
    transport?.close();
    await tellAbort(store, o.rank, e);
    void store.close();
    throw WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e));
  }
}
