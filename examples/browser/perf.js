// The live benchmark page: first this page's floor (perf-floor.js), then one module worker per
// rank (perf-rank.js); each row that rank 0 reports is added to the table and the chart
// (perf-chart.js: busbw against size, the floor as a dashed reference). Alone, the
// page's workers are one node; with ?size=N (and first, token, as job.html takes them) they
// join a job of N ranks across pages and Node ranks (examples/browser/perf-node.mjs), whose store
// `webccl serve --token T` hosts, and the chart shows the job's allReduce; then each node of the
// job on its own (this page's workers, a Node process's threads) as further series, so the cost
// of crossing between them shows beside what each side does alone.
import { createNode, initCommGroup } from '../../dist/browser/index.js';
import { chartSvg, floorBusBw, humanBytes } from './perf-chart.js';
import { measureFloor, measureMainFloor } from './perf-floor.js';
import { allReduceSweep, sweepSizes } from './perf-loop.js';

const q = new URLSearchParams(location.search);
const ranks = Number(q.get('ranks') ?? 2);
const max = Number(q.get('max') ?? 16 * 1024 * 1024);
const sizes = sweepSizes(max, Number(q.get('min') ?? 8));
const seconds = Number(q.get('seconds') ?? 0.1);
const status = document.getElementById('status');
const table = document.getElementById('rows');
const chart = document.getElementById('chart');
const timeChart = document.getElementById('time-chart');
const floorNote = document.getElementById('floor');
const nodeTable = document.getElementById('node-rows');
const rows = [];
/** Each node's own sweep (in a job), by series name. */
const nodeSeries = new Map();
let floor;
let jobRanks = ranks;

function draw() {
  for (const [svg, measure] of [
    [chart, 'busbw'],
    [timeChart, 'time'],
  ]) {
    const extra = [...nodeSeries].map(([label, rs]) => ({ label, rows: rs }));
    const c = chartSvg({ rows, sizes, ranks: rows[0]?.ranks ?? jobRanks, floor, measure, extra });
    svg.setAttribute('viewBox', `0 0 ${c.width} ${c.height}`);
    svg.setAttribute('width', String(c.width));
    svg.setAttribute('height', String(c.height));
    svg.innerHTML = c.markup;
  }
}

function add(row) {
  if (row.series) return addNodeRow(row);
  rows.push(row);
  const tr = table.insertRow();
  const ofFloor = floor ? (row.busbw / floorBusBw(floor, row.size, row.ranks)).toFixed(2) : '';
  for (const v of [
    humanBytes(row.size),
    row.timeUs.toFixed(1),
    row.algbw.toPrecision(3),
    row.busbw.toPrecision(3),
    ofFloor,
    row.wrong,
  ])
    tr.insertCell().textContent = String(v);
  tr.dataset.size = String(row.size);
  draw();
}

/** A row of one node's own sweep: its series on the charts, a row of the second table. */
function addNodeRow(row) {
  if (!nodeSeries.has(row.series)) nodeSeries.set(row.series, []);
  nodeSeries.get(row.series).push(row);
  nodeTable.hidden = false;
  const tr = nodeTable.insertRow();
  for (const v of [
    row.series,
    humanBytes(row.size),
    row.timeUs.toFixed(1),
    row.algbw.toPrecision(3),
    row.busbw.toPrecision(3),
    row.wrong,
  ])
    tr.insertCell().textContent = String(v);
  draw();
}

try {
  const firstRank = Number(q.get('first') ?? 0);
  const job = q.has('size') && {
    master: q.get('master') ?? `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}`,
    worldSize: Number(q.get('size')),
    token: q.get('token') ?? '',
    jobId: q.get('job') ?? undefined,
  };
  if (job) jobRanks = job.worldSize;
  // ?main=1 (the page alone): rank 0 runs here, on the page's main thread, which may not block.
  const onMain = q.get('main') === '1' && !job && ranks > 1;
  draw();
  // The page's own floor first (its workers would otherwise compete with the ranks).
  status.textContent = "measuring this page's floor…";
  floor = await measureFloor(max);
  const workerOneWayUs = floor.oneWayUs;
  if (onMain) floor = { ...floor, ...(await measureMainFloor()), workerOneWayUs };
  floorNote.textContent = onMain
    ? `This page's floor (dashed), with rank 0 on its main thread: two one-way wake-ups between this thread's Atomics.waitAsync and a worker's Atomics.wait (${floor.oneWayUs.toFixed(1)} µs each; between two workers ${workerOneWayUs.toFixed(1)} µs) and one copy of the buffer (${floor.copyGBs.toFixed(2)} GB/s); the table's "of floor" is busbw over the floor's.`
    : `This page's floor (dashed): two one-way wake-ups of a worker blocked in Atomics.wait (${floor.oneWayUs.toFixed(1)} µs each) and one copy of the buffer (${floor.copyGBs.toFixed(2)} GB/s); the table's "of floor" is busbw over the floor's.`;
  draw();
  status.textContent = 'running…';
  // A page of one rank in a job joins alone (no shared memory needed); otherwise one node.
  const node = job && ranks === 1 ? undefined : createNode({ nranks: ranks, ...(job && { firstRank, ...job }) });
  let finished = 0;
  await new Promise((resolve, reject) => {
    if (onMain) {
      // This thread's rank awaits each call (it may not block); rank 0 reports the rows.
      initCommGroup({ node, rank: 0 })
        .then((comm) => allReduceSweep(comm, { sizes, seconds, block: false }, add))
        .then(
          () => ++finished === ranks && resolve(),
          (e) => reject(new Error(`main-thread rank 0: ${e.code ?? e.name}: ${e.message}`)),
        );
    }
    for (let rank = onMain ? 1 : 0; rank < ranks; rank++) {
      const w = new Worker(new URL('./perf-rank.js', import.meta.url), { type: 'module' });
      w.onmessage = ({ data }) => {
        if (data.error) reject(new Error(data.error));
        else if (data.row) add(data.row);
        else if (++finished === ranks) resolve();
      };
      w.onerror = (e) => reject(new Error(`rank ${rank}: ${e.message}`));
      w.postMessage({ join: node ? { node, rank } : { ...job, rank: firstRank }, sizes, seconds, inJob: Boolean(job) });
    }
  });
  const wrong = [...rows, ...[...nodeSeries.values()].flat()].reduce((a, r) => a + r.wrong, 0);
  status.dataset.state = wrong ? 'failed' : 'done';
  status.textContent = `${rows[0]?.ranks ?? ranks} ranks, ${rows.length} sizes: ${wrong ? `${wrong} wrong results` : 'every result right'}`;
  window.perfRows = rows; // read by bench/browser-ws.mjs
  window.perfNodeRows = [...nodeSeries.values()].flat();
  window.perfFloor = floor;
  window.perfOnMain = onMain;
} catch (e) {
  status.dataset.state = 'failed';
  status.textContent = String(e.message ?? e);
}
