// Starting one rank script under each launch form with the built CLI: thread ranks
// (`webccl run -n N`), processes (`--procs`) and two nodes of N/2 threads each (two
// `webccl run --nnodes 2` launchers on this machine, meeting on a free port).
import { join } from 'node:path';
import { expect } from 'vitest';
import { cleanEnv, type Env, type Run, startJob } from './jobs.js';
import type { LaunchFixture } from './launch-fixture.js';
import { freePort } from './net.js';

export type Form = 'threads' | 'procs' | 'nnodes';

/** The launcher's flags that name `form` (nnodes: one launcher's, with its node rank, the
 *  master at `addr`). */
export function formFlags(form: Form, n: number, port?: string, nodeRank?: number, addr = '127.0.0.1'): string[] {
  if (form === 'nnodes') {
    return [
      '--nnodes',
      '2',
      '--node-rank',
      String(nodeRank),
      '--nproc-per-node',
      String(n / 2),
      '--master-addr',
      addr,
      '--master-port',
      port!,
    ];
  }
  return [...(form === 'procs' ? ['--procs'] : []), '-n', String(n)];
}

export interface LaunchOptions {
  /** The launcher's own flags, before the form's. */
  flags?: string[];
  /** Kills a job that does not end (a hang guard, not a timing assertion). */
  guardMs?: number;
  /** Another rank script than the fixture's. */
  script?: string;
  /** Called with each line of every launcher's standard output as it comes. */
  onLine?: (line: string) => void;
}

/**
 * Runs `f`'s script on `n` ranks in `form` with `args`, in an environment with none of the
 * shell's launcher or webccl variables (HOME in the fixture's scratch directory, a job token)
 * plus `extra`; resolves to every launcher's run.
 */
export async function launchForm(
  f: LaunchFixture,
  form: Form,
  n: number,
  args: string[],
  extra: Env = {},
  { flags = [], guardMs = 240_000, script = f.script, onLine }: LaunchOptions = {},
): Promise<Run[]> {
  const env = cleanEnv({ HOME: join(f.tmp, 'home'), WEBCCL_TOKEN: 'launch-forms-test', ...extra });
  const start = (port?: string, k?: number) =>
    startJob(process.execPath, [f.bin, 'run', ...flags, ...formFlags(form, n, port, k), script, ...args], env, {
      cwd: f.root,
      guardMs,
      onLine,
    }).done;
  if (form !== 'nnodes') return [await start()];
  const port = String(await freePort());
  return Promise.all([0, 1].map((k) => start(port, k)));
}

/** Every launcher's standard output, one string. */
export const stdoutOf = (runs: Run[]): string => runs.map((r) => r.stdout).join('');

/** Every launcher ended on its own (not killed by the guard) with `code`; its standard error
 *  shown otherwise. */
export function expectExit(runs: Run[], code = 0): void {
  for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code, hung: false });
}

/** The launchers' runs as one: the first exit code that is not 0 (else 0), hung if any was,
 *  their outputs joined. */
export function joined(runs: Run[]): { code: number | null; hung: boolean; stdout: string; stderr: string } {
  return {
    code: runs.find((r) => r.code !== 0)?.code ?? 0,
    hung: runs.some((r) => r.hung),
    stdout: stdoutOf(runs),
    stderr: runs.map((r) => r.stderr).join(''),
  };
}
