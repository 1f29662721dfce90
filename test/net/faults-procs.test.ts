// The faults of test/net/faults.test.ts across real processes: `webccl run --procs` and two
// `webccl run --nnodes 2` launchers of two threads each, on the built package (dist/). Every
// rank script is test/net/fixtures/net-faults.mjs, which prints its pid and, when its op fails,
// one "fault rank R {code, details, message}" line. Deadlines are short; every process started
// is gone when each test ends (checked by pid).
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/net.js';
import { alive, bin, cleanEnv, type Env, fixture, killAll, pidsIn, type Run, run } from '../helpers/procs.js';

afterAll(killAll);
const node = process.execPath;
const faults = fixture('net-faults.mjs', 'net');

interface Fault {
  code: string;
  details: Record<string, any>;
  message: string;
}

function faultsIn(stdout: string): Map<number, Fault> {
  return new Map(
    [...stdout.matchAll(/^fault rank (\d+) (.*)$/gm)].map((m) => [Number(m[1]), JSON.parse(m[2]) as Fault]),
  );
}

/** No process a rank script reported is left running (the launcher ends its ranks). */
async function expectNoneLeft(...runs: Run[]) {
  const pids = runs.flatMap((r) => pidsIn(r.stdout));
  expect(pids.length).toBeGreaterThan(0);
  for (let i = 0; i < 50 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
  expect(pids.filter(alive)).toEqual([]);
}

const procs = (n: number, args: string[], env: Env = {}, onLine?: (l: string) => void) =>
  run(
    node,
    [bin, 'run', '--procs', '-n', String(n), faults, ...args],
    cleanEnv({ WEBCCL_TIMEOUT_MS: '20000', ...env }),
    { onLine },
  );

async function twoNodes(args: string[], env: Env = {}): Promise<Run[]> {
  const port = await freePort();
  return Promise.all(
    [0, 1].map((k) =>
      run(
        node,
        [
          bin,
          'run',
          '--nnodes',
          '2',
          '--node-rank',
          String(k),
          '--nproc-per-node',
          '2',
          '--master-addr',
          '127.0.0.1',
          '--master-port',
          String(port),
          faults,
          ...args,
        ],
        cleanEnv({ WEBCCL_TIMEOUT_MS: '20000', ...env }),
      ),
    ),
  );
}

describe('a broadcast whose ranks name different roots fails with MISMATCH on every rank', () => {
  const expectRootMismatch = (rs: Run[], n: number) => {
    const out = rs.map((r) => r.stdout).join('');
    const fs = faultsIn(out);
    expect(out).not.toMatch(/^completed/m);
    expect([...fs.keys()].sort(), rs.map((r) => r.stderr).join('\n')).toEqual(Array.from({ length: n }, (_, r) => r));
    for (const [r, f] of fs) {
      expect({ rank: r, code: f.code }, f.message).toEqual({ rank: r, code: 'MISMATCH' });
      expect(f.details.field, f.message).toBe('root');
      expect(f.message).toMatch(/disagree on the root of op #\d+: rank \d has \d, rank \d has \d/);
    }
    for (const r of rs) expect({ code: r.code, hung: r.hung }).toEqual({ code: 1, hung: false });
  };

  for (const [n, bytes] of [
    [2, 64],
    [2, 16 << 20],
    [4, 64],
    [4, 16 << 20],
  ]) {
    it(`--procs -n ${n}, ${bytes} bytes`, async () => {
      const r = await procs(n, ['roots', String(bytes)]);
      expectRootMismatch([r], n);
      await expectNoneLeft(r);
    }, 60_000);
  }

  it('--nnodes 2 --nproc-per-node 2, 16 MiB', async () => {
    const rs = await twoNodes(['roots', String(16 << 20)]);
    expectRootMismatch(rs, 4);
    await expectNoneLeft(...rs);
  }, 60_000);
});

describe('gather, scatter and allToAll whose ranks disagree fail with MISMATCH', () => {
  const expectMismatch = (rs: Run[], ranks: number[], field: string) => {
    const fs = faultsIn(rs.map((r) => r.stdout).join(''));
    for (const r of ranks) {
      const f = fs.get(r);
      expect(
        { rank: r, code: f?.code, field: f?.details.field },
        f?.message ?? rs.map((x) => x.stderr).join('\n'),
      ).toEqual({ rank: r, code: 'MISMATCH', field });
    }
    for (const r of rs) expect(r.hung).toBe(false);
  };

  for (const [mode, n, bytes] of [
    ['gather-roots', 2, 64],
    ['gather-roots', 4, 4 << 20],
    ['scatter-roots', 3, 64],
    ['scatter-roots', 4, 4 << 20],
  ] as const) {
    it(`${mode}, --procs -n ${n}, ${bytes} bytes: every rank`, async () => {
      const r = await procs(n, [mode, String(bytes)]);
      expect(r.stdout).not.toMatch(/^completed/m);
      expectMismatch(
        [r],
        Array.from({ length: n }, (_, k) => k),
        'root',
      );
      await expectNoneLeft(r);
    }, 60_000);
  }

  it('allToAll, rank 1 expects less from rank 0 than it sends, --procs -n 3: both fail naming the counts', async () => {
    const r = await procs(3, ['counts', String(1 << 20)]);
    expectMismatch([r], [0, 1], 'counts');
    expect(faultsIn(r.stdout).get(1)?.details.values).toEqual([
      `sendCounts[1]=${(1 << 18) + 1}`,
      `recvCounts[0]=${1 << 18}`,
    ]);
    await expectNoneLeft(r);
  }, 60_000);

  it('gather-roots and counts on --nnodes 2 --nproc-per-node 2', async () => {
    const rs = await twoNodes(['gather-roots', String(1 << 20)]);
    expectMismatch(rs, [0, 1, 2, 3], 'root');
    const cs = await twoNodes(['counts', '64']);
    expectMismatch(cs, [0, 1], 'counts');
    await expectNoneLeft(...rs, ...cs);
  }, 90_000);
});

describe('abort(reason) reaches every peer as ABORTED with the rank and its reason', () => {
  const expectAbortedBy1 = (f: Fault | undefined, r: number) => {
    expect({ rank: r, code: f?.code, by: f?.details.by, reason: f?.details.reason }, f?.message).toEqual({
      rank: r,
      code: 'ABORTED',
      by: 1,
      reason: 'stopping on purpose',
    });
    expect(f!.message).toMatch(/rank 1 aborted the communicator: stopping on purpose/);
  };

  it('--procs -n 3: ranks 0 and 2, in a 32 MiB allReduce, hear it from rank 1', async () => {
    const r = await procs(3, ['abort']);
    const fs = faultsIn(r.stdout);
    for (const k of [0, 2]) expectAbortedBy1(fs.get(k), k);
    expect(r.stdout).not.toMatch(/EPIPE|ECONNRESET/);
    await expectNoneLeft(r);
  }, 60_000);

  it("--nnodes 2 x 2 threads: ranks 2 and 3 of the other node and rank 1's node mate 0 hear it from rank 1", async () => {
    const rs = await twoNodes(['abort']);
    const fs = faultsIn(rs.map((x) => x.stdout).join(''));
    for (const k of [0, 2, 3]) expectAbortedBy1(fs.get(k), k);
    await expectNoneLeft(...rs);
  }, 60_000);
});

describe('a frozen rank (SIGSTOP): every TIMEOUT names it, not the neighbour waiting for it', () => {
  for (const n of [3, 4]) {
    it(`--procs -n ${n}, rank 1 stopped mid-loop`, async () => {
      let looping = 0;
      let reported = 0;
      let stopped = 0;
      const pids = new Map<number, number>();
      const r = await procs(n, ['loop'], { WEBCCL_TIMEOUT_MS: '3000' }, (line) => {
        const p = /^pid rank (\d+) (\d+)$/.exec(line);
        if (p) pids.set(Number(p[1]), Number(p[2]));
        if (/^looping rank/.test(line) && ++looping === n) {
          stopped = pids.get(1)!;
          process.kill(stopped, 'SIGSTOP');
        }
        // Every survivor has spoken: end the stopped rank rather than wait for the launcher's
        // SIGTERM (held while stopped) and its SIGKILL a grace later.
        if (/^fault rank/.test(line) && ++reported === n - 1) process.kill(stopped, 'SIGKILL');
      });
      try {
        expect(stopped).toBeGreaterThan(0);
        const fs = faultsIn(r.stdout);
        const survivors = Array.from({ length: n }, (_, k) => k).filter((k) => k !== 1);
        expect([...fs.keys()].sort(), r.stderr).toEqual(survivors);
        for (const [k, f] of fs) {
          expect(
            { rank: k, code: ['TIMEOUT', 'ABORTED'].includes(f.code), missing: f.details.missing },
            f.message,
          ).toEqual({ rank: k, code: true, missing: [1] });
        }
        expect(
          [...fs.values()].some((f) => f.code === 'TIMEOUT' && /the stall starts at rank 1\b/.test(f.message)),
        ).toBe(true);
        expect(r.hung).toBe(false);
      } finally {
        if (stopped && alive(stopped)) {
          process.kill(stopped, 'SIGCONT');
          process.kill(stopped, 'SIGKILL');
        }
      }
      await expectNoneLeft(r);
    }, 60_000);
  }
});

describe('a frozen node (SIGSTOP) in --nnodes 2 x 2 threads', () => {
  it('node 1 stopped mid-loop: ranks 0 and 1 name a rank of node 1, never their node mate waiting on it', async () => {
    const port = await freePort();
    let stopped = 0;
    let looping = 0;
    let reported = 0;
    const env = cleanEnv({ WEBCCL_TIMEOUT_MS: '3000' });
    const args = (k: number) => [
      bin,
      'run',
      '--nnodes',
      '2',
      '--node-rank',
      String(k),
      '--nproc-per-node',
      '2',
      '--master-addr',
      '127.0.0.1',
      '--master-port',
      String(port),
      faults,
      'loop',
    ];
    const pids = new Map<number, number>();
    const onLine = (line: string) => {
      const p = /^pid rank (\d+) (\d+)$/.exec(line);
      if (p) pids.set(Number(p[1]), Number(p[2]));
      if (/^looping rank/.test(line) && ++looping === 4) {
        stopped = pids.get(2)!;
        process.kill(stopped, 'SIGSTOP');
      }
      if (/^fault rank/.test(line) && ++reported === 2) process.kill(stopped, 'SIGKILL');
    };
    const rs = await Promise.all([0, 1].map((k) => run(node, args(k), env, { onLine })));
    try {
      const fs = faultsIn(rs[0].stdout);
      expect([...fs.keys()].sort(), rs[0].stderr).toEqual([0, 1]);
      for (const [, f] of fs) {
        expect(['TIMEOUT', 'ABORTED'], f.message).toContain(f.code);
        expect(f.details.missing).toHaveLength(1);
        expect([2, 3], f.message).toContain(f.details.missing[0]);
      }
    } finally {
      if (stopped && alive(stopped)) {
        process.kill(stopped, 'SIGCONT');
        process.kill(stopped, 'SIGKILL');
      }
    }
    await expectNoneLeft(...rs);
  }, 60_000);
});

describe('a rank with the wrong token', () => {
  it('rank 1 of 2 (by hand): both fail well before the connect deadline; rank 0 AUTH_FAILED naming rank 1', async () => {
    const port = await freePort();
    const common = {
      WORLD_SIZE: '2',
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(port),
      WEBCCL_CONNECT_TIMEOUT_MS: '60000',
      WEBCCL_JOB_ID: 'job-a',
    };
    const rs = await Promise.all(
      [0, 1].map((k) =>
        run(
          node,
          [fixture('net-fail.mjs'), 'join'],
          cleanEnv({ ...common, RANK: String(k), WEBCCL_TOKEN: k === 1 ? 'token-b' : 'token-a' }),
        ),
      ),
    );
    for (const r of rs)
      expect({ code: r.code, hung: r.hung, quick: r.ms < 30_000 }, r.stderr).toEqual({
        code: 1,
        hung: false,
        quick: true,
      });
    expect(rs[1].stderr).toMatch(/rank 1 cannot reach the rendezvous store .*token mismatch.*\[AUTH_FAILED\]/);
    expect(rs[0].stderr).toMatch(
      /rank 0: the store at 127\.0\.0\.1:\d+ refused .*token mismatch.*rank 1 of 2 has not joined.*\[AUTH_FAILED\]/,
    );
  }, 60_000);
});
