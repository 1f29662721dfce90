// The page: creates one node for N ranks and starts one module Web Worker per rank, handing
// each the node. The library travels as an ES module; with a bundler write `from 'webccl'`
// here and in rank.js (see README.md beside this file).
import { createNode } from '../../dist/browser/index.js';

const status = document.getElementById('status');
const log = (line) => (document.getElementById('log').textContent += `${line}\n`);
const finish = (state, text) => {
  status.dataset.state = state;
  status.textContent = text;
};

try {
  const n = Number(new URLSearchParams(location.search).get('ranks') ?? 4);
  log(`cross-origin isolated: ${crossOriginIsolated}`);
  // Throws a WebcclError with code UNSUPPORTED, naming the two headers, on a page without them.
  const node = createNode({ nranks: n });
  const results = await Promise.all(
    Array.from(
      { length: n },
      (_, rank) =>
        new Promise((resolve, reject) => {
          // `new URL(..., import.meta.url)` with `type: 'module'`: the form Vite and webpack
          // recognise as a worker entry to bundle.
          const worker = new Worker(new URL('./rank.js', import.meta.url), { type: 'module' });
          worker.onmessage = ({ data }) =>
            data.error ? reject(new Error(`rank ${rank}: ${data.error}`)) : resolve(data);
          worker.onerror = (e) => reject(new Error(`rank ${rank}: ${e.message}`));
          worker.postMessage({ node, rank });
        }),
    ),
  );
  for (const r of results)
    log(
      `rank ${r.rank}/${r.size}: allReduce sum ${r.sum}, allGather ${r.gathered.join(',')}, broadcast from rank 0: ${r.broadcast}; ops run by the progress thread: ${r.threadOps}`,
    );
  const want = (n * (n + 1)) / 2;
  const ok = results.every(
    (r, rank) => r.rank === rank && r.sum === want && r.gathered.every((v, i) => v === i) && r.broadcast === 42,
  );
  finish(ok ? 'done' : 'wrong', ok ? `${n} ranks: every result checked, all correct` : `${n} ranks: WRONG results`);
} catch (e) {
  log(`${e.name}${e.code ? ` ${e.code}` : ''}: ${e.message}`);
  finish('failed', 'failed: see below');
}
