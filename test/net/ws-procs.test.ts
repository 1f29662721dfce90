// WEBCCL_TRANSPORT=ws across real processes, on the built package (dist/): every collective
// checked by the ranks over `webccl run --procs` and two `webccl run --nnodes 2` launchers; a
// wrong token; a rank SIGKILLed mid-job; a rank with WEBCCL_TRANSPORT=tcp among ws ranks; ws with
// WEBCCL_TLS=1; a shrink after a death (its new mesh over ws too). Every job ends on its own (no hang) with the error
// naming the cause.
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/net.js';
import { alive, bin, cleanEnv, type Env, fixture, killAll, type Run, run } from '../helpers/procs.js';

afterAll(killAll);
const node = process.execPath;
const WS = { WEBCCL_TRANSPORT: 'ws' };

const okRanks = (out: string, n: number) =>
  [...out.matchAll(/^ok rank (\d+) of (\d+) /gm)]
    .filter((m) => Number(m[2]) === n)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);

function expectOk(rs: Run[], n: number) {
  for (const r of rs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
  expect(okRanks(rs.map((r) => r.stdout).join(''), n)).toEqual(Array.from({ length: n }, (_, k) => k));
}

/** Ranks 0..n-1 started by hand (torchrun's variables), rank k with `env(k)`. */
async function byHand(n: number, env: (k: number) => Env): Promise<Run[]> {
  const port = await freePort();
  const common = {
    WORLD_SIZE: String(n),
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(port),
    WEBCCL_CONNECT_TIMEOUT_MS: '60000',
    WEBCCL_JOB_ID: 'job-ws',
    WEBCCL_TOKEN: 'token-a',
  };
  return Promise.all(
    Array.from({ length: n }, (_, k) =>
      run(node, [fixture('net-fail.mjs'), 'join'], cleanEnv({ ...common, RANK: String(k), ...env(k) })),
    ),
  );
}

describe('WEBCCL_TRANSPORT=ws: jobs that work', () => {
  it('--procs -n 3: every collective checks out, over a WebSocket mesh', async () => {
    const r = await run(
      node,
      [bin, 'run', '--procs', '-n', '3', fixture('net-check.mjs')],
      cleanEnv({ ...WS, WEBCCL_DEBUG: 'INFO' }),
    );
    expectOk([r], 3);
    expect(r.stderr.match(/mesh of 2 channel\(s\) per peer over ws,/g), r.stderr).toHaveLength(3);
  }, 90_000);

  it('--nnodes 2 --nproc-per-node 2: every collective checks out, hierarchical and ring', async () => {
    const port = await freePort();
    const rs = await Promise.all(
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
            fixture('net-check.mjs'),
            '--expect-default',
            'hierarchical',
            '--algo',
            'ring',
          ],
          cleanEnv(WS),
        ),
      ),
    );
    expectOk(rs, 4);
  }, 90_000);
});

describe('WEBCCL_TRANSPORT=ws: shrink builds its new mesh over ws too', () => {
  it('--procs -n 4 --fault-tolerant, rank 3 killed: the survivors shrink to 3 and their allReduce is right', async () => {
    const r = await run(
      node,
      [bin, 'run', '--fault-tolerant', '--procs', '-n', '4', fixture('shrink-check.mjs'), '3'],
      cleanEnv({ ...WS, WEBCCL_TOKEN: 'shrink-ws' }),
      { guardMs: 150_000 },
    );
    const oks = [...r.stdout.matchAll(/^ok rank (\d+) of 4 shrunk to (\d+) as rank (\d+) after (\w+)$/gm)].map((m) => [
      Number(m[1]),
      Number(m[2]),
      Number(m[3]),
      m[4],
    ]);
    expect(oks.sort(), r.stderr).toEqual(
      [0, 1, 2].map((k) => [k, 3, k, expect.stringMatching(/^(CONNECTION_CLOSED|ABORTED)$/)]),
    );
    expect({ code: r.code, hung: r.hung }).toEqual({ code: 0, hung: false });
  }, 180_000);
});

describe('WEBCCL_TRANSPORT=ws: jobs that fail, on every rank, naming the cause', () => {
  it('rank 1 has another token: both fail promptly with AUTH_FAILED, rank 0 naming rank 1', async () => {
    const rs = await byHand(2, (k) => ({ ...WS, WEBCCL_TOKEN: k === 1 ? 'token-b' : 'token-a' }));
    for (const r of rs)
      expect({ code: r.code, hung: r.hung, quick: r.ms < 30_000 }, r.stderr).toEqual({
        code: 1,
        hung: false,
        quick: true,
      });
    expect(rs[1].stderr).toMatch(/rank 1 cannot reach the rendezvous store .*token mismatch.*\[AUTH_FAILED\]/);
    expect(rs[0].stderr).toMatch(
      /rank 0: the store .*refused .*token mismatch.*rank 1 of 2 has not joined.*\[AUTH_FAILED\]/,
    );
  }, 60_000);

  it('rank 1 with WEBCCL_TRANSPORT=tcp among ws ranks: every rank fails with a coded error naming both', async () => {
    const rs = await byHand(3, (k) => ({ WEBCCL_TRANSPORT: k === 1 ? 'tcp' : 'ws' }));
    for (const [k, r] of rs.entries()) {
      expect({ rank: k, code: r.code, hung: r.hung, quick: r.ms < 30_000 }, r.stderr).toEqual({
        rank: k,
        code: 1,
        hung: false,
        quick: true,
      });
      expect(r.stderr, `rank ${k}`).toMatch(
        /WEBCCL_TRANSPORT=(tcp|ws), but the job's ranks agreed on WEBCCL_TRANSPORT=(ws|tcp)/,
      );
      expect(r.stderr, `rank ${k}`).toMatch(/\[(INVALID_ARGUMENT|ABORTED)\]/);
    }
    // The rank that disagrees with the first to arrive fails INVALID_ARGUMENT itself.
    expect(rs.filter((r) => /\[INVALID_ARGUMENT\]/.test(r.stderr)).length).toBeGreaterThan(0);
  }, 60_000);

  it('WEBCCL_TRANSPORT=ws with WEBCCL_TLS=1: UNSUPPORTED, saying so; a bad value: INVALID_ARGUMENT', async () => {
    const rs = await byHand(2, (k) => (k === 0 ? { ...WS, WEBCCL_TLS: '1' } : { WEBCCL_TRANSPORT: 'udp' }));
    for (const r of rs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 1, hung: false });
    expect(rs[0].stderr).toMatch(/WEBCCL_TLS=1 with WEBCCL_TRANSPORT=ws.*\[UNSUPPORTED\]/);
    expect(rs[1].stderr).toMatch(/WEBCCL_TRANSPORT="udp": expected tcp or ws.*\[INVALID_ARGUMENT\]/);
  }, 60_000);

  it('--procs -n 3, rank 1 SIGKILLed mid-loop: ranks 0 and 2 fail CONNECTION_CLOSED/ABORTED naming rank 1', async () => {
    let looping = 0;
    const pids = new Map<number, number>();
    const r = await run(
      node,
      [bin, 'run', '--procs', '-n', '3', fixture('net-faults.mjs', 'net'), 'loop'],
      cleanEnv({ ...WS, WEBCCL_TIMEOUT_MS: '20000' }),
      {
        onLine: (line) => {
          const p = /^pid rank (\d+) (\d+)$/.exec(line);
          if (p) pids.set(Number(p[1]), Number(p[2]));
          if (/^looping rank/.test(line) && ++looping === 3) process.kill(pids.get(1)!, 'SIGKILL');
        },
      },
    );
    const faults = new Map(
      [...r.stdout.matchAll(/^fault rank (\d+) (.*)$/gm)].map((m) => [
        Number(m[1]),
        JSON.parse(m[2]) as { code: string; message: string },
      ]),
    );
    expect(r.hung).toBe(false);
    expect([...faults.keys()].sort(), r.stdout + r.stderr).toEqual([0, 2]);
    for (const [k, f] of faults) {
      expect(['CONNECTION_CLOSED', 'ABORTED'], f.message).toContain(f.code);
      expect(f.message, `rank ${k}`).toMatch(/rank 1\b/);
    }
    for (const pid of pids.values())
      for (let i = 0; i < 50 && alive(pid); i++) await new Promise((ok) => setTimeout(ok, 100));
    expect([...pids.values()].filter(alive)).toEqual([]);
  }, 90_000);
});
