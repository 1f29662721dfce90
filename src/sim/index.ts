// The network simulator: virtual ranks running the network schedules over a simulated network.

export type { Border } from './border.js';
export {
  collectivePart,
  type DataHooks,
  resolveSimAlgo,
  SIM_ALGORITHMS,
  SIM_COLLECTIVES,
  type SimCall,
  type SimCollective,
  simulateCollective,
} from './collectives.js';
export { SIM_DTYPES, SIM_OPS, type SimDtype, type SimOp } from './memory.js';
export type { Fault, LinkSpec, Topology } from './network.js';
export type {
  Failure,
  Message,
  RankOutcome,
  RankPart,
  RankScope,
  SimOptions,
  SimResult,
} from './types.js';
export { simulate } from './world.js';
