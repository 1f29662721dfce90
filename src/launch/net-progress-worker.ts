// The entry of a node's network progress thread (a worker_threads Worker; see
// net-progress-thread.ts): it joins the job's store, makes its own connections to every peer's
// progress thread (sockets cannot move between threads, so the rank's own cannot be lent), says
// it is ready, then runs the rank's collectives across nodes until the rank has left.

import { writeSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { NET_PROGRESS_MESH } from '../bootstrap/meet.js';
import { meshAt } from '../bootstrap/nodejs/rendezvous.js';
import { StoreClient } from '../bootstrap/nodejs/store-client.js';
import { WebcclError } from '../core/errors.js';
import { setLogThread, setLogWriter } from '../core/log.js';
import { installTraceSink } from '../core/nodejs/trace-files.js';
import { NetProgressHost } from '../hosts/net-host.js';
import { agreeOnTuning } from '../join/net-world.js';
import { hubEnded } from '../progress/net-hub.js';
import { TransportSpaces } from '../transport/spaces.js';
import { resolveWireTls } from '../wire/nodejs/secure-socket.js';
import { checkSecrets } from '../wire/secrets.js';
import type { NetProgressInit } from './net-progress-thread.js';

const d = workerData as NetProgressInit;

setLogThread(`rank ${d.world.rank}'s network progress thread`);
// Its lines (an op's TRACE line, a failure) come as the rank's op ends, and the rank's process
// may end right then: written straight to stderr, not through the main thread's event loop.
setLogWriter((line) => writeSync(2, `${line}\n`));
installTraceSink();

async function main(): Promise<void> {
  const { world } = d;
  const tls = resolveWireTls(d.tls, checkSecrets(world.token, world.jobId), world.jobId);
  const store = await StoreClient.connect({
    host: world.masterAddr,
    port: world.masterPort,
    token: world.token,
    jobId: world.jobId,
    timeoutMs: d.connectTimeoutMs,
    tls,
  });
  // The tuner's model is the job's (agreed by the ranks before this thread started): the same here.
  await agreeOnTuning(store, world.rank);
  const mesh = await meshAt(
    store,
    {
      rank: world.rank,
      size: world.size,
      jobId: world.jobId,
      token: world.token,
      nchannels: d.nchannels,
      masterAddr: world.masterAddr,
      ifname: d.ifname,
      tls,
      carrier: d.carrier,
      timeoutMs: d.connectTimeoutMs,
    },
    NET_PROGRESS_MESH,
  );
  store.unref();
  parentPort!.postMessage({ ready: true });
  // Atomics.waitAsync does not keep a thread's event loop alive: this does, until the loop ends.
  const alive = setInterval(() => undefined, 1 << 30);
  try {
    await new NetProgressHost({
      memory: d.memory,
      hub: d.hub,
      rank: world.rank,
      localRank: d.localRank,
      spaces: new TransportSpaces(mesh),
      store,
      oneHost: d.oneHost,
      cores: d.cores,
      simd: d.simd,
    }).run();
  } finally {
    clearInterval(alive);
    mesh.close();
    void store.close();
  }
  hubEnded(d.memory, d.hub, ''); // (a rank's process waits for this at its exit)
}

main().catch((e: unknown) => {
  const err = WebcclError.is(e) ? e : new WebcclError('INTERNAL', e instanceof Error ? e.message : String(e));
  hubEnded(d.memory, d.hub, `${err.reason} (${err.code})`);
  parentPort!.postMessage({ error: { code: err.code, message: err.reason, details: err.details } });
});
