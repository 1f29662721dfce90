// One rank of job.html, in a module Web Worker: joins the job (through the node the page made,
// or alone with the job's master), runs the checked sequence of ops every rank of the job runs,
// and reports. With `loop` it runs allReduce instead, until the job fails (a test closes a page).
import * as ccl from '../../dist/browser/index.js';
import { checkEveryCollective } from './job-check.js';

onmessage = async ({ data: { join, loop } }) => {
  const who = join.node ? `node rank ${join.rank}` : `rank ${join.rank}`;
  try {
    const comm = await ccl.initCommGroup(join);
    if (loop) {
      await ccl.allReduce(new Float32Array(1024).fill(1));
      postMessage({ looping: comm.rank });
      for (;;) await ccl.allReduce(new Float32Array(1024).fill(1));
    }
    postMessage(await checkEveryCollective(ccl, comm));
  } catch (e) {
    postMessage({ error: `${who}: ${e.code ?? e.name}: ${e.message}`, code: e.code });
  }
};
