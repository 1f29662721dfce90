// Ranks that only dial (what a page's ranks are), as Node processes so that every case runs
// without a browser: they join the job whose store `webccl serve` hosts with initCommGroup or
// createNode's `master`, Node ranks join it with WEBCCL_STORE_SERVED=1, and the mesh has a
// two-way link for each pair with a dial-only end. Every op checked on every rank; a dial-only
// rank that dies mid-op fails the others naming it; a transport disagreement fails everyone;
// bad options are refused at the boundary. No timing asserts.
import { afterAll, describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
import { initCommGroup } from '../../src/index.js';
import { createNode } from '../../src/progress/create-node.js';
import { cleanEnv, type Env, fixture, killAll, type Run, run } from '../helpers/procs.js';
import { JOB_TOKEN, servedJob } from '../helpers/served-job.js';

afterAll(killAll);
const node = process.execPath;

const okRanks = (rs: Run[]) =>
  [
    ...rs
      .map((r) => r.stdout)
      .join('')
      .matchAll(/^ok rank (\d+) of (\d+) /gm),
  ]
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
const expectAllOk = (rs: Run[], n: number) => {
  for (const r of rs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
  expect(okRanks(rs)).toEqual(Array.from({ length: n }, (_, k) => k));
};
const dialEnv = (master: string, rank: number, size: number, jobId: string, extra: Env = {}) =>
  cleanEnv({
    DIAL_MASTER: master,
    DIAL_RANK: String(rank),
    DIAL_SIZE: String(size),
    DIAL_TOKEN: JOB_TOKEN,
    DIAL_JOB: jobId,
    ...extra,
  });

describe('ranks that only dial, in a job with Node ranks that listen', () => {
  it('2 Node ranks + 1 dial-only rank: every collective, send/recv and a split check out on all 3; run again on the same store (emptied between runs), again', async () => {
    const job = await servedJob('dial-3');
    try {
      for (const round of [1, 2]) {
        const rs = await Promise.all([
          run(node, [fixture('net-check.mjs')], job.nodeEnv(0, 3)),
          run(node, [fixture('net-check.mjs')], job.nodeEnv(1, 3)),
          run(node, [fixture('net-check.mjs')], dialEnv(job.master, 2, 3, job.jobId, { WEBCCL_DEBUG: 'INFO' })),
        ]);
        expectAllOk(rs, 3);
        expect(rs[2].stderr, `round ${round}`).toMatch(
          /rank 2\/3: 3 node\(s\), mesh of 2 channel\(s\) per peer over ws, dialling only/,
        );
        // Every rank has left: the store holds nothing of this run.
        for (let i = 0; i < 200 && job.served.store!.server.stats().keys > 0; i++)
          await new Promise((r) => setTimeout(r, 25));
        expect(job.served.store!.server.stats().keys).toBe(0);
      }
    } finally {
      await job.close();
    }
  }, 90_000);

  it('2 Node ranks + 2 dial-only nodes of 2 threads each: all 6 ranks check out; dial-only pairs meet through the relay of webccl serve', async () => {
    const job = await servedJob('dial-6');
    try {
      const dialNode = (first: number) =>
        run(
          node,
          [fixture('dial-node.mjs', 'net'), job.master, String(first), '2', '6', JOB_TOKEN, job.jobId],
          cleanEnv(),
        );
      const rs = await Promise.all([
        run(node, [fixture('net-check.mjs')], job.nodeEnv(0, 6)),
        run(node, [fixture('net-check.mjs')], job.nodeEnv(1, 6)),
        dialNode(2),
        dialNode(4),
      ]);
      expectAllOk(rs, 6);
      // Links between the 4 dial-only ranks (2 channels per pair) all passed the relay; it holds none now.
      expect(job.served.store!.relay.stats()).toMatchObject({ waiting: 0, bytesForwarded: expect.any(Number) });
      expect(job.served.store!.relay.stats().bytesForwarded).toBeGreaterThan(0);
    } finally {
      await job.close();
    }
  }, 120_000);

  it('a dial-only rank SIGKILLed mid-op: every other rank fails with a coded error naming it, none hangs', async () => {
    const job = await servedJob('dial-kill');
    try {
      const rs = await Promise.all([
        run(node, [fixture('net-fail.mjs'), 'loop'], job.nodeEnv(0, 3)),
        run(node, [fixture('net-fail.mjs'), 'loop'], job.nodeEnv(1, 3)),
        run(node, [fixture('net-fail.mjs'), 'loop'], dialEnv(job.master, 2, 3, job.jobId, { DIAL_LOOP: '1' }), {
          onLine: (line) => {
            const pid = /^looping rank 2 pid (\d+)/.exec(line)?.[1];
            if (pid) process.kill(Number(pid), 'SIGKILL');
          },
        }),
      ]);
      expect(rs[2].code).toBe(null); // killed
      for (const r of rs.slice(0, 2)) {
        expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
        expect(r.stdout, r.stderr).toMatch(
          /^failed rank [01] code (CONNECTION_CLOSED|ABORTED): .*rank 2 closed its connections/m,
        );
      }
    } finally {
      await job.close();
    }
  }, 90_000);

  it('Node ranks on WEBCCL_TRANSPORT=tcp with a dial-only rank (which speaks ws): every rank fails naming both transports', async () => {
    const job = await servedJob('dial-tcp');
    try {
      const rs = await Promise.all([
        run(
          node,
          [fixture('net-fail.mjs'), 'join'],
          job.nodeEnv(0, 2, { WEBCCL_TRANSPORT: 'tcp', WEBCCL_CONNECT_TIMEOUT_MS: '20000' }),
        ),
        run(node, [fixture('net-fail.mjs'), 'join'], dialEnv(job.master, 1, 2, job.jobId)),
      ]);
      for (const r of rs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 1, hung: false });
      expect(rs.map((r) => r.stderr).join('')).toMatch(
        /WEBCCL_TRANSPORT=(ws|tcp), but the job's ranks agreed on WEBCCL_TRANSPORT=(tcp|ws)/,
      );
    } finally {
      await job.close();
    }
  }, 60_000);
});

describe('master options at the API boundary', () => {
  const refused = async (p: () => unknown, code: string, text: RegExp) => {
    const e = await Promise.resolve()
      .then(p)
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(WebcclError.is(e), String(e)).toBe(true);
    expect((e as WebcclError).code).toBe(code);
    expect((e as WebcclError).message).toMatch(text);
  };
  const base = { master: 'ws://127.0.0.1:9', rank: 1, worldSize: 2, token: 't' };

  it('initCommGroup refuses a master that is not ws://HOST:PORT, a missing rank, size or token, and ranks outside the world', async () => {
    await refused(
      () => initCommGroup({ ...base, master: 'http://127.0.0.1:9' }),
      'INVALID_ARGUMENT',
      /option master must be ws:\/\/HOST:PORT/,
    );
    await refused(
      () => initCommGroup({ ...base, master: 'ws://127.0.0.1:9/store' }),
      'INVALID_ARGUMENT',
      /option master must be ws:\/\/HOST:PORT/,
    );
    await refused(() => initCommGroup({ ...base, master: 'ws://127.0.0.1' }), 'INVALID_ARGUMENT', /option master/);
    await refused(
      () => initCommGroup({ ...base, rank: undefined }),
      'INVALID_ARGUMENT',
      /option rank .* is required with master/,
    );
    await refused(() => initCommGroup({ ...base, worldSize: undefined }), 'INVALID_ARGUMENT', /option worldSize/);
    await refused(() => initCommGroup({ ...base, token: undefined }), 'INVALID_ARGUMENT', /option token/);
    await refused(() => initCommGroup({ ...base, rank: 2 }), 'INVALID_ARGUMENT', /rank 2 is outside world size 2/);
    await refused(
      () => initCommGroup({ worldSize: 2 }),
      'INVALID_ARGUMENT',
      /option worldSize names a job .* needs option master/,
    );
    await refused(() => initCommGroup({ ...base, mastr: 'x' } as never), 'INVALID_ARGUMENT', /mastr/);
  });

  it('createNode with master needs firstRank, and its ranks must fit the world; the job options need master', () => {
    expect(() => createNode({ nranks: 2, master: 'ws://127.0.0.1:9', worldSize: 4, token: 't' })).toThrow(
      /option firstRank .* is required with master/,
    );
    expect(() => createNode({ nranks: 2, master: 'ws://127.0.0.1:9', firstRank: 3, worldSize: 4, token: 't' })).toThrow(
      /ranks 3\.\.4 of this node do not fit world size 4/,
    );
    expect(() => createNode({ nranks: 2, firstRank: 0 })).toThrow(
      /option firstRank names a job across nodes, which needs option master/,
    );
    const h = createNode({
      nranks: 1,
      master: 'ws://127.0.0.1:9',
      firstRank: 1,
      worldSize: 4,
      token: 't',
      progress: false,
    });
    expect(h.job).toEqual({ master: 'ws://127.0.0.1:9', firstRank: 1, size: 4, token: 't', jobId: '127.0.0.1:10' });
  });

  it('WEBCCL_STORE_SERVED takes 0 or 1', async () => {
    const r = await run(
      node,
      [fixture('net-fail.mjs'), 'join'],
      cleanEnv({ RANK: '0', WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: '1', WEBCCL_STORE_SERVED: 'yes' }),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/WEBCCL_STORE_SERVED="yes": expected 0 or 1 \[INVALID_ARGUMENT\]/);
  });
});
