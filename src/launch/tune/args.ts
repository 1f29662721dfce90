// The command line of `webccl tune`: which perf sweeps to run (ranks, paths, sizes, length of a
// timed block) and where to write the fitted model. Pure, so tests can hit every branch.

import { CliUsageError, type FlagSpec, parseFlags } from '../flags.js';
import { PerfUsageError, parseSize } from '../perf/args.js';

export class TuneUsageError extends CliUsageError {
  override readonly name = 'TuneUsageError';
}

export const TUNE_PATHS = ['shm', 'tcp'] as const;
export type TunePath = (typeof TUNE_PATHS)[number];

export interface TuneOptions {
  /** Rank counts swept on every path. */
  ranks: number[];
  paths: TunePath[];
  minBytes: number;
  maxBytes: number;
  factor: number;
  /** Seconds of one timed block (perf --time). */
  timeSec: number;
  /** Where the model goes; undefined: the default place (~/.webccl/model.json). */
  out: string | undefined;
}

export const TUNE_USAGE = `usage: webccl tune [options]

Fits the cost model the tuner chooses algorithms with (α latency, β bytes/s and γ reduction
rate per path, and the cost of ranks beyond the cores) on this machine: runs webccl perf
allreduce with each algorithm of each path (shm: direct and twoshot, threads of one process;
tcp: ring and doubling, one process per rank over loopback), fits the model by least squares
over each schedule's own step and byte counts, and writes it as JSON. The tuner reads the file
that WEBCCL_MODEL names, else ~/.webccl/model.json, else its built-in model.

      --ranks LIST         rank counts to sweep on every path, 2..64 (default 2,3,4)
      --paths LIST         shm, tcp or both (default shm,tcp)
  -b, --minbytes SIZE      smallest size (default 4K); suffixes K, M, G
  -e, --maxbytes SIZE      largest size (default 64M)
  -f, --stepfactor F       multiply the size by F between rows, ≥ 2 (default 4)
      --time SEC           length of a timed block (default 0.1)
      --out FILE           where to write the model (default ~/.webccl/model.json)
  -h, --help               show this text

The default sweep takes about 3 to 5 minutes on a 2-core machine.`;

const TUNE_FLAGS = {
  ranks: { names: ['ranks'] },
  paths: { names: ['paths'] },
  b: { names: ['b', 'minbytes'] },
  e: { names: ['e', 'maxbytes'] },
  f: { names: ['f', 'stepfactor'] },
  time: { names: ['time'] },
  out: { names: ['out'] },
} as const satisfies Record<string, FlagSpec>;

function size(text: string, flag: string): number {
  try {
    return parseSize(text, flag);
  } catch (e) {
    if (e instanceof PerfUsageError) throw new TuneUsageError(e.message);
    throw e;
  }
}

/** Parses the arguments after `tune`; 'help' when -h is among them. Throws TuneUsageError. */
export function parseTuneArgs(argv: string[]): TuneOptions | 'help' {
  const { given, help, positionals } = parseFlags(argv, TUNE_FLAGS, { error: TuneUsageError, once: true });
  if (help) return 'help';
  if (positionals.length) throw new TuneUsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const v = (key: keyof typeof TUNE_FLAGS) => given.get(key)?.value;
  const ranks = (v('ranks') ?? '2,3,4').split(',').map((t) => {
    if (!/^\d+$/.test(t) || Number(t) < 2 || Number(t) > 64)
      throw new TuneUsageError(`--ranks expects rank counts in 2..64, got ${JSON.stringify(t)}`);
    return Number(t);
  });
  const paths = (v('paths') ?? 'shm,tcp').split(',').map((p) => {
    if (!(TUNE_PATHS as readonly string[]).includes(p))
      throw new TuneUsageError(`--paths: unknown path ${JSON.stringify(p)} (expected ${TUNE_PATHS.join(', ')})`);
    return p as TunePath;
  });
  const minBytes = size(v('b') ?? '4K', '-b');
  const maxBytes = size(v('e') ?? '64M', '-e');
  if (maxBytes < minBytes) throw new TuneUsageError(`-e ${maxBytes} is smaller than -b ${minBytes}`);
  const factorText = v('f') ?? '4';
  if (!/^\d+(\.\d+)?$/.test(factorText) || Number(factorText) < 2)
    throw new TuneUsageError(`-f expects a number ≥ 2, got ${JSON.stringify(factorText)}`);
  const timeText = v('time') ?? '0.1';
  if (!/^\d*\.?\d+$/.test(timeText) || !(Number(timeText) > 0) || Number(timeText) > 60)
    throw new TuneUsageError(`--time expects seconds in (0, 60], got ${JSON.stringify(timeText)}`);
  return {
    ranks: [...new Set(ranks)],
    paths: [...new Set(paths)],
    minBytes,
    maxBytes,
    factor: Number(factorText),
    timeSec: Number(timeText),
    out: v('out'),
  };
}
