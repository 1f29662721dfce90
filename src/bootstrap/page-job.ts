// A job that a page's ranks join (browser-safe): where its store is served (`webccl serve`), the
// world's shape, and its secrets, as given to createNode or initCommGroup with `master`.
import { fail } from '../core/errors.js';
import type { PageJob } from '../core/node.js';
import { showValue } from '../core/options.js';
import { checkSecrets } from '../wire/secrets.js';
import type { Met } from './meet.js';
import type { StoreSession } from './store-session.js';

export type { PageJob };

export interface MetWorldOf<T> {
  transport: T;
  nodeOf: number[];
  store: StoreSession;
  /** Whether every rank offered a network progress thread (Met.progress). */
  progress?: Met['progress'];
}

/** The options that name a job by its master, as createNode and initCommGroup take them. */
export interface MasterOptions {
  /** ws://HOST:P of `webccl serve --token T`: join the job whose store it serves. */
  master?: string;
  /** The world size of that job. */
  worldSize?: number;
  /** The job's token (what `--token` / WEBCCL_TOKEN is for the job's other ranks). */
  token?: string;
  /** The job's id (default: HOST:P+1, what `webccl serve` and Node ranks use by default). */
  jobId?: string;
}

/**
 * The job `o.master` names, checked: `firstRank` of `nranks` consecutive world ranks must fit
 * the world. `where` names the call in errors.
 */
export function pageJob(where: string, o: MasterOptions, firstRank: number, nranks: number): PageJob {
  const bad = (option: string, message: string) => fail('INVALID_ARGUMENT', `${where}: ${message}`, { option });
  const master = o.master!;
  let url: URL;
  try {
    url = new URL(master);
  } catch {
    return bad('master', `option master must be ws://HOST:PORT (or wss://), got ${showValue(master)}`);
  }
  if (
    (url.protocol !== 'ws:' && url.protocol !== 'wss:') ||
    (url.pathname !== '/' && url.pathname !== '') ||
    url.search ||
    !url.port
  ) {
    bad(
      'master',
      `option master must be ws://HOST:PORT (or wss://), the address of webccl serve, got ${showValue(master)}`,
    );
  }
  const size = o.worldSize;
  if (!Number.isInteger(size) || size! < 1)
    bad('worldSize', `option worldSize (an integer ≥ 1) is required with master, got ${showValue(size)}`);
  if (!Number.isInteger(firstRank) || firstRank < 0 || firstRank + nranks > size!) {
    bad(
      'rank',
      nranks > 1
        ? `ranks ${firstRank}..${firstRank + nranks - 1} of this node do not fit world size ${size}`
        : `rank ${showValue(firstRank)} is outside world size ${size}`,
    );
  }
  if (typeof o.token !== 'string' || o.token === '')
    bad('token', "option token (the job's token, a non-empty string) is required with master");
  const jobId = o.jobId ?? `${url.hostname}:${Number(url.port) + 1}`;
  checkSecrets(o.token!, jobId);
  return { master: `${url.protocol}//${url.host}`, firstRank, size: size!, token: o.token!, jobId };
}
