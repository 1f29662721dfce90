#!/usr/bin/env node
// bench/progress-modes: what the default progress mode costs a waited op. Runs `webccl perf`
// for each collective at the default setting (WEBCCL_PROGRESS unset: auto), with
// WEBCCL_PROGRESS=caller and with WEBCCL_PROGRESS=thread, interleaved in rounds (the machine's
// drift hits every mode alike; each round starts with the next mode), and prints per size the
// best time of each mode over the rounds and default / min(caller, thread): 1 or more when the
// default costs nothing (higher is better, as a speed ratio: best time over default time).
//
//   npm run build && node bench/progress-modes.mjs [--collectives allreduce,allgather,broadcast]
//       [--rounds 2] [--json FILE] [-- perf flags, e.g. -b 8 -e 64M -f 8 --ranks 2 --transport tcp]
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'bin', 'webccl.js');
const MODES = ['auto', 'caller', 'thread'];

const dash = process.argv.indexOf('--');
const own = dash < 0 ? process.argv.slice(2) : process.argv.slice(2, dash);
const perfArgs = dash < 0 ? ['-b', '8', '-e', '64M', '-f', '8', '--time', '0.15'] : process.argv.slice(dash + 1);
const { values: v } = parseArgs({
  args: own,
  options: {
    collectives: { type: 'string' },
    rounds: { type: 'string' },
    json: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (v.help) {
  console.log(
    'usage: node bench/progress-modes.mjs [--collectives allreduce,allgather,broadcast] [--rounds 2] [--json FILE] [-- perf flags]',
  );
  process.exit(0);
}
const collectives = (v.collectives ?? 'allreduce,allgather,broadcast').split(',');
const rounds = Number(v.rounds ?? 2);

/** One perf run: time per size (µs, out-of-place), from perf's JSON. */
function perf(collective, mode) {
  const env = { ...process.env };
  if (mode === 'auto') delete env.WEBCCL_PROGRESS;
  else env.WEBCCL_PROGRESS = mode;
  const json = join(root, `.progress-modes-${process.pid}.json`);
  const r = spawnSync(process.execPath, [cli, 'perf', collective, ...perfArgs, '--json', json], {
    env,
    encoding: 'utf8',
    timeout: 1_800_000,
  });
  if (r.status !== 0) throw new Error(`webccl perf ${collective} (${mode}) failed (exit ${r.status}):\n${r.stderr}`);
  const report = JSON.parse(readFileSync(json, 'utf8'));
  rmSync(json, { force: true });
  return new Map(report.rows.map((row) => [row.size, row.oop.time_us]));
}

console.log(
  `# bench/progress-modes on ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}`,
);
console.log(
  `# webccl perf <collective> ${perfArgs.join(' ')}; best of ${rounds} interleaved rounds per mode; times in µs (out of place)`,
);
const results = [];
for (const c of collectives) {
  const best = Object.fromEntries(MODES.map((m) => [m, new Map()]));
  for (let k = 0; k < rounds; k++) {
    // Each round starts with the next mode: a run right after another (whose processes may still
    // be ending) or after a pause does not always fall to the same mode.
    for (let j = 0; j < MODES.length; j++) {
      const m = MODES[(k + j) % MODES.length];
      for (const [bytes, us] of perf(c, m)) best[m].set(bytes, Math.min(best[m].get(bytes) ?? Infinity, us));
    }
  }
  console.log(`#\n# ${c}\n#       size      auto    caller    thread  auto speed / best`);
  for (const bytes of best.auto.keys()) {
    const [a, cl, t] = MODES.map((m) => best[m].get(bytes));
    const ratio = Math.min(cl, t) / a;
    console.log(
      `${String(bytes).padStart(12)} ${a.toFixed(2).padStart(9)} ${cl.toFixed(2).padStart(9)} ${t.toFixed(2).padStart(9)} ${ratio.toFixed(2).padStart(17)}`,
    );
    results.push({ collective: c, bytes, autoUs: a, callerUs: cl, threadUs: t, autoSpeedOverBest: ratio });
  }
}
if (v.json)
  writeFileSync(
    v.json,
    JSON.stringify(
      { machine: cpus()[0]?.model, cores: availableParallelism(), node: process.version, perfArgs, rounds, results },
      null,
      2,
    ),
  );
