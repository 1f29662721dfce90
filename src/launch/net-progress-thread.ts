// Node: starting a rank's network progress thread (net-progress-worker.js, bundled beside this
// module). Unlike the shared-memory progress thread it is started by the rank, after the
// rendezvous: it needs the job's store and every peer's, and it ends with the rank. Each rank of
// a node has its own (a thread's sockets are its own; the node phase of a hierarchical op meets
// the node mates' threads over shared memory). It is unref'd: it never keeps a process alive.

import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CarrierName } from '../bootstrap/nodejs/mesh-carrier.js';
import type { WorldInit } from '../bootstrap/world.js';
import type { TlsFiles } from '../core/config.js';
import { WebcclError } from '../core/errors.js';
import { freshI32 } from '../core/fresh-buffer.js';
import { log } from '../core/log.js';
import { TRACING } from '../core/trace.js';
import type { NetProgress } from '../progress/net-hub.js';
import { askHubToStop, hubEnded, hubState, hubStateAt, moveHub, netThreadExited } from '../progress/net-hub.js';
import { PROGRESS_NONE, PROGRESS_RUNNING, PROGRESS_STOPPING } from '../progress/postboxes.js';
import { stopWithin } from '../progress/thread-stop.js';

declare const __dirname: string | undefined;

/** What the thread needs to join the job (plain data: it crosses to the worker). */
export interface NetProgressInit {
  memory: WebAssembly.Memory;
  world: Omit<WorldInit, 'storeFd' | 'storeServed'>;
  tls?: boolean | TlsFiles;
  /** What carries the job's mesh: the rank's (WEBCCL_TRANSPORT, or ws for a job whose store webccl serve hosts). */
  carrier: CarrierName;
  nchannels: number;
  ifname?: string;
  connectTimeoutMs: number;
  oneHost: boolean;
  cores: number;
  simd: boolean;
  /** The thread's state block (net-hub.ts), allocated by its rank. */
  hub: number;
  /** The rank's place on its node (its LEFT word says when it has left). */
  localRank: number;
}

/** How long a process's exit waits for the thread to write its trace. */
const EXIT_FLUSH_MS = 2000;

function workerPath(): string | null {
  const here = typeof __dirname === 'string' ? __dirname : dirname(fileURLToPath(import.meta.url));
  for (const p of [join(here, 'net-progress-worker.js'), join(here, '../../dist/node/net-progress-worker.js')])
    if (existsSync(p)) return p;
  return null;
}

/** The threads of each node memory, by world rank (tests end one to see its rank's ops fail). */
const threads = new WeakMap<WebAssembly.Memory, Map<number, Worker>>();
/** @internal The network progress thread of world rank `rank` (default: the first) running on `memory`, if any. */
export const netProgressWorker = (memory: WebAssembly.Memory, rank?: number): Worker | undefined => {
  const ranks = threads.get(memory);
  return rank === undefined ? ranks?.values().next().value : ranks?.get(rank);
};

/** Whether this installation can start one (the worker script is there). */
export const canStartNetProgress = (): boolean => workerPath() !== null;

/** Starts the thread and waits until its connections to every peer's thread are made. */
export function startNetProgress(init: NetProgressInit): Promise<NetProgress> {
  const path = workerPath();
  if (!path)
    return Promise.reject(
      new WebcclError(
        'INTERNAL',
        'the network progress thread script net-progress-worker.js is missing (run npm run build)',
      ),
    );
  const { memory, hub } = init;
  const w = new Worker(path, { workerData: init });
  w.unref();
  const mine = threads.get(memory) ?? threads.set(memory, new Map()).get(memory)!;
  mine.set(init.world.rank, w);
  let failure = '';
  const exited = new Promise<void>((done) =>
    w.on('exit', (code) => {
      hubEnded(memory, hub, failure || (code === 0 ? '' : `it exited with code ${code}`));
      netThreadExited(memory, hub, code !== 0 || failure !== '');
      done();
    }),
  );
  // WEBCCL_TRACE: the thread writes its part of the timeline when its loop ends, and a process
  // ends its threads without their exit handlers: at the process's exit, ask it to end and wait
  // (briefly) until it has.
  if (TRACING) {
    process.on('exit', () => {
      if (!askHubToStop(memory, hub)) return;
      const words = freshI32(memory);
      const until = performance.now() + EXIT_FLUSH_MS;
      while (hubState(memory, hub) === PROGRESS_STOPPING && performance.now() < until)
        Atomics.wait(words, hubStateAt(hub), PROGRESS_STOPPING, 50);
    });
  }
  const thread: NetProgress = {
    hub,
    async stop() {
      askHubToStop(memory, hub);
      await stopWithin(exited, () => w.terminate());
    },
  };
  return new Promise<NetProgress>((resolve, reject) => {
    w.on('error', (e) => {
      failure = e instanceof Error ? e.message : String(e);
      // Its ranks' ops fail with the message; where it broke is for whoever reads the log.
      log(
        'WARN',
        `world rank ${init.world.rank}'s network progress thread crashed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`,
      );
      reject(new WebcclError('INTERNAL', `the network progress thread failed: ${failure}`));
    });
    w.on(
      'message',
      (m: { ready?: boolean; error?: { code: string; message: string; details: Record<string, unknown> } }) => {
        // A 'message' listener keeps the process alive, whatever unref() said: one answer is all it waits for.
        w.removeAllListeners('message');
        w.unref();
        if (m.ready) {
          moveHub(memory, hub, PROGRESS_NONE, PROGRESS_RUNNING);
          resolve(thread);
        } else if (m.error) {
          failure = m.error.message;
          reject(
            new WebcclError(
              m.error.code as never,
              `the network progress thread could not join the job: ${m.error.message}`,
              m.error.details,
            ),
          );
        }
      },
    );
    void exited.then(() =>
      reject(
        new WebcclError(
          'INTERNAL',
          `the network progress thread ended before it was ready${failure ? `: ${failure}` : ''}`,
        ),
      ),
    );
  });
}
