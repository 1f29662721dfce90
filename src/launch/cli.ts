// The `webccl` command.
//   webccl run -n N script.mjs [args...]           N ranks as worker threads of one process
//   webccl run --procs -n N script.mjs [args...]   N ranks as N processes of this machine
//   webccl run --nnodes N --node-rank K ...        this process is node K of a multi-node job
import { resolveJobId, resolveToken } from '../bootstrap/nodejs/job-secrets.js';
import { storeServedFromEnv, takeStoreFd } from '../bootstrap/nodejs/store-handoff.js';
import { DEFAULT_MASTER_PORT } from '../bootstrap/world.js';
import { WebcclError } from '../core/errors.js';
import { mergeTraceFiles } from '../core/nodejs/trace-files.js';
import { CliUsageError, type FlagSpec, parseFlags } from './flags.js';
import { perfMain } from './perf/main.js';
import { startProcesses } from './processes.js';
import { serveMain } from './serve/main.js';
import { simulateMain } from './simulate/main.js';
import { type LaunchOptions, type LaunchResult, startRanks } from './threads.js';
import { tuneMain } from './tune/main.js';
import { packageVersion } from './version.js';

const USAGE = `usage: webccl <command> [options]

commands:
  run [options] script.mjs [args...]   start ranks running script.mjs (run --help)
  perf <collective> [options]          nccl-tests-style sweep: time, algbw, busbw, #wrong (perf --help)
  simulate <collective> [options]      predicted time, algbw, busbw on a simulated cluster of up to
                                       65,536 ranks (simulate --help)
  trace merge OUT PARTS...             merge WEBCCL_TRACE files (the .part files each rank left, or
                                       whole traces) into the one Chrome-trace file OUT
  tune [options]                       fit the tuner's cost model on this machine from perf sweeps
                                       and write it (tune --help)
  serve [DIR] [options]                serve DIR's pages cross-origin isolated, webccl at /webccl.js
                                       (serve --help)
  help, -h, --help                     show this text
  --version                            print the version

Flags take their value apart or attached: -n 4, -n4, --ranks 4, --ranks=4.
Environment variables: see docs/configuration.md (WEBCCL_ALGO, WEBCCL_TIMEOUT_MS, WEBCCL_TOKEN, ...).`;

export const RUN_USAGE = `usage: webccl run [options] script.mjs [args...]

Everything after the script is the script's own: webccl run -n 2 s.mjs -n 5 gives s.mjs "-n 5".

  -n, --nproc-per-node L  ranks this launcher starts, 1..64 (default 1): worker threads sharing
                          one node memory, or processes with --procs (also --nranks)
  --procs                 one OS process per rank; each finds RANK, WORLD_SIZE, LOCAL_RANK,
                          LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, WEBCCL_TOKEN and
                          WEBCCL_JOB_ID in its environment (torchrun's convention)
  --nnodes N              the job spans N nodes, each started by its own launcher (default 1)
  --node-rank K           this launcher's node, 0..N-1 (default 0); its threads are world ranks
                          K*L .. K*L+L-1
  --master-addr A         where world rank 0 serves the rendezvous (default 127.0.0.1)
  --master-port P         its port (default 29500; with --procs, a free port)
  --fault-tolerant        a rank that fails does not end the job: the ops of its peers that need
                          it fail naming it, and they may comm.shrink() and go on (exit 0 when
                          every other rank ends well; the failures are still reported)
  -h, --help              show this text
torchrun's spellings (--nproc_per_node, --node_rank, --master_addr, --master_port) work too.

  webccl run -n 4 train.mjs               4 ranks as threads of one process
  webccl run --procs -n4 train.mjs        4 ranks as 4 processes
  webccl run --nnodes 2 --node-rank 0 --nproc-per-node 4 --master-addr 10.0.0.1 train.mjs
                                          node 0 of 2; run it with --node-rank 1 on the other
                                          machine, both with the same WEBCCL_TOKEN

Any rank's failure ends the job (exit 1, naming the rank); Ctrl-C ends every rank, and no rank
outlives its launcher, however the launcher ends.

WEBCCL_TRACE=trace.json writes a timeline of the job (open it in ui.perfetto.dev): each rank
thread or process leaves trace.json.<pid>-<thread>.part, and run merges them into trace.json when
the job ends. Ranks started by another launcher (torchrun, mpirun) leave their parts: merge them
with  webccl trace merge trace.json trace.json.*.part`;

export class UsageError extends CliUsageError {
  override readonly name = 'UsageError';
}

export interface RunArgs {
  /** Ranks this launcher starts: threads of this process, or processes with --procs. */
  nranks: number;
  script: string;
  args: string[];
  /** One OS process per rank; masterAddr/masterPort only when given. */
  procs?: true;
  /** A failing rank does not end the job (--fault-tolerant). */
  faultTolerant?: true;
  masterAddr?: string;
  masterPort?: number;
  /** Set when the job spans nodes (--nnodes > 1) or a master address or port was given. */
  nodes?: { nnodes: number; nodeRank: number; masterAddr: string; masterPort: number };
}

/** run's flags; torchrun's underscore spellings are folded into these. */
const RUN_FLAGS = {
  nranks: { names: ['n', 'nranks', 'nproc-per-node', 'nproc_per_node'] },
  nnodes: { names: ['nnodes'] },
  nodeRank: { names: ['node-rank', 'node_rank'] },
  masterAddr: { names: ['master-addr', 'master_addr'] },
  masterPort: { names: ['master-port', 'master_port'] },
  procs: { names: ['procs'], switch: true },
  faultTolerant: { names: ['fault-tolerant', 'fault_tolerant'], switch: true },
} as const satisfies Record<string, FlagSpec>;

function integer(flag: string, v: string | undefined, what: string, min: number, max: number): number {
  if (v === undefined || !/^\d{1,9}$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new UsageError(`${flag} needs ${what} in ${min}..${max}, got ${v ?? 'nothing'}`);
  }
  return Number(v);
}

/** The arguments after `run`; 'help' when -h or --help comes before the script. Throws UsageError. */
export function parseRunArgs(argv: string[], env: Record<string, string | undefined> = process.env): RunArgs | 'help' {
  // The first argument that is no flag nor a flag's value is the script; everything after it is the script's.
  const { given, help, positionals, rest } = parseFlags(argv, RUN_FLAGS, { error: UsageError, stopAtPositional: true });
  if (help) return 'help';
  const raw: Partial<Record<keyof typeof RUN_FLAGS, { flag: string; value: string }>> = Object.fromEntries(given);
  const script = positionals[0];
  if (!script) throw new UsageError('run: missing the script to run');
  const procs = !!raw.procs;
  const faultTolerant = !!raw.faultTolerant;

  const nranks = raw.nranks ? integer(raw.nranks.flag, raw.nranks.value, 'a rank count', 1, 64) : 1;
  const nnodes = raw.nnodes ? integer(raw.nnodes.flag, raw.nnodes.value, 'a node count', 1, 1e9) : 1;
  const nodeRank = raw.nodeRank ? integer(raw.nodeRank.flag, raw.nodeRank.value, 'a node rank', 0, 1e9) : 0;
  if (nodeRank >= nnodes)
    throw new UsageError(`--node-rank ${nodeRank} is out of range for --nnodes ${nnodes} (expected 0..${nnodes - 1})`);
  // A launcher of one node of several takes the store's address from MASTER_ADDR and MASTER_PORT
  // when no flag names it, as every rank it starts would (not a launcher of one node: an exported
  // MASTER_ADDR must not turn `webccl run -n 4` into a job over the network).
  const fromEnv = nnodes > 1 && !procs;
  const portArg =
    raw.masterPort ?? (fromEnv && env.MASTER_PORT ? { flag: 'MASTER_PORT', value: env.MASTER_PORT } : undefined);
  const masterPort = portArg && integer(portArg.flag, portArg.value, 'a port', 1, 65535);
  let masterAddr = (raw.masterAddr?.value ?? (fromEnv ? env.MASTER_ADDR || undefined : undefined))?.replace(
    /^\[(.*)\]$/,
    '$1',
  ); // "[::1]" is the address ::1
  if (raw.masterAddr && (!masterAddr || /\s/.test(masterAddr))) {
    throw new UsageError(
      `--master-addr needs a host name or address, got ${JSON.stringify(raw.masterAddr.value ?? 'nothing')}`,
    );
  }
  const base = { nranks, script, args: rest, ...(faultTolerant && { faultTolerant: true as const }) };
  if (procs) {
    if (nnodes > 1) {
      throw new UsageError(
        `--procs starts every rank on this machine and cannot be combined with --nnodes ${nnodes}; start one launcher per node without --procs`,
      );
    }
    return { ...base, procs: true, ...(masterAddr && { masterAddr }), ...(masterPort && { masterPort }) };
  }
  if (nnodes === 1 && !masterAddr && !masterPort) return base;
  masterAddr ??= '127.0.0.1';
  return { ...base, nodes: { nnodes, nodeRank, masterAddr, masterPort: masterPort || DEFAULT_MASTER_PORT } };
}

/**
 * When this launcher was started with an IPC channel (as `webccl perf --transport tcp` starts
 * its nodes), every post of a rank to its parent port goes up that channel as
 * { rank: world rank, msg }.
 */
function forwardTo(firstRank: number): LaunchOptions['onMessage'] {
  return (
    process.send &&
    ((rank, msg) => {
      if (process.connected) process.send!({ rank: firstRank + rank, msg });
    })
  );
}

function startJob(a: RunArgs) {
  const { nranks, script, args, faultTolerant } = a;
  if (a.procs)
    return startProcesses({ nranks, script, args, masterAddr: a.masterAddr, masterPort: a.masterPort, faultTolerant });
  if (!a.nodes) return startRanks({ nranks, script, args, onMessage: forwardTo(0), faultTolerant });
  const { nnodes, nodeRank, masterAddr, masterPort } = a.nodes;
  // Resolved here, before any rank starts, so a missing WEBCCL_TOKEN fails the launcher at once.
  const token = resolveToken(process.env, masterAddr);
  const jobId = resolveJobId(process.env, masterAddr, masterPort);
  // Node 0 of `webccl perf --transport tcp` is handed the store's socket, already listening.
  const storeFd = nodeRank === 0 ? takeStoreFd(process.env) : undefined;
  const storeServed = storeServedFromEnv(process.env);
  const world = {
    firstRank: nodeRank * nranks,
    size: nnodes * nranks,
    masterAddr,
    masterPort,
    token,
    jobId,
    ...(storeFd !== undefined && { storeFd }),
    ...(storeServed && { storeServed }),
  };
  return startRanks({ nranks, script, args, world, onMessage: forwardTo(world.firstRank), faultTolerant });
}

function report(result: LaunchResult): void {
  const f = result.failure;
  if (!f) return;
  if (result.exitCode === 0) {
    for (const t of result.failures)
      process.stderr.write(
        `webccl: rank ${t.rank} failed: ${t.message} (tolerated: --fault-tolerant; the other ranks went on)\n`,
      );
    return;
  }
  const who = f.rank >= 0 ? `rank ${f.rank}` : 'the job';
  process.stderr.write(`webccl: ${who} failed: ${f.message}\n`);
  const others = result.failures
    .slice(1)
    .filter((x) => x.rank >= 0)
    .map((x) => x.rank)
    .sort((a, b) => a - b);
  if (others.length)
    process.stderr.write(`webccl: rank${others.length > 1 ? 's' : ''} ${others.join(', ')} then ended too\n`);
}

async function run(argv: string[], out: NodeJS.WritableStream): Promise<number> {
  const args = parseRunArgs(argv);
  if (args === 'help') {
    out.write(`${RUN_USAGE}\n`);
    return 0;
  }
  const job = startJob(args);
  let interrupted = false;
  // Stays installed after the first signal: a second one must reach the job too (for processes
  // it escalates to SIGKILL), not kill the launcher and leave ranks behind.
  const onSignal = () => {
    if (!interrupted) process.stderr.write('\nwebccl: interrupted; ending all ranks\n');
    interrupted = true;
    job.terminate('interrupted');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // Started with an IPC channel (webccl perf starts its nodes so): when the parent ends, however
  // it ends, the channel closes, and this job must not outlive it.
  const onOrphaned = () => job.terminate('the process that started this launcher ended');
  process.once('disconnect', onOrphaned);
  try {
    const result = await job.done;
    report(result);
    return result.exitCode;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('disconnect', onOrphaned);
  }
}

const TRACE_USAGE = `usage: webccl trace merge OUT PARTS...

Merges WEBCCL_TRACE files (the .part files each rank left, or whole traces) into the one
Chrome-trace file OUT (open it in ui.perfetto.dev); the inputs stay.`;

/** webccl trace merge OUT PARTS...: one file of many; the inputs stay. */
function traceMain(argv: string[]): number {
  const { help, positionals } = parseFlags(argv, {}, { error: UsageError });
  if (help) {
    process.stdout.write(`${TRACE_USAGE}\n`);
    return 0;
  }
  const [sub, out, ...parts] = positionals;
  if (sub !== 'merge')
    throw new UsageError(
      sub === undefined ? 'trace: missing the subcommand (merge)' : `trace: unknown subcommand ${sub} (expected merge)`,
    );
  if (out === undefined) throw new UsageError('trace merge: missing the output file (webccl trace merge OUT PARTS...)');
  if (!parts.length) throw new UsageError('trace merge: no input files (webccl trace merge OUT PARTS...)');
  if (parts.includes(out)) throw new UsageError(`trace merge: the output ${out} is also an input`);
  const n = mergeTraceFiles(out, parts);
  process.stdout.write(`webccl: ${n} events of ${parts.length} file${parts.length > 1 ? 's' : ''} written to ${out}\n`);
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case 'run':
        return await run(rest, process.stdout);
      case 'perf':
        return await perfMain(rest);
      case 'simulate':
        return await simulateMain(rest);
      case 'trace':
        return traceMain(rest);
      case 'tune':
        return await tuneMain(rest);
      case 'serve':
        return await serveMain(rest);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(`${USAGE}\n`);
        return cmd === undefined ? 2 : 0;
      case '--version':
      case '-V':
      case 'version':
        process.stdout.write(`webccl ${packageVersion()}\n`);
        return 0;
      default:
        throw new UsageError(`unknown command ${cmd}`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(
        `webccl: ${e.message}\n${cmd === 'run' ? RUN_USAGE : cmd === 'trace' ? TRACE_USAGE : USAGE}\n`,
      );
      return 2;
    }
    // A job that cannot start as configured (no WEBCCL_TOKEN, an unsafe token file): say why.
    if (WebcclError.is(e)) {
      process.stderr.write(`webccl: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}
