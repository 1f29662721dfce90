// webccl run --nnodes: this process as one node of a larger job. Its worker threads learn their
// world rank, the world size, the master address and the job's token and id; the token comes from
// WEBCCL_TOKEN, or on loopback from a private per-user file. Plus the run options' parsing.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { isLoopback, resolveJobId, resolveToken } from '../../src/bootstrap/nodejs/job-secrets.js';
import { WebcclError } from '../../src/core/errors.js';
import { parseRunArgs } from '../../src/launch/cli.js';

const bin = fileURLToPath(new URL('../../bin/webccl.js', import.meta.url));
const fixture = fileURLToPath(new URL('fixtures/launch-world.mjs', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'webccl-nodes-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const SECRET_VARS = [
  'WEBCCL_TOKEN',
  'WEBCCL_JOB_ID',
  'TORCHELASTIC_RUN_ID',
  'OMPI_MCA_ess_base_jobid',
  'SLURM_JOB_ID',
  'SLURM_STEP_ID',
  'XDG_RUNTIME_DIR',
];
/** An environment whose token and job id come only from `extra`, and whose HOME is a temp dir. */
function env(extra: Record<string, string> = {}): Record<string, string | undefined> {
  const e: Record<string, string | undefined> = { ...process.env, HOME: join(tmp, 'home') };
  for (const k of SECRET_VARS) delete e[k];
  return { ...e, ...extra };
}

function run(args: string[], e = env()) {
  const r = spawnSync(process.execPath, [bin, 'run', ...args, fixture], { encoding: 'utf8', env: e, timeout: 120_000 });
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
    const r = spawnSync(process.execPath, [bin, 'run', ...node1of2, fixture, '3'], {
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
