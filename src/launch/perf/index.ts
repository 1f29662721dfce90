// The helpers of `webccl perf` for bench/ scripts (bundled as dist/node/perf.js): the same
// size parsing, busbw factors, table formatting and charts as the command.
export { formatSize, PERF_USAGE, type PerfOptions, PerfUsageError, parsePerfArgs, parseSize } from './args.js';
export { chartTitle } from './chart.js';
export {
  bandwidths,
  busBwFactor,
  COLLECTIVES,
  type Collective,
  collectiveNamed,
  shapeOf,
  sweepSizes,
} from './collectives.js';
export {
  averageBusBw,
  formatRow,
  formatTable,
  NCCL_TYPE,
  type PerfReport,
  type PlaceResult,
  type ResultRow,
  tableFooter,
  tableHeader,
} from './format.js';
export { perfMain, reportSeries, runPerf } from './main.js';
export {
  busBwChartSpec,
  type ChartOptions,
  type ChartPoint,
  type ChartSeries,
  loadChartModules,
  PlotUnavailableError,
  renderBusBwChart,
} from './plot.js';
