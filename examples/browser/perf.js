// The live benchmark page: one module worker per rank (perf-rank.js); each row that rank 0
// reports is added to the table and the chart (busbw against size, log2 size axis). Alone, the
// page's workers are one node; with ?size=N (and first, token, as job.html takes them) they
// join a job of N ranks across pages and Node ranks (examples/browser/perf-node.mjs), whose store
// `webccl serve --token T` hosts, and the chart shows the job's allReduce.
import { createNode } from '../../dist/browser/index.js';
import { sweepSizes } from './perf-loop.js';

const q = new URLSearchParams(location.search);
const ranks = Number(q.get('ranks') ?? 2);
const sizes = sweepSizes(Number(q.get('max') ?? 16 * 1024 * 1024));
const seconds = Number(q.get('seconds') ?? 0.1);
const status = document.getElementById('status');
const table = document.getElementById('rows');
const chart = document.getElementById('chart');
const rows = [];

function draw() {
  const W = 640, H = 320, pad = 40;
  const xs = (size) => pad + ((Math.log2(size) - Math.log2(sizes[0])) / Math.max(1, Math.log2(sizes.at(-1)) - Math.log2(sizes[0]))) * (W - 2 * pad);
  const top = Math.max(...rows.map((r) => r.busbw), 1e-9);
  const ys = (b) => H - pad - (b / top) * (H - 2 * pad);
  const pts = rows.map((r) => `${xs(r.size).toFixed(1)},${ys(r.busbw).toFixed(1)}`);
  chart.innerHTML = `<text x="${pad}" y="20">busbw, max ${top.toFixed(2)} GB/s</text>`
    + `<text x="${W - pad}" y="${H - 10}" text-anchor="end">size ${sizes[0]} B … ${sizes.at(-1)} B (log)</text>`
    + `<polyline points="${pts.join(' ')}"/>` + rows.map((r, i) => `<circle r="3" cx="${pts[i].split(',')[0]}" cy="${pts[i].split(',')[1]}"/>`).join('');
}

function add(row) {
  rows.push(row);
  const tr = table.insertRow();
  for (const v of [row.size, row.timeUs.toFixed(1), row.algbw.toFixed(3), row.busbw.toFixed(3), row.wrong]) tr.insertCell().textContent = String(v);
  draw();
}

try {
  const firstRank = Number(q.get('first') ?? 0);
  const job = q.has('size') && {
    master: q.get('master') ?? `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}`,
    worldSize: Number(q.get('size')), token: q.get('token') ?? '', jobId: q.get('job') ?? undefined,
  };
  // A page of one rank in a job joins alone (no shared memory needed); otherwise one node.
  const node = job && ranks === 1 ? undefined : createNode({ nranks: ranks, ...(job && { firstRank, ...job }) });
  let finished = 0;
  await new Promise((resolve, reject) => {
    for (let rank = 0; rank < ranks; rank++) {
      const w = new Worker(new URL('./perf-rank.js', import.meta.url), { type: 'module' });
      w.onmessage = ({ data }) => {
        if (data.error) reject(new Error(data.error));
        else if (data.row) add(data.row);
        else if (++finished === ranks) resolve();
      };
      w.onerror = (e) => reject(new Error(`rank ${rank}: ${e.message}`));
      w.postMessage({ join: node ? { node, rank } : { ...job, rank: firstRank }, sizes, seconds });
    }
  });
  const wrong = rows.reduce((a, r) => a + r.wrong, 0);
  status.dataset.state = wrong ? 'failed' : 'done';
  status.textContent = `${rows[0]?.ranks ?? ranks} ranks, ${rows.length} sizes: ${wrong ? `${wrong} wrong results` : 'every result right'}`;
  window.perfRows = rows; // read by bench/browser-ws.mjs
} catch (e) {
  status.dataset.state = 'failed';
  status.textContent = String(e.message ?? e);
}
