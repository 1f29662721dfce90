// One rank, in a module Web Worker: TF.js from this example's node_modules (its self-contained
// ES module build), webccl from /webccl.js (webccl serve), the training loop of ../training.js.

import * as ccl from '/webccl.js';
import * as tf from '../node_modules/@tensorflow/tfjs/dist/tf.fesm.min.js';
import { train } from '../training.js';

addEventListener('message', async ({ data: { node, rank } }) => {
  try {
    await tf.setBackend('cpu');
    const comm = await ccl.initCommGroup({ node, rank });
    const r = await train({ tf, ccl, comm, onStep: (step, loss) => postMessage({ step, loss }) });
    postMessage({ ...r, version: tf.version.tfjs });
  } catch (e) {
    postMessage({ error: `${e.code ?? e.name}: ${e.message}` });
  }
});
