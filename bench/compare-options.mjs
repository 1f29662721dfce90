// The options of bench/compare: the usage text, the collectives `--ops all` names, which rank
// counts each collective runs at, and the parser that checks them before any system runs.

export const USAGE = `usage: node bench/compare.mjs [--ops allreduce|all|a,b] [--ranks 2,4] [-b 8] [-e 64M] [-f 4]
                                [--time 0.2] [--reps 1] [--rounds 1] [--tcp] [--group G] [--quiet 30] [--quiet-wait 120]
                                [--json FILE] [--plot FILE.svg|DIR/]

--rounds K runs the systems of each table K times in turn (webccl, the anchors, webccl, ...) and
keeps each system's fastest run per size: on a shared machine that settles into slow and fast
spells, every system then gets its fast spell.

--tcp also runs webccl with --transport tcp (one process per rank) and Open MPI over TCP
loopback, and prints them with Gloo in a second table per collective.

--group G sets webccl on a group of the first G ranks of each --ranks world (larger than G)
beside webccl on a world of G ranks (ratio = group / world), instead of the anchors.

Before each run it waits (up to --quiet-wait s) until the CPUs are less than --quiet % busy
with other work, and notes how busy they were.`;
export const MPI_OPS = [
  'allreduce',
  'allgather',
  'reducescatter',
  'broadcast',
  'reduce',
  'alltoall',
  'gather',
  'scatter',
  'sendrecv',
  'pingpong',
];
/** Rank counts an op runs at: pingpong is one pair, sendrecv needs a peer. */
export const fits = (op, n) => (op === 'pingpong' ? n === 2 : op === 'sendrecv' ? n >= 2 : true);

/** The options in `argv`; `perf` (dist/node/perf.js) names the collectives and reads sizes. */
export function parseCompareArgs(argv, perf) {
  const o = {
    ops: ['allreduce'],
    ranks: [2, 4],
    b: 8,
    e: 64 << 20,
    f: 4,
    time: 0.2,
    tcp: false,
    group: undefined,
    json: undefined,
    plot: undefined,
    quiet: 30,
    quietWait: 120,
    reps: 1,
    rounds: 1,
  };
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k];
    const v = () => {
      if (argv[k + 1] === undefined) throw new Error(`${a} needs a value`);
      return argv[++k];
    };
    switch (a) {
      case '--ops': {
        const t = v();
        o.ops =
          t === 'all'
            ? MPI_OPS
            : t.split(',').map(
                (x) =>
                  perf.collectiveNamed(x) ??
                  (() => {
                    throw new Error(`unknown collective ${x}`);
                  })(),
              );
        break;
      }
      case '--ranks':
        o.ranks = v().split(',').map(Number);
        break;
      case '-b':
        o.b = perf.parseSize(v(), '-b');
        break;
      case '-e':
        o.e = perf.parseSize(v(), '-e');
        break;
      case '-f':
        o.f = Number(v());
        break;
      case '--time':
        o.time = Number(v());
        break;
      case '--tcp':
        o.tcp = true;
        break;
      case '--group':
        o.group = Number(v());
        break;
      case '--quiet':
        o.quiet = Number(v());
        break;
      case '--reps':
        o.reps = Number(v());
        break;
      case '--rounds':
        o.rounds = Number(v());
        break;
      case '--quiet-wait':
        o.quietWait = Number(v());
        break;
      case '--json':
        o.json = v();
        break;
      case '--plot':
        o.plot = v();
        break;
      case '-h':
      case '--help':
        console.log(USAGE);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${a}`);
    }
  }
  if (!o.ranks.every((n) => Number.isInteger(n) && n >= 1 && n <= 64))
    throw new Error('--ranks expects rank counts in 1..64');
  if (!(o.f >= 2 && Number.isInteger(o.f))) throw new Error('-f expects an integer >= 2');
  if (!(o.time > 0)) throw new Error('--time expects seconds > 0');
  if (!(Number.isInteger(o.reps) && o.reps >= 1 && o.reps <= 100))
    throw new Error('--reps expects an integer in 1..100');
  if (!(Number.isInteger(o.rounds) && o.rounds >= 1 && o.rounds <= 20))
    throw new Error('--rounds expects an integer in 1..20');
  if (o.group !== undefined && !(Number.isInteger(o.group) && o.group >= 1 && o.ranks.some((n) => n > o.group))) {
    throw new Error('--group expects a rank count smaller than one of --ranks');
  }
  if (o.group !== undefined && o.tcp) throw new Error('--group compares shared-memory runs; leave out --tcp');
  return o;
}
