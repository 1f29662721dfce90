// Browser ranks over WebSocket against Node processes over TCP, in one sitting, 2 ranks,
// allReduce 1 KiB .. MAX (×4), every rank running the same sweep (examples/browser/perf-loop.js):
//   tcp          2 Node processes, WEBCCL_TRANSPORT=tcp (the anchor)
//   ws-node      2 Node processes, WEBCCL_TRANSPORT=ws (what WebSocket framing costs alone)
//   page-node    1 Chromium page (one worker) + 1 Node process: the page dials the Node rank
//   page-page    2 Chromium pages (one worker each): their links pass the relay of webccl serve
//   floor        no webccl: the page's own WebSocket exchanging S bytes each way with a plain
//                Node ws server (bench/browser-floor.html), the most any browser rank could get
// Each setup is one job whose store `webccl serve --token` hosts (the Node ranks join it with
// WEBCCL_STORE_SERVED=1). Prints an nccl-tests-like table of busbw per setup with the ratio to
// tcp, and writes the rows as JSON.
//   npm run build && node bench/browser-ws.mjs [--max 64M] [--seconds 0.2] [--json out.json]
// Needs Chromium (/usr/bin/chromium or CHROMIUM_PATH) and playwright-core (a dev dependency).
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const bytes = (s) =>
  Number(/^(\d+)([KMG]?)$/i.exec(s)?.[1]) *
  { '': 1, K: 1024, M: 1 << 20, G: 1 << 30 }[/^(\d+)([KMG]?)$/i.exec(s)?.[2].toUpperCase() ?? ''];
const max = bytes(arg('max', '64M'));
const seconds = Number(arg('seconds', '0.2'));
const jsonOut = arg('json', undefined);
const setups = arg('setups', 'tcp,ws-node,page-node,page-page,floor').split(',');
const TOKEN = 'bench-browser-ws';

/** `webccl serve` of the repository with the job's store; resolves with its addresses. */
function serve(jobId) {
  const p = spawn(
    process.execPath,
    [join(root, 'bin/webccl.js'), 'serve', root, '--port', '0', '--token', TOKEN, '--job-id', jobId],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      const http = /at (http:\/\/\S+)\//.exec(out);
      const tcp = /tcp (\S+):(\d+) \(Node ranks/.exec(out);
      if (http && tcp) resolve({ proc: p, http: http[1], storeHost: tcp[1], storePort: tcp[2] });
    });
    p.on('exit', (c) => reject(new Error(`webccl serve exited with ${c}: ${out}`)));
  });
}

/** A Node rank of the job running the sweep; rank 0's rows are its stdout's JSON lines. */
function nodeRank(s, jobId, rank, size, transport) {
  const env = {
    ...process.env,
    RANK: String(rank),
    WORLD_SIZE: String(size),
    MASTER_ADDR: s.storeHost,
    MASTER_PORT: s.storePort,
    WEBCCL_TOKEN: TOKEN,
    WEBCCL_JOB_ID: jobId,
    WEBCCL_TRANSPORT: transport,
    WEBCCL_STORE_SERVED: '1',
  };
  const p = spawn(process.execPath, [join(root, 'examples/browser/perf-node.mjs'), String(max), String(seconds)], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  p.stdout.on('data', (d) => (out += d));
  return new Promise((resolve, reject) =>
    p.on('exit', (c) =>
      c === 0
        ? resolve(
            out
              .split('\n')
              .filter(Boolean)
              .map((l) => JSON.parse(l)),
          )
        : reject(new Error(`rank ${rank} exited with ${c}`)),
    ),
  );
}

/** A page of one rank in the job; resolves with the rows when it holds rank 0. */
async function pageRank(browser, s, jobId, rank, size) {
  const tab = await (await browser.newContext()).newPage();
  tab.on('pageerror', (e) => console.error(`page rank ${rank}: ${e}`));
  await tab.goto(
    `${s.http}/examples/browser/perf.html?size=${size}&first=${rank}&ranks=1&token=${TOKEN}&job=${jobId}&max=${max}&seconds=${seconds}`,
  );
  await tab.waitForFunction(() => document.getElementById('status').dataset.state !== 'running', undefined, {
    timeout: 0,
  });
  const state = await tab.evaluate(() => [
    document.getElementById('status').dataset.state,
    document.getElementById('status').textContent,
  ]);
  if (state[0] !== 'done') throw new Error(`page rank ${rank}: ${state[1]}`);
  return tab.evaluate(() => window.perfRows ?? []);
}

/** The floor: a page's raw WebSocket against a plain ws server, S bytes each way per exchange. */
async function floor(browser, s) {
  const { WebSocketServer } = await import('ws');
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', maxPayload: 2 << 20, perMessageDeflate: false });
  await new Promise((r) => wss.once('listening', r));
  wss.on('connection', (ws) => {
    let want = 0,
      got = 0;
    ws.on('message', (d, binary) => {
      if (!binary) {
        want = Number(String(d));
        got = 0;
        const chunk = Buffer.alloc(Math.min(want, 1 << 20));
        for (let at = 0; at < want; at += chunk.length)
          ws.send(at + chunk.length <= want ? chunk : chunk.subarray(0, want - at));
        return;
      }
      got += d.length;
      if (got === want) ws.send('got');
    });
  });
  const sizes = [];
  for (let b = 1024; b <= max; b *= 4) sizes.push(b);
  const tab = await (await browser.newContext()).newPage();
  await tab.goto(`${s.http}/bench/browser-floor.html?ws=ws://127.0.0.1:${wss.address().port}&sizes=${sizes}`);
  await tab.waitForFunction(() => window.perfRows, undefined, { timeout: 0 });
  const rows = await tab.evaluate(() => window.perfRows);
  wss.close();
  return rows;
}

const { chromium } = await import('playwright-core');
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu'],
});
const results = {};
try {
  for (const setup of setups) {
    const jobId = `bench-${setup}`;
    const s = await serve(jobId);
    try {
      const ranks =
        setup === 'floor'
          ? [floor(browser, s)]
          : setup === 'tcp' || setup === 'ws-node'
            ? [
                nodeRank(s, jobId, 0, 2, setup === 'tcp' ? 'tcp' : 'ws'),
                nodeRank(s, jobId, 1, 2, setup === 'tcp' ? 'tcp' : 'ws'),
              ]
            : setup === 'page-node'
              ? [pageRank(browser, s, jobId, 0, 2), nodeRank(s, jobId, 1, 2, 'ws')]
              : [pageRank(browser, s, jobId, 0, 2), pageRank(browser, s, jobId, 1, 2)];
      results[setup] = (await Promise.all(ranks))[0];
      process.stderr.write(`${setup}: ${results[setup].length} rows\n`);
    } finally {
      s.proc.kill();
    }
  }
} finally {
  await browser.close();
}

const mib = (b) => (b >= 1 << 20 ? `${b / (1 << 20)}M` : `${b / 1024}K`);
const pad = (cells) => cells.map((c) => String(c).padStart(16)).join('');
const sizes = results[setups[0]].map((r) => r.size);
console.log('busbw (GB/s), 2 ranks, allReduce f32 sum');
console.log(pad(['size', ...setups]));
for (const [i, size] of sizes.entries()) {
  const wrong = setups.reduce((a, s) => a + (results[s][i]?.wrong ?? 0), 0);
  console.log(
    pad([mib(size), ...setups.map((s) => results[s][i]?.busbw.toFixed(4) ?? '-')]) +
      (wrong ? `   #wrong ${wrong}` : ''),
  );
}
// Ratios: every setup against TCP, and the pages' against their browser's own floor.
const ratios = [
  ...setups.filter((s) => s !== 'tcp' && results.tcp).map((s) => [`${s}/tcp`, s, 'tcp']),
  ...setups.filter((s) => s.startsWith('page') && results.floor).map((s) => [`${s}/floor`, s, 'floor']),
];
if (ratios.length) {
  console.log('\nratios of busbw');
  console.log(pad(['size', ...ratios.map((r) => r[0])]));
  for (const [i, size] of sizes.entries())
    console.log(
      pad([
        mib(size),
        ...ratios.map(([, a, b]) =>
          results[a][i] && results[b][i] ? (results[a][i].busbw / results[b][i].busbw).toFixed(2) : '-',
        ),
      ]),
    );
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ machine: 'this machine', seconds, results }, null, 2));
