#!/usr/bin/env node
// Where a waited collective's time goes across nodes, part by part: 2 processes over TCP
// loopback each await N allReduces of S bytes back to back (after W warm-up calls), and report
// the median of each part, per progress mode:
//   issue      the allReduce call itself (until it returns its handle)
//   toStart    from the call to the op's start (timing.startedAt: on the network progress thread
//              when it runs the op, so this holds the hand-off that wakes the thread)
//   run        from its start to its end (timing.completedAt), waiting for the peer included
//   toResume   from its end to the rank running again after `await` (the hand-off back)
//   total      from the call to the rank running again
// and, across the two ranks (one machine, one clock: each start and end on the epoch's scale),
//   skew       how far apart the two ranks' runs of an op started (median; p90 after the slash)
//   late run   from the later start to the later end: the op once both sides run it
// The thread's times are taken on its clock and carried over through performance.timeOrigin,
// so a part that crosses threads may be off by a few microseconds either way.
//
//   npm run build && node bench/op-parts.mjs [--bytes 1M] [--ops 3000] [--warmup 200] [--modes caller,thread]
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function parseBytes(v) {
  const m = /^(\d+)([KMG]?)$/i.exec(v);
  if (!m) throw new Error(`bad size ${v}`);
  return Number(m[1]) * 1024 ** ' KMG'.indexOf((m[2] || ' ').toUpperCase());
}

async function rank() {
  const { initCommGroup } = await import(join(here, '..', 'dist', 'node', 'index.js'));
  const comm = await initCommGroup();
  const bytes = Number(process.env.PARTS_BYTES);
  const x = comm.alloc('f32', Math.max(1, bytes / 4));
  for (let i = 0; i < Number(process.env.PARTS_WARMUP); i++) await comm.allReduce(x);
  await comm.barrier();
  const parts = [[], [], [], [], []];
  const ends = []; // [start, end] on the epoch's scale, per op
  for (let i = 0; i < Number(process.env.PARTS_OPS); i++) {
    const t0 = performance.now();
    const w = comm.allReduce(x);
    const t1 = performance.now();
    await w;
    const t2 = performance.now();
    const { startedAt, completedAt } = w.timing;
    [t1 - t0, startedAt - t0, completedAt - startedAt, t2 - completedAt, t2 - t0].forEach((v, k) =>
      parts[k].push(v * 1000),
    );
    ends.push([performance.timeOrigin + startedAt, performance.timeOrigin + completedAt]);
  }
  const median = (v) => v.sort((a, b) => a - b)[v.length >> 1];
  console.log(
    JSON.stringify({ rank: comm.rank, mode: comm.progressMode, parts: parts.map((v) => +median(v).toFixed(1)), ends }),
  );
  await comm.destroy();
}

function main() {
  const args = process.argv.slice(2);
  const opt = (name, def) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : def;
  };
  const bytes = parseBytes(opt('bytes', '1M'));
  const modes = opt('modes', 'caller,thread').split(',');
  console.log(
    `# bench/op-parts: 2 processes over TCP, allReduce of ${bytes} bytes awaited back to back, medians in µs (Node ${process.version})`,
  );
  console.log(
    `${'mode'.padEnd(8)} ${'rank'.padStart(4)} ${['issue', 'toStart', 'run', 'toResume', 'total'].map((h) => h.padStart(9)).join(' ')}     skew  late run`,
  );
  for (const mode of modes) {
    const env = {
      ...process.env,
      PARTS_BYTES: String(bytes),
      PARTS_OPS: opt('ops', '3000'),
      PARTS_WARMUP: opt('warmup', '200'),
      WEBCCL_TRANSPORT: 'tcp',
    };
    if (mode === 'auto') delete env.WEBCCL_PROGRESS;
    else env.WEBCCL_PROGRESS = mode;
    const r = spawnSync(
      process.execPath,
      [join(here, '..', 'bin', 'webccl.js'), 'run', '--procs', '-n', '2', fileURLToPath(import.meta.url)],
      { env, encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`ranks failed (${mode}): ${r.stderr.trim().split('\n').slice(-3).join(' ')}`);
    const rows = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .sort((a, b) => a.rank - b.rank);
    const { skew, lateRun } = acrossRanks(rows[0].ends, rows[1].ends);
    for (const row of rows)
      console.log(
        `${mode.padEnd(8)} ${String(row.rank).padStart(4)} ${row.parts.map((v) => v.toFixed(1).padStart(9)).join(' ')} ${row.rank ? '' : `${skew.padStart(9)} ${lateRun.padStart(9)}`}`,
      );
  }
}

/** Per op, how far apart the ranks' starts were, and its time from the later start to the later end (µs). */
function acrossRanks(a, b) {
  const skews = a.map(([s], i) => Math.abs(s - b[i][0]) * 1000).sort((x, y) => x - y);
  const late = a.map(([s, e], i) => (Math.max(e, b[i][1]) - Math.max(s, b[i][0])) * 1000).sort((x, y) => x - y);
  const at = (v, q) => v[Math.floor(q * (v.length - 1))].toFixed(1);
  return { skew: `${at(skews, 0.5)}/${at(skews, 0.9)}`, lateRun: at(late, 0.5) };
}

if (process.env.PARTS_BYTES !== undefined) await rank();
else main();
