// The helpers of `webccl perf` for bench/ scripts (bundled as dist/node/perf.js): the same
// size parsing, busbw factors, table formatting and charts as the command.
export { parseSize, formatSize, parsePerfArgs, PerfUsageError, PERF_USAGE, type PerfOptions } from './args.js';
export { COLLECTIVES, type Collective, busBwFactor, bandwidths, shapeOf, sweepSizes, collectiveNamed } from './collectives.js';
export { NCCL_TYPE, formatTable, formatRow, tableHeader, tableFooter, averageBusBw, type PerfReport, type ResultRow, type PlaceResult } from './format.js';
export { busBwChartSpec, renderBusBwChart, PlotUnavailableError, type ChartSeries, type ChartPoint } from './plot.js';
export { perfMain, runPerf, reportSeries } from './main.js';
