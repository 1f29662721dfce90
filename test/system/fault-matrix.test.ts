// The fault matrix: each fault of a rank or a buffer × each launch form where
// it applies — threads (`webccl run -n 3`), processes (`webccl run --procs -n 3`) and two nodes of
// two threads (two `webccl run --nnodes 2` launchers on this machine). Every rank runs
// test/system/fixtures/fault-rank.mjs and reports one FAULT-RESULT line; for every surviving rank we
// check the error code, that it came within a bound well under the default deadlines (the jobs
// run with 5 s deadlines), that it names the faulty rank, then the launchers' exit codes, and
// that no process of the job is left.
//
// FAULT_FORMS=threads (or procs, nnodes, a comma list) runs one launch form alone;
// FAULT_CONCURRENCY (default 3) bounds the jobs running at once; FAULT_REPORT=file.json writes
// what every row saw (codes, ranks named, times), from which the failure table of docs/failure-semantics.md is made.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ErrorCode } from '../../src/core/errors.js';
import { alive, cleanEnv, type Env, type Job, type Run, signalGroup, startJob } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { freePort } from '../helpers/net.js';

const { root, bin, script, tmp } = launchFixture(new URL('fixtures/fault-rank.mjs', import.meta.url), 'faults');

type Form = 'threads' | 'procs' | 'nnodes';
const ALL_FORMS: Form[] = ['threads', 'procs', 'nnodes'];
const FORMS = (process.env.FAULT_FORMS ?? ALL_FORMS.join(',')).split(',').map((f) => f.trim()) as Form[];
for (const f of FORMS)
  if (!ALL_FORMS.includes(f)) throw new Error(`FAULT_FORMS: unknown launch form ${f} (have ${ALL_FORMS.join(', ')})`);

/** Short deadlines, so that a deadline can be told apart from "at once" within the bounds. */
const BASE_ENV: Env = { WEBCCL_TIMEOUT_MS: '5000', WEBCCL_CONNECT_TIMEOUT_MS: '5000' };
const TOKEN = 'fault-matrix-token';
/** Guard against a job that never ends (not a timing assertion). */
const GUARD_MS = 60_000;

// ---------------------------------------------------------------- the table

interface Expect {
  /** Codes acceptable on each rank this applies to. */
  codes: ErrorCode[];
  /** Each rank's error must name one of the faulty ranks (default true). */
  names?: boolean;
  /** details.field must be this (MISMATCH). */
  field?: string;
  /** The message must carry this text (the reason given to abort()). */
  reason?: string;
  /** From the issue of the failing op to its rejection, at most. */
  boundMs: number;
}

interface Row {
  what: string;
  fault: string;
  params?: Record<string, unknown>;
  env?: Env;
  /** The launch forms the fault applies to. */
  forms: Form[];
  /** Ranks per form (default: 3 threads, 3 processes, 2 × 2 on nodes). */
  size?: Partial<Record<Form, number>>;
  /** The ranks that do the fault (default: [params.rank ?? 1]). */
  faulty?: (form: Form) => number[];
  /** What every surviving rank sees: an error, 'ok' (the job completes), or nothing asserted. */
  peers: Expect | 'ok' | 'none';
  /** The mismatch rows: the faulty rank must see the same as the others. */
  faultyToo?: boolean;
  /** What the faulty ranks see themselves, when they live to say it. */
  faultyCodes?: ErrorCode[];
  /** Whether each launcher must exit non-zero (default) or 0. */
  launcher?: 'fails' | 'ok';
  /** Extra environment of node k's launcher (nnodes). */
  nodeEnv?: (k: number) => Env;
  /** Acts on the running job (e.g. kills a launcher); returns the launchers it killed. */
  during?: (o: Running) => Promise<Job[]>;
  /** Runs of the job (default 1, or FAULT_REPEAT): the row holds if every run does. For rows
   *  whose outcome once depended on a race (a healthy rank named in one run of a few). */
  repeat?: number;
  /**
   * The same for a row whose every run waits out a deadline (seconds each): repeated only on
   * request (FAULT_REPEAT, npm run fuzz), once in the suite.
   */
  repeatOnRequest?: number;
  /** Further checks; returns the problems found. */
  check?: (o: Outcome) => string[] | Promise<string[]>;
}

const peerDied = (boundMs = 30_000): Expect => ({ codes: ['CONNECTION_CLOSED', 'ABORTED'], boundMs });
/** Rank 1 disagrees on `field`. */
const mismatch = (field: string): Row => ({
  what: `rank 1 disagrees on the ${field}: MISMATCH on every rank, naming the field`,
  fault: 'mismatch',
  params: { field },
  peers: { codes: ['MISMATCH'], names: false, field, boundMs: 30_000 },
  faultyToo: true,
  forms: ['threads', 'procs', 'nnodes'],
});

const ROWS: Row[] = [
  {
    what: 'rank 1 exits with code 7 mid-op: the others fail CONNECTION_CLOSED/ABORTED naming rank 1',
    fault: 'exit7',
    peers: peerDied(),
    forms: ['threads', 'procs', 'nnodes'],
  },
  {
    what: 'rank 1 is SIGKILLed mid 64 MiB allReduce: the others fail CONNECTION_CLOSED/ABORTED naming rank 1',
    fault: 'sigkill',
    peers: peerDied(),
    repeat: 4, // a survivor once named another survivor ("write … EPIPE") in one run of four
    forms: ['procs'],
  },
  {
    what: 'rank 1 drops every connection mid 64 MiB allReduce: the others fail CONNECTION_CLOSED/ABORTED naming rank 1',
    fault: 'drop',
    // The rank's own connections (the fixture destroys the sockets of its thread): with a network
    // progress thread the collectives run on that thread's (progress/net.test.ts ends it).
    env: { WEBCCL_PROGRESS: 'caller' },
    peers: peerDied(),
    faultyCodes: ['CONNECTION_CLOSED', 'ABORTED'],
    repeat: 3, // once named rank 1 everywhere in only one run of four
    forms: ['procs', 'nnodes'],
  },
  {
    what: 'rank 1 never calls initCommGroup: the others fail TIMEOUT/CONNECT_FAILED naming rank 1',
    fault: 'neverJoins',
    peers: { codes: ['TIMEOUT', 'CONNECT_FAILED', 'ABORTED'], boundMs: 30_000 },
    forms: ['threads', 'procs', 'nnodes'],
  },
  {
    what: 'rank 1 joins but never issues the op: the others fail TIMEOUT naming rank 1',
    fault: 'skipsOp',
    peers: { codes: ['TIMEOUT', 'ABORTED'], boundMs: 30_000 },
    repeatOnRequest: 4, // on nnodes, once named rank 1 everywhere in only one run of three
    forms: ['threads', 'procs', 'nnodes'],
  },
  mismatch('collective'),
  mismatch('count'),
  mismatch('dtype'),
  mismatch('op'),
  mismatch('root'),
  mismatch('algorithm'),
  mismatch('shape'),
  {
    what: "rank 1 calls abort(reason): the others fail ABORTED naming rank 1, with the reason's text",
    fault: 'abort',
    params: { reason: 'fault-matrix: rank 1 gives up' },
    peers: { codes: ['ABORTED'], reason: 'fault-matrix: rank 1 gives up', boundMs: 30_000 },
    forms: ['threads', 'procs', 'nnodes'],
  },
  {
    what: "rank 1's script ends while the others issue one more op: they fail at once, naming rank 1",
    fault: 'ends',
    env: { WEBCCL_TIMEOUT_MS: '20000' },
    peers: peerDied(10_000),
    forms: ['threads', 'procs', 'nnodes'],
  },
  {
    what: 'rank 1 is frozen (SIGSTOP): the others fail TIMEOUT naming rank 1',
    fault: 'freeze',
    size: { procs: 4 },
    repeatOnRequest: 4, // once named rank 1 everywhere in only one run of four
    peers: { codes: ['TIMEOUT', 'ABORTED'], boundMs: 30_000 },
    forms: ['procs'],
  },
  {
    what: 'rank 1 has a wrong WEBCCL_TOKEN: it fails AUTH_FAILED; the others fail promptly, naming it',
    fault: 'token',
    params: { token: 'wrong-token' },
    env: { WEBCCL_CONNECT_TIMEOUT_MS: '20000' },
    peers: { codes: ['CONNECT_FAILED', 'ABORTED', 'AUTH_FAILED'], boundMs: 10_000 },
    faultyCodes: ['AUTH_FAILED'],
    forms: ['procs'],
  },
  {
    what: 'rank 1 has no WEBCCL_TOKEN (the per-user file holds another): it fails AUTH_FAILED; the others fail promptly, naming it',
    fault: 'token',
    params: { token: null },
    env: { WEBCCL_CONNECT_TIMEOUT_MS: '20000' },
    peers: { codes: ['CONNECT_FAILED', 'ABORTED', 'AUTH_FAILED'], boundMs: 10_000 },
    faultyCodes: ['AUTH_FAILED'],
    forms: ['procs'],
  },
  {
    what: "node 1's launcher has another WEBCCL_TOKEN: ranks 2, 3 fail AUTH_FAILED; ranks 0, 1 fail promptly, naming them",
    fault: 'plain',
    env: { WEBCCL_CONNECT_TIMEOUT_MS: '20000' },
    nodeEnv: (k) => (k === 1 ? { WEBCCL_TOKEN: 'another-token' } : {}),
    faulty: () => [2, 3],
    peers: { codes: ['CONNECT_FAILED', 'ABORTED', 'AUTH_FAILED'], boundMs: 10_000 },
    faultyCodes: ['AUTH_FAILED'],
    forms: ['nnodes'],
  },
  {
    what: "node 1's launcher has no WEBCCL_TOKEN (the per-user file holds another): ranks 2, 3 fail AUTH_FAILED; ranks 0, 1 fail promptly, naming them",
    fault: 'plain',
    env: { WEBCCL_CONNECT_TIMEOUT_MS: '20000' },
    nodeEnv: (k) => (k === 1 ? { WEBCCL_TOKEN: undefined } : {}),
    faulty: () => [2, 3],
    peers: { codes: ['CONNECT_FAILED', 'ABORTED', 'AUTH_FAILED'], boundMs: 10_000 },
    faultyCodes: ['AUTH_FAILED'],
    forms: ['nnodes'],
  },
  {
    what: 'garbage and an oversized length frame on the store port and on a data port: each rogue connection is refused and logged with a code, the job completes',
    fault: 'hostile',
    params: { probes: ['storeGarbage', 'storeOversize', 'dataGarbage', 'dataOversize'] },
    env: { WEBCCL_DEBUG: 'INFO', WEBCCL_TIMEOUT_MS: '20000' },
    peers: 'ok',
    launcher: 'ok',
    check: (o) => [...probesClosed(o, 5000), ...refusalsLogged(o, 4)],
    forms: ['procs', 'nnodes'],
  },
  {
    what: 'an idle unauthenticated connection to a data port is closed within a few seconds (default connect deadline)',
    fault: 'hostile',
    params: { probes: ['dataIdle', 'storeIdle'], waitMs: 15_000 },
    env: { WEBCCL_DEBUG: 'INFO', WEBCCL_TIMEOUT_MS: '60000', WEBCCL_CONNECT_TIMEOUT_MS: undefined },
    peers: 'ok',
    launcher: 'ok',
    check: (o) => probesClosed(o, 12_000),
    forms: ['procs'],
  },
  {
    what: '60 garbage connections to a data port: refused, logged a few times only, each line with one code',
    fault: 'hostile',
    params: { probes: ['dataFlood'], flood: 60 },
    env: { WEBCCL_DEBUG: 'INFO', WEBCCL_TIMEOUT_MS: '20000' },
    peers: 'ok',
    launcher: 'ok',
    check: (o) => [...probesClosed(o, 5000), ...refusalsRateLimited(o, 10)],
    forms: ['procs'],
  },
  {
    what: 'the launcher is SIGKILLed: every rank ends within a few seconds',
    fault: 'plain',
    params: { spinMs: 50_000 },
    faulty: () => [],
    peers: 'none',
    during: async (o) => {
      await o.joined;
      o.jobs[0].child.kill('SIGKILL');
      return [o.jobs[0]];
    },
    check: (o) => ranksGoneWithin(o, 10_000),
    forms: ['procs'],
  },
  {
    what: "node 1's launcher is SIGKILLed: ranks 0, 1 fail CONNECTION_CLOSED/ABORTED naming rank 2 or 3",
    fault: 'plain',
    params: { spinMs: 50_000 },
    faulty: () => [2, 3],
    peers: peerDied(),
    during: async (o) => {
      await o.joined;
      o.jobs[1].child.kill('SIGKILL');
      return [o.jobs[1]];
    },
    forms: ['nnodes'],
  },
];

// ---------------------------------------------------------------- running a row

interface Result {
  rank: number;
  pid: number;
  role: 'peer' | 'faulty';
  ok: boolean;
  op: string;
  elapsedMs?: number;
  code?: string | null;
  webccl?: boolean;
  message?: string;
  details?: Record<string, unknown>;
}

interface Running {
  jobs: Job[];
  /** Resolves once every rank has printed FAULT-JOINED (or the job has ended). */
  joined: Promise<void>;
}

interface Outcome {
  form: Form;
  size: number;
  faulty: number[];
  runs: Run[];
  launcherPids: number[];
  /** The launchers the row killed, and when. */
  killed: Job[];
  killedAt: number;
  results: Result[];
  /** Every pid the job had: its launchers' and each rank's (from FAULT-START). */
  pids: number[];
  rankPids: number[];
  stderr: string;
  wallMs: number;
}

const lines = (out: string, tag: string) =>
  [...out.matchAll(new RegExp(`^${tag} (.*)$`, 'gm'))].map((m) => JSON.parse(m[1]));

/** At most `n` jobs at once: the rows run concurrently on few cores. */
const slots = { free: Number(process.env.FAULT_CONCURRENCY ?? 3), waiting: [] as (() => void)[] };
async function inSlot<T>(f: () => Promise<T>): Promise<T> {
  if (slots.free > 0) slots.free--;
  else await new Promise<void>((r) => slots.waiting.push(r));
  try {
    return await f();
  } finally {
    const next = slots.waiting.shift();
    if (next) next();
    else slots.free++;
  }
}

async function runRow(row: Row, form: Form, cleanup: (f: () => void) => void): Promise<Outcome> {
  const size = row.size?.[form] ?? (form === 'nnodes' ? 4 : 3);
  const faulty = row.faulty?.(form) ?? [Number(row.params?.rank ?? 1)];
  const args = [script, row.fault, JSON.stringify({ rank: 1, ...row.params })];
  const env = (k = 0) =>
    cleanEnv({
      HOME: join(tmp, 'home'),
      ...BASE_ENV,
      ...(form === 'nnodes' && { WEBCCL_TOKEN: TOKEN }),
      ...row.env,
      ...row.nodeEnv?.(k),
    });
  const t0 = performance.now();
  let jobs: Job[];
  if (form === 'nnodes') {
    const port = await freePort();
    jobs = [0, 1].map((k) =>
      startJob(
        process.execPath,
        [
          bin,
          'run',
          '--nnodes',
          '2',
          '--node-rank',
          String(k),
          '--nproc-per-node',
          String(size / 2),
          '--master-addr',
          '127.0.0.1',
          '--master-port',
          String(port),
          ...args,
        ],
        env(k),
        { cwd: root, guardMs: GUARD_MS },
      ),
    );
  } else {
    jobs = [
      startJob(
        process.execPath,
        [bin, 'run', ...(form === 'procs' ? ['--procs'] : []), '-n', String(size), ...args],
        env(),
        { cwd: root, guardMs: GUARD_MS },
      ),
    ];
  }
  // However the test ends, no process of the job survives it (a frozen rank is resumed to die).
  cleanup(() =>
    jobs.forEach((j) => {
      signalGroup(j, 'SIGCONT');
      signalGroup(j, 'SIGKILL');
    }),
  );
  const allOut = () => jobs.map((j) => j.stdout()).join('');
  // Every rank joined, or the job ended without (then there is nothing left to act on).
  const joined = new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (lines(allOut(), 'FAULT-JOINED').length >= size) {
        clearInterval(poll);
        resolve();
      }
    }, 50);
    void Promise.all(jobs.map((j) => j.done)).then(() => {
      clearInterval(poll);
      resolve();
    });
  });
  const killed = row.during ? await row.during({ jobs, joined }) : [];
  const killedAt = Date.now();
  const runs = await Promise.all(jobs.map((j) => j.done));
  const stdout = runs.map((r) => r.stdout).join('');
  const rankPids = lines(stdout, 'FAULT-START').map((s) => s.pid as number);
  return {
    form,
    size,
    faulty,
    runs,
    killed,
    killedAt,
    launcherPids: jobs.map((j) => j.pid),
    results: lines(stdout, 'FAULT-RESULT'),
    pids: [...new Set([...jobs.map((j) => j.pid), ...rankPids])],
    rankPids: [...new Set(rankPids)],
    stderr: runs.map((r) => r.stderr).join('\n'),
    wallMs: Math.round(performance.now() - t0),
  };
}

// ---------------------------------------------------------------- checks

/** Whether `r`'s error names one of `ranks`: in its details (rank, by, peer, missing), or in
 *  its message as "rank K" / "ranks J, K" (leaving out "on rank <itself>"). */
function namesRank(r: Result, ranks: number[]): boolean {
  const d = r.details ?? {};
  const ids = [d.rank, d.by, d.peer, ...(Array.isArray(d.missing) ? d.missing : [])];
  if (ids.some((x) => ranks.includes(x as number))) return true;
  const text = (r.message ?? '').replace(new RegExp(`\\bon rank ${r.rank}\\b`, 'g'), '');
  for (const m of text.matchAll(/\branks? (\d+(?:(?:, | and )\d+)*)/g)) {
    if (m[1].split(/, | and /).some((n) => ranks.includes(Number(n)))) return true;
  }
  return false;
}

/** What is wrong with rank `rank`'s report, against `want`. */
function checkRank(o: Outcome, rank: number, want: Expect | 'ok'): string[] {
  const mine = o.results.filter((r) => r.rank === rank);
  if (mine.length !== 1)
    return [
      `rank ${rank}: ${mine.length} FAULT-RESULT lines (expected 1: it must report on its own, not be ended by the launcher)`,
    ];
  const r = mine[0];
  if (want === 'ok') return r.ok ? [] : [`rank ${rank}: failed ${r.code} ${r.message}`];
  const p: string[] = [];
  const saw = `${r.code}: ${r.message} ${JSON.stringify(r.details)}`;
  if (r.ok) return [`rank ${rank}: ${r.op} succeeded; expected ${want.codes.join('|')}`];
  if (!r.webccl) p.push(`rank ${rank}: not a WebcclError (${saw})`);
  if (!want.codes.includes(r.code as ErrorCode))
    p.push(`rank ${rank}: code ${r.code}, expected ${want.codes.join('|')} (${saw})`);
  if ((r.elapsedMs ?? Infinity) > want.boundMs)
    p.push(`rank ${rank}: failed after ${r.elapsedMs} ms, over the bound of ${want.boundMs} ms (${saw})`);
  if (want.names !== false && o.faulty.length && !namesRank(r, o.faulty))
    p.push(`rank ${rank}: does not name rank ${o.faulty.join(' or ')} (${saw})`);
  if (want.field && r.details?.field !== want.field)
    p.push(`rank ${rank}: details.field is ${JSON.stringify(r.details?.field)}, expected ${want.field} (${saw})`);
  if (want.reason && !(r.message ?? '').includes(want.reason))
    p.push(`rank ${rank}: the message lacks the reason "${want.reason}" (${saw})`);
  return p;
}

async function problems(row: Row, o: Outcome): Promise<string[]> {
  const p: string[] = [];
  p.push(...launcherCodes(row, o));
  const ranks = Array.from({ length: o.size }, (_, r) => r);
  if (row.peers !== 'none') {
    for (const r of ranks.filter((x) => row.faultyToo || !o.faulty.includes(x))) p.push(...checkRank(o, r, row.peers));
  }
  if (row.faultyCodes) {
    for (const r of o.results.filter((x) => o.faulty.includes(x.rank))) {
      if (r.ok || !row.faultyCodes.includes(r.code as ErrorCode))
        p.push(
          `faulty rank ${r.rank}: ${r.ok ? 'succeeded' : r.code}, expected ${row.faultyCodes.join('|')} (${r.message})`,
        );
    }
  }
  p.push(...((await row.check?.(o)) ?? []));
  // Nothing of the job is left once its launchers have ended.
  const left = o.pids.filter(alive);
  if (left.length) p.push(`processes left after the launchers ended: ${left.join(', ')}`);
  return p;
}

/** Each launcher's exit: non-zero when a rank failed, 0 when the job completed; a launcher the
 *  row killed is not asked. */
function launcherCodes(row: Row, o: Outcome): string[] {
  const p: string[] = [];
  o.runs.forEach((r, k) => {
    if (o.killed.some((j) => j.pid === o.launcherPids[k])) return;
    if (r.hung) p.push(`launcher ${k}: hung (killed by the guard after ${GUARD_MS} ms)`);
    const want = row.launcher ?? 'fails';
    if (want === 'ok' && r.code !== 0) p.push(`launcher ${k}: exit code ${r.code ?? r.signal}, expected 0`);
    if (want === 'fails' && (r.code === 0 || r.code === null))
      p.push(`launcher ${k}: exit code ${r.code ?? r.signal}, expected non-zero`);
  });
  return p;
}

/** Every probe of the hostile rank was closed by the server within `ms`. */
function probesClosed(o: Outcome, ms: number): string[] {
  const rogue = o.results.find((r) => r.role === 'faulty');
  const probes = (rogue?.details as { probes?: Record<string, { closedByPeer: boolean; ms: number }> })?.probes;
  if (!probes) return ['the hostile rank reported no probes'];
  return Object.entries(probes).flatMap(([k, v]) =>
    v.closedByPeer && v.ms <= ms
      ? []
      : [`${k}: ${v.closedByPeer ? `closed after ${v.ms} ms` : 'not closed'}; expected closed within ${ms} ms`],
  );
}

const refusals = (o: Outcome) => o.stderr.split('\n').filter((l) => /^webccl WARN .*refused /.test(l));

/** At least `n` refusals logged, each with a code. */
function refusalsLogged(o: Outcome, n: number): string[] {
  const r = refusals(o);
  const p = r.length < n ? [`${r.length} refusal lines logged, expected at least ${n}:\n${r.join('\n')}`] : [];
  return [...p, ...r.filter((l) => !/\[[A-Z_]+\]$/.test(l)).map((l) => `a refusal logged without a code: ${l}`)];
}

/** A flood of refusals is logged at most `n` times, each line with exactly one code. */
function refusalsRateLimited(o: Outcome, n: number): string[] {
  const r = refusals(o);
  return [
    ...(r.length > n ? [`${r.length} refusal lines logged for one flood, expected at most ${n}`] : []),
    ...(r.length ? [] : ['no refusal logged']),
    ...[
      ...new Set(
        r.filter((l) => /\[[A-Z_]+\] \[[A-Z_]+\]$/.test(l)).map((l) => l.replace(/127\.0\.0\.1:\d+/g, 'ADDR')),
      ),
    ].map((l) => `a doubled code suffix: ${l}`),
  ];
}

/** Every rank's process is gone within `ms` of its launcher's death. */
async function ranksGoneWithin(o: Outcome, ms: number): Promise<string[]> {
  const p = o.rankPids.length === o.size ? [] : [`${o.rankPids.length} ranks started, expected ${o.size}`];
  const left = () => o.rankPids.filter(alive);
  while (left().length && Date.now() < o.killedAt + ms) await new Promise((r) => setTimeout(r, 100));
  if (left().length)
    p.push(`rank processes ${left().join(', ')} still running ${ms} ms after the launcher was SIGKILLed`);
  return p;
}

// ---------------------------------------------------------------- the matrix

const report: Record<string, unknown>[] = [];
afterAll(() => {
  if (process.env.FAULT_REPORT) writeFileSync(process.env.FAULT_REPORT, JSON.stringify(report, null, 1));
});

describe.concurrent('fault matrix', () => {
  for (const row of ROWS) {
    for (const form of FORMS) {
      if (!row.forms.includes(form)) continue;
      it(`${form}: ${row.what}`, async ({ onTestFinished }) => {
        // A row whose outcome depends on a race runs several times: it holds only if every run does.
        const asked = Number(process.env.FAULT_REPEAT ?? 1);
        const runs = Math.max(row.repeat ?? 1, asked > 1 ? Math.max(asked, row.repeatOnRequest ?? 1) : 1);
        let o: Outcome;
        let p: string[] = [];
        let attempt = 0;
        do {
          o = await inSlot(() => runRow(row, form, onTestFinished));
          p = await problems(row, o);
        } while (!p.length && ++attempt < runs);
        report.push({
          form,
          row: row.what,
          runs: Math.min(attempt + 1, runs),
          problems: p,
          wallMs: o.wallMs,
          exit: o.runs.map((r) => r.code ?? r.signal),
          ranks: o.results.map((r) => ({
            rank: r.rank,
            role: r.role,
            ok: r.ok,
            code: r.code,
            elapsedMs: r.elapsedMs,
            named: r.ok ? undefined : namesRank(r, o.faulty),
            message: r.message,
            details: r.details,
          })),
        });
        expect(p, `${form}: ${row.what}\n${o.stderr.slice(-4000)}`).toEqual([]);
      }, 240_000);
    }
  }
});
