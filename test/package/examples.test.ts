// Every example the README lists runs and says what it should.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = (args: string[]) => spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8', timeout: 180_000 });

const cases: [string, number, RegExp][] = [
  ['allreduce', 3, /allReduce sum 6, max 20,0, avg 1[\s\S]*reduceScatter \(rank 2\) 18,21,24[\s\S]*prod on rank 2: 6/],
  ['async', 2, /bucket 2: 1048576 floats, avg 0.5/],
  ['zero-copy', 2, /every element 3/],
  [
    'coalesced',
    2,
    /4 gradients \(1003 floats\) averaged in 1 allReduce: 0.5, 0.5, empty, 0.5[\s\S]*broadcast from rank 0 in 1 op/,
  ],
  ['half-precision', 2, /bf16 sum of 1.5 over 2 ranks: 0x4040 = 3[\s\S]*f16 avg of 1.5: 0x3e00/],
  [
    'errors',
    3,
    /INVALID_OP[\s\S]*MISMATCH on count: ranks 0,1 have 10,12[\s\S]*rank 2 did not arrive[\s\S]*flight record: allReduce #3 failed, waiting on rank 2, TIMEOUT/,
  ],
  ['demo', 4, /every result checked: all correct/],
  [
    'groups',
    4,
    /^(?=[\s\S]*rank 0: tp group rank 0\/2 \(world 0,1\) activations 3,30; dp group rank 0\/2 \(world 0,2\) gradients 1,101; correct)(?=[\s\S]*rank 3: tp group rank 1\/2 \(world 2,3\) activations 7,70; dp group rank 1\/2 \(world 1,3\) gradients 2,102; correct)(?![\s\S]*WRONG)/,
  ],
  [
    'layouts',
    2,
    /rank 0: NC1HWC0 \(c0 4: 32 elements for 24 values\), gathered correctly; conversions 2, 160 bytes[\s\S]*rank 1: NHWC, gathered correctly; conversions 2, 144 bytes/,
  ],
];

for (const [name, n, want] of cases) {
  it(`examples/${name}.mjs on ${n} ranks`, () => {
    const r = run(['bin/webccl.js', 'run', '-n', String(n), `examples/${name}.mjs`]);
    // The only stderr allowed: the flight record a TIMEOUT (or the abort it causes) prints (errors.mjs makes one).
    const flightRecords = /webccl WARN rank \d+: flight record after (TIMEOUT|ABORTED)[^\n]*\n( {2}[^\n]*\n)*/g;
    expect(r.stderr.replace(flightRecords, '')).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(want);
  });
}

it('examples/multi-process.mjs as 2 processes (webccl run --procs)', () => {
  const r = run(['bin/webccl.js', 'run', '--procs', '-n', '2', 'examples/multi-process.mjs']);
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  expect(r.stdout).toMatch(
    /rank 1 of 2: pid \d+[\s\S]*avg of 262144 floats over 2 ranks: element 0 is 0.5[\s\S]*2 process\(es\), pids \d+, \d+: every result checked/,
  );
});

// The training step of examples/overlap.mjs: its gradients (10 MiB each) go to the progress
// thread on one node and to the network progress threads across processes; the results agree.
for (const form of [
  ['-n', '2'],
  ['--procs', '-n', '2'],
]) {
  it(`examples/overlap.mjs (webccl run ${form.join(' ')}): the progress thread runs the gradients' allReduces, results agree`, () => {
    const r = run(['bin/webccl.js', 'run', ...form, 'examples/overlap.mjs']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(
      /step with allReduces issued as layers finish, one wait: +[\d.]+ ms[\s\S]*average gradient element: 0.875 \(all ranks agree\)/,
    );
    const threadOps = Number(/ops run by the progress thread on rank 0: (\d+)/.exec(r.stdout)?.[1]);
    expect(threadOps).toBeGreaterThan(0);
  });
}

it('examples/launch.mjs', () => {
  const r = run(['examples/launch.mjs']);
  expect(r.status).toBe(0);
  expect(r.stdout).toMatch(/exit code 0/);
});

it('examples/layouts.mjs with WEBCCL_DEBUG=INFO logs every conversion with its cost', () => {
  const r = spawnSync(process.execPath, ['bin/webccl.js', 'run', '-n', '2', 'examples/layouts.mjs'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 180_000,
    env: { ...process.env, WEBCCL_DEBUG: 'INFO' },
  });
  expect(r.status).toBe(0);
  const logged =
    r.stderr.match(
      /webccl INFO rank \d: allGather converted its (input|output) .+? \[[\d, ]+\] -> .+? f32: \d+ B in [\d.]+ us/g,
    ) ?? [];
  expect(logged.length).toBe(4); // input and output on each of the two ranks
});
