// A page's Web Workers as ranks, against the page's own floor and against Node worker threads,
// in one sitting: the live benchmark (examples/browser/perf.html, allReduce from 8 B to MAX by
// ×4, every result checked) in Chromium and/or Firefox ESR, which measures the page's floor
// first (one-way Atomics.wait wake-up ℓ, plain copy rate B: floor time 2·ℓ + S/B), then
// `webccl perf allreduce` over the same sizes on Node worker threads. Prints, per size, each
// browser's time, its time over the floor's, and its busbw over Node's; writes the rows as JSON.
// With --main, the pages' rank 0 runs on the main thread (perf.html?main=1: it awaits each call),
// and ×floor is over that thread's floor (Atomics.waitAsync against a worker's Atomics.wait).
// npm run build && node bench/browser-page.mjs [--browsers chromium,firefox] [--ranks 2] [--max 16M] [--seconds 0.2]
// [--main] [--json out.json] Needs playwright-core (a dev dependency) and Debian's chromium / firefox-esr (or
// CHROMIUM_PATH, FIREFOX_PATH).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, firefox } from 'playwright-core';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const bytes = (s) => {
  const m = /^(\d+)([KMG]?)$/i.exec(s);
  if (!m) throw new Error(`bench/browser-page: not a size: ${s}`);
  return Number(m[1]) * { '': 1, K: 1024, M: 1 << 20, G: 1 << 30 }[m[2].toUpperCase()];
};
const ranks = Number(arg('ranks', '2'));
const max = bytes(arg('max', '16M'));
const seconds = Number(arg('seconds', '0.2'));
const jsonOut = arg('json', undefined);
const browsers = arg('browsers', 'chromium,firefox').split(',');
const onMain = process.argv.includes('--main');
const PATHS = {
  chromium: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  firefox: process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr',
};

/** The browser's rows and floor from perf.html, served by `webccl serve --demo`. */
async function pageRun(which) {
  if (!existsSync(PATHS[which])) return { skipped: `no ${which} at ${PATHS[which]}` };
  const server = spawn(process.execPath, [join(root, 'bin/webccl.js'), 'serve', '--demo', '--port', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const url = await new Promise((resolve, reject) => {
      let out = '';
      const t = setTimeout(() => reject(new Error(`webccl serve --demo printed no address: ${out}`)), 30_000);
      server.stdout.on('data', (d) => {
        out += d;
        const m = /live benchmark at (http:\/\/\S+perf\.html)/.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(m[1]);
        }
      });
    });
    const browser =
      which === 'firefox'
        ? await firefox.launch({ channel: 'moz-firefox', executablePath: PATHS.firefox, headless: true })
        : await chromium.launch({ executablePath: PATHS.chromium, args: ['--no-sandbox', '--disable-gpu'] });
    try {
      const tab = await browser.newPage();
      await tab.goto(
        `${url}?${new URLSearchParams({ ranks: String(ranks), max: String(max), seconds: String(seconds), ...(onMain && { main: '1' }) })}`,
      );
      await tab.waitForSelector('#status:not([data-state="running"])', { timeout: 1_800_000 });
      const state = await tab.getAttribute('#status', 'data-state');
      if (state !== 'done') return { skipped: `${which}: ${await tab.textContent('#status')}` };
      return {
        version: browser.version(),
        rows: await tab.evaluate('window.perfRows'),
        floor: await tab.evaluate('window.perfFloor'),
      };
    } finally {
      await browser.close();
    }
  } finally {
    server.kill();
  }
}

/** webccl perf on Node worker threads over sizes `lo`..`hi` ×4: time (µs) and busbw per size. */
function perfRows(lo, hi) {
  const json = join(tmpdir(), `webccl-browser-page-${process.pid}.json`);
  const r = spawnSync(
    process.execPath,
    [
      join(root, 'bin/webccl.js'),
      'perf',
      'allreduce',
      '--ranks',
      String(ranks),
      '-b',
      String(lo),
      '-e',
      String(hi),
      '-f',
      '4',
      '--time',
      String(seconds),
      '-c',
      '1',
      '--json',
      json,
    ],
    { encoding: 'utf8', timeout: 1_800_000 },
  );
  if (!existsSync(json)) throw new Error(`webccl perf failed: ${r.stderr}`);
  const rep = JSON.parse(readFileSync(json, 'utf8'));
  rmSync(json);
  return rep.rows.map((x) => [x.size, { timeUs: x.oop.time_us, busbw: x.oop.busbw }]);
}

/** The page's sizes (8 B ×4, and max itself) on Node worker threads. */
function nodeRun() {
  const rows = perfRows(8, max);
  if (rows.at(-1)?.[0] !== max) rows.push(...perfRows(max, max));
  return new Map(rows);
}

const floorTime = (f, s) => 2 * f.oneWayUs + s / (f.copyGBs * 1e3);
const pages = {};
for (const b of browsers) pages[b] = await pageRun(b);
const node = nodeRun();

console.log(
  `# bench/browser-page: allReduce, ${ranks} ranks, Node ${process.version} worker threads beside each browser's page workers${onMain ? " (rank 0 on the page's main thread)" : ''}`,
);
for (const [b, p] of Object.entries(pages)) {
  console.log(
    p.skipped
      ? `# ${b}: skipped (${p.skipped})`
      : `# ${b} ${p.version}: floor one-way ${p.floor.oneWayUs.toFixed(1)} µs${p.floor.workerOneWayUs ? ` (main thread; between workers ${p.floor.workerOneWayUs.toFixed(1)} µs)` : ''}, copy ${p.floor.copyGBs.toFixed(2)} GB/s`,
  );
}
const live = Object.entries(pages).filter(([, p]) => !p.skipped);
const head = ['size', 'node µs', 'node busbw', ...live.flatMap(([b]) => [`${b} µs`, `×floor`, `busbw/node`])];
console.log(head.map((h) => h.padStart(12)).join(''));
const out = [];
for (const size of live[0]?.[1].rows.map((r) => r.size) ?? [...node.keys()]) {
  const n = node.get(size);
  const cells = [size, n?.timeUs.toFixed(1) ?? '-', n?.busbw.toFixed(3) ?? '-'];
  const row = { size, node: n };
  for (const [b, p] of live) {
    const r = p.rows.find((x) => x.size === size);
    const overFloor = r.timeUs / floorTime(p.floor, size);
    cells.push(r.timeUs.toFixed(1), overFloor.toFixed(1), n ? (r.busbw / n.busbw).toFixed(2) : '-');
    row[b] = { timeUs: r.timeUs, busbw: r.busbw, wrong: r.wrong, overFloor, ofNode: n ? r.busbw / n.busbw : undefined };
  }
  out.push(row);
  console.log(cells.map((c) => String(c).padStart(12)).join(''));
}
if (jsonOut)
  writeFileSync(
    jsonOut,
    JSON.stringify(
      {
        ranks,
        max,
        seconds,
        onMain,
        node: process.version,
        browsers: Object.fromEntries(live.map(([b, p]) => [b, { version: p.version, floor: p.floor }])),
        rows: out,
      },
      null,
      2,
    ),
  );
