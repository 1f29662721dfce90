#!/usr/bin/env node
// bench/progress-cost: what running ops on the progress thread costs a rank that waits for each
// op at once (`await comm.allReduce(x)` back to back), against running them on the rank
// (WEBCCL_PROGRESS=caller): µs per op (the slower rank's median over rounds) and the CPU per op of
// each rank's process (all its threads), for 2 ranks as processes over TCP (the network progress
// thread) or as threads of one node (the node's progress thread). Modes run in turn, round by
// round, so that both see the same machine.
//
//   npm run build && node bench/progress-cost.mjs [--paths tcp,threads] [--ranks 2] [--sizes 8,2K,256K,4M]
//       [--modes caller,thread] [--rounds 3] [--sittings 2] [--quiet 30] [--json FILE]
// (--ranks 4 on a 2-core machine: ranks, and their threads, outnumber the cores)
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchOptions, bytesOf, waitQuiet } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'bin', 'webccl.js');
const rankScript = join(root, 'bench', 'progress-cost-rank.mjs');
const PATHS = ['tcp', 'threads'];
const MODES = ['caller', 'thread', 'auto'];

const opts = benchOptions(
  'progress-cost',
  (argv) => {
    const { values: v } = parseArgs({
      args: argv,
      options: Object.fromEntries(
        ['paths', 'ranks', 'sizes', 'modes', 'rounds', 'sittings', 'quiet', 'json'].map((k) => [k, { type: 'string' }]),
      ),
    });
    const pick = (s, known, what) =>
      s.split(',').map((x) =>
        known.includes(x)
          ? x
          : (() => {
              throw new Error(`unknown ${what} ${x} (known: ${known.join(', ')})`);
            })(),
      );
    const o = {
      paths: pick(v.paths ?? 'tcp', PATHS, 'path'),
      modes: pick(v.modes ?? 'caller,thread', MODES, 'mode'),
      sizes: (v.sizes ?? '8,2K,256K,4M').split(',').map((s) => bytesOf(s)),
      rounds: Number(v.rounds ?? 3),
      sittings: Number(v.sittings ?? 2),
      quiet: Number(v.quiet ?? 30),
      json: v.json,
      ranks: Number(v.ranks ?? 2),
    };
    if (!(Number.isInteger(o.ranks) && o.ranks >= 2 && o.ranks <= 64))
      throw new Error(`bad --ranks ${v.ranks} (2..64)`);
    if (!(o.rounds >= 1 && o.sittings >= 1) || o.sizes.some((b) => b < 4 || b % 4))
      throw new Error('bad --rounds, --sittings or --sizes (multiples of 4 bytes)');
    return o;
  },
  root,
);

function runRanks(path, mode) {
  const args = [
    cli,
    'run',
    ...(path === 'tcp' ? ['--procs'] : []),
    '-n',
    String(opts.ranks),
    rankScript,
    JSON.stringify({ sizes: opts.sizes, rounds: opts.rounds }),
  ];
  const r = spawnSync(process.execPath, args, {
    encoding: 'utf8',
    env: { ...process.env, WEBCCL_PROGRESS: mode },
    maxBuffer: 16 << 20,
    timeout: 600_000,
  });
  if (r.status !== 0) throw new Error(`${path} ${mode}: exit ${r.status}\n${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}

console.log(
  `# bench/progress-cost on ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}`,
);
console.log(
  `# ${opts.ranks} ranks, await comm.allReduce(x) back to back on comm.alloc() f32 buffers; us per op (slowest rank, median of rounds), CPU us per op per rank process`,
);
const results = [];
for (const path of opts.paths) {
  for (let sitting = 0; sitting < opts.sittings; sitting++) {
    const busy = waitQuiet(opts.quiet);
    const rows = new Map(opts.sizes.map((b) => [b, {}]));
    for (const mode of opts.modes) {
      for (const l of runRanks(path, mode)) {
        const cell = (rows.get(l.bytes)[mode] ??= { us: 0, cpuUs: [], ran: l.mode, threadOps: 0 });
        cell.us = Math.max(cell.us, l.us);
        cell.cpuUs.push(l.cpuUs);
        cell.threadOps += l.threadOps;
      }
    }
    console.log(
      `#\n# ${path === 'tcp' ? `${opts.ranks} processes over TCP loopback` : `${opts.ranks} worker threads of one node`}, sitting ${sitting + 1}; CPUs ${busy ?? '?'}% busy before`,
    );
    const cpuWidth = Math.max(14, 6 * opts.ranks + 2);
    console.log(
      `# ${'bytes'.padStart(10)} ${opts.modes.map((m) => `${m} us`.padStart(12) + `${m} cpu`.padStart(cpuWidth)).join('')}${opts.modes.length > 1 ? `  ${opts.modes[1]}/${opts.modes[0]}` : ''}`,
    );
    for (const [bytes, cells] of rows) {
      const cols = opts.modes
        .map(
          (m) =>
            `${cells[m].us.toFixed(0).padStart(12)}${cells[m].cpuUs
              .map((c) => c.toFixed(0))
              .join('/')
              .padStart(cpuWidth)}`,
        )
        .join('');
      const ratio =
        opts.modes.length > 1 ? `  ${(cells[opts.modes[1]].us / cells[opts.modes[0]].us).toFixed(2).padStart(8)}` : '';
      console.log(`  ${String(bytes).padStart(10)} ${cols}${ratio}`);
      results.push({
        path,
        ranks: opts.ranks,
        sitting,
        bytes,
        cpuBusyBefore: busy,
        ...Object.fromEntries(opts.modes.map((m) => [m, cells[m]])),
      });
    }
  }
}
if (opts.json)
  writeFileSync(
    opts.json,
    JSON.stringify(
      { machine: cpus()[0]?.model, cores: availableParallelism(), node: process.version, results },
      null,
      2,
    ),
  );
