// One rank of net-progress.html, in a module Web Worker: joins the job through the page's node
// and runs the overlap check (overlap-ops.js).
import { initCommGroup } from '/dist/browser/index.js';
import { overlapCheck } from './overlap-ops.js';

onmessage = async ({ data: { join, busyMs } }) => {
  try {
    postMessage(await overlapCheck(await initCommGroup(join), busyMs));
  } catch (e) {
    postMessage({ error: `${e.code ?? e.name}: ${e.message}` });
  }
};
