// The table and the JSON of `webccl perf` say the same thing: every table cell is the JSON
// value rounded as printed. Checked on synthetic reports and on a real run of the command. Its
// charts: test/launch/perf-chart.test.ts.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { averageBusBw, formatTable, type PerfReport, tableHeader, wrongTotal } from '../../src/launch/perf/format.js';
import { median, reportSeries } from '../../src/launch/perf/main.js';
import { oopRow, report, row } from '../helpers/perf-report.js';

/** Reads the data rows and the closing lines of a printed table. */
function parseTable(text: string) {
  const lines = text.split('\n');
  const rows = lines
    .filter((l) => l.trim() && !l.startsWith('#'))
    .map((l) => {
      const f = l.trim().split(/\s+/);
      expect(f).toHaveLength(13);
      const place = (k: number) =>
        f[k] === 'N/A'
          ? null
          : {
              time: Number(f[k]),
              algbw: Number(f[k + 1]),
              busbw: Number(f[k + 2]),
              wrong: f[k + 3] === 'N/A' ? null : Number(f[k + 3]),
            };
      return {
        size: Number(f[0]),
        count: Number(f[1]),
        type: f[2],
        redop: f[3],
        root: Number(f[4]),
        oop: place(5),
        ip: place(9),
      };
    });
  const avg = /^# Avg bus bandwidth\s+:\s+(\S+)$/m.exec(text);
  const wrong = /^# Wrong values\s+:\s+(\d+)/m.exec(text);
  return { rows, avgBusBw: avg ? Number(avg[1]) : undefined, wrongTotal: wrong ? Number(wrong[1]) : null };
}

function expectAgreement(report: PerfReport, text: string) {
  const t = parseTable(text);
  expect(t.rows).toHaveLength(report.rows.length);
  report.rows.forEach((r, k) => {
    const p = t.rows[k];
    expect([p.size, p.count, p.type, p.redop, p.root]).toEqual([r.size, r.count, r.type, r.redop, r.root]);
    for (const place of ['oop', 'ip'] as const) {
      const want = r[place];
      if (want === null) {
        expect(p[place]).toBeNull();
        continue;
      }
      expect(p[place]!.time).toBe(Number(want.time_us.toFixed(2)));
      expect(p[place]!.algbw).toBe(Number(want.algbw.toFixed(2)));
      expect(p[place]!.busbw).toBe(Number(want.busbw.toFixed(2)));
      expect(p[place]!.wrong).toBe(want.wrong);
    }
  });
  expect(t.avgBusBw).toBe(Number(report.avgBusBw.toFixed(4)));
  expect(t.wrongTotal).toBe(report.wrongTotal);
}

describe('table and JSON', () => {
  it('agree cell by cell, through a JSON round trip', () => {
    const r = report([
      row(8, 0.1234, 0.19, 0),
      row(1 << 20, 123.456, 99.994, 0),
      row(64 << 20, 41_234.5678, 40_000, 0),
    ]);
    const back = JSON.parse(JSON.stringify(r)) as PerfReport;
    expectAgreement(back, formatTable(r));
  });

  it('prints 8-byte latencies in microseconds with two decimals', () => {
    const text = formatTable(report([row(8, 0.19, 1.005, 0)]));
    expect(text).toMatch(/^\s+8\s+2\s+float\s+sum\s+-1\s+0\.19\s+0\.04\s+0\.06\s+0\s+1\.0\d\s/m);
  });

  it('shows N/A when results were not checked, and the total of wrong values when they were', () => {
    const unchecked = report([row(8, 1, 1, null)]);
    expect(unchecked.wrongTotal).toBeNull();
    expect(formatTable(unchecked)).toMatch(/\sN\/A\s+\S+\s+\S+\s+\S+\s+N\/A$/m);
    expect(formatTable(unchecked)).not.toMatch(/Wrong values/);
    const bad = report([row(8, 1, 1, 0), row(16, 1, 1, 3)]);
    expect(bad.wrongTotal).toBe(6);
    expect(formatTable(bad)).toMatch(/^# Wrong values\s+: 6 FAILED$/m);
    expectAgreement(bad, formatTable(bad));
  });

  it('averages busbw over every row and both placements, as nccl-tests', () => {
    const rows = [row(1e6, 1000, 500, 0, 2), row(2e6, 1000, 1000, 0, 2)];
    // busbw at n = 2 is algbw: 1, 2, 2, 2 GB/s.
    expect(averageBusBw(rows)).toBeCloseTo(1.75, 12);
    expect(averageBusBw([])).toBe(0);
  });

  it('says when a sweep was interrupted', () => {
    expect(formatTable(report([row(8, 1, 1, 0)], true))).toMatch(/^# interrupted after 1 row$/m);
  });

  it('prints N/A in the in-place half where the collective has no in-place form; averages and totals skip it', () => {
    const r = report([oopRow(1 << 20, 100, 0), oopRow(4 << 20, 400, 2)]);
    const text = formatTable(r);
    expect(text).toMatch(
      /^\s+1048576\s+65536\s+float\s+none\s+-1\s+100\.00\s+10\.49\s+7\.86\s+0\s+N\/A\s+N\/A\s+N\/A\s+N\/A$/m,
    );
    // busbw = 1 MiB / 100 µs × 3/4, the same for both rows: the mean of the out-of-place figures only.
    expect(r.avgBusBw).toBeCloseTo((1048576 / 100e3) * 0.75, 12);
    expect(r.wrongTotal).toBe(2);
    expectAgreement(JSON.parse(JSON.stringify(r)) as PerfReport, text);
    const series = reportSeries(r);
    expect(series.map((x) => x.label)).toEqual(['webccl shm out-of-place']);
  });

  it('counts unchecked rows of an out-of-place-only collective as unchecked', () => {
    expect(wrongTotal([oopRow(8, 1, null)])).toBeNull();
    expect(wrongTotal([oopRow(8, 1, 0)])).toBe(0);
  });

  it('has nccl-tests column names', () => {
    const [, names, units] = tableHeader();
    expect(names.split(/\s+/).slice(1)).toEqual([
      'size',
      'count',
      'type',
      'redop',
      'root',
      'time',
      'algbw',
      'busbw',
      '#wrong',
      'time',
      'algbw',
      'busbw',
      '#wrong',
    ]);
    expect(units).toMatch(/\(B\)\s+\(elements\)\s+\(us\)\s+\(GB\/s\)\s+\(GB\/s\)\s+\(us\)/);
  });
});

describe('median of timed blocks', () => {
  it('takes the middle block, or the mean of the two middle ones', () => {
    expect(median([5])).toBe(5);
    expect(median([9, 1, 5])).toBe(5);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });
});

const cli = join(__dirname, '..', '..', 'bin', 'webccl.js');
const built = existsSync(join(__dirname, '..', '..', 'dist', 'node', 'perf-rank.js'));

describe.skipIf(!built)('webccl perf (the built command)', () => {
  it('prints a table with #wrong 0 that matches its --json', () => {
    const dir = mkdtempSync(join(tmpdir(), 'webccl-perf-'));
    try {
      const json = join(dir, 'out.json');
      const text = execFileSync(
        process.execPath,
        [
          cli,
          'perf',
          'allreduce',
          '-b',
          '8',
          '-e',
          '64K',
          '-f',
          '8',
          '--ranks',
          '2',
          '-c',
          '1',
          '-n',
          '5',
          '-w',
          '1',
          '--json',
          json,
        ],
        { encoding: 'utf8' },
      );
      const r = JSON.parse(readFileSync(json, 'utf8')) as PerfReport;
      expect(r.rows.map((x) => x.size)).toEqual([8, 64, 512, 4096, 32768]);
      expect(r.rows.every((x) => x.oop.wrong === 0 && x.ip.wrong === 0)).toBe(true);
      expect(r.wrongTotal).toBe(0);
      expectAgreement(r, text);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** Runs the built command with a small sweep; returns its table and JSON. */
  const runBuilt = (args: string[]) => {
    const dir = mkdtempSync(join(tmpdir(), 'webccl-perf-'));
    try {
      const json = join(dir, 'out.json');
      const text = execFileSync(
        process.execPath,
        [cli, 'perf', ...args, '-c', '1', '-n', '3', '-w', '1', '--json', json],
        { encoding: 'utf8', timeout: 120_000 },
      );
      return { text, r: JSON.parse(readFileSync(json, 'utf8')) as PerfReport };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it.each([
    ['alltoall', 4, [8, 256, 8192]],
    ['gather', 3, [6, 255, 8190]],
    ['scatter', 3, [6, 255, 8190]],
    ['sendrecv', 3, [8, 256, 8192]],
    ['pingpong', 2, [8, 256, 8192]],
  ] as const)(
    '%s on %d ranks: every row checked, #wrong 0, the table matches the JSON',
    (coll, n, sizes) => {
      const root = ['gather', 'scatter'].includes(coll) ? ['-r', String(n - 1)] : [];
      const { text, r } = runBuilt([
        coll,
        '-b',
        '8',
        '-e',
        '16K',
        '-f',
        '32',
        '--ranks',
        String(n),
        '-d',
        'i8',
        ...root,
      ]);
      expect(r).toMatchObject({ collective: coll, nranks: n, group: null, wrongTotal: 0, interrupted: false });
      expect(r.rows.map((x) => x.size)).toEqual(sizes); // i8: a byte per element, whole blocks
      for (const x of r.rows) {
        expect(x.oop.wrong).toBe(0);
        expect(x.ip === null).toBe(['alltoall', 'sendrecv', 'pingpong'].includes(coll));
        if (x.ip) expect(x.ip.wrong).toBe(0);
        expect(x.root).toBe(root.length ? n - 1 : -1);
      }
      expectAgreement(r, text);
    },
    150_000,
  );

  it("--group 2 of a 4-rank world: the group's rows, busbw with n = 2, the idle ranks named", () => {
    const { text, r } = runBuilt(['allreduce', '-b', '8', '-e', '64K', '-f', '64', '--ranks', '4', '--group', '2']);
    expect(text.split('\n')[0]).toBe(
      '# webccl perf allreduce: 4 ranks (worker threads), group of 2 (world ranks 0..1; 2..3 idle), transport shm, buffers shm, algo auto',
    );
    expect(r).toMatchObject({ nranks: 2, group: { worldSize: 4, worldRanks: [0, 1] }, wrongTotal: 0 });
    expect(r.rows.map((x) => x.size)).toEqual([8, 512, 32768]);
    // allreduce busbw at n = 2 is algbw; at n = 4 it would be 1.5 × algbw.
    for (const x of r.rows) expect(x.oop.busbw).toBe(x.oop.algbw);
    expectAgreement(r, text);
  }, 150_000);

  it("--group 3 of 4 with a gather rooted on the group's last rank, and a group of 1", () => {
    const g3 = runBuilt(['gather', '-b', '64', '-e', '64', '--ranks', '4', '--group', '3', '-r', '2']);
    expect(g3.r).toMatchObject({ nranks: 3, group: { worldSize: 4, worldRanks: [0, 1, 2] }, wrongTotal: 0 });
    expect(g3.r.rows[0]).toMatchObject({ size: 60, count: 5, root: 2 });
    const g1 = runBuilt(['allreduce', '-b', '64', '-e', '64', '--ranks', '2', '--group', '1']);
    expect(g1.r).toMatchObject({ nranks: 1, group: { worldSize: 2, worldRanks: [0] }, wrongTotal: 0 });
  }, 150_000);

  it('--plot and --json: the files written are reported, the chart drawn with whole legend labels', () => {
    const dir = mkdtempSync(join(tmpdir(), 'webccl-perf-'));
    try {
      const json = join(dir, 'out.json');
      const svg = join(dir, 'chart.svg');
      const text = execFileSync(
        process.execPath,
        [
          cli,
          'perf',
          'allreduce',
          '-b8',
          '-e64',
          '-f8',
          '-n2',
          '-w1',
          '-dfloat,bf16',
          '--ranks',
          '2',
          '--json',
          json,
          '--plot',
          svg,
          '--plot-y',
          'log',
        ],
        { encoding: 'utf8', timeout: 120_000 },
      );
      expect(text).toContain(`\n# wrote ${json}: the results as JSON\n`);
      expect(text).toContain(`\n# wrote ${svg}: busbw against size, 4 lines, log busbw axis\n`);
      const chart = readFileSync(svg, 'utf8');
      expect(chart).toContain('>webccl shm bfloat16 out-of-place<');
      expect(chart).not.toContain('…');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 150_000);

  it('exits with code 2 on a bad flag', () => {
    let status = 0;
    let stderr = '';
    try {
      execFileSync(process.execPath, [cli, 'perf', 'allreduce', '--ranks', 'two'], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      status = (e as { status: number }).status;
      stderr = (e as { stderr: string }).stderr;
    }
    expect(status).toBe(2);
    expect(stderr).toMatch(/--ranks expects an integer in 1\.\.64, got "two"/);
  });
});
