// The entry of a page rank's network progress thread (a module Web Worker; see
// page-net-thread.ts): says it has loaded; given the job, joins its store, makes its own
// connections to every peer's progress thread (dialling, as its rank does: Node ranks' threads
// directly, other pages' through the relay), says it is ready, then runs the rank's collectives
// across nodes until the rank has left.

import { connectAt, NET_PROGRESS_MESH } from '../bootstrap/meet.js';
import { STORE_PATH } from '../bootstrap/page-rendezvous.js';
import { connectStoreWith, type WebSocketClass } from '../bootstrap/store-websocket-client.js';
import { WebcclError } from '../core/errors.js';
import { setLogThread } from '../core/log.js';
import { agreeOnTuning } from '../join/net-world.js';
import { hubEnded } from '../progress/net-hub.js';
import type { PageNetInit, PageNetMessage } from '../progress/page-net-thread.js';
import { TransportSpaces } from '../transport/spaces.js';
import { RELAY_PATH } from '../transport/ws/page-carrier.js';
import { PageTransport } from '../transport/ws/page-transport.js';
import { NetProgressHost } from './net-host.js';

const say = (m: PageNetMessage) => postMessage(m);

async function run(d: PageNetInit): Promise<void> {
  setLogThread(`rank ${d.rank}'s network progress thread`);
  const { job } = d;
  const store = await connectStoreWith((globalThis as { WebSocket?: WebSocketClass }).WebSocket, {
    url: job.master + STORE_PATH,
    token: job.token,
    jobId: job.jobId,
    timeoutMs: d.connectTimeoutMs,
  });
  // The tuner's model is the job's (agreed by the ranks before this thread started): the same here.
  await agreeOnTuning(store, d.rank);
  const transport = PageTransport.create({
    rank: d.rank,
    size: job.size,
    jobId: job.jobId,
    token: job.token,
    nchannels: d.nchannels,
    timeoutMs: d.connectTimeoutMs,
    relay: job.master + RELAY_PATH,
    mesh: NET_PROGRESS_MESH,
  });
  const mesh = await connectAt(
    store,
    transport,
    { rank: d.rank, size: job.size, timeoutMs: d.connectTimeoutMs },
    NET_PROGRESS_MESH,
  );
  say({ ready: true });
  try {
    await new NetProgressHost({
      memory: d.memory,
      hub: d.hub,
      rank: d.rank,
      localRank: d.localRank,
      spaces: new TransportSpaces(mesh),
      store,
      oneHost: d.oneHost,
      cores: d.cores,
      simd: d.simd,
    }).run();
  } finally {
    mesh.close();
    void store.close();
  }
}

onmessage = ({ data }: MessageEvent<PageNetInit>) => {
  run(data).then(
    () => {
      hubEnded(data.memory, data.hub, '');
      say({ ended: '' });
    },
    (e: unknown) => {
      const err = WebcclError.is(e) ? e : new WebcclError('INTERNAL', e instanceof Error ? e.message : String(e));
      hubEnded(data.memory, data.hub, `${err.reason} (${err.code})`);
      say({ error: { code: err.code, message: err.reason, details: err.details } });
    },
  );
};
say({ loaded: true });
