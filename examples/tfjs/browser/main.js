// The page: one node for N ranks, one module Web Worker per rank (browser/rank.js), the loss of
// every step as the workers report it, and the result left in window.tfjsResult.
import { createNode } from '/webccl.js';

const status = document.getElementById('status');
const log = (line) => (document.getElementById('log').textContent += `${line}\n`);
const finish = (state, text, result) => {
  status.dataset.state = state;
  status.textContent = text;
  window.tfjsResult = { state, ...result };
};

try {
  const n = Number(new URLSearchParams(location.search).get('ranks') ?? 2);
  const node = createNode({ nranks: n }); // UNSUPPORTED, naming the headers, on a page without them
  const losses = Array.from({ length: n }, () => []); // losses[rank][step - 1]
  let shown = 0;
  const showSteps = () => {
    // a step's line once every rank has reported it: the loss over the global batch, the same on each
    while (losses.every((l) => l.length > shown)) {
      const l = losses.map((x) => x[shown]);
      const agree = l.every((x) => x === l[0]);
      shown++;
      log(
        `step ${String(shown).padStart(2)}  loss ${l[0].toFixed(6)}${agree ? '' : `  ranks differ: ${l.join(', ')}`}`,
      );
    }
  };
  log(`${n} workers, tfjsDataParallel, tf.train.adam on the cpu backend`);
  const results = await Promise.all(
    Array.from(
      { length: n },
      (_, rank) =>
        new Promise((resolve, reject) => {
          const worker = new Worker(new URL('./rank.js', import.meta.url), { type: 'module' });
          worker.onmessage = ({ data }) => {
            if (data.error) reject(new Error(`rank ${rank}: ${data.error}`));
            else if (data.step) {
              losses[rank].push(data.loss);
              showSteps();
            } else resolve(data);
          };
          worker.onerror = (e) => reject(new Error(`rank ${rank}: ${e.message}`));
          worker.postMessage({ node, rank });
        }),
    ),
  );
  const { lines, spread, delta, version } = results[0];
  for (const line of lines) log(line);
  log(`TF.js ${version}`);
  log(`ranks agree: max |Δ| between ranks' weights: ${spread}`);
  log(`max |Δ| vs single-process: ${delta.toExponential(2)}`);
  const agree = losses.every((l) => l.every((x, s) => x === losses[0][s]));
  const ok = agree && spread === 0 && delta < 1e-5 && losses[0].at(-1) < losses[0][0];
  finish(ok ? 'done' : 'wrong', ok ? `${n} workers trained one model` : `${n} workers: WRONG (see below)`, {
    ranks: n,
    losses,
    spread,
    delta,
  });
} catch (e) {
  log(`${e.name}${e.code ? ` ${e.code}` : ''}: ${e.message}`);
  finish('failed', 'failed: see below', { error: e.message });
}
