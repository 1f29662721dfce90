// Jobs of test/net/fixtures/net-faults.mjs under the launchers: every rank prints "pid rank R PID",
// and one whose op fails prints "fault rank R {code, details, message}". Reads those lines back
// per rank, and checks that no process a job's ranks reported is left once the job has ended.
import { expect } from 'vitest';
import { type Env, leftOf, pidsIn, type Run } from './jobs.js';
import { launchFixture } from './launch-fixture.js';
import { type Form, launchForm } from './launch-forms.js';

export interface Fault {
  code: string;
  details: Record<string, any>;
  message: string;
}

/** Each rank's fault line in `stdout`. */
export function faultsIn(stdout: string): Map<number, Fault> {
  return new Map(
    [...stdout.matchAll(/^fault rank (\d+) (.*)$/gm)].map((m) => [Number(m[1]), JSON.parse(m[2]) as Fault]),
  );
}

/** No process a rank reported is left running (the launcher ends its ranks). */
export async function expectNoneLeft(...runs: Run[]): Promise<void> {
  const pids = runs.flatMap((r) => pidsIn(r.stdout));
  expect(pids.length).toBeGreaterThan(0);
  expect(await leftOf(pids)).toEqual([]);
}

export type FaultJob = (
  form: Form,
  n: number,
  args: string[],
  env?: Env,
  onLine?: (line: string) => void,
) => Promise<Run[]>;

/**
 * For a file that launches the fault script (call it at the file's top level): runs it on `n`
 * ranks in `form` (nnodes: two launchers of n/2 threads), with 20 s deadlines unless `env` says
 * otherwise; a job that has not ended after 50 s is killed and reported as hung.
 */
export function faultJobs(tmpPrefix: string): FaultJob {
  const f = launchFixture(new URL('../net/fixtures/net-faults.mjs', import.meta.url), tmpPrefix);
  return (form, n, args, env = {}, onLine) =>
    launchForm(f, form, n, args, { WEBCCL_TIMEOUT_MS: '20000', ...env }, { guardMs: 50_000, onLine });
}
