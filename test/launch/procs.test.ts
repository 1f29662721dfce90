// webccl run --procs: one OS process per rank, torchrun's variables in each environment, and a
// job that ends as a whole (a rank's death, or a signal to the launcher, ends every rank).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// The built bundle: rank processes load its rank guard (dist/node/rank-guard.js) first.
import { launchProcesses } from '../../dist/node/index.js';
import { alive } from '../helpers/jobs.js';

const bin = fileURLToPath(new URL('../../bin/webccl.js', import.meta.url));
const fixture = fileURLToPath(new URL('../fixtures/launch-procs.mjs', import.meta.url));

/** This environment without the variables the launcher is meant to set or pass through. */
function cleanEnv(extra: Record<string, string> = {}): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const k of [
    'WEBCCL_TOKEN',
    'WEBCCL_JOB_ID',
    'RANK',
    'WORLD_SIZE',
    'LOCAL_RANK',
    'LOCAL_WORLD_SIZE',
    'MASTER_ADDR',
    'MASTER_PORT',
  ])
    delete env[k];
  return { ...env, ...extra };
}

// The sleepers run 60 s; the launcher must end them long before, so this is a hang guard only.
const webccl = (args: string[], env = cleanEnv()) =>
  spawnSync(process.execPath, [bin, 'run', '--procs', ...args], { encoding: 'utf8', env, timeout: 50_000 });

const lines = (out: string) => out.trim().split('\n').filter(Boolean);
const readyPids = (out: string) =>
  lines(out)
    .filter((l) => l.startsWith('ready '))
    .map((l) => Number(l.split(' ')[2]));

describe('webccl run --procs', () => {
  it('gives every process its rank, the world size, one master address and port, one token and job id', () => {
    const r = webccl(['-n', '3', fixture, 'env', 'a', 'b']);
    expect(r.status).toBe(0);
    const envs = lines(r.stdout)
      .map((l) => JSON.parse(l))
      .sort((x, y) => Number(x.RANK) - Number(y.RANK));
    expect(envs.map((e) => [e.RANK, e.WORLD_SIZE, e.LOCAL_RANK, e.LOCAL_WORLD_SIZE])).toEqual(
      [0, 1, 2].map((k) => [`${k}`, '3', `${k}`, '3']),
    );
    for (const e of envs) {
      expect(e).toMatchObject({
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: envs[0].MASTER_PORT,
        WEBCCL_TOKEN: envs[0].WEBCCL_TOKEN,
        WEBCCL_JOB_ID: envs[0].WEBCCL_JOB_ID,
        args: ['a', 'b'],
      });
    }
    expect(Number(envs[0].MASTER_PORT)).toBeGreaterThan(0);
    expect(envs[0].WEBCCL_TOKEN).toMatch(/^[0-9a-f]{64}$/);
    expect(envs[0].WEBCCL_JOB_ID).toMatch(/^job-[0-9a-f]{12}$/);
  });

  it("passes the parent's WEBCCL_TOKEN and WEBCCL_JOB_ID through, and a given --master-port", () => {
    const r = webccl(
      ['--master-port', '29123', '-n', '2', fixture, 'env'],
      cleanEnv({ WEBCCL_TOKEN: 'parent-secret', WEBCCL_JOB_ID: 'my-job' }),
    );
    expect(r.status).toBe(0);
    for (const e of lines(r.stdout).map((l) => JSON.parse(l))) {
      expect(e).toMatchObject({ WEBCCL_TOKEN: 'parent-secret', WEBCCL_JOB_ID: 'my-job', MASTER_PORT: '29123' });
    }
  });

  it('ends the job when a rank exits non-zero, names that rank and ends the others', () => {
    const r = webccl(['-n', '3', fixture, 'fail-rank-1']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/webccl: rank 1 failed: exited with code 3/);
    expect(r.stderr).toMatch(/ranks 0, 2 then ended too/);
    const pids = readyPids(r.stdout);
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(alive(pid)).toBe(false);
  });

  it('names the rank that failed first, though ranks that failed because of it were gone before it', () => {
    const at = mkdtempSync(join(tmpdir(), 'webccl-exit-order-'));
    const r = webccl(['-n', '3', fixture, 'exit-slowly-rank-1', join(at, 'going')]);
    rmSync(at, { recursive: true, force: true });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^webccl: rank 1 failed: exited with code 7$/m);
    expect(r.stderr).toMatch(/^webccl: ranks 0, 2 then ended too$/m);
  });

  it('on SIGTERM to the launcher, ends every rank and exits non-zero', async () => {
    const launcher = spawn(process.execPath, [bin, 'run', '--procs', '-n', '3', fixture, 'sleep'], { env: cleanEnv() });
    let out = '';
    let err = '';
    launcher.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((done) => launcher.on('exit', (code) => done(code)));
    await new Promise<void>((ready) =>
      launcher.stdout.on('data', (d) => {
        out += d;
        if (readyPids(out).length === 3) ready();
      }),
    );
    launcher.kill('SIGTERM');
    const code = await exited;
    expect(code).not.toBe(0);
    expect(err).toMatch(/interrupted; ending all ranks/);
    for (const pid of readyPids(out)) expect(alive(pid)).toBe(false);
  });

  it('launchProcesses reports the first failure and what became of the others', async () => {
    const result = await launchProcesses({
      nranks: 2,
      script: fixture,
      args: ['fail-rank-1'],
      env: cleanEnv(),
      graceMs: 200,
    });
    expect(result.exitCode).toBe(1);
    expect(result.failure).toMatchObject({ rank: 1, message: 'exited with code 3' });
    expect(result.failures[1]).toMatchObject({ rank: 0, message: 'killed by SIGTERM' });
  });
});
