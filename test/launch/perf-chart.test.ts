// The charts of `webccl perf --plot` (vega): busbw against a log size axis, a legend that names
// what differs between the lines and a title what they share, a log busbw axis on request, and
// the chart packages checked before the sweep. The live benchmark's chart helpers
// (examples/browser/perf-chart.js): human size labels, round ticks on both kinds of axis, the
// floor's curve, and markup that names what it draws.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  chartSvg,
  decadeTicks,
  floorBusBw,
  floorTimeUs,
  humanBytes,
  niceTicks,
} from '../../examples/browser/perf-chart.js';
import { type PerfOptions, parsePerfArgs } from '../../src/launch/perf/args.js';
import { chartTitle } from '../../src/launch/perf/chart.js';
import type { ResultRow } from '../../src/launch/perf/format.js';
import { reportSeries, runPerf } from '../../src/launch/perf/main.js';
import { busBwChartSpec, renderBusBwChart } from '../../src/launch/perf/plot.js';
import { oopRow, report, row } from '../helpers/perf-report.js';

describe('perf.html chart helpers', () => {
  it('labels sizes in B, KiB and MiB, exactly', () => {
    expect([8, 512, 1024, 65536, 1536, 16 << 20].map(humanBytes)).toEqual([
      '8 B',
      '512 B',
      '1 KiB',
      '64 KiB',
      '1536 B',
      '16 MiB',
    ]);
  });

  it('puts round ticks from 0 past the top, and decades around a log range', () => {
    expect(niceTicks(3.7)).toEqual([0, 1, 2, 3, 4]);
    expect(niceTicks(12)).toEqual([0, 2.5, 5, 7.5, 10, 12.5]);
    expect(niceTicks(0)).toEqual([0, 1]);
    expect(decadeTicks(3, 6800)).toEqual([1, 10, 100, 1000, 10000]);
    expect(decadeTicks(10, 10)).toEqual([10, 100]);
  });

  it('draws the floor as 2 wake-ups plus one copy, and a point per row with its figures', () => {
    const floor = { oneWayUs: 5, copyGBs: 4 };
    expect(floorTimeUs(floor, 4000)).toBe(11); // 2 × 5 µs + 4000 B at 4000 B/µs
    expect(floorBusBw(floor, 4000, 2)).toBeCloseTo(4000 / 11 / 1e3, 12);
    const rows = [
      { size: 8, timeUs: 20, busbw: 0.0004 },
      { size: 4096, timeUs: 40, busbw: 0.1 },
    ];
    for (const measure of ['busbw', 'time']) {
      const { markup } = chartSvg({ rows, sizes: [8, 64, 4096], ranks: 2, floor, measure });
      expect(markup.match(/<circle /g)).toHaveLength(2);
      expect(markup).toContain('<title>8 B: 20.0 µs, busbw 0.000400 GB/s, ');
      expect([...markup.matchAll(/class="tick-x"[^>]*>([^<]*)</g)].map((m) => m[1])).toEqual(['8 B', '64 B', '4 KiB']);
      expect(markup).toContain('class="floor"');
    }
  });

  it('draws further series (each node alone) in colours of their own, each named in the legend and in its points', () => {
    const rows = [
      { size: 8, timeUs: 20, busbw: 0.0004 },
      { size: 4096, timeUs: 40, busbw: 0.1 },
    ];
    const alone = (t: number) => rows.map((r) => ({ ...r, timeUs: r.timeUs / t, busbw: r.busbw * t }));
    const extra = [
      { label: 'page ranks 0, 1 alone', rows: alone(2) },
      { label: 'Node ranks 2, 3 alone', rows: alone(3) },
    ];
    const { markup } = chartSvg({ rows, sizes: [8, 64, 4096], ranks: 4, floor: { oneWayUs: 5, copyGBs: 4 }, extra });
    expect(markup.match(/<circle /g)).toHaveLength(6);
    expect([...markup.matchAll(/class="legend"[^>]*>([^<]*)</g)].map((m) => m[1])).toEqual([
      'allReduce, 4 ranks',
      "this page's floor",
      'page ranks 0, 1 alone',
      'Node ranks 2, 3 alone',
    ]);
    expect(markup).toContain('<title>Node ranks 2, 3 alone, 4 KiB: 13.3 µs, busbw 0.300 GB/s</title>');
    const colours = [...markup.matchAll(/<polyline class="(?:series|extra)"[^>]* stroke="([^"]+)"/g)].map((m) => m[1]);
    expect(new Set(colours).size).toBe(3);
    // The highest point of any series sets the scale: the busbw axis reaches Node's 0.3 GB/s.
    expect(
      Math.max(...[...markup.matchAll(/class="tick-y"[^>]*>([^<]*)</g)].map((m) => Number(m[1]))),
    ).toBeGreaterThanOrEqual(0.3);
  });
});

describe('chart spec', () => {
  it('plots busbw against a log size axis, one line per series', () => {
    const r = report([row(8, 1, 1, 0), row(1024, 2, 2, 0)]);
    const spec = busBwChartSpec(reportSeries(r), 't') as any;
    expect(spec.encoding.x.scale.type).toBe('log');
    expect(spec.encoding.color.field).toBe('system');
    const systems = new Set(spec.data.values.map((v: any) => v.system));
    expect(systems).toEqual(new Set(['webccl shm out-of-place', 'webccl shm in-place']));
    expect(spec.data.values).toHaveLength(4);
  });
});

describe('charts a person can read', () => {
  /** A row of datatype `type` and op `redop` (the table's names). */
  const typed = (size: number, type: string, redop: string, us = 10): ResultRow => ({
    ...row(size, us, us, 0),
    type,
    redop,
  });

  it('one legend entry per datatype, op and placement, naming only what differs between the lines', () => {
    const two = report([
      typed(8, 'float', 'sum'),
      typed(1024, 'float', 'sum'),
      typed(8, 'bfloat16', 'sum'),
      typed(1024, 'bfloat16', 'sum'),
    ]);
    expect(reportSeries(two).map((x) => x.label)).toEqual([
      'webccl shm float out-of-place',
      'webccl shm float in-place',
      'webccl shm bfloat16 out-of-place',
      'webccl shm bfloat16 in-place',
    ]);
    const ops = report([typed(8, 'float', 'sum'), typed(8, 'float', 'max')]);
    expect(reportSeries(ops).map((x) => x.label)).toEqual([
      'webccl shm sum out-of-place',
      'webccl shm sum in-place',
      'webccl shm max out-of-place',
      'webccl shm max in-place',
    ]);
    const both = report([typed(8, 'float', 'sum'), typed(8, 'half', 'max')]);
    expect(reportSeries(both, 'sys').map((x) => x.label)).toEqual([
      'sys float sum out-of-place',
      'sys float sum in-place',
      'sys half max out-of-place',
      'sys half max in-place',
    ]);
    const labels = reportSeries(
      report([...['float', 'half', 'bfloat16'].flatMap((t) => ['sum', 'max'].map((o) => typed(8, t, o)))]),
    ).map((x) => x.label);
    expect(new Set(labels).size).toBe(12);
  });

  it('legend labels are never cut short (vega cuts at 160 px unless told)', async () => {
    const r = report([
      typed(8, 'float', 'sum'),
      typed(1024, 'float', 'sum'),
      typed(8, 'bfloat16', 'sum'),
      typed(1024, 'bfloat16', 'sum'),
    ]);
    const spec = busBwChartSpec(reportSeries(r), 't') as any;
    expect(spec.encoding.color.legend.labelLimit).toBe(0);
    const svg = await renderBusBwChart(reportSeries(r), 't');
    for (const label of reportSeries(r).map((x) => x.label)) expect(svg).toContain(`>${label}<`);
    expect(svg).not.toContain('…');
  }, 60_000);

  it('the title names what every line shares, and only that', () => {
    const one = report([typed(8, 'bfloat16', 'sum')]);
    expect(chartTitle({ ...one, host: { ...one.host, cpus: 4 } }, '4 ranks', 4)).toBe(
      'allreduce, 4 ranks, bfloat16 sum: bus bandwidth',
    );
    const mixed = report([typed(8, 'float', 'sum'), typed(8, 'bfloat16', 'sum')]);
    expect(chartTitle({ ...mixed, host: { ...mixed.host, cpus: 4 } }, '4 ranks', 4)).toBe(
      'allreduce, 4 ranks, sum: bus bandwidth',
    );
    const a2a = report([oopRow(8, 1, 0)]);
    expect(chartTitle({ ...a2a, collective: 'alltoall', host: { ...a2a.host, cpus: 8 } }, '4 ranks', 4)).toBe(
      'alltoall, 4 ranks, float: bus bandwidth',
    );
  });

  it('states the oversubscription when the ranks outnumber the cores', () => {
    const r = report([typed(8, 'float', 'sum')]); // 2 cpus
    expect(chartTitle(r, '4 ranks', 4)).toBe(
      'allreduce, 4 ranks on 2 cores (oversubscribed 2×), float sum: bus bandwidth',
    );
    expect(chartTitle(r, '3 ranks', 3)).toMatch(/3 ranks on 2 cores \(oversubscribed 1\.5×\)/);
    expect(chartTitle(r, '2 ranks', 2)).toBe('allreduce, 2 ranks, float sum: bus bandwidth');
    expect(chartTitle({ ...r, transport: 'tcp' }, '4 ranks (2 processes × 2 threads)', 4)).toBe(
      'allreduce, 4 ranks (2 processes × 2 threads) on 2 cores (oversubscribed 2×) over tcp, float sum: bus bandwidth',
    );
  });

  it('a log busbw axis on request, leaving out the rows it cannot place (busbw 0)', () => {
    const r = report([row(8, 1e9, 1e9, 0), row(1024, 10, 10, 0), row(1 << 20, 100, 100, 0)]);
    const zero = reportSeries(r).map((x) => ({
      ...x,
      points: x.points.map((p, k) => (k === 0 ? { ...p, busbw: 0 } : p)),
    }));
    const lin = busBwChartSpec(zero, 't') as any;
    expect(lin.encoding.y.scale).toBeUndefined();
    expect(lin.data.values).toHaveLength(6);
    const log = busBwChartSpec(zero, 't', { yScale: 'log' }) as any;
    expect(log.encoding.y.scale).toEqual({ type: 'log' });
    expect(log.encoding.y.title).toMatch(/log scale/);
    expect(log.data.values).toHaveLength(4);
    expect(log.data.values.every((v: any) => v.busbw > 0)).toBe(true);
  });

  it('--plot-y linear|log, only with --plot', () => {
    expect((parsePerfArgs(['allreduce']) as PerfOptions).plotY).toBe('linear');
    expect((parsePerfArgs(['allreduce', '--plot', 'a.svg', '--plot-y', 'log']) as PerfOptions).plotY).toBe('log');
    expect(() => parsePerfArgs(['allreduce', '--plot', 'a.svg', '--plot-y', 'sqrt'])).toThrow(
      /--plot-y expects linear or log, got "sqrt"/,
    );
    expect(() => parsePerfArgs(['allreduce', '--plot-y', 'log'])).toThrow(/--plot-y .*give --plot FILE\.svg too/);
  });

  it('--plot without its chart packages is refused before the sweep starts', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const io = { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } };
    const o = parsePerfArgs(['allreduce', '--plot', join(tmpdir(), 'never.svg')]) as PerfOptions;
    // A rank script that does not exist: reaching the sweep would fail differently.
    const { exitCode, report: r } = await runPerf(o, {
      io,
      rankScript: '/nonexistent/perf-rank.js',
      chartPackages: ['vega', 'webccl-no-such-chart-package'],
    });
    expect(exitCode).toBe(1);
    expect(out.join('')).toBe('');
    expect(err.join('')).toMatch(
      /^webccl perf: --plot: charts need the vega and webccl-no-such-chart-package packages, which were not found/,
    );
    expect(r.rows).toEqual([]);
  });
});
