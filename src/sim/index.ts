// The network simulator: virtual ranks running the network schedules over a simulated network.
export { simulate, type SimOptions, type SimResult, type RankOutcome, type RankScope, type Message } from './world.js';
export { type Fault, type LinkSpec, type Topology } from './network.js';
export { SIM_ALGORITHMS, SIM_COLLECTIVES, type SimCall, type SimCollective, type DataHooks, resolveSimAlgo, simulateCollective } from './collectives.js';
export { SIM_DTYPES, SIM_OPS, type SimDtype, type SimOp } from './memory.js';
