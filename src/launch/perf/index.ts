// The helpers of `webccl perf` for bench/ scripts (bundled as dist/node/perf.js): the same
// size parsing, busbw factors, table formatting and charts as the command.
export { parseSize, formatSize, parsePerfArgs, PerfUsageError, PERF_USAGE, type PerfOptions } from './args.js';
export { COLLECTIVES, type Collective, busBwFactor, bandwidths, shapeOf, sweepSizes, collectiveNamed } from './collectives.js';
export { NCCL_TYPE, formatTable, formatRow, tableHeader, tableFooter, averageBusBw, type PerfReport, type ResultRow, type PlaceResult } from './format.js';
export { busBwChartSpec, renderBusBwChart, loadChartModules, PlotUnavailableError, type ChartSeries, type ChartPoint, type ChartOptions } from './plot.js';
export { chartTitle } from './chart.js';
export { perfMain, runPerf, reportSeries } from './main.js';
