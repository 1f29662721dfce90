#!/usr/bin/env node
// bench/compare: the same sweep with webccl, Open MPI and torch.distributed's Gloo, on this
// machine in one sitting, printed as one busbw table per (collective, rank count) with the
// ratio webccl / anchor per size. Anchors that are not installed are skipped, and the script
// says how to install them.
//
//   npm run build && node bench/compare.mjs [--ops allreduce|all|a,b] [--ranks 2,4]
//     [-b 8] [-e 64M] [-f 4] [--time 0.2] [--reps 1] [--rounds 1] [--tcp] [--group G] [--quiet 30]
//     [--json FILE] [--plot FILE.svg|DIR/]
//
// webccl runs at its default settings: the WEBCCL_ variables of this environment (but the
// token and job id) are not passed on. Every system uses the same timing method (see docs/benchmarks.md): time = the
// slowest rank's mean time per call over a block of about --time seconds, after a barrier (the
// median of --reps such blocks; with --rounds K, each system's fastest of K runs taken in turn);
// busbw as nccl-tests. webccl and Open MPI run out of place; torch's
// collectives run in place. Open MPI runs over shared memory (btl self,vader). With --tcp, webccl
// runs a second time with --transport tcp (one process per rank, over TCP loopback) and Open MPI
// over TCP loopback (btl self,tcp), and each (collective, rank count) gets two tables: shared
// memory (webccl shm against Open MPI vader) and TCP (webccl tcp against Open MPI tcp and Gloo,
// which is TCP only); on 2 ranks, allreduce, allgather and broadcast also against the floor of
// Node's own sockets for the same transfer (bench/tcp-floor.mjs, run right after webccl). The
// options are read in compare-options.mjs; each system runs from compare-systems.mjs.
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fits, parseCompareArgs, USAGE } from './compare-options.mjs';
import {
  droppedWebcclVars,
  FLOOR_OPS,
  findGloo,
  findOpenMpi,
  GLOO_OPS,
  runGloo,
  runMpi,
  runNodeFloor,
  runWebccl,
} from './compare-systems.mjs';
import { waitQuiet } from './machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dropped = droppedWebcclVars();
const perfJs = join(root, 'dist', 'node', 'perf.js');
if (!existsSync(perfJs)) {
  console.error('bench/compare: dist/ is missing; run `npm run build` first');
  process.exit(2);
}
const perf = await import(perfJs);
const { compareTable, compareSeries } = await import('./compare-table.mjs');

let opts;
try {
  opts = parseCompareArgs(process.argv.slice(2), perf);
} catch (e) {
  console.error(`bench/compare: ${e.message}\n${USAGE}`);
  process.exit(2);
}

const mpi = findOpenMpi();
const gloo = findGloo();
console.log(
  `# bench/compare on ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}`,
);
console.log(
  `# anchors found: webccl (this tree)${mpi ? `, Open MPI ${mpi.version}` : ''}${gloo ? `, Gloo (torch ${gloo.version}, ${gloo.python})` : ''}`,
);
console.log(
  `# webccl at its default settings (no WEBCCL_ variable${dropped.length ? `; ignored here: ${dropped.join(', ')}` : ''})`,
);
if (!mpi)
  console.log('# Open MPI not found: apt-get install openmpi-bin libopenmpi-dev  (mpirun and mpicc are needed)');
if (!gloo) console.log('# Gloo not found: apt-get install python3-torch  (or set PYTHON to a python3 that has torch)');

// ------------------------------------------------------------------ the sitting

/**
 * Runs each system of `plan` in turn, each after a quiet moment, saying on stderr which runs
 * (after `what`); with --rounds K the whole plan K times, keeping each system's fastest row per size.
 */
function measure(plan, what) {
  const systems = plan.map((p) => ({ name: p.name, short: p.short, label: p.label, seconds: 0 }));
  for (let round = 1; round <= opts.rounds; round++) {
    plan.forEach((p, k) => {
      const of = opts.rounds > 1 ? ` (round ${round} of ${opts.rounds})` : '';
      process.stderr.write(`bench/compare: ${what}: ${p.label}${of} ...\n`);
      const busyBefore = waitQuiet(opts.quiet, opts.quietWait);
      const t0 = performance.now();
      const res = p.go();
      const s = systems[k];
      s.seconds += (performance.now() - t0) / 1000;
      s.busyBefore = Math.max(s.busyBefore ?? 0, busyBefore);
      if (res.rows) s.rows = fastest(s.rows, res.rows);
      else if (!s.rows) Object.assign(s, res);
    });
  }
  return systems;
}

/** Per size, the faster of two runs' rows (a row missing from one run is taken from the other). */
function fastest(a, b) {
  if (!a) return b;
  const bySize = new Map(a.map((r) => [r.size, r]));
  for (const r of b) {
    const old = bySize.get(r.size);
    if (!old || r.time_us < old.time_us) bySize.set(r.size, { ...r, wrong: Math.max(r.wrong ?? 0, old?.wrong ?? 0) });
    else old.wrong = Math.max(old.wrong ?? 0, r.wrong ?? 0);
  }
  return [...bySize.values()].sort((x, y) => x.size - y.size);
}

const groups = [];
for (const n of opts.group === undefined ? [] : opts.ranks.filter((k) => k > opts.group)) {
  for (const op of opts.ops) {
    const g = opts.group;
    if (!fits(op, g)) continue;
    const plan = [
      {
        name: 'webccl-group',
        short: 'webccl',
        label: `webccl shm, group of ${g} in ${n} ranks`,
        go: () => runWebccl(opts, op, n, 'shm', g),
      },
      {
        name: 'world',
        short: `world${g}`,
        label: `webccl shm, ${g}-rank world`,
        go: () => runWebccl(opts, op, g, 'shm'),
      },
    ];
    const systems = measure(plan, op);
    const group = {
      op,
      n: g,
      title: `${op}, a group of ${g} ranks in a ${n}-rank world against a ${g}-rank world`,
      systems,
    };
    groups.push(group);
    console.log(compareTable(group, availableParallelism(), perf.formatSize));
  }
}
for (const n of opts.group === undefined ? opts.ranks : []) {
  for (const op of opts.ops) {
    if (!fits(op, n)) {
      process.stderr.write(`bench/compare: ${op} does not run on ${n} rank${n === 1 ? '' : 's'}; skipped\n`);
      continue;
    }
    // Each table: webccl first (the base of the ratios), then the anchors on the same transport.
    const shm = [{ name: 'webccl', short: 'webccl', label: 'webccl shm', go: () => runWebccl(opts, op, n, 'shm') }];
    if (mpi)
      shm.push({ name: 'ompi-shm', short: 'MPI', label: 'Open MPI vader', go: () => runMpi(opts, mpi, op, n, 'shm') });
    const tcp = [];
    if (opts.tcp && n >= 2)
      tcp.push({
        name: 'webccl-tcp',
        short: 'webccl-tcp',
        label: `webccl tcp (${n} processes)`,
        go: () => runWebccl(opts, op, n, 'tcp'),
      });
    // Right after webccl: where Node's own sockets bound it, the bound from the same moment.
    if (opts.tcp && n === 2 && FLOOR_OPS.includes(op))
      tcp.push({ name: 'node-floor', short: 'floor', label: "Node's sockets", go: () => runNodeFloor(opts, op) });
    if (mpi && opts.tcp)
      tcp.push({
        name: 'ompi-tcp',
        short: 'MPI-tcp',
        label: 'Open MPI tcp',
        go: () => runMpi(opts, mpi, op, n, 'tcp'),
      });
    if (gloo && GLOO_OPS.includes(op))
      (opts.tcp ? tcp : shm).push({
        name: 'gloo',
        short: 'Gloo',
        label: 'Gloo tcp',
        go: () => runGloo(opts, gloo, op, n),
      });
    const tables = opts.tcp
      ? [
          { transport: 'shm', plan: shm },
          { transport: 'tcp', plan: tcp },
        ]
      : [{ plan: shm }];
    for (const { transport, plan } of tables) {
      if (!plan.length) continue;
      const systems = measure(plan, `${op}, ${n} ranks`);
      const group = { op, n, ...(transport && { transport }), systems };
      groups.push(group);
      console.log(compareTable(group, availableParallelism(), perf.formatSize));
    }
  }
}

if (opts.json) {
  writeFileSync(
    opts.json,
    `${JSON.stringify(
      {
        tool: 'bench/compare',
        date: new Date().toISOString(),
        node: process.version,
        cores: availableParallelism(),
        cpu: cpus()[0]?.model,
        anchors: { openmpi: mpi?.version ?? null, gloo: gloo?.version ?? null },
        sweep: {
          b: opts.b,
          e: opts.e,
          f: opts.f,
          time: opts.time,
          reps: opts.reps,
          rounds: opts.rounds,
          tcp: opts.tcp,
        },
        groups,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nwrote ${opts.json}`);
}
// --plot DIR/ writes DIR/<op>-<n>ranks.svg (and <op>-<n>ranks-tcp.svg with --tcp); --plot FILE.svg
// writes FILE-<op>-<n>ranks[-tcp].svg when there are several.
const plotDir = opts.plot && (opts.plot.endsWith('/') || (existsSync(opts.plot) && statSync(opts.plot).isDirectory()));
if (plotDir) mkdirSync(opts.plot, { recursive: true });
if (opts.plot) {
  for (const g of groups) {
    const tag = `${g.op}-${g.n}ranks${g.transport === 'tcp' ? '-tcp' : ''}`;
    const file = plotDir
      ? join(opts.plot, `${tag}.svg`)
      : groups.length === 1
        ? opts.plot
        : `${opts.plot.replace(/\.svg$/i, '')}-${tag}.svg`;
    const over = g.transport === 'tcp' ? ' over TCP loopback' : g.transport === 'shm' ? ', shared memory' : '';
    try {
      writeFileSync(
        file,
        await perf.renderBusBwChart(compareSeries(g), `${g.op}, ${g.n} ranks${over}, float32 sum: bus bandwidth`),
      );
      console.log(`wrote ${file}`);
    } catch (e) {
      console.error(`bench/compare: --plot: ${e.message}`);
      process.exitCode = 1;
      break;
    }
  }
}
