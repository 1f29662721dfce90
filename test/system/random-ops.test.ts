// Seeded random sequences of ops under every launch form, with the built CLI: the rank script
// (test/system/fixtures/random-ops.mjs) draws the same ops on every rank — every collective and
// send/recv, on the world, a split and a random subset group, every dtype and reduce op,
// alloc() and plain buffers, in place and out of place, counts at the edges, batches in flight
// across communicators — checks each result against its own plain reference and prints
// "ok <rank> <ops>". The grid's edges get their own runs: 8 thread ranks on 2 cores in each
// progress mode, tiny slots (every op crosses chunk boundaries), the scalar build.
// The model-based runs add what a user's program does around its ops (see the fixture): calls
// refused at issue on some ranks and not others, waits in a random order, buffers allocated and
// freed, groups formed anew; on 2, 4 and 8 thread ranks, 3 processes and 2 nodes x 2 threads, in
// each progress mode. More and longer on request (npm run fuzz: 10 seeds of 400 ops), or
// WEBCCL_RANDOM_OPS=400 WEBCCL_RANDOM_SEEDS=10 npx vitest run test/system/random-ops;
// WEBCCL_RANDOM_FIRST_SEED=S starts the seeds at S (the deaths and shrinks take the first). A
// failing rank prints its seed.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanEnv, type Env, type Run, run } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { freePort } from '../helpers/net.js';

const f = launchFixture(new URL('fixtures/random-ops.mjs', import.meta.url), 'random-ops');
const env = (extra: Env = {}): Env =>
  cleanEnv({ HOME: join(f.tmp, 'home'), WEBCCL_TOKEN: 'random-ops-test', ...extra });
const OPS = Number(process.env.WEBCCL_RANDOM_OPS) || 120;
const SEEDS = Array.from(
  { length: Number(process.env.WEBCCL_RANDOM_SEEDS) || 1 },
  (_, k) => (Number(process.env.WEBCCL_RANDOM_FIRST_SEED) || 11) + k,
);

type Form = 'threads' | 'procs' | 'nnodes';

/** Runs `n` ranks in `form` (nnodes: 2 launchers of n/2 threads); every launcher's run. */
async function launch(
  form: Form,
  n: number,
  seed: number,
  extra: Env = {},
  die?: { rank: number; at: number },
  shrinkAfter?: { rank: number; at: number }[],
  ops = OPS,
  model = false,
): Promise<Run[]> {
  const args = [
    f.script,
    JSON.stringify(shrinkAfter ? { seed, ops, deaths: shrinkAfter, shrink: true } : { seed, ops, die, model }),
  ];
  const flags = die || shrinkAfter ? ['--fault-tolerant'] : [];
  if (form === 'nnodes') {
    const port = String(await freePort());
    return Promise.all(
      [0, 1].map((k) =>
        run(
          process.execPath,
          [
            f.bin,
            'run',
            ...flags,
            '--nnodes',
            '2',
            '--node-rank',
            String(k),
            '--nproc-per-node',
            String(n / 2),
            '--master-addr',
            '127.0.0.1',
            '--master-port',
            port,
            ...args,
          ],
          env(extra),
          240_000,
          f.root,
        ),
      ),
    );
  }
  return [
    await run(
      process.execPath,
      [f.bin, 'run', ...flags, ...(form === 'procs' ? ['--procs'] : []), '-n', String(n), ...args],
      env(extra),
      240_000,
      f.root,
    ),
  ];
}

/** Every launcher ended well and every rank said ok. */
function allOk(runs: Run[], n: number): void {
  const out = runs.map((r) => r.stdout).join('');
  const wrong = out.split('\n').filter((l) => /^(wrong|failed) /.test(l));
  expect(wrong, out).toEqual([]);
  for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
  expect(
    [...out.matchAll(/^ok (\d+) \d+( refused \d+)?$/gm)].map((m) => Number(m[1])).sort((a, b) => a - b),
    out,
  ).toEqual([...Array(n).keys()]);
}

const MODES = ['auto', 'thread', 'caller'] as const;
/** The model-based runs: every launch form × every progress mode. */
const models: { name: string; form: Form; n: number; env?: Env }[] = [
  ...[2, 4, 8].flatMap((n) =>
    MODES.map((p) => ({
      name: `${n} thread ranks, ${p} progress`,
      form: 'threads' as Form,
      n,
      env: { WEBCCL_PROGRESS: p },
    })),
  ),
  ...MODES.map((p) => ({
    name: `3 processes, ${p} progress`,
    form: 'procs' as Form,
    n: 3,
    env: { WEBCCL_PROGRESS: p },
  })),
  ...MODES.map((p) => ({
    name: `2 nodes x 2 threads, ${p} progress`,
    form: 'nnodes' as Form,
    n: 4,
    env: { WEBCCL_PROGRESS: p },
  })),
];
const MODEL_OPS = Number(process.env.WEBCCL_RANDOM_OPS) || 40;

const cases: { name: string; form: Form; n: number; env?: Env }[] = [
  {
    name: '8 thread ranks, every op on the ranks, no spinning',
    form: 'threads',
    n: 8,
    env: { WEBCCL_PROGRESS: 'caller', WEBCCL_SPIN_US: '0' },
  },
  {
    name: '5 thread ranks, 4 KiB slots (ops cross chunk boundaries)',
    form: 'threads',
    n: 5,
    env: { WEBCCL_BUFFSIZE: '4096' },
  },
  {
    name: '3 thread ranks, scalar wasm, WEBCCL_CHECK=1',
    form: 'threads',
    n: 3,
    env: { WEBCCL_WASM: 'scalar', WEBCCL_CHECK: '1' },
  },
  { name: '3 processes over TCP', form: 'procs', n: 3 },
  { name: '2 nodes x 2 threads, 3 channels', form: 'nnodes', n: 4, env: { WEBCCL_NCHANNELS: '3' } },
];

// A rank dies (exits 7) just before a drawn op, with the others' ops in flight on the world and
// on groups: under --fault-tolerant every other rank's pending or next op fails with a coded
// error — never a hang, never a wrong result before it — and the launchers end well.
const deaths: { name: string; form: Form; n: number; rank: number; at: number; env?: Env }[] = [
  { name: '8 thread ranks, rank 5 dies at op 12', form: 'threads', n: 8, rank: 5, at: 12 },
  {
    name: '8 thread ranks on the progress thread, rank 6 dies at op 75',
    form: 'threads',
    n: 8,
    rank: 6,
    at: 75,
    env: { WEBCCL_PROGRESS: 'thread' },
  },
  { name: '3 processes, rank 0 (the store) dies at op 12', form: 'procs', n: 3, rank: 0, at: 12 },
  { name: '2 nodes x 2 threads, rank 2 dies at op 75', form: 'nnodes', n: 4, rank: 2, at: 75 },
];

/** Every launcher ended well, and every rank but the dead one reported a coded fault. */
function survivorsFailed(runs: Run[], n: number, dead: number): void {
  const out = runs.map((r) => r.stdout).join('');
  expect(
    out.split('\n').filter((l) => /^(wrong|failed) /.test(l)),
    out,
  ).toEqual([]);
  for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
  const faults = [...out.matchAll(/^fault (\d+) (\w+) /gm)]
    .map((m) => [Number(m[1]), m[2]] as const)
    .sort((a, b) => a[0] - b[0]);
  expect(
    faults.map(([r]) => r),
    out,
  ).toEqual([...Array(n).keys()].filter((r) => r !== dead));
  for (const [, code] of faults) expect(['CONNECTION_CLOSED', 'ABORTED', 'TIMEOUT']).toContain(code);
}

// The same deaths, then the survivors shrink the world, form their groups anew over it and run
// as many ops again, every result checked (world rank 0 serves the store and must survive).
// With two deaths (one in each world, `rank` counted in that world), they shrink twice.
const shrinks: {
  name: string;
  form: Form;
  n: number;
  deaths: { rank: number; at: number }[];
  env?: Env;
  seed?: number;
  ops?: number;
}[] = [
  { name: '5 thread ranks, rank 3 dies at op 12', form: 'threads', n: 5, deaths: [{ rank: 3, at: 12 }] },
  { name: '4 processes, rank 1 dies at op 75', form: 'procs', n: 4, deaths: [{ rank: 1, at: 75 }] },
  { name: '2 nodes x 2 threads, rank 1 dies at op 12', form: 'nnodes', n: 4, deaths: [{ rank: 1, at: 12 }] },
  // Seed 2963227: the first shrinking survivor revokes the world, so on three others a send
  // throws ABORTED at issue while a world op of the same batch still runs on the progress
  // thread. The fixture called shrink() without waiting for that op, and shrink() refused a
  // communicator with an op pending (7 of 7 survivors failed, every run); now shrink() ends
  // such ops itself, and the fixture waits for them as well.
  {
    name: '8 thread ranks on the progress thread, rank 3 dies at op 86',
    form: 'threads',
    n: 8,
    deaths: [{ rank: 3, at: 86 }],
    env: { WEBCCL_PROGRESS: 'thread' },
    seed: 2963227,
  },
  // Seed 17480 draws the ops that met a stale entry in a rank's list of heap blocks (a group's
  // block freed by its other member) in 4 runs of 10 before the fix (see core/heap.test.ts).
  // (Ops are numbered on across worlds: the second world's run from OPS, 120 unless set.)
  {
    name: `2 nodes x 3 threads, rank 3 dies at op 20, then rank 1 of the 5 left at op ${OPS + 30}`,
    form: 'nnodes',
    n: 6,
    deaths: [
      { rank: 3, at: 20 },
      { rank: 1, at: OPS + 30 },
    ],
    seed: 17480,
  },
  // Here world rank 0 is still in an op of the first shrunk world, waiting on a rank that has
  // moved on to shrink it again: unless shrinking revokes the communicator, rank 0 comes to
  // the agreement after the others' deadline and is taken for dead. (No survivor saw the
  // second death in this world's own ops: the agreement waited for its deadline, 8 s here,
  // until the survivors also named the ranks whose connections closed without an ABORT.)
  {
    name: '2 nodes x 3 threads, 80 ops a world, rank 1 dies at op 31, then rank 3 of the 5 left at op 104',
    form: 'nnodes',
    n: 6,
    deaths: [
      { rank: 1, at: 31 },
      { rank: 3, at: 104 },
    ],
    seed: 302,
    ops: 80,
    env: { WEBCCL_TIMEOUT_MS: '8000' },
  },
];

describe('seeded random ops, every result checked', () => {
  for (const c of shrinks) {
    it(`${c.name}: the survivors shrink and run ${c.ops ?? OPS} more ops, every result checked (seed ${c.seed ?? SEEDS[0]})`, async () => {
      const runs = await launch(
        c.form,
        c.n,
        c.seed ?? SEEDS[0],
        { WEBCCL_TIMEOUT_MS: '30000', ...c.env },
        undefined,
        c.deaths,
        c.ops,
      );
      const out = runs.map((r) => r.stdout).join('');
      expect(
        out.split('\n').filter((l) => /^(wrong|failed) /.test(l)),
        out,
      ).toEqual([]);
      for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      const left = [...Array(c.n).keys()];
      for (const d of c.deaths) left.splice(d.rank, 1);
      // "ok-after-shrink <job world rank> <new rank> of <new size> <ops> after <shrinks>": the survivors in order,
      // renumbered.
      const oks = [...out.matchAll(/^ok-after-shrink (\d+) (\d+) of (\d+) \d+ after (\d+)$/gm)]
        .map((m) => [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])])
        .sort((a, b) => a[0] - b[0]);
      expect(oks, out).toEqual(left.map((r, i) => [r, i, left.length, c.deaths.length]));
    }, 300_000);
  }
  for (const c of deaths) {
    it(`${c.name} under --fault-tolerant: every other rank fails with a coded error (seed ${SEEDS[0]})`, async () => {
      survivorsFailed(
        await launch(c.form, c.n, SEEDS[0], { WEBCCL_TIMEOUT_MS: '30000', ...c.env }, { rank: c.rank, at: c.at }),
        c.n,
        c.rank,
      );
    }, 300_000);
  }

  for (const c of models) {
    for (const seed of SEEDS) {
      it(`model: ${c.name}, refusals, waits in random order, memory and groups anew (seed ${seed}, ${MODEL_OPS} ops)`, async () => {
        allOk(await launch(c.form, c.n, seed, c.env, undefined, undefined, MODEL_OPS, true), c.n);
      }, 300_000);
    }
  }
  for (const c of cases) {
    for (const seed of SEEDS) {
      it(`${c.name} (seed ${seed}, ${OPS} ops)`, async () => {
        allOk(await launch(c.form, c.n, seed, c.env), c.n);
      }, 300_000);
    }
  }
});
