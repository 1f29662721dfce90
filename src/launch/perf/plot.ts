// busbw against size as an SVG chart: a vega-lite spec (log₂ size axis, one line per series:
// system, datatype, op, placement), rendered in Node by vega with no browser and no canvas. vega
// and vega-lite are loaded only when a chart is asked for, so the library never depends on them.
import { formatSize } from './args.js';

export interface ChartPoint {
  /** Bytes, as in the table's size column. */
  size: number;
  busbw: number;
}

export interface ChartSeries {
  /** Legend entry: a system and transport, e.g. "webccl shm" or "Open MPI vader". */
  label: string;
  points: ChartPoint[];
}

export interface ChartOptions {
  /** The busbw axis: linear (default) or log, on which the small messages' busbw shows. */
  yScale?: 'linear' | 'log';
}

export class PlotUnavailableError extends Error {
  override readonly name = 'PlotUnavailableError';
}

/** The vega-lite spec of the chart (pure: tests and bench/report can inspect it). */
export function busBwChartSpec(
  series: ChartSeries[],
  title: string,
  options: ChartOptions = {},
): Record<string, unknown> {
  const log = options.yScale === 'log';
  // A log axis has no 0: a row of busbw 0 (a time too short to measure) is left out, not drawn at -∞.
  const shown = (p: ChartPoint) => p.size > 0 && Number.isFinite(p.busbw) && (!log || p.busbw > 0);
  const values = series.flatMap((s) =>
    s.points.filter(shown).map((p) => ({
      system: s.label,
      size: p.size,
      sizeLabel: formatSize(p.size),
      busbw: p.busbw,
    })),
  );
  const sizes = [...new Set(values.map((v) => v.size))].sort((a, b) => a - b);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 560,
    height: 320,
    background: 'white',
    data: { values },
    mark: { type: 'line', point: true, strokeWidth: 2 },
    encoding: {
      x: {
        field: 'size',
        type: 'quantitative',
        title: 'size (bytes, log scale)',
        scale: { type: 'log', base: 2, domain: sizes.length ? [sizes[0], sizes[sizes.length - 1]] : undefined },
        axis: {
          values: sizes,
          labelExpr:
            "datum.value >= 1073741824 ? datum.value / 1073741824 + ' GiB' : datum.value >= 1048576 ? datum.value / 1048576 + ' MiB' : datum.value >= 1024 ? datum.value / 1024 + ' KiB' : datum.value + ' B'",
          labelAngle: -45,
        },
      },
      y: {
        field: 'busbw',
        type: 'quantitative',
        title: `bus bandwidth (GB/s${log ? ', log scale' : ''})`,
        ...(log && { scale: { type: 'log' } }),
      },
      // Labels whole (vega cuts them at 160 px by default: "webccl shm bfloat1…"), below the plot, in the series'
      // order.
      color: {
        field: 'system',
        type: 'nominal',
        title: null,
        sort: series.map((s) => s.label),
        legend: { orient: 'bottom', direction: 'vertical', columns: series.length > 4 ? 2 : 1, labelLimit: 0 },
      },
      tooltip: [{ field: 'system' }, { field: 'sizeLabel', title: 'size' }, { field: 'busbw', format: '.3f' }],
    },
  };
}

// A specifier in a variable: bundlers leave the import to run time, when it may be missing.
const load = (name: string): Promise<Record<string, unknown>> => import(name);

/** What the chart needs of a vega View. */
interface ChartView {
  toSVG(): Promise<string>;
  finalize(): void;
}

/** vega and vega-lite, loaded at run time (optional, untyped here). */
export interface ChartModules {
  vega: Record<string, unknown>;
  vl: Record<string, unknown>;
}

/**
 * Loads vega and vega-lite (other names: tests), or says how to install them. Call it before a sweep whose chart needs
 * them.
 */
export async function loadChartModules(
  names: readonly [string, string] = ['vega', 'vega-lite'],
): Promise<ChartModules> {
  try {
    const [vega, vl] = await Promise.all([load(names[0]), load(names[1])]);
    return { vega, vl };
  } catch (e) {
    throw new PlotUnavailableError(
      `charts need the ${names[0]} and ${names[1]} packages, which were not found (${(e as Error).message.split('\n')[0]}); install them with: npm i -D ${names.join(' ')}`,
    );
  }
}

export async function renderBusBwChart(
  series: ChartSeries[],
  title: string,
  options: ChartOptions & { modules?: ChartModules } = {},
): Promise<string> {
  const { vega, vl } = options.modules ?? (await loadChartModules());
  // An ES module or its CommonJS default, whichever the loader gave.
  const own = <T>(m: Record<string, unknown>, key: string) =>
    (m[key] ?? (m.default as Record<string, unknown> | undefined)?.[key]) as T;
  const compile = own<(spec: unknown) => { spec: unknown }>(vl, 'compile');
  const View = own<new (runtime: unknown, o: { renderer: string }) => ChartView>(vega, 'View');
  const parse = own<(s: unknown) => unknown>(vega, 'parse');
  const view = new View(parse(compile(busBwChartSpec(series, title, options)).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}
