// The ring allReduce's piece size as the tuner picks it (src/tuner/ring-pieces.ts) against the
// fixed 512 KiB pieces the model is fitted on: `webccl perf allreduce -a ring` over TCP
// loopback, one process per rank, once with WEBCCL_PIECE_BYTES=524288 and once without, the two
// alternating for --rounds rounds so that the machine's drift falls on both alike. Reports the
// median time of each, their ratio, and the piece the model picked.
//
//   node bench/ring-pieces.mjs [--ranks 2,3,4] [-b 1M] [-e 64M] [-f 4] [--time 0.2] [--reps 3]
//        [--rounds 3] [--json FILE]
// Build first: npm run build.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { activeModel, ringPieceBytes } from '../dist/node/tuner.js';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const ranksList = opt('--ranks', '2,3,4').split(',').map(Number);
const sweep = [
  '-b',
  opt('-b', '1M'),
  '-e',
  opt('-e', '64M'),
  '-f',
  opt('-f', '4'),
  '--time',
  opt('--time', '0.2'),
  '--reps',
  opt('--reps', '3'),
];
const rounds = Number(opt('--rounds', '3'));
const jsonFile = opt('--json');
const cli = new URL('../bin/webccl.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'webccl-ring-pieces-'));
const { model } = activeModel();
const cores = availableParallelism();

/** One perf sweep: size -> µs. `piece` undefined: the tuner's choice. */
function perf(ranks, piece) {
  const file = join(dir, 'perf.json');
  const env = { ...process.env };
  if (piece === undefined) delete env.WEBCCL_PIECE_BYTES;
  else env.WEBCCL_PIECE_BYTES = String(piece);
  execFileSync(
    process.execPath,
    [
      cli,
      'perf',
      'allreduce',
      '--transport',
      'tcp',
      '--ranks',
      String(ranks),
      '-a',
      'ring',
      ...sweep,
      '-c',
      '0',
      '--json',
      file,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'], env },
  );
  return new Map(JSON.parse(readFileSync(file, 'utf8')).rows.map((r) => [r.size, r.oop.time_us]));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const show = (b) => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : `${b / 1024} KiB`);
const rows = [];
try {
  for (const ranks of ranksList) {
    const fixed = [];
    const tuned = [];
    for (let r = 0; r < rounds; r++) {
      process.stderr.write(`${ranks} ranks, round ${r + 1} of ${rounds}\n`);
      fixed.push(perf(ranks, 524288));
      tuned.push(perf(ranks));
    }
    for (const size of fixed[0].keys()) {
      const f = median(fixed.map((m) => m.get(size)));
      const t = median(tuned.map((m) => m.get(size)));
      rows.push({
        ranks,
        size,
        piece: ringPieceBytes(model, ranks, size, ranks, cores),
        fixedUs: f,
        tunedUs: t,
        speedup: f / t,
      });
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

console.log(`ring allReduce over TCP loopback, one process per rank; median of ${rounds} alternating rounds`);
console.log('ranks  size      piece      512 KiB (us)  tuned (us)  512 KiB / tuned');
for (const r of rows) {
  console.log(
    `${String(r.ranks).padEnd(7)}${show(r.size).padEnd(10)}${show(r.piece).padEnd(11)}${r.fixedUs.toFixed(0).padStart(12)}${r.tunedUs.toFixed(0).padStart(12)}${r.speedup.toFixed(2).padStart(17)}`,
  );
}
if (jsonFile) writeFileSync(jsonFile, JSON.stringify({ model: model.source ?? null, rounds, sweep, rows }, null, 1));
