// How a rank's life ends, and what its peers learn: a rank that leaves (its script ends) fails
// only the ops that need it, at once and naming it; abort(reason) reaches every peer with the
// aborting rank and its text; a rank's last lines reach the terminal even when it blocks or is
// ended; and ranks never outlive their launcher, however it ends. In-process ranks (the
// TypeScript sources), worker threads (launch() and webccl run -n), processes (--procs) and
// nodes (--nnodes).
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { Communicator } from '../../src/api/communicator.js';
import { leaveNode } from '../../src/core/node.js';
import { boundedUtf8 } from '../../src/core/reason-text.js';
import { REASON_BYTES } from '../../src/core/shm-map.js';
import { joinNode } from '../../src/engine/context.js';
import { createNode } from '../../src/progress/create-node.js';
import { settleAll, together } from '../helpers/inproc.js';
import { formFlags } from '../helpers/launch-forms.js';
import { freePort } from '../helpers/net.js';
import { runScenario } from '../helpers/threads.js';

const bin = fileURLToPath(new URL('../../bin/webccl.js', import.meta.url));
const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));
const beside = (name: string) => fileURLToPath(new URL(`fixtures/${name}`, import.meta.url));

function inproc(n: number, timeoutMs = 60_000) {
  const node = createNode({ nranks: n, slotBytes: 4096 });
  const comms = Array.from({ length: n }, (_, r) => new Communicator(joinNode(node, r, { spinUs: 0 }), { timeoutMs }));
  return { node, comms };
}

const codeOf = (e: unknown) => (e as { code?: string } | undefined)?.code;
const detailsOf = (e: unknown) => (e as { details?: Record<string, unknown> } | undefined)?.details;

describe('a rank that leaves fails only the ops that need it (in-process ranks)', () => {
  it('an op issued after rank 2 left fails at once on every peer with CONNECTION_CLOSED naming it', async () => {
    const { node, comms } = inproc(3);
    await together(comms, (c) => c.allReduce(new Float32Array(8).fill(1)));
    leaveNode(node, 2);
    // settleAll gives up after 20 s: far under the communicators' 60 s deadline.
    const errs = await settleAll(comms.slice(0, 2).map((c) => c.allReduce(new Float32Array(8))));
    for (const e of errs) {
      expect(codeOf(e)).toBe('CONNECTION_CLOSED');
      expect(detailsOf(e)).toMatchObject({ rank: 2, peer: 2 });
      expect((e as Error).message).toMatch(/rank 2 has left/);
    }
  });

  it('an op the departed rank finished completes on its peers with the right result', async () => {
    const { node, comms } = inproc(3);
    const xs = comms.map(() => new Float32Array(5000).fill(1)); // several chunks of a 4 KiB slot
    const works = comms.map((c, r) => c.allReduce(xs[r]));
    // Drive every rank until rank 2 alone has finished, then let it leave.
    const t0 = performance.now();
    while (!works[2].isCompleted()) {
      works.slice(0, 2).forEach((w) => w.isCompleted());
      if (performance.now() - t0 > 20_000) throw new Error('rank 2 did not finish its op');
    }
    leaveNode(node, 2);
    const errs = await settleAll(works.slice(0, 2));
    expect(errs).toEqual([undefined, undefined]);
    for (const x of xs) expect([x[0], x[4999]]).toEqual([3, 3]);
  });
});

describe('abort(reason) reaches every peer with the aborting rank and its text', () => {
  it('in-process ranks: ABORTED with details.by, details.reason, and the text in the message', async () => {
    const { comms } = inproc(3);
    const reason = 'out of memory in layer 7 — giving up';
    const pending = [comms[0].allReduce(new Float32Array(64)), comms[2].allReduce(new Float32Array(64))];
    pending.forEach((w) => w.isCompleted()); // both are waiting for rank 1
    comms[1].abort(reason);
    for (const e of await settleAll(pending)) {
      expect(codeOf(e)).toBe('ABORTED');
      expect(detailsOf(e)).toMatchObject({ by: 1, reason });
      expect((e as Error).message).toContain(reason);
    }
    // The aborting rank's own next op says the same.
    let own: unknown;
    try {
      comms[1].barrier();
    } catch (e) {
      own = e;
    }
    expect(codeOf(own)).toBe('ABORTED');
    expect(detailsOf(own)).toMatchObject({ by: 1, reason });
  });

  it('a long reason is cut to the shared area, never inside a character', async () => {
    const cut = boundedUtf8('é'.repeat(500));
    expect(cut.length).toBeLessThanOrEqual(REASON_BYTES - 4);
    expect(new TextDecoder('utf-8', { fatal: true }).decode(cut)).toBe('é'.repeat(cut.length / 2));
    const { comms } = inproc(2);
    const w = comms[0].allReduce(new Float32Array(4));
    comms[1].abort('€'.repeat(1000));
    const [e] = await settleAll([w]);
    expect(codeOf(e)).toBe('ABORTED');
    expect(detailsOf(e)!.reason).toBe('€'.repeat(Math.floor((REASON_BYTES - 4) / 3)));
  });
});

describe('worker threads (launch())', () => {
  for (const exit of [false, true]) {
    it(`a rank whose script ${exit ? 'calls process.exit(0)' : 'ends'}: the op it finished completes, the next fails at once naming it`, async () => {
      const { result, reports } = await runScenario(
        3,
        'leave',
        { leaves: 2, exit, count: 100_000, afterMs: 300, timeoutMs: 120_000 },
        { slotBytes: 4096 },
      );
      expect(result.exitCode).toBe(0);
      for (const r of [0, 1]) {
        const rep = reports[r][0];
        expect(rep.first).toBe(3);
        expect(rep.error.code).toBe('CONNECTION_CLOSED');
        expect(rep.error.details).toMatchObject({ rank: 2 });
        expect(rep.ms).toBeLessThan(30_000); // the deadline is 120 s
      }
    });
  }

  it('abort(reason) on rank 1: every peer gets ABORTED naming rank 1, with its reason', async () => {
    const reason = 'bad batch 42 on rank 1';
    const { reports } = await runScenario(3, 'abortReason', { aborts: 1, reason, timeoutMs: 120_000 });
    for (const r of [0, 2]) {
      const e = reports[r][0].error;
      expect(e.code).toBe('ABORTED');
      expect(e.details).toMatchObject({ by: 1, reason });
      expect(e.message).toContain(reason);
    }
  });

  it('a rank that left, then a rank that died of it: a later op names the rank that left first', async () => {
    const { reports } = await runScenario(3, 'leaveThenDeath', {});
    expect(reports[0][0].error).toMatchObject({ code: 'CONNECTION_CLOSED', details: { rank: 1 } });
    const e = reports[2][0].error;
    expect(e.code).toBe('CONNECTION_CLOSED');
    expect(e.details.rank).toBe(1);
    expect(e.message).toMatch(/rank 1 has left the job[\s\S]*since then: .*rank 0 died/);
  });

  it('a rank that died, then a rank that left of it: a later op names the rank that died', async () => {
    const { reports } = await runScenario(3, 'deathThenLeave', {});
    const e = reports[2][0].error;
    expect(e.code, JSON.stringify(e)).toBe('ABORTED');
    expect(e.details.by).toBe(1);
    expect(e.message).toMatch(/rank 1 died/);
  });

  it('a rank that throws: every peer learns its rank and its error in details', async () => {
    const { reports } = await runScenario(3, 'death', { dies: 1 });
    for (const r of [0, 2]) {
      const e = reports[r][0].error;
      expect(e.code).toBe('ABORTED');
      expect(e.details.by).toBe(1);
      expect(e.details.reason).toMatch(/rank 1 fails on purpose/);
    }
  });
});

// ---------------------------------------------------------------- whole jobs from the CLI

const children = new Set<ChildProcess>();
afterAll(() => children.forEach((c) => killGroup(c.pid!)));

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** The environment without any launcher's variables, plus `extra`. */
function env(extra: Record<string, string> = {}): Record<string, string | undefined> {
  const e: Record<string, string | undefined> = { ...process.env };
  for (const k of Object.keys(e))
    if (/^(WEBCCL_|RANK$|WORLD_SIZE$|LOCAL_RANK$|LOCAL_WORLD_SIZE$|MASTER_)/.test(k)) delete e[k];
  return { ...e, ...extra };
}

interface Job {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
  /** Resolves once `re` matches the output `count` times; rejects after `ms`. */
  waitFor(re: RegExp, count: number, ms: number): Promise<RegExpMatchArray[]>;
}

/** `webccl run ...` in its own process group (so nothing it starts can escape the cleanup). */
function start(args: string[], e = env()): Job {
  const child = spawn(process.execPath, [bin, 'run', ...args], {
    env: e,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  child.stdout!.on('data', (d) => {
    out += d;
    waiters.forEach((w) => w());
  });
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return {
    child,
    exited,
    out: () => out,
    err: () => err,
    waitFor: (re, count, ms) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const m = [...out.matchAll(new RegExp(re, 'gm'))];
          if (m.length < count) return;
          waiters.delete(check);
          clearTimeout(t);
          resolve(m);
        };
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`waited ${ms} ms for ${count} × ${re}; stdout:\n${out}\nstderr:\n${err}`));
        }, ms);
        waiters.add(check);
        check();
      }),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until none of `pids` exists; returns those still alive after `ms`. */
async function gone(pids: number[], ms: number): Promise<number[]> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (!pids.some(alive)) return [];
    await sleep(100);
  }
  return pids.filter(alive);
}

describe("a thread rank's output reaches the terminal (webccl run -n 2)", () => {
  it('lines printed right before a long blocking wait appear while the rank still waits', async () => {
    const job = start(['-n', '2', beside('print-then-block.mjs'), 'wait']);
    // The rank blocks for 60 s: its lines must come long before.
    await job.waitFor(/^rank 1 line \d$/, 3, 30_000);
    killGroup(job.child.pid!);
    await job.exited;
  });

  it('lines printed right before the rank is terminated appear', async () => {
    const job = start(['-n', '2', beside('print-then-block.mjs'), 'throw']);
    const code = await job.exited;
    expect(code).toBe(1);
    expect(job.err()).toMatch(/webccl: rank 0 failed: Error: rank 0 fails on purpose/);
    expect(job.out().match(/^rank 1 line \d$/gm)).toEqual(['rank 1 line 1', 'rank 1 line 2', 'rank 1 line 3']);
    expect(job.err()).toMatch(/^rank 1 error line$/m);
  });
});

describe('a thread rank that leaves a job across nodes (--nnodes 2, 2 threads each)', () => {
  it('its node peer fails naming it; the other node fails at once, naming it in the message', async () => {
    const port = await freePort();
    const e = env({ WEBCCL_TOKEN: 'lifecycle-test', WEBCCL_TIMEOUT_MS: '120000' });
    const nodes = [0, 1].map((k) =>
      start([...formFlags('nnodes', 4, String(port), k), beside('leave-then-op.mjs'), '0'], e),
    );
    const codes = await Promise.all(nodes.map((n) => n.exited));
    expect(codes).toEqual([0, 0]);
    const results = nodes
      .flatMap((n) => [...n.out().matchAll(/^result (\d+) (\w+) (.*) (\d+)$/gm)])
      .sort((a, b) => Number(a[1]) - Number(b[1]));
    expect(results.map((m) => Number(m[1]))).toEqual([1, 2, 3]);
    for (const [, rank, code, json, ms] of results) {
      const d = JSON.parse(json);
      expect(Number(ms)).toBeLessThan(30_000); // the deadline is 120 s
      if (rank === '1') {
        expect([code, d.rank]).toEqual(['CONNECTION_CLOSED', 0]);
      } else {
        // Whichever comes first: rank 0's own connections closing as its thread ends, or rank 1's abort.
        expect(['ABORTED', 'CONNECTION_CLOSED']).toContain(code);
        expect(d.message).toMatch(/rank 0 (has left|closed its connections)/);
      }
    }
  });
});

describe('ranks never outlive their launcher', () => {
  const ready = (job: Job, n: number) =>
    job.waitFor(/^ready (\d+) (\d+)$/, n, 60_000).then((ms) => ms.map((m) => Number(m[2])));

  it('SIGKILL of `webccl run --procs -n 3` running collectives: every rank aborts and ends within seconds', async () => {
    const job = start(['--procs', '-n', '3', beside('collective-loop.mjs')], env({ WEBCCL_TIMEOUT_MS: '120000' }));
    const pids = await ready(job, 3);
    await sleep(300); // some ops in flight
    job.child.kill('SIGKILL');
    expect(await gone(pids, 20_000)).toEqual([]);
    // Each rank said why it ended: its launcher's end, or (when a peer's abort reached its loop
    // first, and its script ended before the pipe's close was read) the coded error naming that
    // peer. Nothing of the job's process group is left.
    for (const r of [0, 1, 2]) {
      const launcherLine = new RegExp(
        `rank ${r} \\(pid \\d+\\): its launcher \\(pid \\d+\\) ended; aborting and ending this rank`,
      );
      const peerAbort = new RegExp(`^failed ${r} (ABORTED|CONNECTION_CLOSED) .*rank \\d`, 'm');
      expect(launcherLine.test(job.err()) || peerAbort.test(job.out()), `rank ${r}:\n${job.out()}\n${job.err()}`).toBe(
        true,
      );
    }
    expect(alive(-job.child.pid!)).toBe(false);
  });

  it('SIGKILL of `webccl run --procs -n 2` whose ranks never use webccl: they end too', async () => {
    const job = start(['--procs', '-n', '2', fixture('launch-procs.mjs'), 'sleep']);
    const pids = await ready(job, 2);
    job.child.kill('SIGKILL');
    expect(await gone(pids, 20_000)).toEqual([]);
    expect(alive(-job.child.pid!)).toBe(false);
  });

  it("SIGKILL of one --nnodes launcher: the other node's ranks fail at once with an error naming a lost rank", async () => {
    const port = await freePort();
    const e = env({ WEBCCL_TOKEN: 'lifecycle-test', WEBCCL_TIMEOUT_MS: '120000' });
    const nodes = [0, 1].map((k) =>
      start([...formFlags('nnodes', 4, String(port), k), beside('collective-loop.mjs')], e),
    );
    await Promise.all(nodes.map((n) => ready(n, 2)));
    await sleep(300);
    nodes[0].child.kill('SIGKILL');
    const failed = await nodes[1].waitFor(/^failed (\d+) (\w+) (.*)$/, 2, 30_000); // the deadline is 120 s
    // A rank that sees the lost connection first aborts its node peer (ABORTED, same cause).
    expect(failed.some((m) => m[2] === 'CONNECTION_CLOSED' && [0, 1].includes(JSON.parse(m[3]).peer))).toBe(true);
    for (const m of failed) {
      expect(['CONNECTION_CLOSED', 'ABORTED']).toContain(m[2]);
      expect(JSON.parse(m[3]).message).toMatch(/rank [01] closed its connections/);
    }
    expect(await nodes[1].exited).toBe(0);
  });

  it('a launcher started with an IPC channel (as webccl perf starts its nodes) ends its job when the channel closes', async () => {
    const child = spawn(process.execPath, [bin, 'run', '-n', '2', beside('print-then-block.mjs'), 'wait'], {
      env: env(),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    children.add(child);
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    await new Promise<void>((ready) => child.stdout!.on('data', (d) => String(d).includes('rank 1 line 3') && ready()));
    child.disconnect(); // what the parent's death does to the channel
    expect(await exited).toBe(1); // the ranks block for 60 s: only the launcher can have ended them
    expect(err).toMatch(/the process that started this launcher ended/);
  });
});
