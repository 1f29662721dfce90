// The webccl command: starting ranks, exit codes, and a message naming the rank that failed.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseRunArgs } from '../src/launch/cli.js';

const bin = fileURLToPath(new URL('../bin/webccl.js', import.meta.url));
const fixture = (f: string) => fileURLToPath(new URL(`./fixtures/${f}`, import.meta.url));
const webccl = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 120_000 });

describe('webccl run', () => {
  it('starts N ranks that share memory and passes the script its arguments', () => {
    const r = webccl('run', '-n', '4', fixture('sums.mjs'), 'a', 'b');
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual([0, 1, 2, 3].map((k) => `rank ${k} of 4 ok a b`));
  });

  it("ends the job with a non-zero code and names the rank whose error was uncaught", () => {
    const r = webccl('run', '-n', '3', fixture('throws-on-rank-2.mjs'));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/rank 2 failed: .*boom on rank 2/);
  });

  it('treats a rank exiting non-zero as a failure', () => {
    const r = webccl('run', '-n', '2', fixture('exits-on-rank-1.mjs'));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/rank 1 failed: exited with code 3/);
  });

  it('rejects bad arguments with exit code 2', () => {
    expect(webccl('run', '-n', 'x', 'a.mjs').status).toBe(2);
    expect(webccl('run', '--bogus').status).toBe(2);
    expect(webccl('frobnicate').status).toBe(2);
    expect(() => parseRunArgs(['-n', '0', 's.mjs'])).toThrow(/1\.\.64/);
    expect(parseRunArgs(['-n', '3', 's.mjs', '-x'])).toEqual({ nranks: 3, script: 's.mjs', args: ['-x'] });
  });
});
