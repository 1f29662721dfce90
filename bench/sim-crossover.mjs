// Crossover of the allreduce schedules, from the simulator: ring, tree, doubling and
// hierarchical at 8 → 4,096 ranks (8 per node), 10 and 100 Gbit between nodes (5 us), inside a
// node 1 us and 400 Gbit, 1 KiB → 1 GiB. Prints, for each rank count, link and size, the
// predicted time of each schedule, the winner and its lead over the runner-up.
//
//   node bench/sim-crossover.mjs [--ranks 8,64,512,4096] [--gbit 10,100] [--sizes 1K,32K,1M,32M,1G]
//                                [--algos ring,tree,doubling,hierarchical] [--skip-ring-above N] [--json FILE]
// A ring over 4,096 ranks moves 33 M messages whatever the size (most of a minute of
// simulation each, split over every core from 1,024 ranks); --skip-ring-above N leaves the ring
// out above N ranks except at the smallest and largest size. Build first: npm run build (this
// loads dist/node/sim-threads.js).
import { writeFileSync } from 'node:fs';
import { simulateOnThreads } from '../dist/node/sim-threads.js';
import { bytesOf, flagOf } from './machine.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => flagOf(args, name, dflt);
const ranksList = opt('--ranks', '8,64,512,4096').split(',').map(Number);
const gbits = opt('--gbit', '10,100').split(',').map(Number);
const sizes = opt('--sizes', '1K,32K,1M,32M,1G').split(',').map(bytesOf);
const skipRingAbove = Number(opt('--skip-ring-above', 'Infinity'));
const json = opt('--json', undefined);
const ALGOS = opt('--algos', 'ring,tree,doubling,hierarchical').split(',');
const label = (b) =>
  b >= 1 << 30 ? `${b / (1 << 30)} GiB` : b >= 1 << 20 ? `${b / (1 << 20)} MiB` : `${b / 1024} KiB`;
const us = (t) => (t >= 1e4 ? `${(t / 1e3).toFixed(1)} ms` : `${t.toFixed(1)} us`);

const rows = [];
console.log(`| ranks | link | size | ${ALGOS.join(' | ')} | fastest | lead |`);
console.log(`| ---: | ---: | ---: | ${ALGOS.map(() => '---:').join(' | ')} | --- | ---: |`);
for (const ranks of ranksList)
  for (const gbit of gbits)
    for (const bytes of sizes) {
      const net = {
        ranks,
        nodes: Math.max(1, ranks / 8),
        mode: 'size',
        inter: { latencyUs: 5, bytesPerUs: (gbit * 1e9) / 8 / 1e6 },
        intra: { latencyUs: 1, bytesPerUs: 50000 },
      };
      const times = {};
      for (const algo of ALGOS) {
        if (algo === 'ring' && ranks > skipRingAbove && bytes !== sizes[0] && bytes !== sizes[sizes.length - 1])
          continue;
        const t0 = performance.now();
        let r;
        try {
          r = await simulateOnThreads(net, { collective: 'allreduce', algo, count: bytes / 4 }, 'auto');
        } catch (e) {
          // A thread out of heap (a tree posting thousands of receives per rank up front): "—".
          console.error(`# ${ranks} ranks, ${gbit} Gbit, ${label(bytes)}, ${algo}: ${e.message}`);
          continue;
        }
        times[algo] = r.timeUs;
        rows.push({
          ranks,
          gbit,
          size: bytes,
          algorithm: algo,
          timeUs: r.timeUs,
          wallSec: (performance.now() - t0) / 1000,
        });
      }
      const ranked = Object.entries(times).sort((a, b) => a[1] - b[1]);
      const lead = ranked.length > 1 ? `${(ranked[1][1] / ranked[0][1]).toFixed(2)}× over ${ranked[1][0]}` : '';
      console.log(
        `| ${ranks} | ${gbit} Gbit | ${label(bytes)} | ${ALGOS.map((a) => (a in times ? us(times[a]) : '—')).join(' | ')} | ${ranked[0][0]} | ${lead} |`,
      );
    }
if (json)
  writeFileSync(json, `${JSON.stringify({ tool: 'bench/sim-crossover.mjs', node: process.version, rows }, null, 2)}\n`);
