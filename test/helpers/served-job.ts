// A job whose store `webccl serve` hosts (in this process), and the environments of its ranks:
// Node ranks that listen (WEBCCL_TRANSPORT=ws, WEBCCL_STORE_SERVED=1, the usual MASTER_ADDR/
// MASTER_PORT) and ranks that only dial, as a page's do (the master's ws:// address).
import { join } from 'node:path';
import { type Served, startServe } from '../../src/launch/serve/serve-job.js';
import { cleanEnv, type Env, root } from './procs.js';

export const JOB_TOKEN = 'served-job-token';

export interface ServedJob {
  served: Served;
  jobId: string;
  /** ws://127.0.0.1:P, what a page's ranks give as `master`. */
  master: string;
  /** The environment of a Node rank `rank` of `size` that listens. */
  nodeEnv(rank: number, size: number, extra?: Env): Env;
  close(): Promise<void>;
}

export async function servedJob(
  jobId: string,
  o: { onReject?: (r: { remote: string; kind: string; reason: string }) => void } = {},
): Promise<ServedJob> {
  const served = await startServe({
    dir: root,
    port: 0,
    browserBuild: join(root, 'dist', 'browser', 'index.js'),
    store: { token: JOB_TOKEN, jobId, port: 0, onReject: o.onReject ?? (() => {}) },
  });
  return {
    served,
    jobId,
    master: served.http.url.replace(/^http/, 'ws'),
    nodeEnv: (rank, size, extra = {}) =>
      cleanEnv({
        RANK: String(rank),
        WORLD_SIZE: String(size),
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: String(served.store!.port),
        WEBCCL_TOKEN: JOB_TOKEN,
        WEBCCL_JOB_ID: jobId,
        WEBCCL_TRANSPORT: 'ws',
        WEBCCL_STORE_SERVED: '1',
        WEBCCL_CONNECT_TIMEOUT_MS: '60000',
        ...extra,
      }),
    close: () => served.close(),
  };
}
