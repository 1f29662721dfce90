// The cost model fitted on the machine webccl is developed on (2 cores, Node 20, shared with
// other work): fitModel (fit.ts) over `webccl perf allreduce` rows of 4 KiB–64 MiB by 4, shm
// direct and twoshot at 2–8 threads, tcp ring and doubling at 2–8 processes on loopback (the
// sweep bench/model-error.mjs runs). `webccl tune` fits one for the machine it runs on (see
// model-source.ts for which one the tuner uses).
import type { CostModel } from './cost-model.js';

export const DEFAULT_MODEL: CostModel = {
  version: 1,
  cores: 2,
  // (with a core per rank the threads' reduction does not show apart from their copies: γ is
  // free; over TCP the bytes are nearly free beside o, and γ is what shows)
  shm: {
    alphaUs: 1.974,
    wakeUs: 20.84,
    betaBytesPerUs: 6094,
    gammaBytesPerUs: null,
    messageUs: 0,
    crowdUsPerByte: 0.00009786,
    crowdUsPerReducedByte: 0.0000191,
    crowdMessageUs: 0,
    roundUs: 6.218,
  },
  tcp: {
    alphaUs: 0,
    wakeUs: 0,
    betaBytesPerUs: 21000,
    gammaBytesPerUs: 1704,
    messageUs: 100.8,
    crowdUsPerByte: 0.0001754,
    crowdUsPerReducedByte: 0.001579,
    crowdMessageUs: 130.7,
    roundUs: 96.02,
  },
  source: {
    fit: 'src/tuner/fit.ts fitModel',
    sizes: '4K..64M x4',
    shm: '2..8 ranks: direct, twoshot',
    tcp: '2..8 ranks, one per process: ring, doubling',
    machine: 'AMD EPYC Zen 5, 2 vCPUs, Node 20',
  },
};
