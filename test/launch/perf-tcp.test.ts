// `webccl perf --transport tcp`: the ranks as node processes on this machine (worker threads
// sharing memory within each) joined over TCP loopback. The sweep runs end to end through the
// built CLI, results are checked (#wrong 0), the JSON records the layout; a rank that fails and
// Ctrl-C end every node; --transport ws runs the same launch over WebSocket. Needs `npm run build` (dist/).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { type PerfOptions, parsePerfArgs } from '../../src/launch/perf/args.js';
import type { PerfReport } from '../../src/launch/perf/format.js';
import { runPerf } from '../../src/launch/perf/main.js';

const bin = fileURLToPath(new URL('../../bin/webccl.js', import.meta.url));
const cliScript = fileURLToPath(new URL('../../dist/node/cli.js', import.meta.url));
const failingRank = fileURLToPath(new URL('fixtures/perf-fail-rank.mjs', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'webccl-perf-tcp-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function perf(args: string[], json: string) {
  const r = spawnSync(process.execPath, [bin, 'perf', ...args, '--json', json], { encoding: 'utf8', timeout: 60_000 });
  return { ...r, report: r.status === 0 ? (JSON.parse(readFileSync(json, 'utf8')) as PerfReport) : undefined };
}

/** Pids whose parent is `pid` (from /proc; empty where there is none). */
function childrenOf(pid: number): number[] {
  if (!existsSync('/proc/self/stat')) return [];
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        // "pid (comm) state ppid ...": comm may hold spaces, so read after the last ')'.
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } },
    out,
    err,
  };
}

describe('webccl perf --transport tcp', () => {
  it('2 ranks as 2 processes: every row checked, #wrong 0, the layout in the table and the JSON', () => {
    const json = join(tmp, 'two.json');
    const r = perf(
      [
        'allreduce',
        '--transport',
        'tcp',
        '--ranks',
        '2',
        '-b',
        '8',
        '-e',
        '64K',
        '-f',
        '8',
        '-n',
        '3',
        '-w',
        '1',
        '-c',
        '1',
      ],
      json,
    );
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.stdout.split('\n')[0]).toBe(
      '# webccl perf allreduce: 2 ranks (2 processes × 1 thread), transport tcp, buffers shm, algo auto',
    );
    expect(r.stdout).toMatch(/# Wrong values\s+: 0 OK/);
    const rep = r.report!;
    expect(rep).toMatchObject({
      transport: 'tcp',
      nranks: 2,
      nodes: 2,
      ranksPerNode: 1,
      wrongTotal: 0,
      interrupted: false,
    });
    expect(rep.rows.map((x) => x.size)).toEqual([8, 64, 512, 4096, 32768]);
    for (const row of rep.rows) {
      expect([row.oop.wrong, row.ip.wrong, row.oop.iters]).toEqual([0, 0, 3]);
      expect(row.oop.time_us).toBeGreaterThan(0);
    }
  });

  it('--transport ws: the same launch with WEBCCL_TRANSPORT=ws in every node process; every row checked, #wrong 0', () => {
    const json = join(tmp, 'ws.json');
    const r = spawnSync(
      process.execPath,
      [
        bin,
        'perf',
        'allreduce',
        '--transport',
        'ws',
        '--ranks',
        '4',
        '--nodes',
        '2',
        '-b',
        '8',
        '-e',
        '256K',
        '-f',
        '8',
        '-n',
        '2',
        '-w',
        '1',
        '--json',
        json,
      ],
      { encoding: 'utf8', timeout: 90_000, env: { ...process.env, WEBCCL_DEBUG: 'INFO' } },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(
      '# webccl perf allreduce: 4 ranks (2 processes × 2 threads), transport ws, buffers shm, algo auto',
    );
    expect(r.stdout).toMatch(/# Wrong values\s+: 0 OK/);
    // Every rank of both nodes says its mesh runs over ws.
    expect(r.stderr.match(/channel\(s\) per peer over ws,/g), r.stderr).toHaveLength(4);
    expect(r.stderr).not.toMatch(/over tcp,/);
    const rep = JSON.parse(readFileSync(json, 'utf8')) as PerfReport;
    expect(rep).toMatchObject({ transport: 'ws', nranks: 4, nodes: 2, wrongTotal: 0 });
    expect(rep.rows.map((x) => x.size)).toEqual([8, 64, 512, 4096, 32768, 262144]);
  }, 120_000);

  it('4 ranks as 2 processes × 2 threads, hierarchical allreduce', () => {
    const json = join(tmp, 'four.json');
    const r = perf(
      [
        'allreduce',
        '--transport',
        'tcp',
        '--ranks',
        '4',
        '--nodes',
        '2',
        '-a',
        'hierarchical',
        '-b',
        '8',
        '-e',
        '4K',
        '-f',
        '8',
        '-n',
        '3',
        '-w',
        '1',
      ],
      json,
    );
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.stdout.split('\n')[0]).toBe(
      '# webccl perf allreduce: 4 ranks (2 processes × 2 threads), transport tcp, buffers shm, algo hierarchical',
    );
    expect(r.report).toMatchObject({
      transport: 'tcp',
      nranks: 4,
      nodes: 2,
      ranksPerNode: 2,
      algo: 'hierarchical',
      wrongTotal: 0,
    });
    expect(r.report!.rows).toHaveLength(4);
  });

  it('the other collectives, with a root on the second node', () => {
    for (const coll of ['allgather', 'reducescatter', 'broadcast', 'reduce']) {
      const json = join(tmp, `${coll}.json`);
      const r = perf(
        [
          coll,
          '--transport',
          'tcp',
          '--ranks',
          '4',
          '--nodes',
          '2',
          '-r',
          '3',
          '-b',
          '8',
          '-e',
          '1K',
          '-f',
          '32',
          '-n',
          '2',
          '-w',
          '0',
        ],
        json,
      );
      expect({ coll, status: r.status, stderr: r.stderr }).toEqual({ coll, status: 0, stderr: '' });
      expect({ coll, wrong: r.report!.wrongTotal, rows: r.report!.rows.length }).toEqual({ coll, wrong: 0, rows: 2 });
    }
  });

  it('alltoall, gather, scatter, sendrecv across 2 nodes × 2 threads, and pingpong over TCP: #wrong 0', () => {
    for (const coll of ['alltoall', 'gather', 'scatter', 'sendrecv']) {
      const json = join(tmp, `${coll}.json`);
      const r = perf(
        [
          coll,
          '--transport',
          'tcp',
          '--ranks',
          '4',
          '--nodes',
          '2',
          '-r',
          '2',
          '-b',
          '8',
          '-e',
          '4K',
          '-f',
          '16',
          '-n',
          '2',
          '-w',
          '0',
        ],
        json,
      );
      expect({ coll, status: r.status, stderr: r.stderr }).toEqual({ coll, status: 0, stderr: '' });
      expect({ coll, wrong: r.report!.wrongTotal, rows: r.report!.rows.length }).toEqual({ coll, wrong: 0, rows: 3 });
      expect({ coll, ip: r.report!.rows[0].ip === null }).toEqual({
        coll,
        ip: coll === 'alltoall' || coll === 'sendrecv',
      });
    }
    const json = join(tmp, 'pingpong.json');
    const r = perf(['pingpong', '--transport', 'tcp', '-b', '8', '-e', '4K', '-f', '16', '-n', '3', '-w', '0'], json);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.report).toMatchObject({ collective: 'pingpong', nranks: 2, nodes: 2, wrongTotal: 0 });
  }, 120_000);

  it('--group 3 of 2 nodes × 2 threads: the group spans both nodes, the fourth rank idles', () => {
    const json = join(tmp, 'group.json');
    const r = perf(
      [
        'allreduce',
        '--transport',
        'tcp',
        '--ranks',
        '4',
        '--nodes',
        '2',
        '--group',
        '3',
        '-b',
        '8',
        '-e',
        '4K',
        '-f',
        '16',
        '-n',
        '2',
        '-w',
        '0',
      ],
      json,
    );
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.stdout.split('\n')[0]).toBe(
      '# webccl perf allreduce: 4 ranks (2 processes × 2 threads), group of 3 (world ranks 0..2; 3 idle), transport tcp, buffers shm, algo auto',
    );
    expect(r.report).toMatchObject({
      nranks: 3,
      group: { worldSize: 4, worldRanks: [0, 1, 2] },
      nodes: 2,
      wrongTotal: 0,
    });
    expect(r.report!.rows).toHaveLength(3);
  }, 60_000);

  // -n auto warms up first: every placement and a barrier each round, at the smallest size and,
  // across nodes, at the first size the network progress thread runs (256 KiB here).
  it.each([
    ['threads', ['--transport', 'shm']],
    ['2 processes', ['--transport', 'tcp']],
  ])(
    '-n auto on %s: the warm-ups of each path, then every row right',
    (_, transport) => {
      const json = join(tmp, `auto-${transport[1]}.json`);
      const r = perf(
        ['allreduce', ...transport, '--ranks', '2', '-b', '8', '-e', '256K', '-f', '32', '--time', '0.02', '-c', '1'],
        json,
      );
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      const rep = r.report!;
      expect(rep).toMatchObject({ wrongTotal: 0, interrupted: false });
      expect(rep.rows.map((x) => x.size)).toEqual([8, 256, 8192, 262144]);
      for (const row of rep.rows)
        expect([row.oop.wrong, row.ip.wrong, row.oop.iters > 0, row.ip.iters > 0]).toEqual([0, 0, true, true]);
    },
    60_000,
  );

  it('a rank that fails ends every node: exit 1, the rank named, the rows done so far kept', async () => {
    const o = parsePerfArgs([
      'allreduce',
      '--transport',
      'tcp',
      '--ranks',
      '4',
      '--nodes',
      '2',
      '-b',
      '8',
      '-e',
      '1M',
      '-f',
      '2',
      '--time',
      '0.05',
    ]) as PerfOptions;
    const c = capture();
    const t0 = performance.now();
    const { exitCode, report } = await runPerf(o, { rankScript: failingRank, cliScript, io: c.io });
    const err = c.err.join('');
    expect(exitCode).toBe(1);
    // The launcher names the first failure it hears: rank 3's own, or a rank that heard of it
    // first (its connections closed), which names rank 3 in turn.
    expect(err).toMatch(
      /^webccl perf: rank (3 failed: Error: rank 3 fails on purpose|\d failed: .*rank 3 (closed its connections|failed))/m,
    );
    expect(report.interrupted).toBe(true);
    expect(report.rows.length).toBeLessThan(18);
    // The failure comes 1.5 s in; the others get 3 s to end on their own, then SIGTERM.
    expect(performance.now() - t0).toBeLessThan(20_000);
  }, 30_000);

  it('Ctrl-C ends every node: exit code 130, the rows done so far, no process left', async () => {
    const child = spawn(
      process.execPath,
      [
        bin,
        'perf',
        'allreduce',
        '--transport',
        'tcp',
        '--ranks',
        '2',
        '-b',
        '8',
        '-e',
        '64M',
        '-f',
        '2',
        '--time',
        '0.2',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const firstRow = new Promise<void>((resolve) =>
      child.stdout.on('data', (d) => {
        out += d;
        if (/^\s+8\s+2\s+float/m.test(out)) resolve();
      }),
    );
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    await firstRow;
    const nodes = childrenOf(child.pid!);
    if (existsSync('/proc/self/stat')) expect(nodes).toHaveLength(2);
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(nodes.filter(alive)).toEqual([]);
    expect(out).toMatch(/# interrupted after \d+ rows?/);
    expect(err).toMatch(/webccl perf: interrupted; ending all ranks/);
    expect(err).not.toMatch(/failed/);
  }, 30_000);
});
