// Node: a node's progress thread is a worker_threads Worker running progress-worker.js (bundled
// beside this module) on the node's memory. It is unref'd: it never keeps a process alive.

import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { log } from '../core/log.js';
import type { NodeHandle } from '../core/node.js';
import type { ProgressThread } from '../progress/start.js';
import { stopWithin } from '../progress/thread-stop.js';

declare const __dirname: string | undefined;

/** The worker script: beside the bundle; from the TypeScript sources, in the built dist/. */
function workerPath(): string | null {
  const here = typeof __dirname === 'string' ? __dirname : dirname(fileURLToPath(import.meta.url));
  for (const p of [join(here, 'progress-worker.js'), join(here, '../../dist/node/progress-worker.js')])
    if (existsSync(p)) return p;
  return null;
}

export function startNodeProgress(
  node: NodeHandle,
  ended: (why: string) => void,
  env?: Record<string, string | undefined>,
): ProgressThread {
  const path = workerPath();
  if (!path) {
    ended('the progress thread script progress-worker.js is missing (run npm run build)');
    return { stop: async () => undefined };
  }
  const w = new Worker(path, {
    workerData: { memory: node.memory, cores: availableParallelism() },
    env: env ?? process.env,
  });
  w.unref();
  let failure = '';
  w.on('error', (e) => {
    failure = e instanceof Error ? e.message : String(e);
    log('WARN', `the node's progress thread failed: ${failure}`);
  });
  const exited = new Promise<void>((done) =>
    w.on('exit', (code) => {
      ended(failure || (code === 0 ? '' : `it exited with code ${code}`));
      done();
    }),
  );
  return {
    /** Waits for the thread to end after it was asked to; ends it by force after STOP_GRACE_MS. */
    async stop() {
      await stopWithin(exited, () => w.terminate());
      await exited;
    },
  };
}
