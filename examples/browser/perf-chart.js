// The live benchmark's charts (perf.html), as SVG strings: bus bandwidth (linear GB/s: the large
// messages) and time per call (log µs: the latency end) against message size, with labelled
// axes, ticks in human sizes (8 B … 16 MiB), grid lines, a tooltip on each point, this page's
// floor as a dashed reference curve, and further series (each node of a job on its own) in
// colours of their own. Pure: rows in, markup out (no DOM).

const W = 720,
  H = 360,
  LEFT = 64,
  RIGHT = 20,
  BOTTOM = 48;
/** The main series' colour, then the further series'. */
const COLOURS = ['#2b6cb0', '#c05621', '#2f855a', '#6b46c1', '#b7791f'];
/** Legend entries per line, and each one's width. */
const LEGEND_PER_LINE = 3,
  LEGEND_W = 215;
const UNITS = ['B', 'KiB', 'MiB', 'GiB'];
/** Pixels between two size labels' centres ("512 KiB" is about 45 px wide at 11 px). */
const MIN_LABEL_GAP = 50;

/** 8 → "8 B", 1024 → "1 KiB", 16777216 → "16 MiB". */
export function humanBytes(n) {
  let u = 0;
  while (n >= 1024 && u < UNITS.length - 1 && n % 1024 === 0) {
    n /= 1024;
    u++;
  }
  return `${n} ${UNITS[u]}`;
}

/** Round tick steps (1, 2, 2.5 or 5 × 10^k) giving about `count` ticks from 0 to at least `top`. */
export function niceTicks(top, count = 5) {
  if (!(top > 0)) return [0, 1];
  const raw = top / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * pow).find((s) => s >= raw);
  const ticks = [];
  for (let v = 0; v < top + step / 2; v += step) ticks.push(+v.toPrecision(12));
  if (ticks.at(-1) < top) ticks.push(+(ticks.at(-1) + step).toPrecision(12));
  return ticks;
}

/** Powers of ten from at most `lo` to at least `hi` (a log axis's ticks). */
export function decadeTicks(lo, hi) {
  const ticks = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) ticks.push(10 ** e);
  return ticks.length > 1 ? ticks : [ticks[0], ticks[0] * 10];
}

/** The floor's time (µs) for `size` bytes: two one-way wake-ups and one copy of the buffer. */
export const floorTimeUs = (floor, size) => 2 * floor.oneWayUs + size / (floor.copyGBs * 1e3);

/** The floor's bus bandwidth (GB/s) at `size` for `ranks` ranks. */
export function floorBusBw(floor, size, ranks) {
  return (size / (floorTimeUs(floor, size) * 1e3)) * ((2 * (ranks - 1)) / Math.max(ranks, 1));
}

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

/** What each chart plots: its axis, the row's value, the floor's, and a linear or log scale. */
const MEASURES = {
  busbw: { axis: 'bus bandwidth (GB/s)', of: (r) => r.busbw, floor: floorBusBw, log: false },
  time: { axis: 'time per call (µs, log scale)', of: (r) => r.timeUs, floor: (f, s) => floorTimeUs(f, s), log: true },
};

/**
 * The chart of `measure` ('busbw' or 'time') for `rows` ({ size, timeUs, busbw }) over the sweep
 * `sizes`, with `floor` ({ oneWayUs, copyGBs }, or undefined while it is measured) for `ranks`
 * ranks, and `extra` series ([{ label, rows }]) beside it.
 */
export function chartSvg({ rows, sizes, ranks, floor, measure = 'busbw', extra = [] }) {
  const m = MEASURES[measure];
  const legend = [{ label: `allReduce, ${ranks} ranks`, colour: COLOURS[0] }];
  if (floor) legend.push({ label: "this page's floor", colour: '#9ca3af', dashed: true });
  extra.forEach((e, k) => legend.push({ label: e.label, colour: COLOURS[1 + (k % (COLOURS.length - 1))] }));
  const TOP = 12 + 16 * Math.ceil(legend.length / LEGEND_PER_LINE);
  const lo = Math.log2(sizes[0]),
    hi = Math.log2(sizes.at(-1));
  const x = (size) => LEFT + ((Math.log2(size) - lo) / Math.max(hi - lo, 1)) * (W - LEFT - RIGHT);
  const floorPts = floor ? sizes.map((s) => [s, m.floor(floor, s, ranks)]) : [];
  const values = [...rows, ...extra.flatMap((e) => e.rows)]
    .map(m.of)
    .concat(floorPts.map((p) => p[1]))
    .filter((v) => v > 0);
  const ticksY = m.log
    ? decadeTicks(Math.min(1, ...values), Math.max(10, ...values))
    : niceTicks(Math.max(1e-9, ...values));
  const span = m.log ? [Math.log10(ticksY[0]), Math.log10(ticksY.at(-1))] : [0, ticksY.at(-1)];
  const y = (v) => {
    const at = m.log ? Math.log10(Math.max(v, ticksY[0])) : v;
    return H - BOTTOM - ((at - span[0]) / (span[1] - span[0])) * (H - TOP - BOTTOM);
  };
  const parts = [`<rect x="0" y="0" width="${W}" height="${H}" fill="#fff"/>`];
  // grid and ticks: every sweep size on x (a label too close to the last one's is left out: the
  // last size, max, need not be a power of 4 away), round values on y
  const labelled = sizes.filter((s, k) => k === sizes.length - 1 || x(sizes.at(-1)) - x(s) >= MIN_LABEL_GAP);
  for (const s of sizes) {
    parts.push(`<line class="grid" x1="${x(s)}" x2="${x(s)}" y1="${TOP}" y2="${H - BOTTOM}" stroke="#e5e7eb"/>`);
    if (labelled.includes(s))
      parts.push(
        `<text class="tick-x" x="${x(s)}" y="${H - BOTTOM + 16}" text-anchor="middle" font-size="11">${humanBytes(s)}</text>`,
      );
  }
  for (const t of ticksY) {
    parts.push(`<line class="grid" x1="${LEFT}" x2="${W - RIGHT}" y1="${y(t)}" y2="${y(t)}" stroke="#e5e7eb"/>`);
    parts.push(`<text class="tick-y" x="${LEFT - 6}" y="${y(t) + 4}" text-anchor="end" font-size="11">${t}</text>`);
  }
  parts.push(`<line x1="${LEFT}" x2="${W - RIGHT}" y1="${H - BOTTOM}" y2="${H - BOTTOM}" stroke="#333"/>`);
  parts.push(`<line x1="${LEFT}" x2="${LEFT}" y1="${TOP}" y2="${H - BOTTOM}" stroke="#333"/>`);
  parts.push(
    `<text class="axis-x" x="${(LEFT + W - RIGHT) / 2}" y="${H - 8}" text-anchor="middle" font-size="12">message size (bytes, log scale)</text>`,
  );
  parts.push(
    `<text class="axis-y" transform="translate(16 ${(TOP + H - BOTTOM) / 2}) rotate(-90)" text-anchor="middle" font-size="12">${m.axis}</text>`,
  );
  if (floorPts.length) {
    const d = floorPts.map(([s, v]) => `${x(s).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    parts.push(
      `<polyline class="floor" points="${d}" fill="none" stroke="#9ca3af" stroke-dasharray="5 4"><title>${esc(`this page's floor: 2 × ${floor.oneWayUs.toFixed(1)} µs one-way wake-up + one copy at ${floor.copyGBs.toFixed(2)} GB/s`)}</title></polyline>`,
    );
  }
  const series = (rs, colour, cls, tipOf) => {
    if (!rs.length) return;
    parts.push(
      `<polyline class="${cls}" points="${rs.map((r) => `${x(r.size).toFixed(1)},${y(m.of(r)).toFixed(1)}`).join(' ')}" fill="none" stroke="${colour}" stroke-width="2"/>`,
    );
    for (const r of rs)
      parts.push(
        `<circle class="${cls}-point" r="4" cx="${x(r.size).toFixed(1)}" cy="${y(m.of(r)).toFixed(1)}" fill="${colour}"><title>${esc(tipOf(r))}</title></circle>`,
      );
  };
  const figures = (r) => `${humanBytes(r.size)}: ${r.timeUs.toFixed(1)} µs, busbw ${r.busbw.toPrecision(3)} GB/s`;
  extra.forEach((e, k) =>
    series(e.rows, legend[legend.length - extra.length + k].colour, 'extra', (r) => `${e.label}, ${figures(r)}`),
  );
  series(
    rows,
    COLOURS[0],
    'series',
    (r) => `${figures(r)}${floor ? `, ${(r.busbw / floorBusBw(floor, r.size, ranks)).toFixed(2)}× the floor` : ''}`,
  );
  legend.forEach((e, k) => {
    const lx = LEFT + 10 + (k % LEGEND_PER_LINE) * LEGEND_W,
      ly = 14 + 16 * Math.floor(k / LEGEND_PER_LINE);
    parts.push(
      `<line x1="${lx}" x2="${lx + 24}" y1="${ly}" y2="${ly}" stroke="${e.colour}" stroke-width="2"${e.dashed ? ' stroke-dasharray="5 4"' : ''}/><text class="legend" x="${lx + 30}" y="${ly + 4}" font-size="12">${esc(e.label)}</text>`,
    );
  });
  return { width: W, height: H, markup: parts.join('') };
}
