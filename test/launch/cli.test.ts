// The webccl command: starting ranks, exit codes, and a message naming the rank that failed.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseRunArgs, UsageError } from '../../src/launch/cli.js';
import { parsePerfArgs } from '../../src/launch/perf/args.js';
import { parseSimulateArgs } from '../../src/launch/simulate/args.js';
import { parseTuneArgs } from '../../src/launch/tune/args.js';

const bin = fileURLToPath(new URL('../../bin/webccl.js', import.meta.url));
const fixture = (f: string) => fileURLToPath(new URL(`../fixtures/${f}`, import.meta.url));
const beside = (f: string) => fileURLToPath(new URL(`fixtures/${f}`, import.meta.url));
const webccl = (...args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 120_000 });

describe('webccl run', () => {
  it('starts N ranks that share memory and passes the script its arguments', () => {
    const r = webccl('run', '-n', '4', fixture('sums.mjs'), 'a', 'b');
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual([0, 1, 2, 3].map((k) => `rank ${k} of 4 ok a b`));
  });

  it('ends the job with a non-zero code and names the rank whose error was uncaught', () => {
    const r = webccl('run', '-n', '3', beside('throws-on-rank-2.mjs'));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/rank 2 failed: .*boom on rank 2/);
  });

  it('treats a rank exiting non-zero as a failure', () => {
    const r = webccl('run', '-n', '2', beside('exits-on-rank-1.mjs'));
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

  it('a launcher of one node of several takes MASTER_ADDR and MASTER_PORT when no flag names them; one of a single node does not', () => {
    const env = { MASTER_ADDR: '10.1.2.3', MASTER_PORT: '8080' };
    expect(parseRunArgs(['--nnodes', '2', '--node-rank', '1', 's.mjs'], env)).toMatchObject({
      nodes: { nnodes: 2, nodeRank: 1, masterAddr: '10.1.2.3', masterPort: 8080 },
    });
    expect(parseRunArgs(['--nnodes', '2', '--master-port', '9000', 's.mjs'], env)).toMatchObject({
      nodes: { masterAddr: '10.1.2.3', masterPort: 9000 },
    });
    expect(parseRunArgs(['-n', '4', 's.mjs'], env)).toEqual({ nranks: 4, script: 's.mjs', args: [] });
    expect(() => parseRunArgs(['--nnodes', '2', 's.mjs'], { MASTER_PORT: 'http' })).toThrow(
      /MASTER_PORT needs a port in 1\.\.65535, got http/,
    );
  });
});

describe('one argument parser for every subcommand', () => {
  const version = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8'))
    .version as string;

  it('webccl --version prints the package version', () => {
    for (const flag of ['--version', '-V', 'version']) {
      const r = webccl(flag);
      expect([flag, r.status, r.stdout]).toEqual([flag, 0, `webccl ${version}\n`]);
    }
  });

  it("webccl run --help and -h print run's usage on stdout with exit code 0", () => {
    for (const flag of ['--help', '-h']) {
      const r = webccl('run', flag);
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/^usage: webccl run \[options\] script\.mjs/);
      expect(r.stdout).toMatch(/--nproc-per-node/);
      expect(r.stderr).toBe('');
    }
    expect(parseRunArgs(['-n', '2', '--help', 's.mjs'])).toBe('help');
  });

  it('accepts one-letter flags with the value attached, as nccl-tests users type them', () => {
    expect(parseRunArgs(['-n4', 's.mjs'])).toEqual({ nranks: 4, script: 's.mjs', args: [] });
    expect(parseRunArgs(['--nproc_per_node=3', 's.mjs']).nranks).toBe(3);
    expect(
      parsePerfArgs(['allreduce', '-b8', '-e1M', '-f4', '-n4', '-w1', '-c0', '-dbf16', '-omax', '-r1']),
    ).toMatchObject({
      minBytes: 8,
      maxBytes: 1 << 20,
      factor: 4,
      iters: 4,
      warmup: 1,
      check: false,
      dtypes: ['bf16'],
      ops: ['max'],
      root: 1,
    });
    expect(parseSimulateArgs(['allreduce', '-b1K', '-e4K', '-dfloat'])).toMatchObject({
      minBytes: 1024,
      maxBytes: 4096,
      dtype: 'f32',
    });
    expect(parseTuneArgs(['-b4K', '-e1M', '-f8'])).toMatchObject({ minBytes: 4096, maxBytes: 1 << 20, factor: 8 });
  });

  it('run gives the script everything after it, untouched, flags included', () => {
    expect(parseRunArgs(['-n', '2', 's.mjs', '-n', '5'])).toEqual({ nranks: 2, script: 's.mjs', args: ['-n', '5'] });
    expect(parseRunArgs(['-n', '2', 's.mjs', '--help', '--bogus=1'])).toEqual({
      nranks: 2,
      script: 's.mjs',
      args: ['--help', '--bogus=1'],
    });
    expect(parseRunArgs(['--', '-s.mjs', 'x'])).toEqual({ nranks: 1, script: '-s.mjs', args: ['x'] });
    const r = webccl('run', '-n2', fixture('sums.mjs'), '-n', '5');
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual([0, 1].map((k) => `rank ${k} of 2 ok -n 5`));
  });

  it('refuses unknown options with a usage error naming them, in every subcommand', () => {
    const cases: [string[], string][] = [
      [['run', '--bogus', 's.mjs'], 'webccl: unknown option --bogus\n'],
      [['run', '-x', 's.mjs'], 'webccl: unknown option -x\n'],
      [['perf', 'allreduce', '--bogus=1'], 'webccl perf: unknown option --bogus\n'],
      [['simulate', 'allreduce', '-z', '1'], 'webccl simulate: unknown option -z\n'],
      [['tune', '--frob'], 'webccl tune: unknown option --frob\n'],
      [['trace', 'merge', '--frob', 'a', 'b'], 'webccl: unknown option --frob\n'],
    ];
    for (const [args, first] of cases) {
      const r = webccl(...args);
      expect([args, r.status, r.stderr.slice(0, first.length)]).toEqual([args, 2, first]);
      expect(r.stdout).toBe('');
    }
    expect(() => parseRunArgs(['--bogus', 's.mjs'])).toThrow(UsageError);
    const help = webccl('trace', '--help');
    expect([help.status, help.stdout.split('\n')[0]]).toEqual([0, 'usage: webccl trace merge OUT PARTS...']);
  });

  it('a missing collective is said once, without the command repeated', () => {
    const perf = webccl('perf');
    expect(perf.status).toBe(2);
    expect(perf.stderr.split('\n')[0]).toBe(
      'webccl perf: name a collective (allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter, sendrecv, pingpong)',
    );
    expect(perf.stderr.match(/name a collective/g)).toHaveLength(1);
    const sim = webccl('simulate');
    expect(sim.status).toBe(2);
    expect(sim.stderr.split('\n')[0]).toMatch(/^webccl simulate: which collective\?/);
  });
});
