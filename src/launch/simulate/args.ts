// The command line of `webccl simulate`: nccl-tests' sweep flags (-b -e -f -i -d -r), -a for the
// algorithm (or all), and the simulated network's shape and links.
// Pure: parsing never touches the process, so tests can hit every branch.

import { SIM_ALGORITHMS, SIM_DTYPES, type SimDtype } from '../../sim/index.js';
import { CliUsageError, type FlagSpec, parseFlags } from '../flags.js';
import { PerfUsageError, parseSize } from '../perf/args.js';
import { collectiveNamed } from '../perf/collectives.js';

export class SimUsageError extends CliUsageError {
  override readonly name = 'SimUsageError';
}

/** The collectives the simulator runs (perf's names; ping-pong is not simulated). */
export type SimCollectiveName = keyof typeof SIM_ALGORITHMS;
const ALL_NAMES = Object.keys(SIM_ALGORITHMS) as SimCollectiveName[];
const simulated = (name: string | undefined): SimCollectiveName | undefined =>
  name && (ALL_NAMES as string[]).includes(name) ? (name as SimCollectiveName) : undefined;
const MORE_ALIASES: Record<string, SimCollectiveName> = { barrier: 'barrier' };

export interface SimulateOptions {
  collective: SimCollectiveName;
  ranks: number;
  nodes: number;
  latencyUs: number;
  /** Bytes per microsecond. */
  bytesPerUs: number;
  intraLatencyUs: number;
  intraBytesPerUs: number;
  /** Software cost of each message at its sender (LogP's o). */
  overheadUs: number;
  /** Algorithms to run at every size; empty: the engine's own choice. */
  algos: string[];
  minBytes: number;
  maxBytes: number;
  factor: number;
  stepBytes: number;
  dtype: SimDtype;
  root: number;
  seed: number;
  jitter: number;
  /** Worker threads the simulation is split over ('auto': every core from 1,024 ranks). */
  threads: number | 'auto';
  json: string | undefined;
}

export const MAX_SIM_RANKS = 65536;

export const SIMULATE_USAGE = `usage: webccl simulate <${ALL_NAMES.join('|')}> [options]

Predicts, without running anything on a network, how long the collective takes on a cluster:
every rank is simulated, running webccl's own schedules, over a model of the links (time
virtual; no bytes are moved).

      --ranks N            ranks in all (default 8)
      --nodes M            nodes the ranks are spread over, N/M each (default N: one rank each)
      --latency T          α between nodes (default 5us): a number with ns, us, ms or s
      --bandwidth R        β of each node's network interface, each way (default 25Gbit):
                           a number with Kbit, Mbit, Gbit, Tbit (or Gbps, Gb/s), or bytes: GB/s, MB/s
      --intra-latency T    α between ranks of one node (default 1us)
      --intra-bandwidth R  β between two ranks of one node (default 400Gbit)
      --overhead T         software cost of each message at its sender, one after another
                           (default 0us; TCP on loopback costs ~50us)
  -a, --algo A             an algorithm, a comma list, or all (default: what webccl would pick);
                           allreduce: ${SIM_ALGORITHMS.allreduce.join(' ')}; the others have one each
  -b, --minbytes SIZE      smallest size (default 8); suffixes K, M, G (powers of 1024)
  -e, --maxbytes SIZE      largest size (default 64M)
  -f, --stepfactor F       multiply the size by F between rows (default 2)
  -i, --stepbytes SIZE     add SIZE between rows when -f is 1 (default 1M)
  -d, --datatype T         ${SIM_DTYPES.join(' ')} (default f32): sets the element size
  -r, --root R             root of broadcast, reduce, gather and scatter (default 0)
      --jitter J           scale each message's latency by 1 + J·u, u uniform in [0,1) (default 0)
      --seed S             seed of the jitter (default 1): the same seed gives the same times
      --threads T          split the simulation over T worker threads, each running whole
                           nodes' ranks (default auto: every core from 1,024 ranks, else 1);
                           the results are the same, message for message
      --json FILE          also write the rows as JSON (size, algorithm, timeUs, ...)
  -h, --help               show this text

busbw follows nccl-tests: allreduce 2(n-1)/n, allgather, reducescatter, alltoall, gather and
scatter (n-1)/n of the total size (all n blocks), broadcast, reduce and sendrecv 1 (sendrecv:
each rank sends to rank+1 and receives from rank-1, at least 2 ranks).`;

const SIM_FLAGS = {
  ranks: { names: ['ranks'] },
  nodes: { names: ['nodes'] },
  latency: { names: ['latency'] },
  bandwidth: { names: ['bandwidth'] },
  intraLatency: { names: ['intra-latency'] },
  intraBandwidth: { names: ['intra-bandwidth'] },
  overhead: { names: ['overhead'] },
  a: { names: ['a', 'algo'] },
  b: { names: ['b', 'minbytes'] },
  e: { names: ['e', 'maxbytes'] },
  f: { names: ['f', 'stepfactor'] },
  i: { names: ['i', 'stepbytes'] },
  d: { names: ['d', 'datatype'] },
  r: { names: ['r', 'root'] },
  seed: { names: ['seed'] },
  jitter: { names: ['jitter'] },
  threads: { names: ['threads'] },
  json: { names: ['json'] },
} as const satisfies Record<string, FlagSpec>;

const TIME_UNITS: Record<string, number> = { ns: 1e-3, us: 1, µs: 1, ms: 1e3, s: 1e6 };

/** "5us" → 5, "100ns" → 0.1, "0.5ms" → 500 (microseconds). */
export function parseLatency(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*(ns|us|µs|ms|s)$/i.exec(text.trim());
  if (!m) throw new SimUsageError(`${flag} expects a time such as 5us, 800ns or 1.5ms, got ${JSON.stringify(text)}`);
  return Number(m[1]) * TIME_UNITS[m[2].toLowerCase() === 'µs' ? 'µs' : m[2].toLowerCase()];
}

const RATE_PREFIX: Record<string, number> = { k: 1e3, m: 1e6, g: 1e9, t: 1e12 };

/** "25Gbit" → 3125 (bytes per µs); bits by "bit", "bps" or "b/s", bytes by "B/s" or "Bps". */
export function parseBandwidth(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kKmMgGtT])(bit|bps|b\/s|B\/s|Bps)$/.exec(text.trim());
  const bad = () =>
    new SimUsageError(`${flag} expects a rate such as 25Gbit, 100Gbps or 12.5GB/s, got ${JSON.stringify(text)}`);
  if (!m) throw bad();
  const perSec = (Number(m[1]) * RATE_PREFIX[m[2].toLowerCase()]) / (m[3].startsWith('B') ? 1 : 8);
  if (!(perSec > 0)) throw bad();
  return perSec / 1e6;
}

function int(text: string, flag: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max)
    throw new SimUsageError(`${flag} expects an integer in ${min}..${max}, got ${JSON.stringify(text)}`);
  return Number(text);
}

const size = (text: string, flag: string): number => {
  try {
    return parseSize(text, flag);
  } catch (e) {
    throw e instanceof PerfUsageError ? new SimUsageError(e.message) : e;
  }
};

/** Parses the arguments after `simulate`; 'help' when -h is among them. Throws SimUsageError. */
export function parseSimulateArgs(argv: string[]): SimulateOptions | 'help' {
  const { given, help, positionals } = parseFlags(argv, SIM_FLAGS, { error: SimUsageError, once: true });
  if (help) return 'help';
  let collective: SimCollectiveName | undefined;
  if (positionals.length) {
    const arg = positionals[0];
    collective = MORE_ALIASES[arg.toLowerCase()] ?? simulated(collectiveNamed(arg));
    if (!collective)
      throw new SimUsageError(`unknown collective ${JSON.stringify(arg)} (expected ${ALL_NAMES.join(', ')})`);
    if (positionals.length > 1)
      throw new SimUsageError(
        `unexpected argument ${JSON.stringify(positionals[1])} (the collective is already ${collective})`,
      );
  }
  if (!collective) throw new SimUsageError('which collective? (e.g. webccl simulate allreduce --ranks 1024)');
  const v = (key: keyof typeof SIM_FLAGS) => given.get(key);
  const ranks = v('ranks') ? int(v('ranks')!.value, '--ranks', 1, MAX_SIM_RANKS) : 8;
  const nodes = v('nodes') ? int(v('nodes')!.value, '--nodes', 1, MAX_SIM_RANKS) : ranks;
  if (collective === 'sendrecv' && ranks < 2)
    throw new SimUsageError('sendrecv needs at least 2 ranks (each sends to rank+1, which must be another rank)');
  if (ranks % nodes)
    throw new SimUsageError(
      `--ranks ${ranks} is not a multiple of --nodes ${nodes}: every node holds --ranks / --nodes ranks`,
    );
  const lat = (key: keyof typeof SIM_FLAGS, flag: string, dflt: number) =>
    v(key) ? parseLatency(v(key)!.value, flag) : dflt;
  const bw = (key: keyof typeof SIM_FLAGS, flag: string, dflt: string) => parseBandwidth(v(key)?.value ?? dflt, flag);
  const minBytes = v('b') ? size(v('b')!.value, '-b') : 8;
  const maxBytes = v('e') ? size(v('e')!.value, '-e') : 64 << 20;
  if (maxBytes < minBytes) throw new SimUsageError(`-e ${maxBytes} is smaller than -b ${minBytes}`);
  const factorText = v('f')?.value ?? '2';
  if (!/^\d+(\.\d+)?$/.test(factorText) || Number(factorText) < 1)
    throw new SimUsageError(`-f expects a number ≥ 1, got ${JSON.stringify(factorText)}`);
  const dtypeText = v('d')?.value ?? 'f32';
  const dtype =
    ({ float: 'f32', double: 'f64', int32: 'i32', int: 'i32' } as Record<string, SimDtype>)[dtypeText] ?? dtypeText;
  if (!(SIM_DTYPES as readonly string[]).includes(dtype))
    throw new SimUsageError(`-d: unknown datatype ${JSON.stringify(dtypeText)} (expected ${SIM_DTYPES.join(', ')})`);
  const jitterText = v('jitter')?.value ?? '0';
  if (!/^\d+(\.\d+)?$/.test(jitterText))
    throw new SimUsageError(`--jitter expects a number ≥ 0, got ${JSON.stringify(jitterText)}`);
  return {
    collective,
    ranks,
    nodes,
    latencyUs: lat('latency', '--latency', 5),
    bytesPerUs: bw('bandwidth', '--bandwidth', '25Gbit'),
    intraLatencyUs: lat('intraLatency', '--intra-latency', 1),
    intraBytesPerUs: bw('intraBandwidth', '--intra-bandwidth', '400Gbit'),
    overheadUs: lat('overhead', '--overhead', 0),
    algos: parseAlgos(collective, v('a')?.value),
    minBytes,
    maxBytes,
    factor: Number(factorText),
    stepBytes: v('i') ? size(v('i')!.value, '-i') : 1 << 20,
    dtype: dtype as SimDtype,
    root: v('r') ? int(v('r')!.value, '-r', 0, ranks - 1) : 0,
    seed: v('seed') ? int(v('seed')!.value, '--seed', 0, 2 ** 32 - 1) : 1,
    jitter: Number(jitterText),
    threads: !v('threads') || v('threads')!.value === 'auto' ? 'auto' : int(v('threads')!.value, '--threads', 1, 256),
    json: v('json')?.value,
  };
}

function parseAlgos(coll: SimCollectiveName, text: string | undefined): string[] {
  const mine = SIM_ALGORITHMS[coll];
  if (text === undefined || text === 'auto') return [];
  if (text === 'all') return [...mine];
  const names = text.split(',');
  for (const a of names) {
    if (!mine.includes(a))
      throw new SimUsageError(
        `-a: ${coll} has no algorithm ${JSON.stringify(a)} (expected auto, all, ${mine.join(', ')})`,
      );
  }
  return [...new Set(names)];
}
