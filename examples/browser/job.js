// The page of job.html: this page's K ranks, joined to the job whose store the serving
// `webccl serve --token T` hosts. With K > 1 the page makes one node (a shared
// WebAssembly.Memory, which needs a cross-origin isolated page) with createNode's `master`, and
// each worker's initCommGroup({ node, rank }) meets the job; with K = 1 the worker joins alone,
// initCommGroup({ master, rank, worldSize, token }), which works on any page (a node of one rank
// needs no shared memory). Every rank meets Node ranks (WEBCCL_TRANSPORT=ws) directly and other
// pages' ranks through the relay of webccl serve, then runs the same checked ops (job-check.js).
import { createNode } from '../../dist/browser/index.js';

const q = new URLSearchParams(location.search);
const status = document.getElementById('status');
const log = (line) => (document.getElementById('log').textContent += `${line}\n`);
const finish = (state, text, result) => {
  status.dataset.state = state;
  status.textContent = text;
  window.jobResult = result; // read by the tests
};

try {
  const nranks = Number(q.get('ranks') ?? 1);
  const firstRank = Number(q.get('first') ?? 0);
  const job = {
    master: q.get('master') ?? `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}`,
    worldSize: Number(q.get('size')),
    token: q.get('token') ?? '',
    jobId: q.get('job') ?? undefined,
  };
  log(
    `world ranks ${firstRank}..${firstRank + nranks - 1} of ${job.worldSize}, joining the job at ${job.master}; cross-origin isolated: ${crossOriginIsolated}`,
  );
  // With master, the node's ranks are world ranks firstRank.. of the job.
  const node = nranks > 1 ? createNode({ nranks, firstRank, ...job }) : undefined;
  const results = await Promise.all(
    Array.from(
      { length: nranks },
      (_, rank) =>
        new Promise((resolve, reject) => {
          const worker = new Worker(new URL('./job-rank.js', import.meta.url), { type: 'module' });
          worker.onmessage = ({ data }) => {
            if (data.looping !== undefined) return void (window.jobLooping = (window.jobLooping ?? 0) + 1);
            if (data.error) reject(Object.assign(new Error(data.error), { code: data.code }));
            else resolve(data);
          };
          worker.onerror = (e) => reject(new Error(`rank ${firstRank + rank}: ${e.message}`));
          const join = node ? { node, rank } : { ...job, rank: firstRank };
          worker.postMessage({ join, loop: q.get('loop') === '1' });
        }),
    ),
  );
  for (const r of results)
    log(`rank ${r.rank}/${r.size}: every op checked; allReduce algorithms ${JSON.stringify(r.algos)}`);
  finish('done', `${nranks} rank(s) of ${results[0].size}: every result checked, all correct`, {
    ok: true,
    ranks: results.map((r) => r.rank),
  });
} catch (e) {
  log(`${e.name}${e.code ? ` ${e.code}` : ''}: ${e.message}`);
  finish('failed', 'failed: see below', { ok: false, code: e.code, message: e.message });
}
