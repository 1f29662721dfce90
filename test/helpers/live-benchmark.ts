// The live benchmark page (`webccl serve --demo`, examples/browser/perf.html), as the browser
// tests check it in Chromium and in Firefox: 2 ranks from 8 B to 64 KiB, every row right, both
// charts drawn as described (points with tooltips, human size ticks, named axes, grid, the
// page's floor), and a screenshot of charts and table at `shot`.
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';

export async function expectLiveBenchmark(tab: Page, errors: string[], url: string, shot: string): Promise<void> {
  await tab.goto(`${url}?ranks=2&max=65536&seconds=0.02`);
  await tab.waitForSelector('#status:not([data-state="running"])', { timeout: 90_000 });
  expect({ state: await tab.getAttribute('#status', 'data-state'), text: await tab.textContent('#status') }).toEqual({
    state: 'done',
    text: '2 ranks, 8 sizes: every result right',
  });
  const sizes = ['8 B', '32 B', '128 B', '512 B', '2 KiB', '8 KiB', '32 KiB', '64 KiB'];
  const rows = await tab.$$eval('#rows tr', (trs) =>
    trs.slice(1).map((tr) => [...tr.children].map((td) => td.textContent)),
  );
  expect(rows.map((r) => [r[0], r[5]])).toEqual(sizes.map((s) => [s, '0']));
  expect(rows.every((r) => Number(r[1]) > 0 && Number(r[3]) > 0 && Number(r[4]) > 0)).toBe(true);
  // The chart: a point per size (its figures in a tooltip), ticks in human sizes and GB/s,
  // both axes named, grid lines, and the page's floor as a curve over every size.
  const chart = await tab.$eval('#chart', (svg) => ({
    points: [...svg.querySelectorAll('circle')].map((c) => c.querySelector('title')?.textContent ?? ''),
    xTicks: [...svg.querySelectorAll('.tick-x')].map((t) => t.textContent),
    yTicks: [...svg.querySelectorAll('.tick-y')].map((t) => Number(t.textContent)),
    axes: [...svg.querySelectorAll('.axis-x, .axis-y')].map((t) => t.textContent),
    grid: svg.querySelectorAll('.grid').length,
    floor: svg.querySelector('.floor')?.getAttribute('points')?.split(' ').length ?? 0,
  }));
  expect(chart.points).toHaveLength(8);
  for (const [k, tip] of chart.points.entries())
    expect(tip).toMatch(new RegExp(`^${sizes[k]}: [\\d.]+ µs, busbw [\\d.]+ GB/s, [\\d.]+× the floor$`));
  // 32 KiB sits too close to 64 KiB for a label of its own
  expect(chart.xTicks).toEqual(sizes.filter((s) => s !== '32 KiB'));
  expect(chart.yTicks[0]).toBe(0);
  expect(chart.yTicks.length).toBeGreaterThanOrEqual(3);
  expect(chart.axes).toEqual(['message size (bytes, log scale)', 'bus bandwidth (GB/s)']);
  expect(chart.grid).toBe(sizes.length + chart.yTicks.length);
  expect(chart.floor).toBe(8);
  // The latency end: time per call on a log axis (decade ticks), the floor's time beside it.
  const times = await tab.$eval('#time-chart', (svg) => ({
    points: svg.querySelectorAll('circle').length,
    yTicks: [...svg.querySelectorAll('.tick-y')].map((t) => Number(t.textContent)),
    axis: svg.querySelector('.axis-y')?.textContent,
    floor: svg.querySelector('.floor')?.getAttribute('points')?.split(' ').length ?? 0,
  }));
  expect(times.points).toBe(8);
  expect(times.axis).toBe('time per call (µs, log scale)');
  expect(times.yTicks.every((t, k) => k === 0 || t === 10 * times.yTicks[k - 1])).toBe(true);
  expect(times.floor).toBe(8);
  const floor = (await tab.evaluate('window.perfFloor')) as { oneWayUs: number; copyGBs: number };
  expect(floor.oneWayUs).toBeGreaterThan(0);
  expect(floor.copyGBs).toBeGreaterThan(0);
  // The picture a person sees: a PNG of the charts and the table, at `shot`.
  await tab.locator('.result').screenshot({ path: shot });
  const png = readFileSync(shot);
  expect(png.subarray(1, 4).toString()).toBe('PNG');
  expect(png.readUInt32BE(16)).toBeGreaterThan(700); // width: the chart and the table beside it
  expect(errors).toEqual([]);
}
