// The command line of `webccl perf`: nccl-tests' flags where they exist (-b -e -f -i -n -w -c
// -d -o -r), -a for the algorithm, and the launcher's own (--ranks, --nodes, --transport, --group,
// --json, --plot).
// Pure: parsing never touches the process, so tests can hit every branch.
import { DTYPES, type Dtype, FLOAT_DTYPES, REDUCE_OPS, type ReduceOp } from '../../core/dtypes.js';
import type { Algo } from '../../core/shm-map.js';
import { NET_ALGORITHMS, type NetAlgo } from '../../tuner/net-tuner.js';
import { ALGORITHMS } from '../../tuner/tuner.js';
import { CliUsageError, type FlagSpec, parseFlags } from '../flags.js';
import { COLLECTIVES, type Collective, collectiveNamed, HAS_OP, ranksNeeded } from './collectives.js';

export class PerfUsageError extends CliUsageError {
  override readonly name = 'PerfUsageError';
}

export const TRANSPORTS_AVAILABLE = ['shm', 'tcp', 'ws'] as const;
const TRANSPORTS_PLANNED: string[] = [];
export type Transport = (typeof TRANSPORTS_AVAILABLE)[number];

/** The allreduce algorithms -a accepts, by transport: one node's, or the network's. */
export const ALGORITHMS_OF: Record<Transport, readonly string[]> = {
  shm: ALGORITHMS,
  tcp: NET_ALGORITHMS,
  ws: NET_ALGORITHMS,
};

export interface PerfOptions {
  collective: Collective;
  minBytes: number;
  maxBytes: number;
  factor: number;
  stepBytes: number;
  /** Timed iterations per row; undefined: chosen per size so a timed block lasts `timeSec`. */
  iters: number | undefined;
  timeSec: number;
  /** Timed blocks per row; the row reports the median (over blocks) of the slowest rank's mean. */
  reps: number;
  warmup: number;
  check: boolean;
  dtypes: Dtype[];
  ops: ReduceOp[];
  root: number;
  algo: Algo | NetAlgo | undefined;
  /** Ranks in all (the world). */
  ranks: number;
  /** --group N: the collective runs on a group of world ranks 0..N−1 (made with createGroup); the others idle. */
  group: number | undefined;
  /** Nodes (processes) the ranks are spread over, ranks / nodes worker threads each; 1 with shm. */
  nodes: number;
  transport: Transport;
  /** 'shm': buffers from comm.alloc() (zero-copy); 'js': ordinary TypedArrays (copied in and out). */
  buffers: 'shm' | 'js';
  json: string | undefined;
  plot: string | undefined;
  /** The chart's busbw axis: linear (default), or log so that small messages' busbw shows. */
  plotY: 'linear' | 'log';
}

export const PERF_USAGE = `usage: webccl perf <${COLLECTIVES.join('|')}> [options]

  -b, --minbytes SIZE      smallest size (default 8); suffixes K, M, G (powers of 1024)
  -e, --maxbytes SIZE      largest size (default 64M)
  -f, --stepfactor F       multiply the size by F between rows (default 2)
  -i, --stepbytes SIZE     add SIZE between rows when -f is 1 (default 1M)
  -n, --iters N|auto       timed iterations per row (default auto: a timed block of about --time s)
      --time SEC           length of a timed block when -n is auto (default 0.2)
      --reps R             timed blocks per row; report the median block (default 1)
  -w, --warmup_iters N     untimed iterations before each timed block (default 5); with -n
                           auto the sweep also warms up for about 2 s at its smallest size
                           (across nodes, 2 s more at its first size over 8 MiB, which the
                           network progress thread runs)
  -c, --check 0|1          check every result against closed-form data: #wrong (default 1)
  -d, --datatype T         ${DTYPES.join(' ')} (or float, double, half, bfloat16, int32, ...), a
                           comma list, or all (default f32)
  -o, --op OP              ${REDUCE_OPS.join(' ')}, a comma list, or all (default sum)
  -r, --root R             root of broadcast, reduce, gather and scatter (default 0; a rank of
                           the --group when one is given)
  -a, --algo A             allreduce algorithm (default auto): ${ALGORITHMS.join(' ')} with shm,
                           ${NET_ALGORITHMS.join(' ')} with tcp and ws
      --ranks N            ranks in all (default 2)
      --group N            run the collective on a group of the first N ranks (world ranks
                           0..N-1, made with createGroup); the other ranks idle until the end;
                           the rows are the group's (busbw with n = N)
      --transport T        shm (default): the ranks are worker threads of one process sharing
                           memory; tcp: they are spread over --nodes processes joined over TCP
                           loopback, ranks/nodes threads sharing memory in each; ws: as tcp,
                           the processes joined over WebSocket (WEBCCL_TRANSPORT=ws)
      --nodes M            with tcp or ws: processes (default: one per rank); --ranks must be a
                           multiple of M
      --buffers shm|js     comm.alloc() buffers used in place (default), or plain TypedArrays
      --json FILE          also write the results as JSON
      --plot FILE.svg      also draw busbw against size, a line per datatype, op and placement
                           (needs the vega and vega-lite packages, checked before the sweep)
      --plot-y linear|log  the chart's busbw axis (default linear; log shows small messages)
  -h, --help               show this text

One-letter flags take their value apart or attached, as in nccl-tests: -b 8 or -b8, -n4.
Time is the slowest rank's mean time per iteration, with a barrier before each timed block.
busbw follows nccl-tests: allreduce 2(n-1)/n, allgather, reducescatter, alltoall, gather and
scatter (n-1)/n of the total size, broadcast, reduce and sendrecv 1. sendrecv: each rank sends
to rank+1 and receives from rank-1 at once. pingpong (2 ranks): rank 0 sends, rank 1 sends it
back; time is half the round trip. alltoall, sendrecv and pingpong have no in-place form (N/A).`;

const UNITS: Record<string, number> = { '': 1, b: 1, k: 1 << 10, m: 1 << 20, g: 1 << 30 };

/** "8" → 8, "1K" → 1024, "64M" → 67108864, "1G" → 1073741824 (also 1KB, 1KiB, 1.5M). */
export function parseSize(text: string, flag = 'size'): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgb]?)(?:i?b)?$/i.exec(text.trim());
  if (!m) throw new PerfUsageError(`${flag} expects a size such as 8, 1K, 64M or 1G, got ${JSON.stringify(text)}`);
  const bytes = Math.floor(Number(m[1]) * UNITS[m[2].toLowerCase()]);
  if (!(bytes >= 1) || !Number.isSafeInteger(bytes))
    throw new PerfUsageError(`${flag} must be at least 1 byte, got ${JSON.stringify(text)}`);
  return bytes;
}

/** Sizes as the table's readers like them: 8 B, 1 KiB, 64 MiB. */
export function formatSize(bytes: number): string {
  for (const [unit, scale] of [
    ['GiB', 1 << 30],
    ['MiB', 1 << 20],
    ['KiB', 1 << 10],
  ] as const) {
    if (bytes >= scale && bytes % scale === 0) return `${bytes / scale} ${unit}`;
  }
  if (bytes >= 1 << 20) return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
  if (bytes >= 1 << 10) return `${(bytes / (1 << 10)).toFixed(1)} KiB`;
  return `${bytes} B`;
}

const DTYPE_ALIASES: Record<string, Dtype> = {
  float: 'f32',
  float32: 'f32',
  double: 'f64',
  float64: 'f64',
  half: 'f16',
  float16: 'f16',
  bfloat16: 'bf16',
  int: 'i32',
  int32: 'i32',
  uint32: 'u32',
  int8: 'i8',
  char: 'i8',
  uint8: 'u8',
  int64: 'i64',
};

function parseDtypes(text: string): Dtype[] {
  if (text === 'all') return [...DTYPES];
  return text.split(',').map((t) => {
    const d = (DTYPES as readonly string[]).includes(t) ? (t as Dtype) : DTYPE_ALIASES[t.toLowerCase()];
    if (!d)
      throw new PerfUsageError(`-d: unknown datatype ${JSON.stringify(t)} (expected ${DTYPES.join(', ')} or all)`);
    return d;
  });
}

function parseOps(text: string): ReduceOp[] {
  if (text === 'all') return [...REDUCE_OPS];
  return text.split(',').map((t) => {
    if (!(REDUCE_OPS as readonly string[]).includes(t))
      throw new PerfUsageError(`-o: unknown op ${JSON.stringify(t)} (expected ${REDUCE_OPS.join(', ')} or all)`);
    return t as ReduceOp;
  });
}

function int(text: string, flag: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new PerfUsageError(
      `${flag} expects an integer in ${min}..${max === Number.MAX_SAFE_INTEGER ? '' : max}, got ${JSON.stringify(text)}`,
    );
  }
  return Number(text);
}

/** perf's flags: nccl-tests' one-letter and long spellings, and the launcher's own. */
const PERF_FLAGS = {
  b: { names: ['b', 'minbytes'] },
  e: { names: ['e', 'maxbytes'] },
  f: { names: ['f', 'stepfactor'] },
  i: { names: ['i', 'stepbytes'] },
  n: { names: ['n', 'iters'] },
  w: { names: ['w', 'warmup_iters', 'warmup'] },
  c: { names: ['c', 'check'] },
  d: { names: ['d', 'datatype', 'dtype'] },
  o: { names: ['o', 'op'] },
  r: { names: ['r', 'root'] },
  a: { names: ['a', 'algo'] },
  ranks: { names: ['ranks'] },
  nodes: { names: ['nodes'] },
  transport: { names: ['transport'] },
  group: { names: ['group'] },
  buffers: { names: ['buffers'] },
  json: { names: ['json'] },
  plot: { names: ['plot'] },
  plotY: { names: ['plot-y'] },
  time: { names: ['time'] },
  reps: { names: ['reps'] },
} as const satisfies Record<string, FlagSpec>;

/** Parses the arguments after `perf`; 'help' when -h is among them. Throws PerfUsageError. */
export function parsePerfArgs(argv: string[]): PerfOptions | 'help' {
  const { given, help, positionals } = parseFlags(argv, PERF_FLAGS, { error: PerfUsageError });
  if (help) return 'help';
  let collective: Collective | undefined;
  if (positionals.length) {
    collective = collectiveNamed(positionals[0]);
    if (!collective)
      throw new PerfUsageError(
        `unknown collective ${JSON.stringify(positionals[0])} (expected ${COLLECTIVES.join(', ')})`,
      );
    if (positionals.length > 1)
      throw new PerfUsageError(
        `unexpected argument ${JSON.stringify(positionals[1])} (the collective is already ${collective})`,
      );
  }
  if (!collective) throw new PerfUsageError(`name a collective (${COLLECTIVES.join(', ')})`);

  const get = (key: keyof typeof PERF_FLAGS) => given.get(key);
  const size = (key: keyof typeof PERF_FLAGS, dflt: number) =>
    get(key) ? parseSize(get(key)!.value, get(key)!.flag) : dflt;
  const num = (key: keyof typeof PERF_FLAGS, dflt: number, min: number, max?: number) =>
    get(key) ? int(get(key)!.value, get(key)!.flag, min, max) : dflt;

  const minBytes = size('b', 8);
  const maxBytes = size('e', 64 << 20);
  if (minBytes > maxBytes) throw new PerfUsageError(`-b ${minBytes} is larger than -e ${maxBytes}`);
  const factor = num('f', 2, 1, 1 << 20);
  const stepBytes = size('i', 1 << 20);
  const nText = get('n')?.value;
  const iters = nText === undefined || nText === 'auto' ? undefined : int(nText, get('n')!.flag, 1);
  let timeSec = 0.2;
  if (get('time')) {
    timeSec = Number(get('time')!.value);
    if (!(timeSec > 0 && timeSec <= 600))
      throw new PerfUsageError(`--time expects seconds in (0, 600], got ${JSON.stringify(get('time')!.value)}`);
  }
  const reps = num('reps', 1, 1, 100);
  const warmup = num('w', 5, 0);
  const check = num('c', 1, 0, 1) === 1;
  const ranks = num('ranks', 2, 1, 64);
  const group = get('group') ? int(get('group')!.value, '--group', 1, 64) : undefined;
  if (group !== undefined && group > ranks)
    throw new PerfUsageError(`--group ${group} is larger than the world: --ranks ${ranks}`);
  const participants = group ?? ranks;
  const root = num('r', 0, 0);
  if (root >= participants) {
    throw new PerfUsageError(
      `-r: invalid root ${root} (root should be in the 0..${participants - 1} range${group === undefined ? '' : ', a rank of the --group'})`,
    );
  }
  const unfit = ranksNeeded(collective, participants);
  if (unfit)
    throw new PerfUsageError(
      `${unfit}: give ${group === undefined ? '--ranks' : '--group'} ${collective === 'pingpong' ? '2' : 'at least 2'}`,
    );

  const dtypes = parseDtypes(get('d')?.value ?? 'f32');
  let ops = HAS_OP[collective] ? parseOps(get('o')?.value ?? 'sum') : (['sum'] as ReduceOp[]);
  if (ops.includes('avg') && dtypes.every((d) => !FLOAT_DTYPES.has(d))) {
    if (get('o')?.value === 'all') ops = ops.filter((o) => o !== 'avg');
    else throw new PerfUsageError(`-o avg is defined for float datatypes only (${dtypes.join(', ')} given)`);
  }

  const transport = get('transport')?.value ?? 'shm';
  if (!(TRANSPORTS_AVAILABLE as readonly string[]).includes(transport)) {
    if (TRANSPORTS_PLANNED.includes(transport)) {
      throw new PerfUsageError(
        `--transport ${transport} is not available yet: this release has ${TRANSPORTS_AVAILABLE.join(', ')} only`,
      );
    }
    throw new PerfUsageError(
      `--transport: unknown transport ${JSON.stringify(transport)} (expected ${TRANSPORTS_AVAILABLE.join(', ')})`,
    );
  }
  const nodes = parseNodes(transport as Transport, ranks, get('nodes'));
  const algo = parseAlgo(transport as Transport, get('a')?.value);
  const buffers = get('buffers')?.value ?? 'shm';
  if (buffers !== 'shm' && buffers !== 'js')
    throw new PerfUsageError(`--buffers expects shm or js, got ${JSON.stringify(buffers)}`);
  const plot = get('plot')?.value;
  if (plot !== undefined && !/\.svg$/i.test(plot))
    throw new PerfUsageError(`--plot writes SVG: give a file name ending in .svg, got ${JSON.stringify(plot)}`);
  const plotY = get('plotY')?.value ?? 'linear';
  if (plotY !== 'linear' && plotY !== 'log')
    throw new PerfUsageError(`--plot-y expects linear or log, got ${JSON.stringify(plotY)}`);
  if (get('plotY') && plot === undefined)
    throw new PerfUsageError('--plot-y sets the axis of the --plot chart: give --plot FILE.svg too');

  return {
    collective,
    minBytes,
    maxBytes,
    factor,
    stepBytes,
    iters,
    timeSec,
    reps,
    warmup,
    check,
    dtypes,
    ops,
    root,
    algo,
    ranks,
    group,
    nodes,
    transport: transport as Transport,
    buffers,
    json: get('json')?.value,
    plot,
    plotY,
  };
}

/** --nodes: with tcp or ws, a divisor of the rank count, at least 2 (default: one node per rank). */
function parseNodes(transport: Transport, ranks: number, given: { flag: string; value: string } | undefined): number {
  if (transport === 'shm') {
    if (given && given.value !== '1')
      throw new PerfUsageError(
        `--nodes ${given.value} needs --transport tcp or ws (with shm every rank is a thread of one process)`,
      );
    return 1;
  }
  const nodes = given ? int(given.value, given.flag, 1, 64) : ranks;
  if (nodes < 2) {
    throw new PerfUsageError(
      given
        ? `--transport ${transport} needs at least 2 nodes: with --nodes 1 every rank shares one process's memory and no byte crosses ${transport === 'ws' ? 'a WebSocket' : 'TCP'} (use --transport shm)`
        : `--transport ${transport} needs at least 2 ranks (one process each by default), got --ranks ${ranks}`,
    );
  }
  if (ranks % nodes) {
    throw new PerfUsageError(
      `--ranks ${ranks} is not a multiple of --nodes ${nodes}: every node runs --ranks / --nodes ranks`,
    );
  }
  return nodes;
}

/** -a: auto, or an allreduce algorithm of the transport (shared-memory names with shm, network names with tcp). */
function parseAlgo(transport: Transport, a: string | undefined): Algo | NetAlgo | undefined {
  if (a === undefined || a === 'auto') return undefined;
  const mine = ALGORITHMS_OF[transport];
  if (mine.includes(a)) return a as Algo | NetAlgo;
  const other = (Object.keys(ALGORITHMS_OF) as Transport[]).find((t) => ALGORITHMS_OF[t].includes(a));
  if (other) {
    throw new PerfUsageError(
      `-a ${a} is a${other === 'shm' ? ' shared-memory' : ' network'} algorithm, for --transport ${other}; with --transport ${transport} use auto, ${mine.join(', ')}`,
    );
  }
  throw new PerfUsageError(
    `-a: unknown algorithm ${JSON.stringify(a)} (expected auto, ${mine.join(', ')} with --transport ${transport})`,
  );
}
