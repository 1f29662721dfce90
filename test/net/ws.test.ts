// WEBCCL_TRANSPORT=ws across real processes, on the built package (dist/): every collective
// checked by the ranks over `webccl run --procs` and two `webccl run --nnodes 2` launchers; a
// wrong token; a rank SIGKILLed mid-job; a rank with WEBCCL_TRANSPORT=tcp among ws ranks; ws with
// WEBCCL_TLS=1; a shrink after a death (its new mesh over ws too). Every job ends on its own (no
// hang) with the error naming the cause.
import { describe, expect, it } from 'vitest';
import { type Env, leftOf, type Run } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { expectExit, launchForm, stdoutOf } from '../helpers/launch-forms.js';
import { expectFailedEarly, fixture, joinByHand } from '../helpers/procs.js';
import { faultJobs, faultsIn } from '../helpers/rank-faults.js';
import { shrunkIn } from '../helpers/shrink-check.js';

const WS = { WEBCCL_TRANSPORT: 'ws' };
const check = launchFixture('net-check.mjs', 'ws');
const faulty = faultJobs('ws-faults');

const okRanks = (out: string, n: number) =>
  [...out.matchAll(/^ok rank (\d+) of (\d+) /gm)]
    .filter((m) => Number(m[2]) === n)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);

function expectOk(rs: Run[], n: number) {
  expectExit(rs);
  expect(okRanks(stdoutOf(rs), n)).toEqual(Array.from({ length: n }, (_, k) => k));
}

/** Ranks 0..n-1 started by hand (torchrun's variables), rank k with `env(k)`. */
const byHand = (n: number, env: (k: number) => Env) => joinByHand(n, env, 'job-ws');

describe('WEBCCL_TRANSPORT=ws: jobs that work', () => {
  it('--procs -n 3: every collective checks out, over a WebSocket mesh', async () => {
    const rs = await launchForm(check, 'procs', 3, [], { ...WS, WEBCCL_DEBUG: 'INFO' }, { guardMs: 50_000 });
    expectOk(rs, 3);
    expect(rs[0].stderr.match(/mesh of 2 channel\(s\) per peer over ws,/g), rs[0].stderr).toHaveLength(3);
  }, 90_000);

  it('--nnodes 2 --nproc-per-node 2: every collective checks out, hierarchical and ring', async () => {
    const args = ['--expect-default', 'hierarchical', '--algo', 'ring'];
    expectOk(await launchForm(check, 'nnodes', 4, args, WS, { guardMs: 50_000 }), 4);
  }, 90_000);
});

describe('WEBCCL_TRANSPORT=ws: shrink builds its new mesh over ws too', () => {
  it('--procs -n 4 --fault-tolerant, rank 3 killed: the survivors shrink to 3 and their allReduce is right', async () => {
    const rs = await launchForm(
      check,
      'procs',
      4,
      ['3'],
      { ...WS, WEBCCL_TOKEN: 'shrink-ws' },
      { flags: ['--fault-tolerant'], script: fixture('shrink-check.mjs'), guardMs: 150_000 },
    );
    expect(shrunkIn(stdoutOf(rs)), rs[0].stderr).toEqual(
      [0, 1, 2].map((k) => [k, 3, k, expect.stringMatching(/^(CONNECTION_CLOSED|ABORTED)$/)]),
    );
    expectExit(rs);
  }, 180_000);
});

describe('WEBCCL_TRANSPORT=ws: jobs that fail, on every rank, naming the cause', () => {
  it('rank 1 has another token: both fail promptly with AUTH_FAILED, rank 0 naming rank 1', async () => {
    const rs = await byHand(2, (k) => ({ ...WS, WEBCCL_TOKEN: k === 1 ? 'token-b' : 'token-a' }));
    expectFailedEarly(rs);
    expect(rs[1].stderr).toMatch(/rank 1 cannot reach the rendezvous store .*token mismatch.*\[AUTH_FAILED\]/);
    expect(rs[0].stderr).toMatch(
      /rank 0: the store .*refused .*token mismatch.*rank 1 of 2 has not joined.*\[AUTH_FAILED\]/,
    );
  }, 60_000);

  it('rank 1 with WEBCCL_TRANSPORT=tcp among ws ranks: every rank fails with a coded error naming both', async () => {
    const rs = await byHand(3, (k) => ({ WEBCCL_TRANSPORT: k === 1 ? 'tcp' : 'ws' }));
    expectFailedEarly(rs);
    for (const [k, r] of rs.entries()) {
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
    expectExit(rs, 1);
    expect(rs[0].stderr).toMatch(/WEBCCL_TLS=1 with WEBCCL_TRANSPORT=ws.*\[UNSUPPORTED\]/);
    expect(rs[1].stderr).toMatch(/WEBCCL_TRANSPORT="udp": expected tcp or ws.*\[INVALID_ARGUMENT\]/);
  }, 60_000);

  it('--procs -n 3, rank 1 SIGKILLed mid-loop: ranks 0 and 2 fail CONNECTION_CLOSED/ABORTED naming rank 1', async () => {
    let looping = 0;
    const pids = new Map<number, number>();
    const [r] = await faulty('procs', 3, ['loop'], WS, (line) => {
      const p = /^pid rank (\d+) (\d+)$/.exec(line);
      if (p) pids.set(Number(p[1]), Number(p[2]));
      if (/^looping rank/.test(line) && ++looping === 3) process.kill(pids.get(1)!, 'SIGKILL');
    });
    const faults = faultsIn(r.stdout);
    expect(r.hung).toBe(false);
    expect([...faults.keys()].sort(), r.stdout + r.stderr).toEqual([0, 2]);
    for (const [k, f] of faults) {
      expect(['CONNECTION_CLOSED', 'ABORTED'], f.message).toContain(f.code);
      expect(f.message, `rank ${k}`).toMatch(/rank 1\b/);
    }
    expect(await leftOf([...pids.values()])).toEqual([]);
  }, 90_000);
});
