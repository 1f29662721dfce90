// The cost model fitted on the machine webccl is developed on (2 cores, Node 20, shared with
// other work): fitModel (fit.ts) over `webccl perf allreduce` rows of 4 KiB–64 MiB by 4, shm
// direct and twoshot at 2–8 threads, tcp ring and doubling at 2–8 processes on loopback (the
// sweep bench/model-error.mjs runs). `webccl tune` fits one for the machine it runs on (see
// model-source.ts for which one the tuner uses).
import type { CostModel } from './cost-model.js';

export const DEFAULT_MODEL: CostModel = {
  version: 1,
  cores: 2,
  // (at most as many ranks as cores the threads reduce as fast as they copy: γ is too fast to
  // show apart from β; over TCP the bytes are nearly free beside o, and γ is what shows)
  shm: { alphaUs: 1.985, wakeUs: 24.69, betaBytesPerUs: 6061, gammaBytesPerUs: null, messageUs: 0, crowdUsPerByte: 0.00009749, crowdUsPerReducedByte: 0.00001862, crowdMessageUs: 0 },
  tcp: { alphaUs: 0, wakeUs: 0, betaBytesPerUs: 15790, gammaBytesPerUs: 1760, messageUs: 98.66, crowdUsPerByte: 0.00001584, crowdUsPerReducedByte: 0.001722, crowdMessageUs: 220.3 },
  source: { fit: 'src/tuner/fit.ts fitModel', sizes: '4K..64M x4', shm: '2..8 ranks: direct, twoshot', tcp: '2..8 ranks, one per process: ring, doubling', machine: 'AMD EPYC Zen 5, 2 vCPUs, Node 20' },
};
