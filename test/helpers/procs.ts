// Jobs of real processes for the tests, with the repository as their working directory and a
// HOME of their own: spawn a command in its own process group with a clean environment, collect
// its output (and hand each stdout line to a callback as it comes), kill the group if it
// outlives a guard, and tell whether any given pid is still alive (see jobs.ts).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { cleanEnv as cleanJobEnv, type Env, killAllJobs, type Run, startJob } from './jobs.js';
import { freePort } from './net.js';

export { alive, type Env, pidsIn, type Run } from './jobs.js';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const bin = join(root, 'bin', 'webccl.js');
/** A rank script: beside the tests of `folder` (test/<folder>/fixtures/), or shared by the tests of
 *  several folders (test/fixtures/). */
export const fixture = (name: string, folder?: string) =>
  join(root, 'test', ...(folder ? [folder] : []), 'fixtures', name);

const home = mkdtempSync(join(tmpdir(), 'webccl-procs-'));

/** This environment without any launcher's or webccl's variables, HOME in a temp dir, plus `extra`. */
export const cleanEnv = (extra: Env = {}): Env => cleanJobEnv({ HOME: home, ...extra });

/** Kills every job still running (call from afterAll). */
export const killAll = killAllJobs;

export function run(
  cmd: string,
  args: string[],
  env: Env,
  o: { guardMs?: number; onLine?: (line: string) => void } = {},
): Promise<Run> {
  return startJob(cmd, args, env, { cwd: root, ...o }).done;
}

/**
 * Ranks 0..n-1 of test/fixtures/net-fail.mjs `join` (join the world, run one allReduce), each
 * started by hand as torchrun starts them, meeting on a free port, with a 60 s connect deadline,
 * token 'token-a' and job id `jobId`; rank k's environment has `each(k)` added.
 */
export async function joinByHand(n: number, each: (k: number) => Env, jobId = 'job-a'): Promise<Run[]> {
  const common = {
    WORLD_SIZE: String(n),
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(await freePort()),
    WEBCCL_CONNECT_TIMEOUT_MS: '60000',
    WEBCCL_JOB_ID: jobId,
    WEBCCL_TOKEN: 'token-a',
  };
  return Promise.all(
    Array.from({ length: n }, (_, k) =>
      run(process.execPath, [fixture('net-fail.mjs'), 'join'], cleanEnv({ ...common, RANK: String(k), ...each(k) })),
    ),
  );
}

/** Every rank exited with code 1 on its own, well before joinByHand's 60 s connect deadline. */
export function expectFailedEarly(rs: Run[]): void {
  rs.forEach((r, k) =>
    expect({ rank: k, code: r.code, hung: r.hung, early: r.ms < 30_000 }, r.stderr).toEqual({
      rank: k,
      code: 1,
      hung: false,
      early: true,
    }),
  );
}
