// The cost model fitted on the machine webccl is developed on (2 cores, Node 20, shared with
// other work): fitModel (fit.ts) over `webccl perf allreduce` rows of 4 KiB–64 MiB by 4, shm
// direct and twoshot at 2–8 threads, tcp ring and doubling at 2–8 processes on loopback (the
// sweep bench/model-error.mjs runs). `webccl tune` fits one for the machine it runs on (see
// model-source.ts for which one the tuner uses).
import type { CostModel } from './cost-model.js';

export const DEFAULT_MODEL: CostModel = {
  version: 1,
  cores: 2,
  shm: { alphaUs: 2.06, wakeUs: 24.3, betaBytesPerUs: 7798, gammaBytesPerUs: 83542, messageUs: 0 },
  tcp: { alphaUs: 0, wakeUs: 77.5, betaBytesPerUs: 2643, gammaBytesPerUs: 1926, messageUs: 83.1 },
  source: { fit: 'src/tuner/fit.ts fitModel', sizes: '4K..64M x4', shm: '2..8 ranks: direct, twoshot', tcp: '2..8 ranks, one per process: ring, doubling', machine: 'AMD EPYC Zen 5, 2 vCPUs, Node 20' },
};
