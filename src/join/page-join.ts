// Joining a job as a rank that cannot listen (browser-safe): a page's rank, alone or one of its
// workers' node, meets the job at the store `webccl serve` hosts and connects by dialling
// (bootstrap/page-rendezvous.ts); the world communicator is then built as a Node rank's is.

import { Communicator } from '../api/communicator.js';
import type { CommunicatorOptions } from '../api/options.js';
import { connectAt } from '../bootstrap/meet.js';
import type { PageJob } from '../bootstrap/page-job.js';
import { pageRendezvous } from '../bootstrap/page-rendezvous.js';
import { freshBuffer } from '../core/fresh-buffer.js';
import type { NodeHandle } from '../core/node.js';
import { type JoinOptions, joinNodeAs } from '../engine/context.js';
import { newHub } from '../progress/net-hub.js';
import { loadPageNetThread, startPageNetProgress } from '../progress/page-net-thread.js';
import { type PageSocketClass, RELAY_PATH } from '../transport/ws/page-carrier.js';
import { PageTransport } from '../transport/ws/page-transport.js';
import { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_NCHANNELS, netThreadOffer, netWorldCommunicator } from './net-world.js';

export interface PageJoinInput {
  node: NodeHandle;
  /** This rank's place in its node. */
  localRank: number;
  job: PageJob;
  opts: CommunicatorOptions & JoinOptions;
  /** The WebSocket class (default: the runtime's own). */
  WebSocket?: PageSocketClass;
}

const isLoopbackHost = (h: string) => h === 'localhost' || h === '[::1]' || /^127\./.test(h);

export async function joinPageWorld(i: PageJoinInput): Promise<Communicator> {
  const { node, localRank, job, opts } = i;
  const world = { rank: job.firstRank + localRank, size: job.size };
  const ctx = joinNodeAs(node, localRank, { cores: opts.cores, simd: opts.simd, spinUs: opts.spinUs }, world);
  ctx.worldRank = world.rank;
  const local = new Communicator(ctx, { timeoutMs: opts.timeoutMs });
  const connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS;
  // The rank offers a network progress thread once its script has loaded (the job takes it if
  // every rank offers). A page that is not cross-origin isolated has unshared memory, which no worker can share.
  const shared = typeof SharedArrayBuffer === 'function' && freshBuffer(node.memory) instanceof SharedArrayBuffer;
  const offer = shared ? netThreadOffer(opts.progress) : undefined;
  const worker = offer ? await loadPageNetThread() : undefined;
  const progress = worker ? offer : undefined;
  const met = await pageRendezvous({
    job,
    rank: world.rank,
    nodeKey: node.key,
    nchannels: DEFAULT_NCHANNELS,
    connectTimeoutMs,
    WebSocket: i.WebSocket,
    progress,
  }).catch((e: unknown) => {
    worker?.terminate();
    throw e;
  });
  if (worker && !met.progress) worker.terminate(); // some rank offered none: the job runs without threads
  const oneHost = isLoopbackHost(new URL(job.master).hostname);
  const startNetProgress = () =>
    startPageNetProgress(worker!, {
      memory: node.memory,
      job,
      rank: world.rank,
      localRank,
      nchannels: DEFAULT_NCHANNELS,
      connectTimeoutMs,
      oneHost,
      cores: ctx.cores,
      simd: ctx.core.simd,
      hub: newHub(ctx),
    });
  const remesh = (prefix: string, rank: number, size: number) => {
    const t = PageTransport.create({
      rank,
      size,
      jobId: job.jobId,
      token: job.token,
      nchannels: DEFAULT_NCHANNELS,
      timeoutMs: connectTimeoutMs,
      relay: `${job.master}${RELAY_PATH}`,
      WebSocket: i.WebSocket,
      mesh: prefix,
    });
    return connectAt(met.store, t, { rank, size, timeoutMs: connectTimeoutMs }, prefix);
  };
  return netWorldCommunicator({
    ctx,
    local,
    node,
    localRank,
    world,
    met,
    opts,
    remesh,
    oneHost,
    ...(progress && { startNetProgress }),
  });
}
