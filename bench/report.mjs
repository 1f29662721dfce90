#!/usr/bin/env node
// bench/report: tables and a chart from saved results, without measuring again.
//
//   node bench/report.mjs RESULT.json [MORE.json ...] [--plot FILE.svg] [--title TEXT]
//
// Reads `webccl perf --json` files (prints each as nccl-tests' table) and `bench/compare --json`
// files (prints the side-by-side busbw tables). --plot draws busbw against size with one line
// per system/transport (and per rank count when the files differ in it).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const perfJs = join(root, 'dist', 'node', 'perf.js');
if (!existsSync(perfJs)) {
  console.error('bench/report: dist/ is missing; run `npm run build` first');
  process.exit(2);
}
const perf = await import(perfJs);
const { compareTable, compareSeries } = await import('./compare-table.mjs');

const USAGE = 'usage: node bench/report.mjs RESULT.json [MORE.json ...] [--plot FILE.svg] [--title TEXT]';
const files = [];
let plot;
let title;
const argv = process.argv.slice(2);
for (let k = 0; k < argv.length; k++) {
  if (argv[k] === '--plot') plot = argv[++k];
  else if (argv[k] === '--title') title = argv[++k];
  else if (argv[k] === '-h' || argv[k] === '--help') {
    console.log(USAGE);
    process.exit(0);
  } else if (argv[k].startsWith('-')) {
    console.error(`bench/report: unknown option ${argv[k]}\n${USAGE}`);
    process.exit(2);
  } else files.push(argv[k]);
}
if (!files.length || (plot !== undefined && !/\.svg$/i.test(plot))) {
  console.error(
    `bench/report: ${files.length ? '--plot needs a file name ending in .svg' : 'name at least one JSON result'}\n${USAGE}`,
  );
  process.exit(2);
}

const series = [];
const titles = new Set();
for (const file of files) {
  const doc = JSON.parse(readFileSync(file, 'utf8'));
  if (doc.tool === 'webccl perf') {
    const layout = doc.nodes > 1 ? ` (${doc.nodes} processes × ${doc.ranksPerNode} threads)` : '';
    const group = doc.group ? ` as a group of a ${doc.group.worldSize}-rank world` : '';
    console.log(
      `\n## ${file}: webccl perf ${doc.collective}, ${doc.nranks} ranks${group}${layout}, ${doc.transport} (${doc.date})\n`,
    );
    console.log('```');
    process.stdout.write(perf.formatTable(doc));
    console.log('```');
    const multi = files.length > 1;
    series.push(...perf.reportSeries(doc, `webccl ${doc.transport}${multi ? ` ${doc.nranks} ranks` : ''}`));
    titles.add(`${doc.collective}, ${doc.nranks} ranks`);
  } else if (doc.tool === 'bench/compare') {
    console.log(`\n## ${file}: bench/compare (${doc.date}, ${doc.cores} cores, Node ${doc.node})`);
    for (const g of doc.groups) {
      console.log(compareTable(g, doc.cores, perf.formatSize));
      const multi = doc.groups.length > 1;
      series.push(
        ...compareSeries(g).map((s) => ({ ...s, label: multi ? `${s.label}, ${g.op} ${g.n} ranks` : s.label })),
      );
      titles.add(`${g.op}, ${g.n} ranks`);
    }
  } else {
    console.error(`bench/report: ${file} is neither a webccl perf nor a bench/compare result`);
    process.exit(2);
  }
}

if (plot) {
  try {
    writeFileSync(plot, await perf.renderBusBwChart(series, title ?? `${[...titles].join('; ')}: bus bandwidth`));
    console.log(`\nwrote ${plot}`);
  } catch (e) {
    console.error(`bench/report: --plot: ${e.message}`);
    process.exit(1);
  }
}
