// `webccl simulate`: its arguments (defaults, units, every refusal), and its output: the table
// and the JSON rows (size, algorithm, timeUs), with the times the simulator predicts.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/launch/cli.js';
import { parseBandwidth, parseLatency, parseSimulateArgs, SimUsageError } from '../../src/launch/simulate/args.js';
import { simulateMain } from '../../src/launch/simulate/main.js';

const parse = (...argv: string[]) => {
  const o = parseSimulateArgs(argv);
  if (o === 'help') throw new Error('help');
  return o;
};

describe('parseSimulateArgs', () => {
  it("defaults: 8 ranks one per node, 5 us and 25 Gbit between nodes, 1 us and 400 Gbit inside, the engine's choice of algorithm", () => {
    expect(parse('allreduce')).toMatchObject({
      collective: 'allreduce',
      ranks: 8,
      nodes: 8,
      latencyUs: 5,
      bytesPerUs: 3125,
      intraLatencyUs: 1,
      intraBytesPerUs: 50000,
      overheadUs: 0,
      algos: [],
      minBytes: 8,
      maxBytes: 64 << 20,
      factor: 2,
      dtype: 'f32',
      root: 0,
      seed: 1,
      jitter: 0,
      json: undefined,
    });
  });

  it('reads every flag, in both spellings', () => {
    expect(
      parse(
        'all_reduce',
        '--ranks',
        '1024',
        '--nodes=128',
        '--latency',
        '2.5us',
        '--bandwidth',
        '100Gbit',
        '--intra-latency',
        '300ns',
        '--intra-bandwidth',
        '50GB/s',
        '--overhead',
        '50us',
        '-a',
        'ring,tree',
        '-b',
        '1K',
        '-e',
        '1G',
        '-f',
        '4',
        '--seed',
        '9',
        '--jitter',
        '0.25',
        '-d',
        'double',
        '--json',
        'x.json',
      ),
    ).toMatchObject({
      collective: 'allreduce',
      ranks: 1024,
      nodes: 128,
      latencyUs: 2.5,
      bytesPerUs: 12500,
      intraLatencyUs: 0.3,
      intraBytesPerUs: 50000,
      overheadUs: 50,
      algos: ['ring', 'tree'],
      minBytes: 1024,
      maxBytes: 1 << 30,
      factor: 4,
      seed: 9,
      jitter: 0.25,
      dtype: 'f64',
      json: 'x.json',
    });
    expect(parse('allreduce', '-a', 'all').algos).toEqual(['ring', 'doubling', 'tree', 'hierarchical']);
    expect(parse('broadcast', '-a', 'all', '-r', '7').algos).toEqual(['chain']);
    expect(parse('barrier').collective).toBe('barrier');
    expect(parse('all_to_all', '-a', 'all').algos).toEqual(['pairwise']);
    expect(parse('gather', '-a', 'direct').algos).toEqual(['direct']);
    expect(parse('scatter').collective).toBe('scatter');
    expect(parseSimulateArgs(['allreduce', '-h'])).toBe('help');
    expect(parse('allreduce').threads).toBe('auto');
    expect(parse('allreduce', '--threads', 'auto').threads).toBe('auto');
    expect(parse('allreduce', '--threads', '3').threads).toBe(3);
  });

  it('units of time and rate', () => {
    expect(parseLatency('5us', 'x')).toBe(5);
    expect(parseLatency('5µs', 'x')).toBe(5);
    expect(parseLatency('800ns', 'x')).toBeCloseTo(0.8);
    expect(parseLatency('1.5ms', 'x')).toBe(1500);
    expect(parseLatency('2s', 'x')).toBe(2e6);
    expect(parseBandwidth('25Gbit', 'x')).toBe(3125);
    expect(parseBandwidth('10Gbps', 'x')).toBe(1250);
    expect(parseBandwidth('100Gb/s', 'x')).toBe(12500);
    expect(parseBandwidth('1000Mbit', 'x')).toBe(125);
    expect(parseBandwidth('12.5GB/s', 'x')).toBe(12500);
  });

  it.each([
    [['allreduce', '--frobnicate', '1'], /unknown option --frobnicate/],
    [['allreduce', '--ranks'], /--ranks needs a value/],
    [['allreduce', '--ranks', '0'], /--ranks expects an integer in 1\.\.65536, got "0"/],
    [['allreduce', '--ranks', '70000'], /--ranks expects an integer/],
    [['allreduce', '--ranks', '12', '--nodes', '5'], /--ranks 12 is not a multiple of --nodes 5/],
    [['allreduce', '--latency', '5'], /--latency expects a time such as 5us/],
    [['allreduce', '--latency', '-1us'], /--latency expects a time/],
    [['allreduce', '--bandwidth', '25'], /--bandwidth expects a rate such as 25Gbit/],
    [['allreduce', '--overhead', 'some'], /--overhead expects a time/],
    [['allreduce', '--bandwidth', '0Gbit'], /--bandwidth expects a rate/],
    [['allreduce', '--intra-bandwidth', 'fast'], /--intra-bandwidth expects a rate/],
    [
      ['allreduce', '-a', 'butterfly'],
      /-a: allreduce has no algorithm "butterfly" \(expected auto, all, ring, doubling, tree, hierarchical\)/,
    ],
    [['allgather', '-a', 'tree'], /-a: allgather has no algorithm "tree"/],
    [['allreduce', '-b', '1M', '-e', '1K'], /-e 1024 is smaller than -b 1048576/],
    [['allreduce', '-b', 'lots'], /-b expects a size/],
    [['allreduce', '-f', '0.5'], /-f expects a number ≥ 1/],
    [['allreduce', '-d', 'f16'], /-d: unknown datatype "f16"/],
    [['broadcast', '--ranks', '4', '-r', '4'], /-r expects an integer in 0\.\.3/],
    [['allreduce', '--seed', 'x'], /--seed expects an integer/],
    [['allreduce', '--jitter', '-1'], /--jitter expects a number/],
    [['allreduce', '--threads', '0'], /--threads expects an integer in 1\.\.256/],
    [['allreduce', '--threads', 'many'], /--threads expects an integer/],
    [['allreduce', '--ranks', '8', '--ranks', '16'], /--ranks given twice/],
    [
      ['alltoallv'],
      /unknown collective "alltoallv" \(expected allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter, sendrecv, barrier\)/,
    ],
    [['gather', '-a', 'ring'], /-a: gather has no algorithm "ring" \(expected auto, all, direct\)/],
    [['allreduce', 'broadcast'], /the collective is already allreduce/],
    [[], /which collective/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseSimulateArgs(argv as string[])).toThrow(SimUsageError);
    expect(() => parseSimulateArgs(argv as string[])).toThrow(message);
  });
});

describe('simulateMain', () => {
  const io = () => {
    const out: string[] = [];
    const err: string[] = [];
    return {
      out,
      err,
      io: { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } },
    };
  };

  it('prints one row per size and algorithm, and the JSON rows carry size, algorithm and timeUs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webccl-sim-'));
    const json = join(dir, 'r.json');
    const t = io();
    const code = await simulateMain(
      ['allreduce', '--ranks', '16', '--nodes', '4', '-a', 'all', '-b', '1K', '-e', '64K', '-f', '8', '--json', json],
      t.io,
    );
    expect(code).toBe(0);
    const rows = t.out
      .join('')
      .split('\n')
      .filter((l) => l && !l.startsWith('#'));
    expect(rows).toHaveLength(3 * 4);
    const report = JSON.parse(readFileSync(json, 'utf8'));
    expect(report).toMatchObject({
      tool: 'webccl simulate',
      collective: 'allreduce',
      nranks: 16,
      nodes: 4,
      ranksPerNode: 4,
      latencyUs: 5,
      bandwidthGbit: 25,
    });
    expect(report.rows.map((r: { size: number; algorithm: string }) => `${r.size} ${r.algorithm}`)).toEqual(
      [1024, 8192, 65536].flatMap((s) => ['ring', 'doubling', 'tree', 'hierarchical'].map((a) => `${s} ${a}`)),
    );
    for (const r of report.rows) {
      expect(r.timeUs).toBeGreaterThan(0);
      expect(r.algbw).toBeCloseTo(r.size / (r.timeUs * 1e3), 9);
      expect(r.busbw).toBeCloseTo((r.algbw * 2 * 15) / 16, 9);
    }
    // The table shows the JSON's numbers rounded.
    expect(rows[0].trim().split(/\s+/).slice(0, 5)).toEqual([
      '1024',
      '256',
      'float',
      'ring',
      report.rows[0].timeUs.toFixed(2),
    ]);
  });

  it('alltoall, gather and scatter: size is all n blocks, busbw (n−1)/n of algbw', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webccl-sim-'));
    for (const coll of ['alltoall', 'gather', 'scatter']) {
      const json = join(dir, `${coll}.json`);
      expect(
        await simulateMain(
          [coll, '--ranks', '8', '--nodes', '2', '-b', '1K', '-e', '1M', '-f', '1024', '-r', '3', '--json', json],
          io().io,
        ),
      ).toBe(0);
      const rows = JSON.parse(readFileSync(json, 'utf8')).rows;
      expect(rows.map((r: { size: number; count: number }) => [r.size, r.count])).toEqual([
        [1024, 32],
        [1 << 20, 32768],
      ]);
      for (const r of rows) expect(r.busbw).toBeCloseTo((r.algbw * 7) / 8, 9);
    }
  });

  it('sendrecv (also send_recv): size is what each rank sends, busbw = algbw; refused on one rank', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webccl-sim-'));
    const json = join(dir, 'sendrecv.json');
    expect(parse('send_recv').collective).toBe('sendrecv');
    expect(parse('sendrecv', '-a', 'all').algos).toEqual(['p2p']);
    expect(
      await simulateMain(
        ['sendrecv', '--ranks', '8', '--nodes', '2', '-b', '1K', '-e', '1M', '-f', '1024', '--json', json],
        io().io,
      ),
    ).toBe(0);
    const rows = JSON.parse(readFileSync(json, 'utf8')).rows;
    expect(rows.map((r: { size: number; count: number; algorithm: string }) => [r.size, r.count, r.algorithm])).toEqual(
      [
        [1024, 256, 'p2p'],
        [1 << 20, 262144, 'p2p'],
      ],
    );
    for (const r of rows) expect(r.busbw).toBe(r.algbw);
    const t = io();
    expect(await simulateMain(['sendrecv', '--ranks', '1'], t.io)).toBe(2);
    expect(t.err.join('')).toMatch(/^webccl simulate: sendrecv needs at least 2 ranks/);
  });

  it('--seed: the same seed prints the same times under jitter, another seed others', async () => {
    const times = async (seed: string) => {
      const t = io();
      await simulateMain(
        [
          'allreduce',
          '--ranks',
          '12',
          '--nodes',
          '3',
          '-a',
          'all',
          '-b',
          '4K',
          '-e',
          '4M',
          '-f',
          '32',
          '--jitter',
          '0.5',
          '--seed',
          seed,
        ],
        t.io,
      );
      return t.out
        .join('')
        .split('\n')
        .filter((l) => l && !l.startsWith('#'))
        .map((l) => l.trim().split(/\s+/)[4]);
    };
    const a = await times('3');
    expect(await times('3')).toEqual(a);
    expect(await times('4')).not.toEqual(a);
  });

  it('names the schedule the engine would pick when no -a is given', async () => {
    const t = io();
    await simulateMain(['allreduce', '--ranks', '4', '-b', '1K', '-e', '64M', '-f', '65536'], t.io);
    const algos = t.out
      .join('')
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.trim().split(/\s+/)[3]);
    expect(algos).toEqual(['doubling', 'ring']);
  });

  it('a usage error exits 2 naming the flag; webccl simulate is a command of the CLI', async () => {
    const t = io();
    expect(await simulateMain(['allreduce', '--latency', 'soon'], t.io)).toBe(2);
    expect(t.err.join('')).toMatch(/^webccl simulate: --latency expects a time/);
    const h = io();
    expect(await simulateMain(['--help'], h.io)).toBe(0);
    expect(h.out.join('')).toMatch(/usage: webccl simulate/);
    const write = process.stdout.write;
    let printed = '';
    process.stdout.write = ((s: string) => {
      printed += s;
      return true;
    }) as typeof write;
    try {
      expect(await main(['simulate', 'barrier', '--ranks', '64'])).toBe(0);
    } finally {
      process.stdout.write = write;
    }
    expect(printed).toMatch(/dissemination/);
  });

  it('--threads 2 (the packaged CLI, its worker threads) prints the rows of one thread, wall time aside', () => {
    const rows = (threads: string) =>
      execFileSync(
        process.execPath,
        [
          fileURLToPath(new URL('../../bin/webccl.js', import.meta.url)),
          'simulate',
          'allreduce',
          '--ranks',
          '32',
          '--nodes',
          '8',
          '-a',
          'all',
          '-b',
          '4K',
          '-e',
          '4M',
          '-f',
          '32',
          '--jitter',
          '0.3',
          '--overhead',
          '1us',
          '--threads',
          threads,
        ],
        { encoding: 'utf8' },
      )
        .split('\n')
        .filter((l) => l && !l.startsWith('#'))
        .map((l) => l.trim().split(/\s+/).slice(0, -1).join(' '));
    const one = rows('1');
    expect(one).toHaveLength(3 * 4);
    expect(rows('2')).toEqual(one);
  });
});
