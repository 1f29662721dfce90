// End to end across real processes: jobs started by the built CLI (`bin/webccl.js run --procs`,
// `run --nnodes`), by Open MPI's mpirun, by hand with torchrun's variables, and on two emulated
// machines (network namespaces joined by a veth pair). The rank scripts check every result
// themselves (test/fixtures/net-check.mjs); here we check that every rank said so, and that
// jobs that cannot work fail on every side with an error naming the cause.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, type Env, killAllJobs, type Run, run as runJob, startJob } from '../helpers/jobs.js';
import { formFlags } from '../helpers/launch-forms.js';
import { freePort } from '../helpers/net.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'bin', 'webccl.js');
const check = join(root, 'test', 'fixtures', 'net-check.mjs');
const failing = join(root, 'test', 'fixtures', 'net-fail.mjs');
const node = process.execPath;

const tmp = mkdtempSync(join(tmpdir(), 'webccl-net-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** This environment without any launcher's or webccl's variables, HOME in a temp dir (for the
 *  per-user token file), plus `extra`. */
const env = (extra: Env = {}): Env => cleanEnv({ HOME: join(tmp, 'home'), ...extra });

afterAll(killAllJobs);
const run = (cmd: string, args: string[], e: Env, guardMs?: number): Promise<Run> =>
  runJob(cmd, args, e, guardMs, root);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The ranks whose "ok rank R of N" line is in `out`, sorted. */
function okRanks(out: string, n: number): number[] {
  return [...out.matchAll(/^ok rank (\d+) of (\d+) /gm)]
    .filter((m) => Number(m[2]) === n)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

function expectOk(r: Run, ranks: number[], n: number, what: string) {
  expect({ what, code: r.code, hung: r.hung }, r.stderr).toEqual({ what, code: 0, hung: false });
  expect(okRanks(r.stdout, n), r.stdout).toEqual(ranks);
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

/** `webccl run --nnodes 2 --node-rank K --nproc-per-node 2` for K = 0, 1, together. */
function twoNodes(port: number, e: (k: number) => Env, wrap: (k: number) => string[] = () => [], addr = '127.0.0.1') {
  return Promise.all(
    [0, 1].map((k) => {
      const args = [
        bin,
        'run',
        ...formFlags('nnodes', 4, String(port), k, addr),
        check,
        '--expect-default',
        'hierarchical',
        '--algo',
        'ring',
      ];
      const [cmd, ...pre] = [...wrap(k), node];
      return run(cmd, [...pre, ...args], e(k));
    }),
  );
}

describe('webccl run --procs: one process per rank', () => {
  it.each([2, 3, 4])(
    '%i processes: allReduce (f32 sum of 1, 1000, 300000; i32 max), allGather, reduceScatter, broadcast, reduce, allToAll (equal and per-peer counts), gather and scatter from every root, barrier',
    async (n) => {
      const r = await run(node, [bin, 'run', '--procs', '-n', String(n), check], env());
      expectOk(r, range(0, n), n, `${n} processes`);
      expect(r.stderr).toBe('');
    },
    60_000,
  );

  it('WEBCCL_NCHANNELS=1 and =4: the mesh has that many connections per pair, and results are right', async () => {
    const runs = await Promise.all(
      [1, 4].map((c) =>
        run(
          node,
          [bin, 'run', '--procs', '-n', '3', check, '--sizes', '300000'],
          env({ WEBCCL_NCHANNELS: String(c), WEBCCL_DEBUG: 'INFO' }),
        ),
      ),
    );
    for (const [i, c] of [1, 4].entries()) {
      expectOk(runs[i], [0, 1, 2], 3, `WEBCCL_NCHANNELS=${c}`);
      expect(runs[i].stderr.match(new RegExp(`mesh of ${c} channel\\(s\\) per peer`, 'g'))).toHaveLength(3);
    }
  }, 60_000);
});

describe('the rendezvous port a launcher picks', () => {
  // The launcher binds the port and hands the listening socket to rank 0: a program that tries
  // to take the port while rank 0 has not yet joined finds it in use, and the job is unharmed.
  // (A port picked, released and bound later by rank 0 was taken by another job's store once.)
  it('webccl run --procs: no other program can bind it before rank 0 serves the store; only rank 0 is handed the socket, and the variable is gone after the join', async () => {
    const go = join(tmp, 'store-port-go');
    const job = startJob(
      node,
      [bin, 'run', '--procs', '-n', '3', join(root, 'test', 'net', 'fixtures', 'store-port-held.mjs'), go],
      env(),
      { cwd: root },
    );
    const until = Date.now() + 30_000;
    while ((job.stdout().match(/^PORT /gm)?.length ?? 0) < 3) {
      if (Date.now() > until) break;
      await sleep(50);
    }
    const ports = [...job.stdout().matchAll(/^PORT (\d+) rank (\d) handed=(\w+)/gm)].map((m) => ({
      port: Number(m[1]),
      rank: Number(m[2]),
      handed: m[3] === 'true',
    }));
    expect(ports.map((p) => p.rank).sort(), job.stdout()).toEqual([0, 1, 2]);
    expect(new Set(ports.map((p) => p.port)).size).toBe(1);
    expect(ports.filter((p) => p.handed).map((p) => p.rank)).toEqual([0]);
    const intruder = await new Promise<string>((resolve) => {
      const s = createServer();
      s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
      s.listen(ports[0].port, '127.0.0.1', () => s.close(() => resolve('bound')));
    });
    expect(intruder).toBe('EADDRINUSE');
    writeFileSync(go, '');
    const r = await job.done;
    expectOk(r, [0, 1, 2], 3, 'after the intruder was refused');
    expect(r.stdout).not.toMatch(/after-join handed=true/);
  }, 60_000);
});

describe('webccl run --nnodes 2 --nproc-per-node 2 on this machine', () => {
  it('4 ranks on 2 nodes: the default allReduce is hierarchical, algo ring works, every collective checks out', async () => {
    const port = await freePort();
    const [a, b] = await twoNodes(port, () => env());
    expectOk(a, [0, 1], 4, 'node 0');
    expectOk(b, [2, 3], 4, 'node 1');
  }, 90_000);
});

// The flags below are Open MPI's; another MPI's mpirun (MPICH's Hydra) is not tried.
const mpirun = spawnSync('mpirun', ['--version'], { encoding: 'utf8' });
const mpirunWhy =
  mpirun.status !== 0
    ? 'no mpirun on PATH (apt-get install openmpi-bin)'
    : !/Open MPI/i.test(mpirun.stdout + mpirun.stderr)
      ? `mpirun is not Open MPI's (${(mpirun.stdout.split('\n')[0] ?? '').trim()})`
      : undefined;
const haveMpirun = mpirunWhy === undefined;
if (mpirunWhy) console.warn(`net-processes: mpirun test skipped: ${mpirunWhy}`);

describe.skipIf(!haveMpirun)("Open MPI's mpirun starts the ranks (identity from OMPI_COMM_WORLD_*)", () => {
  it('mpirun -np 3 node net-check.mjs', async () => {
    const port = await freePort();
    const r = await run(
      'mpirun',
      [
        '--allow-run-as-root',
        '--oversubscribe',
        '-np',
        '3',
        '-x',
        `MASTER_PORT=${port}`,
        '-x',
        'PATH',
        '-x',
        'HOME',
        node,
        check,
      ],
      env(),
    );
    expectOk(r, [0, 1, 2], 3, 'mpirun -np 3');
  }, 90_000);
});

// ---------------------------------------------------------------- two machines, emulated

const suffix = `${process.pid.toString(36)}${Math.floor(Math.random() * 36 ** 3).toString(36)}`.slice(-7);
const NS = [`wccl-a-${suffix}`, `wccl-b-${suffix}`];
const VETH = [`wva${suffix}`, `wvb${suffix}`]; // interface names hold at most 15 characters
const IPS = ['10.77.0.1', '10.77.0.2'];

function ip(args: string[]): { ok: boolean; err: string } {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  return { ok: r.status === 0, err: (r.error?.message ?? r.stderr ?? '').trim() };
}

/** Why network namespaces cannot be used here, or undefined when they can (tried for real). */
function netnsUnavailable(): string | undefined {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return 'not root (creating network namespaces needs root)';
  const probe = `wccl-probe-${suffix}`;
  const made = ip(['netns', 'add', probe]);
  if (!made.ok) return `ip netns add failed: ${made.err}`;
  const veth = ip(['-n', probe, 'link', 'add', `wvp${suffix}`, 'type', 'veth', 'peer', 'name', `wvq${suffix}`]);
  ip(['netns', 'del', probe]);
  return veth.ok ? undefined : `cannot create a veth pair: ${veth.err}`;
}

const netnsWhy = netnsUnavailable();
if (netnsWhy) console.warn(`net-processes: two-machine tests skipped: ${netnsWhy}`);

describe.skipIf(netnsWhy !== undefined)('two machines emulated by network namespaces joined by a veth pair', () => {
  beforeAll(() => {
    const steps: string[][] = [
      ['netns', 'add', NS[0]],
      ['netns', 'add', NS[1]],
      ['link', 'add', VETH[0], 'type', 'veth', 'peer', 'name', VETH[1]],
      ...[0, 1].flatMap((k) => [
        ['link', 'set', VETH[k], 'netns', NS[k]],
        ['-n', NS[k], 'addr', 'add', `${IPS[k]}/24`, 'dev', VETH[k]],
        ['-n', NS[k], 'link', 'set', VETH[k], 'up'],
        ['-n', NS[k], 'link', 'set', 'lo', 'up'],
      ]),
    ];
    for (const s of steps) {
      const r = ip(s);
      if (!r.ok) throw new Error(`ip ${s.join(' ')}: ${r.err}`);
    }
  });
  // Deleting a namespace deletes the veth end inside it, and with it the pair.
  afterAll(() => {
    for (const ns of NS) ip(['netns', 'del', ns]);
    ip(['link', 'del', VETH[0]]); // only if setup failed before moving it
  });

  const inNs = (k: number) => ['ip', 'netns', 'exec', NS[k]];
  const token = 'net-processes-test-token';

  for (const ifname of [false, true]) {
    it(`node 0 at ${IPS[0]}, node 1 at ${IPS[1]}, WEBCCL_TOKEN set${ifname ? ', WEBCCL_SOCKET_IFNAME = each veth' : ''}: every collective checks out`, async () => {
      const [a, b] = await twoNodes(
        29500,
        (k) => env({ WEBCCL_TOKEN: token, WEBCCL_DEBUG: 'INFO', ...(ifname && { WEBCCL_SOCKET_IFNAME: VETH[k] }) }),
        inNs,
        IPS[0],
      );
      expectOk(a, [0, 1], 4, 'node 0');
      expectOk(b, [2, 3], 4, 'node 1');
      // Each node's ranks listen on its own veth address: the mesh crosses the pair.
      expect(a.stderr.match(new RegExp(`listening on ${IPS[0].replace(/\./g, '\\.')}:`, 'g'))).toHaveLength(2);
      expect(b.stderr.match(new RegExp(`listening on ${IPS[1].replace(/\./g, '\\.')}:`, 'g'))).toHaveLength(2);
    }, 90_000);
  }

  it("one rank per machine, torchrun's variables set by hand (MASTER_ADDR off loopback)", async () => {
    const rs = await Promise.all(
      [0, 1].map((k) =>
        run(
          'ip',
          ['netns', 'exec', NS[k], node, check, '--sizes', '1,300000'],
          env({ RANK: String(k), WORLD_SIZE: '2', MASTER_ADDR: IPS[0], MASTER_PORT: '29501', WEBCCL_TOKEN: token }),
        ),
      ),
    );
    rs.forEach((r, k) => expectOk(r, [k], 2, `rank ${k}`));
  }, 60_000);

  it('node 0 publishes an address node 1 cannot reach (WEBCCL_SOCKET_IFNAME=lo): both fail, naming the other rank', async () => {
    const rs = await Promise.all(
      [0, 1].map((k) =>
        run(
          'ip',
          ['netns', 'exec', NS[k], node, failing, 'join'],
          env({
            RANK: String(k),
            WORLD_SIZE: '2',
            MASTER_ADDR: IPS[0],
            MASTER_PORT: '29502',
            WEBCCL_TOKEN: token,
            WEBCCL_CONNECT_TIMEOUT_MS: '5000',
            ...(k === 0 && { WEBCCL_SOCKET_IFNAME: 'lo' }),
          }),
        ),
      ),
    );
    rs.forEach((r) => expect({ code: r.code, hung: r.hung }).toEqual({ code: 1, hung: false }));
    // Rank 0 waits to be dialled; rank 1 dials (see the known issue below for its two messages).
    expect(rs[0].stderr).toMatch(/rank 0: ranks? 1 did not connect within 5000 ms .*\[CONNECT_FAILED\]/);
    expect(rs[1].stderr).toMatch(/rank 1\b.*\branks? 0\b.*\[CONNECT_FAILED\]/);
  }, 60_000);

  it('the dialling rank names the address it could not reach', async () => {
    const jobs = [0, 1, 2, 3].map((j) =>
      Promise.all(
        [0, 1].map((k) =>
          run(
            'ip',
            ['netns', 'exec', NS[k], node, failing, 'join'],
            env({
              RANK: String(k),
              WORLD_SIZE: '2',
              MASTER_ADDR: IPS[0],
              MASTER_PORT: String(29510 + j),
              WEBCCL_TOKEN: token,
              WEBCCL_CONNECT_TIMEOUT_MS: '3000',
              ...(k === 0 && { WEBCCL_SOCKET_IFNAME: 'lo' }),
            }),
          ),
        ),
      ),
    );
    for (const [, dialler] of await Promise.all(jobs)) {
      expect(dialler.code).toBe(1);
      expect(dialler.stderr).toMatch(/127\.0\.0\.1:\d+.*\[CONNECT_FAILED\]/);
    }
  }, 60_000);
});

// ---------------------------------------------------------------- errors, seen from every side

describe('a job that cannot form fails on every side, naming the cause', () => {
  /** Ranks 0, 1, ... of a job started by hand with torchrun's variables (WORLD_SIZE is the
   *  number of ranks unless `each[k]` says otherwise); `each[k]` is added to rank k's environment,
   *  and rank k starts `delayMs` after rank k-1. Every rank must fail on its own. */
  async function byHand(each: Env[], { delayMs = 0, port = 0 } = {}): Promise<Run[]> {
    const p = port || (await freePort());
    const common = {
      WORLD_SIZE: String(each.length),
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(p),
      WEBCCL_CONNECT_TIMEOUT_MS: '5000',
      WEBCCL_TOKEN: 'token-a',
      WEBCCL_JOB_ID: 'job-a',
    };
    const started: Promise<Run>[] = [];
    for (const [k, extra] of each.entries()) {
      if (k && delayMs) await sleep(delayMs);
      started.push(run(node, [failing, 'join'], env({ ...common, RANK: String(k), ...extra })));
    }
    const rs = await Promise.all(started);
    rs.forEach((r, k) =>
      expect({ rank: k, code: r.code, hung: r.hung, joined: r.stdout.includes('joined') }, r.stderr).toEqual({
        rank: k,
        code: 1,
        hung: false,
        joined: false,
      }),
    );
    return rs;
  }

  it('rank 1 has another WEBCCL_TOKEN: it fails AUTH_FAILED at the store; rank 0 fails AUTH_FAILED naming rank 1', async () => {
    const [r0, r1] = await byHand([{}, { WEBCCL_TOKEN: 'token-b' }]);
    expect(r1.stderr).toMatch(
      /rank 1 cannot reach the rendezvous store at 127\.0\.0\.1:\d+: .*token mismatch.*\[AUTH_FAILED\]/,
    );
    expect(r0.stderr).toMatch(
      /rank 0: the store at 127\.0\.0\.1:\d+ refused .*token mismatch.*rank 1 of 2 has not joined.*\[AUTH_FAILED\]/,
    );
    expect(r0.stderr).toMatch(/refused .*token mismatch/); // and the store says whom it refused
  }, 60_000);

  it('rank 1 has another WEBCCL_JOB_ID: it fails AUTH_FAILED (job id mismatch); rank 0 names rank 1 as missing', async () => {
    const [r0, r1] = await byHand([{}, { WEBCCL_JOB_ID: 'job-b' }]);
    expect(r1.stderr).toMatch(/rank 1 cannot reach the rendezvous store .*job id mismatch.*\[AUTH_FAILED\]/);
    expect(r0.stderr).toMatch(/rank 0: rank 1 of 2 did not join within 5000 ms .*\[CONNECT_FAILED\]/);
  }, 60_000);

  it('rank 1 says WORLD_SIZE=3, rank 0 says 2: both fail, naming both sizes', async () => {
    // Rank 1 starts after rank 0, so rank 0's size is the one agreed first.
    const [r0, r1] = await byHand([{}, { WORLD_SIZE: '3' }], { delayMs: 500 });
    expect(r1.stderr).toMatch(
      /rank 1 was started with world size 3, but the job's ranks agreed on 2 .*\[INVALID_ARGUMENT\]/,
    );
    expect(r0.stderr).toMatch(
      /rank 0: the job failed during rendezvous \(rank 1: .*world size 3.*agreed on 2.*\[ABORTED\]/,
    );
  }, 60_000);

  // Rank 1 comes a second after rank 0, so rank 0 gives up on rank 2 first and rank 1 is still
  // waiting when it does.
  const rank2Missing = { WORLD_SIZE: '3', WEBCCL_CONNECT_TIMEOUT_MS: '3000' };

  it('a 3-rank job whose rank 2 never comes: rank 0 names rank 2; rank 1 fails too, at once', async () => {
    const [r0, r1] = await byHand([rank2Missing, rank2Missing], { delayMs: 1000 });
    expect(r0.stderr).toMatch(/rank 0: rank 2 of 3 did not join within 3000 ms .*\[CONNECT_FAILED\]/);
    expect(r1.stderr).toMatch(/\[(CONNECT_FAILED|CONNECTION_CLOSED|ABORTED)\]/);
  }, 60_000);

  it('when rank 0 gives up during rendezvous, rank 1 learns why (rank 2 did not join)', async () => {
    const [, r1] = await byHand([rank2Missing, rank2Missing], { delayMs: 1000 });
    expect(r1.stderr).toMatch(/rank 1\b.*rank 2\b.*\[(CONNECT_FAILED|ABORTED)\]/);
  }, 60_000);

  describe('MASTER_PORT taken by another program', () => {
    let server: Server | undefined;
    afterAll(() => server?.close());
    const occupy = async (onConnection: (s: Socket) => void) => {
      const port = await freePort();
      server?.close();
      server = createServer(onConnection);
      await new Promise<void>((ok) => server!.listen(port, '127.0.0.1', ok));
      return port;
    };

    it('that never answers: rank 0 fails ADDRESS_IN_USE; rank 1 fails CONNECT_FAILED at the deadline', async () => {
      const port = await occupy(() => {});
      const [r0, r1] = await byHand([{}, {}], { port });
      expect(r0.stderr).toMatch(
        /rank 0 cannot serve the rendezvous store: .*127\.0\.0\.1:\d+: address already in use \[ADDRESS_IN_USE\]/,
      );
      expect(r1.stderr).toMatch(
        /rank 1 cannot reach the rendezvous store at 127\.0\.0\.1:\d+: no store reachable .*within 5000 ms.*\[CONNECT_FAILED\]/,
      );
    }, 60_000);

    it('that answers something else: rank 1 fails at once with a protocol error naming the address', async () => {
      const port = await occupy((s) => s.end('HTTP/1.1 400 Bad Request\r\n\r\n'));
      const [r0, r1] = await byHand([{}, {}], { port });
      expect(r0.stderr).toMatch(/\[ADDRESS_IN_USE\]/);
      expect(r1.stderr).toMatch(
        new RegExp(`rank 1 cannot reach the rendezvous store at 127\\.0\\.0\\.1:${port}: .*\\[PROTOCOL_ERROR\\]`),
      );
    }, 60_000);
  });
});

describe('a rank that dies mid-job', () => {
  const survivors = (stderr: string) =>
    [...stderr.matchAll(/^WebcclError: allReduce #\d+ on rank (\d+): (.*)$/gm)].map((m) => ({
      rank: Number(m[1]),
      message: m[2],
    }));

  it('--procs -n 3, rank 1 exits with code 7 after the first allReduce: the launcher names rank 1, the others fail CONNECTION_CLOSED (no hang)', async () => {
    const r = await run(node, [bin, 'run', '--procs', '-n', '3', failing, 'exit-rank-1'], env());
    expect({ code: r.code, hung: r.hung }).toEqual({ code: 1, hung: false });
    expect(r.stdout.match(/^first allReduce done/gm)).toHaveLength(3);
    expect(r.stdout).not.toMatch(/second allReduce done/);
    expect(r.stderr).toMatch(/^webccl: rank 1 failed: exited with code 7$/m);
    // Each survivor printed its own error before the launcher's grace period ran out.
    const errs = survivors(r.stderr);
    expect(errs.map((e) => e.rank).sort(), r.stderr).toEqual([0, 2]);
    for (const e of errs) expect(e.message).toMatch(/rank \d+.*\[(CONNECTION_CLOSED|ABORTED)\]$/);
    // The first survivor to fail learnt it from rank 1 itself (rank 2 receives from it in the
    // ring, rank 0 sends to it), so at least one names it; the other may name that survivor.
    expect(errs.filter((e) => /rank 1\b/.test(e.message)).length).toBeGreaterThan(0);
  }, 60_000);

  it('in --procs -n 4, every survivor names the dead rank 1', async () => {
    const r = await run(node, [bin, 'run', '--procs', '-n', '4', failing, 'exit-rank-1'], env());
    expect(r.code).toBe(1);
    const errs = survivors(r.stderr);
    expect(errs.map((e) => e.rank).sort(), r.stderr).toEqual([0, 2, 3]);
    for (const e of errs) expect(e.message).toMatch(/rank 1\b/);
  }, 60_000);
});
