// The tuner's cost model for bench/ scripts (bundled as dist/node/tuner.js): counts, fitting,
// predictions, the model in force and the choices made from it.
export { type CostModel, checkModel, type PathCosts, predictUs } from './cost-model.js';
export { DEFAULT_MODEL } from './default-model.js';
export { fitModel, type PerfRow, rowCounts } from './fit.js';
export { activeModel, defaultModelPath } from './model-source.js';
export { crossoverBytes, flatPredictions, shmPredictions } from './predict.js';
export { RING_PIECES, ringPieceBytes, ringPieceCosts } from './ring-pieces.js';
export { hierarchicalCounts, netCounts, onPath, shmCounts } from './schedules.js';
