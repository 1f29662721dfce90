// A page: a rank's network progress thread is a module Web Worker running net-progress-worker.js,
// the script the browser build ships beside its index.js. The rank loads it before the
// rendezvous (loadPageNetThread) and offers it only once it has loaded, so that the job's choice,
// made from every rank's offer, never rests on a script that turns out to be missing; after the
// rendezvous, startPageNetProgress hands it the job and it connects to every peer's thread (its
// WebSockets are its own, as a Node thread's sockets are). It runs on the rank's memory, started
// by the rank (a Worker inside the rank's worker), and ends with it.

import type { PageJob } from '../bootstrap/page-job.js';
import { WebcclError } from '../core/errors.js';
import { log } from '../core/log.js';
import type { NetProgress } from './net-hub.js';
import { askHubToStop, hubEnded, moveHub, netThreadExited } from './net-hub.js';
import { PROGRESS_NONE, PROGRESS_RUNNING } from './postboxes.js';
import { FORCED_STOP, stopWithin, workerErrorText } from './thread-stop.js';

/** How long a rank waits for the script to load before it goes on without a thread. */
const LOAD_WAIT_MS = 30_000;

/** What the thread needs to join the job (plain data: it crosses to the worker). */
export interface PageNetInit {
  memory: WebAssembly.Memory;
  job: PageJob;
  rank: number;
  localRank: number;
  nchannels: number;
  connectTimeoutMs: number;
  oneHost: boolean;
  cores: number;
  simd: boolean;
  hub: number;
}

/**
 * What the worker says: loaded (its module ran), ready (connected), ended (why: empty if by itself), or could not join.
 */
export type PageNetMessage =
  | { loaded: true }
  | { ready: true }
  | { ended: string }
  | { error: { code: string; message: string; details: Record<string, unknown> } };

/** The thread's worker with its script loaded, or undefined (no Worker here, or the script did not load: logged). */
export function loadPageNetThread(): Promise<Worker | undefined> {
  if (typeof Worker !== 'function') return Promise.resolve(undefined);
  const url = new URL('./net-progress-worker.js', import.meta.url);
  return new Promise((resolve) => {
    // Written out in full, not as `new Worker(url)`: bundlers (Vite, webpack) recognise this form and bundle the
    // worker.
    const w = new Worker(new URL('./net-progress-worker.js', import.meta.url), {
      type: 'module',
      name: 'webccl network progress thread',
    });
    const give = (got: Worker | undefined, why = '') => {
      clearTimeout(timer);
      w.onmessage = w.onerror = null;
      if (!got) {
        w.terminate();
        log(
          'WARN',
          `the network progress thread did not start (${why}): this rank offers none, and the job runs its collectives on the ranks`,
        );
      }
      resolve(got);
    };
    const timer = setTimeout(
      () => give(undefined, `its script ${url.href} did not load within ${LOAD_WAIT_MS / 1000} s`),
      LOAD_WAIT_MS,
    );
    w.onmessage = ({ data }: MessageEvent<PageNetMessage>) =>
      give('loaded' in data ? w : undefined, 'its script said something else first');
    w.onerror = (e: Event) => give(undefined, workerErrorText(e) || `its script ${url.href} could not be loaded`);
  });
}

/** Hands the loaded thread the job and waits until its connections to every peer's thread are made. */
export function startPageNetProgress(w: Worker, init: PageNetInit): Promise<NetProgress> {
  const { memory, hub } = init;
  let done: () => void = () => undefined;
  const exited = new Promise<void>((res) => (done = res));
  let ended = false;
  const end = (why: string, lost: boolean) => {
    if (ended) return;
    ended = true;
    w.terminate();
    hubEnded(memory, hub, why);
    netThreadExited(memory, hub, lost);
    done();
  };
  const thread: NetProgress = {
    hub,
    async stop() {
      askHubToStop(memory, hub);
      await stopWithin(exited, () => end(FORCED_STOP, true));
    },
  };
  return new Promise<NetProgress>((resolve, reject) => {
    w.onerror = (e: Event) => {
      const why = `it failed: ${workerErrorText(e) || 'an error in its worker'}`;
      reject(new WebcclError('INTERNAL', `the network progress thread ${why}`));
      end(why, true);
    };
    w.onmessage = ({ data }: MessageEvent<PageNetMessage>) => {
      if ('ready' in data) {
        moveHub(memory, hub, PROGRESS_NONE, PROGRESS_RUNNING);
        resolve(thread);
      } else if ('error' in data) {
        reject(
          new WebcclError(
            data.error.code as never,
            `the network progress thread could not join the job: ${data.error.message}`,
            data.error.details,
          ),
        );
        end(data.error.message, true);
      } else if ('ended' in data) {
        reject(
          new WebcclError(
            'INTERNAL',
            `the network progress thread ended before it was ready${data.ended ? `: ${data.ended}` : ''}`,
          ),
        );
        end(data.ended, data.ended !== '');
      }
    };
    w.postMessage(init);
  });
}
