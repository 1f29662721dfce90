// The live benchmark's chart helpers (examples/browser/perf-chart.js): human size labels, round
// ticks on both kinds of axis, the floor's curve, and markup that names what it draws.
import { describe, expect, it } from 'vitest';
import {
  chartSvg,
  decadeTicks,
  floorBusBw,
  floorTimeUs,
  humanBytes,
  niceTicks,
} from '../../examples/browser/perf-chart.js';

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
