// A page: a node's progress thread is a module Web Worker running progress-worker.js, the
// script the browser build ships beside its index.js (found from import.meta.url, the form
// bundlers recognise as a worker entry). The script loads after createNode returns, so the node
// says STARTING until the thread runs; a script that cannot be loaded (a bundler that moved
// webccl's files without it) leaves the node without a thread, with a warning, and its ranks run
// their ops themselves.

import { log } from '../core/log.js';
import type { NodeHandle } from '../core/node.js';
import { type ProgressThread, progressNotStarted } from './start.js';
import { FORCED_STOP, stopWithin, workerErrorText } from './thread-stop.js';

/** What the worker posts back: that it has ended (`why` empty when it ended by itself). */
export interface PageThreadEnded {
  ended: string;
}

export function startPageProgress(node: NodeHandle, ended: (why: string) => void): ProgressThread {
  const url = new URL('./progress-worker.js', import.meta.url);
  let w: Worker;
  try {
    // Written out in full, not as `new Worker(url)`: bundlers (Vite, webpack) recognise this form and bundle the
    // worker.
    w = new Worker(new URL('./progress-worker.js', import.meta.url), {
      type: 'module',
      name: 'webccl progress thread',
    });
  } catch (e) {
    progressNotStarted(node.memory, `${url.href}: ${e instanceof Error ? e.message : String(e)}`);
    return { stop: async () => undefined };
  }
  let done: () => void = () => undefined;
  const exited = new Promise<void>((res) => (done = res));
  const end = (why: string) => {
    ended(why);
    w.terminate();
    done();
  };
  w.onmessage = ({ data }: MessageEvent<PageThreadEnded>) => end(data.ended);
  w.onerror = (e: Event) => {
    const message = workerErrorText(e); // reported here, as the node's: not also as the page's uncaught error
    const why = message ? `it failed: ${message}` : `its script ${url.href} could not be loaded`;
    // Never ran: no rank handed it anything, so the node goes on without it. Else its ops fail.
    if (progressNotStarted(node.memory, why)) {
      w.terminate();
      return done();
    }
    log('WARN', `the node's progress thread failed: ${why}`);
    end(why);
  };
  w.postMessage({ memory: node.memory, cores: navigator.hardwareConcurrency || 1 });
  return {
    stop: () => stopWithin(exited, () => end(FORCED_STOP)),
  };
}
