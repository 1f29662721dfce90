// `webccl tune`: its arguments (defaults, every refusal) and a real, tiny sweep on both paths
// whose model the tuner then reads through WEBCCL_MODEL. Loads dist/ (npm run build first).
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { parseTuneArgs, TuneUsageError } from '../../src/launch/tune/args.js';
import { checkModel } from '../../src/tuner/cost-model.js';
import { activeModel } from '../../src/tuner/model-source.js';

const run = promisify(execFile);
const cli = join(__dirname, '..', '..', 'bin', 'webccl.js');

afterEach(() => {
  delete process.env.WEBCCL_MODEL;
});

const parse = (...argv: string[]) => {
  const o = parseTuneArgs(argv);
  if (o === 'help') throw new Error('help');
  return o;
};

describe('parseTuneArgs', () => {
  it('defaults: ranks 2,3,4 on shm and tcp, 4 KiB..64 MiB by 4, 0.1 s blocks, the default place', () => {
    expect(parse()).toEqual({
      ranks: [2, 3, 4],
      paths: ['shm', 'tcp'],
      minBytes: 4096,
      maxBytes: 64 << 20,
      factor: 4,
      timeSec: 0.1,
      out: undefined,
    });
    expect(
      parse(
        '--ranks',
        '2,8',
        '--paths=tcp',
        '-b',
        '1K',
        '--maxbytes',
        '1M',
        '-f',
        '8',
        '--time',
        '0.05',
        '--out',
        'm.json',
      ),
    ).toEqual({
      ranks: [2, 8],
      paths: ['tcp'],
      minBytes: 1024,
      maxBytes: 1 << 20,
      factor: 8,
      timeSec: 0.05,
      out: 'm.json',
    });
    expect(parseTuneArgs(['--ranks', '2', '-h'])).toBe('help');
  });

  it('refuses bad values, naming the flag', () => {
    for (const [argv, flag] of [
      [['--ranks', '1'], '--ranks'],
      [['--ranks', '2,x'], '--ranks'],
      [['--ranks', '65'], '--ranks'],
      [['--paths', 'ws'], '--paths'],
      [['-b', '1Q'], '-b'],
      [['-b', '1M', '-e', '1K'], '-e'],
      [['-f', '1'], '-f'],
      [['--time', '0'], '--time'],
      [['--time', 'x'], '--time'],
      [['--bogus', '1'], '--bogus'],
      [['--out'], '--out'],
      [['--out', 'a', '--out', 'b'], '--out'],
      [['stray'], 'stray'],
    ] as const) {
      expect(() => parseTuneArgs([...argv])).toThrow(TuneUsageError);
      expect(() => parseTuneArgs([...argv])).toThrow(flag);
    }
  });
});

describe('webccl tune', () => {
  it('sweeps both paths (the ring in 512 KiB pieces), fits and writes a model the tuner then uses', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'webccl-tune-')), 'model.json');
    // The ring is measured in the fixed 512 KiB pieces the counts assume, whatever the caller's
    // WEBCCL_PIECE_BYTES: a value its perf runs would refuse must not reach them.
    const env = { ...process.env, WEBCCL_PIECE_BYTES: '1000' };
    const r = await run(
      process.execPath,
      [cli, 'tune', '--ranks', '2', '-b', '4K', '-e', '64K', '-f', '16', '--time', '0.02', '--out', out],
      { timeout: 120_000, env },
    );
    expect(r.stdout).toMatch(/tune: shm direct on 2 ranks: 2 sizes/);
    expect(r.stdout).toMatch(/tune: tcp doubling on 2 ranks, 2 connections per pair: 2 sizes/);
    // the ring again on one connection: what a connection costs (φ, ω) shows between the two
    expect(r.stdout).toMatch(/tune: tcp ring on 2 ranks, 2 connections per pair: 2 sizes/);
    expect(r.stdout).toMatch(/tune: tcp ring on 2 ranks, 1 connection per pair: 2 sizes/);
    expect(r.stdout).toContain(`tune: wrote ${out}`);
    // each path's fitted costs, o (per message) among them; a fitted model always carries o
    expect(r.stdout).toMatch(
      /tune: tcp: α [\d.]+ us, wake [\d.]+ us per rank beyond \d+ cores, o [\d.]+ us per message, β /,
    );
    const model = checkModel(JSON.parse(readFileSync(out, 'utf8')), out);
    expect(typeof model.tcp.messageUs).toBe('number');
    // and the crowded costs apart from the base ones
    expect(r.stdout).toMatch(
      /tune: tcp: .*; per core's worth of ranks beyond: o' [\d.]+ us, [\d.]+ ns per byte moved, [\d.]+ ns per byte reduced; ρ [\d.]+ us per turn beyond the first in a step; per connection: φ [\d.]+ ns per byte it carries, ω [\d.]+ us per step for each beyond the first; median error/,
    );
    for (const f of [
      'crowdMessageUs',
      'crowdUsPerByte',
      'crowdUsPerReducedByte',
      'roundUs',
      'flowUsPerByte',
      'channelStepUs',
    ] as const)
      expect(typeof model.tcp[f]).toBe('number');
    expect(model.source).toMatchObject({ tool: 'webccl tune' });
    const rows = model.source!.rows as { path: string; algo: string; channels?: number }[];
    expect(rows.length).toBe(2 * 2 * 2 + 2);
    expect(
      rows
        .filter((x) => x.path === 'tcp')
        .map((x) => `${x.algo} ${x.channels}`)
        .sort(),
    ).toEqual(['doubling 2', 'doubling 2', 'ring 1', 'ring 1', 'ring 2', 'ring 2']);
    process.env.WEBCCL_MODEL = out;
    expect(activeModel().model).toEqual(model);
  }, 150_000);

  it('a bad option exits 2 with the usage', async () => {
    const e = await run(process.execPath, [cli, 'tune', '--paths', 'ws']).catch(
      (x: { code: number; stderr: string }) => x,
    );
    expect((e as { code: number }).code).toBe(2);
    expect((e as { stderr: string }).stderr).toMatch(/--paths: unknown path "ws"[\s\S]*usage: webccl tune/);
  });
});
