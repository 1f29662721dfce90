// The network simulator: virtual ranks running the network schedules over a simulated network.
export { simulate } from './world.js';
export { type SimOptions, type SimResult, type RankOutcome, type RankScope, type RankPart, type Message, type Failure } from './types.js';
export { type Border } from './border.js';
export { type Fault, type LinkSpec, type Topology } from './network.js';
export { SIM_ALGORITHMS, SIM_COLLECTIVES, type SimCall, type SimCollective, type DataHooks, resolveSimAlgo, simulateCollective, collectivePart } from './collectives.js';
export { SIM_DTYPES, SIM_OPS, type SimDtype, type SimOp } from './memory.js';
