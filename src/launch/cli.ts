// The `webccl` command.
//   webccl run -n N script.mjs [args...]   N ranks as worker threads of one process
import { startRanks } from './threads.js';
import { perfMain } from './perf/main.js';

const USAGE = `usage: webccl <command> [options]

commands:
  run -n N script.mjs [args...]   start N ranks (worker threads sharing memory) running script.mjs
  perf <collective> [options]     nccl-tests-style sweep: time, algbw, busbw, #wrong (perf --help)
  help                            show this text

Environment variables: see the README (WEBCCL_ALGO, WEBCCL_TIMEOUT_MS, WEBCCL_BUFFSIZE, ...).`;

export class UsageError extends Error {}

export function parseRunArgs(argv: string[]): { nranks: number; script: string; args: string[] } {
  let nranks: number | undefined;
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-n' || a === '--nranks' || a === '--nproc-per-node') {
      const v = argv[++i];
      if (v === undefined || !/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 64) throw new UsageError(`${a} needs a rank count in 1..64, got ${v ?? 'nothing'}`);
      nranks = Number(v);
    } else if (a.startsWith('-')) {
      throw new UsageError(`unknown option ${a}`);
    } else break;
  }
  const script = argv[i];
  if (!script) throw new UsageError('run: missing the script to run');
  return { nranks: nranks ?? 1, script, args: argv.slice(i + 1) };
}

async function run(argv: string[]): Promise<number> {
  const { nranks, script, args } = parseRunArgs(argv);
  const job = startRanks({ nranks, script, args });
  const onSignal = () => {
    process.stderr.write('\nwebccl: interrupted; ending all ranks\n');
    job.terminate('interrupted');
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const result = await job.done;
  if (result.failure) {
    const f = result.failure;
    const who = f.rank >= 0 ? `rank ${f.rank}` : 'the job';
    process.stderr.write(`webccl: ${who} failed: ${f.message}\n`);
    const others = result.failures.slice(1).filter((x) => x.rank >= 0).map((x) => x.rank);
    if (others.length) process.stderr.write(`webccl: rank${others.length > 1 ? 's' : ''} ${others.join(', ')} then ended too\n`);
  }
  return result.exitCode;
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case 'run':
        return await run(rest);
      case 'perf':
        return await perfMain(rest);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(USAGE + '\n');
        return cmd === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command ${cmd}`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`webccl: ${e.message}\n${USAGE}\n`);
      return 2;
    }
    throw e;
  }
}
