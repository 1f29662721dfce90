// The webccl command: starting ranks under each launch form, exit codes, and a message naming
// the rank that failed. Worker threads of one process (webccl run -n N). One OS process per rank
// (--procs): torchrun's variables in each environment, and a job that ends as a whole (a rank's
// death, or a signal to the launcher, ends every rank). This process as one node of a larger job
// (--nnodes): its worker threads learn their world rank, the world size, the master address and
// the job's token and id; the token comes from WEBCCL_TOKEN, or on loopback from a private
// per-user file. Then the run options' parsing, and one argument parser for every subcommand.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
// The built bundle: rank processes load its rank guard (dist/node/rank-guard.js) first.
import { launchProcesses } from '../../dist/node/index.js';
import { isLoopback, resolveJobId, resolveToken } from '../../src/bootstrap/nodejs/job-secrets.js';
import { WebcclError } from '../../src/core/errors.js';
import { parseRunArgs, UsageError } from '../../src/launch/cli.js';
import { parsePerfArgs } from '../../src/launch/perf/args.js';
import { parseSimulateArgs } from '../../src/launch/simulate/args.js';
import { parseTuneArgs } from '../../src/launch/tune/args.js';
import { alive, cleanEnv } from '../helpers/jobs.js';

const bin = fileURLToPath(new URL('../../bin/webccl.js', import.meta.url));
const fixture = (f: string) => fileURLToPath(new URL(`../fixtures/${f}`, import.meta.url));
const beside = (f: string) => fileURLToPath(new URL(`fixtures/${f}`, import.meta.url));
const webccl = (...args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 120_000 });
const tmp = mkdtempSync(join(tmpdir(), 'webccl-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

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

const launchProcs = fixture('launch-procs.mjs');
// The sleepers run 60 s; the launcher must end them long before, so this is a hang guard only.
const procs = (args: string[], env = cleanEnv()) =>
  spawnSync(process.execPath, [bin, 'run', '--procs', ...args], { encoding: 'utf8', env, timeout: 50_000 });

const lines = (out: string) => out.trim().split('\n').filter(Boolean);
const readyPids = (out: string) =>
  lines(out)
    .filter((l) => l.startsWith('ready '))
    .map((l) => Number(l.split(' ')[2]));

describe('webccl run --procs', () => {
  it('gives every process its rank, the world size, one master address and port, one token and job id', () => {
    const r = procs(['-n', '3', launchProcs, 'env', 'a', 'b']);
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
    const r = procs(
      ['--master-port', '29123', '-n', '2', launchProcs, 'env'],
      cleanEnv({ WEBCCL_TOKEN: 'parent-secret', WEBCCL_JOB_ID: 'my-job' }),
    );
    expect(r.status).toBe(0);
    for (const e of lines(r.stdout).map((l) => JSON.parse(l))) {
      expect(e).toMatchObject({ WEBCCL_TOKEN: 'parent-secret', WEBCCL_JOB_ID: 'my-job', MASTER_PORT: '29123' });
    }
  });

  it('ends the job when a rank exits non-zero, names that rank and ends the others', () => {
    const r = procs(['-n', '3', launchProcs, 'fail-rank-1']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/webccl: rank 1 failed: exited with code 3/);
    expect(r.stderr).toMatch(/ranks 0, 2 then ended too/);
    const pids = readyPids(r.stdout);
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(alive(pid)).toBe(false);
  });

  it('names the rank that failed first, though ranks that failed because of it were gone before it', () => {
    const at = mkdtempSync(join(tmpdir(), 'webccl-exit-order-'));
    const r = procs(['-n', '3', launchProcs, 'exit-slowly-rank-1', join(at, 'going')]);
    rmSync(at, { recursive: true, force: true });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^webccl: rank 1 failed: exited with code 7$/m);
    expect(r.stderr).toMatch(/^webccl: ranks 0, 2 then ended too$/m);
  });

  it('on SIGTERM to the launcher, ends every rank and exits non-zero', async () => {
    const launcher = spawn(process.execPath, [bin, 'run', '--procs', '-n', '3', launchProcs, 'sleep'], {
      env: cleanEnv(),
    });
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
      script: launchProcs,
      args: ['fail-rank-1'],
      env: cleanEnv(),
      graceMs: 200,
    });
    expect(result.exitCode).toBe(1);
    expect(result.failure).toMatchObject({ rank: 1, message: 'exited with code 3' });
    expect(result.failures[1]).toMatchObject({ rank: 0, message: 'killed by SIGTERM' });
  });
});

const launchWorld = beside('launch-world.mjs');
/** An environment whose token and job id come only from `extra`, and whose HOME is a temp dir. */
const env = (extra: Record<string, string> = {}) => cleanEnv({ HOME: join(tmp, 'home'), ...extra });

function run(args: string[], e = env()) {
  const r = spawnSync(process.execPath, [bin, 'run', ...args, launchWorld], {
    encoding: 'utf8',
    env: e,
    timeout: 120_000,
  });
  const out =
    r.status === 0
      ? r.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l))
          .sort((a, b) => a.rank - b.rank)
      : [];
  return { ...r, out };
}

const node1of2 = ['--nnodes', '2', '--node-rank', '1', '--nproc-per-node', '2', '--master-port', '29999'];

describe('webccl run --nnodes', () => {
  it('gives node 1 of 2 (2 threads each) world ranks 2 and 3 of 4 and the token from WEBCCL_TOKEN', () => {
    const r = run(node1of2, env({ WEBCCL_TOKEN: 'shared-secret' }));
    expect(r.status).toBe(0);
    expect(r.out).toEqual(
      [0, 1].map((i) => ({
        rank: i,
        world: {
          rank: 2 + i,
          size: 4,
          masterAddr: '127.0.0.1',
          masterPort: 29999,
          token: 'shared-secret',
          jobId: '127.0.0.1:29999',
        },
      })),
    );
  });

  it('names a failing thread by its world rank', () => {
    const r = spawnSync(process.execPath, [bin, 'run', ...node1of2, launchWorld, '3'], {
      encoding: 'utf8',
      env: env({ WEBCCL_TOKEN: 't' }),
      timeout: 120_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/webccl: rank 3 failed: .*world rank 3 throws/);
  });

  it('without WEBCCL_TOKEN on loopback, uses a per-user token file made with mode 0600', () => {
    for (const [where, e, file] of [
      ['XDG_RUNTIME_DIR', env({ XDG_RUNTIME_DIR: join(tmp, 'run') }), join(tmp, 'run', 'webccl-token')],
      ['HOME', env(), join(tmp, 'home', '.webccl', 'token')],
    ] as const) {
      const first = run(node1of2, e);
      const second = run(node1of2, e);
      expect({ where, status: first.status, stderr: first.stderr }).toEqual({ where, status: 0, stderr: '' });
      const token = readFileSync(file, 'utf8').trim();
      expect(token).toMatch(/^[0-9a-f]{64}$/);
      if (process.platform !== 'win32') expect(statSync(file).mode & 0o777).toBe(0o600);
      for (const o of [...first.out, ...second.out]) expect(o.world.token).toBe(token);
    }
  });

  it('refuses a token file that group or others can read', () => {
    if (process.platform === 'win32') return;
    const dir = join(tmp, 'loose');
    const file = join(dir, 'webccl-token');
    const e = { XDG_RUNTIME_DIR: dir };
    resolveToken(e, '127.0.0.1'); // creates it
    chmodSync(file, 0o644);
    expect(() => resolveToken(e, '127.0.0.1')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => resolveToken(e, 'localhost')).toThrow(/chmod 600/);
  });

  it('refuses a non-loopback master address without WEBCCL_TOKEN, naming the variable', () => {
    const r = run(['--nnodes', '2', '--master-addr', '10.1.2.3'], env());
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/WEBCCL_TOKEN/);
    let err: unknown;
    try {
      resolveToken({}, '10.1.2.3');
    } catch (e) {
      err = e;
    }
    expect(WebcclError.is(err) && err.code).toBe('INVALID_ARGUMENT');
  });

  it('with --nnodes 1 and no master options, hands the threads no world (as before)', () => {
    const r = run(['--nnodes', '1', '-n', '2']);
    expect(r.status).toBe(0);
    expect(r.out).toEqual([
      { rank: 0, world: null },
      { rank: 1, world: null },
    ]);
  });
});

describe('job secrets', () => {
  it('resolveJobId: WEBCCL_JOB_ID, then torchrun, Open MPI, Slurm job.step, then master address:port', () => {
    const env: Record<string, string> = {
      WEBCCL_JOB_ID: 'w',
      TORCHELASTIC_RUN_ID: 't',
      OMPI_MCA_ess_base_jobid: 'o',
      SLURM_JOB_ID: '7',
      SLURM_STEP_ID: '2',
    };
    const seen: string[] = [];
    for (const name of ['WEBCCL_JOB_ID', 'TORCHELASTIC_RUN_ID', 'OMPI_MCA_ess_base_jobid', 'SLURM_JOB_ID']) {
      seen.push(resolveJobId(env, 'h', 1));
      delete env[name];
    }
    seen.push(resolveJobId(env, 'h', 1));
    expect(seen).toEqual(['w', 't', 'o', '7.2', 'h:1']);
    expect(resolveJobId({ SLURM_JOB_ID: '7' }, 'h', 1)).toBe('7');
    expect(resolveJobId({ WEBCCL_JOB_ID: '' }, '10.0.0.1', 29500)).toBe('10.0.0.1:29500');
  });

  it('isLoopback', () => {
    for (const h of ['127.0.0.1', '127.3.2.1', '::1', '[::1]', 'localhost', 'LocalHost', '::ffff:127.0.0.1'])
      expect([h, isLoopback(h)]).toEqual([h, true]);
    for (const h of ['10.0.0.1', '128.0.0.1', '::2', 'example.com', '0.0.0.0', ''])
      expect([h, isLoopback(h)]).toEqual([h, false]);
  });
});

describe('run options', () => {
  it('parses the multi-node and --procs forms', () => {
    expect(
      parseRunArgs([
        '--nnodes',
        '2',
        '--node-rank',
        '1',
        '--nproc-per-node',
        '4',
        '--master-addr',
        '10.0.0.1',
        's.mjs',
        '--nnodes',
      ]),
    ).toEqual({
      nranks: 4,
      script: 's.mjs',
      args: ['--nnodes'],
      nodes: { nnodes: 2, nodeRank: 1, masterAddr: '10.0.0.1', masterPort: 29500 },
    });
    expect(parseRunArgs(['--nnodes=2', '--node_rank=1', '--master-addr', '[::1]', 's.mjs']).nodes).toEqual({
      nnodes: 2,
      nodeRank: 1,
      masterAddr: '::1',
      masterPort: 29500,
    });
    expect(parseRunArgs(['--master-port', '1234', 's.mjs']).nodes).toEqual({
      nnodes: 1,
      nodeRank: 0,
      masterAddr: '127.0.0.1',
      masterPort: 1234,
    });
    expect(parseRunArgs(['--procs', '-n', '3', 's.mjs'])).toEqual({
      nranks: 3,
      script: 's.mjs',
      args: [],
      procs: true,
    });
    expect(parseRunArgs(['--procs', '--master-port', '7', 's.mjs']).masterPort).toBe(7);
    expect(parseRunArgs(['--nnodes', '1', '--node-rank', '0', 's.mjs'])).toEqual({
      nranks: 1,
      script: 's.mjs',
      args: [],
    });
  });

  it('rejects bad values', () => {
    const bad: [string[], RegExp][] = [
      [['--nnodes', '2', '--node-rank', '2', 's.mjs'], /out of range for --nnodes 2 \(expected 0\.\.1\)/],
      [['--node-rank', '1', 's.mjs'], /out of range for --nnodes 1/],
      [['--nnodes', '0', 's.mjs'], /1\.\./],
      [['--master-port', '0', 's.mjs'], /1\.\.65535/],
      [['--master-port', '65536', 's.mjs'], /1\.\.65535/],
      [['--master-addr', '', 's.mjs'], /host name/],
      [['--procs', '--nnodes', '2', 's.mjs'], /--procs .*--nnodes 2/],
      [['--procs=1', 's.mjs'], /unknown option/],
    ];
    for (const [args, message] of bad) expect(() => parseRunArgs(args)).toThrow(message);
  });

  it('exits 2 on a usage error', () => {
    for (const args of [
      ['--nnodes', '2', '--node-rank', '5'],
      ['--master-port', 'x'],
      ['--procs', '--nnodes', '3'],
    ]) {
      const r = spawnSync(process.execPath, [bin, 'run', ...args, 's.mjs'], { encoding: 'utf8' });
      expect([args, r.status]).toEqual([args, 2]);
    }
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
