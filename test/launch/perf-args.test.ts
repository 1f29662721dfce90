// `webccl perf` argument parsing: sizes with suffixes, nccl-tests flags, and bad flags refused
// with a clear message and exit code 2 (never a stack trace).
import { describe, expect, it } from 'vitest';
import { formatSize, type PerfOptions, PerfUsageError, parsePerfArgs, parseSize } from '../../src/launch/perf/args.js';
import { describeRun, perfMain } from '../../src/launch/perf/main.js';

const parse = (...argv: string[]) => parsePerfArgs(argv) as PerfOptions;

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } },
    out,
    err,
  };
}

describe('parseSize', () => {
  it.each([
    ['8', 8],
    ['1K', 1024],
    ['1k', 1024],
    ['64M', 64 << 20],
    ['1G', 1 << 30],
    ['2KB', 2048],
    ['4KiB', 4096],
    ['1.5M', 1.5 * (1 << 20)],
    ['512', 512],
    ['16m', 16 << 20],
  ])('%s is %d bytes', (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(['', 'abc', '-8', '8X', '0', 'M', '1 TB'])('refuses %j', (text) => {
    expect(() => parseSize(text, '-b')).toThrow(PerfUsageError);
    expect(() => parseSize(text, '-b')).toThrow(/-b/);
  });

  it('formats sizes for people', () => {
    expect(formatSize(8)).toBe('8 B');
    expect(formatSize(1024)).toBe('1 KiB');
    expect(formatSize(64 << 20)).toBe('64 MiB');
    expect(formatSize(1 << 30)).toBe('1 GiB');
    expect(formatSize(1536)).toBe('1.5 KiB');
  });
});

describe('parsePerfArgs', () => {
  it('has nccl-tests-like defaults', () => {
    const o = parse('allreduce');
    expect(o).toMatchObject({
      collective: 'allreduce',
      minBytes: 8,
      maxBytes: 64 << 20,
      factor: 2,
      iters: undefined,
      warmup: 5,
      check: true,
      dtypes: ['f32'],
      ops: ['sum'],
      root: 0,
      algo: undefined,
      ranks: 2,
      nodes: 1,
      transport: 'shm',
      buffers: 'shm',
    });
  });

  it('--transport tcp: one process per rank unless --nodes says otherwise', () => {
    expect(parse('allreduce', '--transport', 'tcp')).toMatchObject({ transport: 'tcp', ranks: 2, nodes: 2 });
    expect(parse('allreduce', '--transport', 'tcp', '--ranks', '4')).toMatchObject({ ranks: 4, nodes: 4 });
    expect(parse('allreduce', '--transport=tcp', '--ranks', '4', '--nodes', '2')).toMatchObject({ ranks: 4, nodes: 2 });
    expect(parse('allreduce', '--transport', 'tcp', '--ranks', '6', '--nodes=3', '-r', '5')).toMatchObject({
      ranks: 6,
      nodes: 3,
      root: 5,
    });
    expect(parse('allreduce', '--nodes', '1')).toMatchObject({ transport: 'shm', nodes: 1 });
  });

  it('-a takes the shared-memory algorithms with shm and the network ones with tcp', () => {
    expect(parse('allreduce', '-a', 'direct').algo).toBe('direct');
    expect(parse('allreduce', '-a', 'twoshot', '--transport', 'shm').algo).toBe('twoshot');
    for (const a of ['ring', 'doubling', 'hierarchical', 'tree'])
      expect(parse('allreduce', '--transport', 'tcp', '-a', a).algo).toBe(a);
    expect(parse('allreduce', '--transport', 'tcp', '-a', 'auto').algo).toBeUndefined();
  });

  it('the first line names the layout: threads of one process, or processes × threads', () => {
    expect(describeRun(parse('allreduce')).split('\n')[0]).toBe(
      '# webccl perf allreduce: 2 ranks (worker threads), transport shm, buffers shm, algo auto',
    );
    expect(describeRun(parse('allreduce', '--transport', 'tcp', '--ranks', '4', '--nodes', '2')).split('\n')[0]).toBe(
      '# webccl perf allreduce: 4 ranks (2 processes × 2 threads), transport tcp, buffers shm, algo auto',
    );
    expect(describeRun(parse('broadcast', '--transport', 'tcp', '-a', 'ring')).split('\n')[0]).toBe(
      '# webccl perf broadcast: 2 ranks (2 processes × 1 thread), transport tcp, buffers shm, algo ring',
    );
  });

  it('reads every flag, short and long, with separate or = values', () => {
    const o = parse(
      'allreduce',
      '-b',
      '1K',
      '-e',
      '64M',
      '-f',
      '4',
      '-n',
      '10',
      '-w',
      '2',
      '-c',
      '0',
      '-d',
      'bf16',
      '-o',
      'max',
      '-a',
      'twoshot',
      '--ranks',
      '4',
      '--transport',
      'shm',
      '--json',
      'out.json',
      '--plot=chart.svg',
      '--buffers=js',
    );
    expect(o).toMatchObject({
      minBytes: 1024,
      maxBytes: 64 << 20,
      factor: 4,
      iters: 10,
      warmup: 2,
      check: false,
      dtypes: ['bf16'],
      ops: ['max'],
      algo: 'twoshot',
      ranks: 4,
      json: 'out.json',
      plot: 'chart.svg',
      buffers: 'js',
    });
    expect(parse('--minbytes=8', 'reduce', '--maxbytes', '1G', '--root', '1', '--ranks', '2')).toMatchObject({
      collective: 'reduce',
      maxBytes: 1 << 30,
      root: 1,
    });
  });

  it('accepts nccl-tests and torch spellings of collectives and types', () => {
    expect(parse('all_reduce').collective).toBe('allreduce');
    expect(parse('reduce_scatter').collective).toBe('reducescatter');
    expect(parse('bcast').collective).toBe('broadcast');
    expect(parse('allreduce', '-d', 'float,half,bfloat16,double').dtypes).toEqual(['f32', 'f16', 'bf16', 'f64']);
    expect(parse('allreduce', '-d', 'all').dtypes).toHaveLength(9);
    expect(parse('allreduce', '-o', 'all').ops).toEqual(['sum', 'prod', 'max', 'min', 'avg']);
    expect(parse('allreduce', '-n', 'auto', '--time', '0.5')).toMatchObject({ iters: undefined, timeSec: 0.5 });
    expect(parse('allreduce', '--reps', '3').reps).toBe(3);
    expect(parse('allreduce').reps).toBe(1);
  });

  it("knows the new collectives by nccl-tests' and torch's names", () => {
    for (const name of ['alltoall', 'all_to_all', 'all-to-all', 'ALLTOALL'])
      expect(parse(name).collective).toBe('alltoall');
    expect(parse('gather', '-r', '1').collective).toBe('gather');
    expect(parse('scatter').collective).toBe('scatter');
    for (const name of ['sendrecv', 'send_recv']) expect(parse(name).collective).toBe('sendrecv');
    for (const name of ['pingpong', 'ping-pong']) expect(parse(name).collective).toBe('pingpong');
    expect(parse('gather', '--ranks', '4', '-r', '3')).toMatchObject({ root: 3, ranks: 4 });
    expect(parse('alltoall', '-o', 'max').ops).toEqual(['sum']);
  });

  it('--group N: the first N ranks run the collective; the root is a rank of the group', () => {
    expect(parse('allreduce').group).toBeUndefined();
    expect(parse('allreduce', '--ranks', '4', '--group', '2')).toMatchObject({ ranks: 4, group: 2 });
    expect(parse('allreduce', '--ranks', '4', '--group=4').group).toBe(4);
    expect(parse('allreduce', '--ranks', '4', '--group', '1').group).toBe(1);
    expect(parse('scatter', '--ranks', '4', '--group', '3', '-r', '2')).toMatchObject({ group: 3, root: 2 });
    expect(parse('pingpong', '--ranks', '4', '--group', '2')).toMatchObject({ group: 2 });
    expect(parse('allreduce', '--transport', 'tcp', '--ranks', '4', '--nodes', '2', '--group', '3')).toMatchObject({
      nodes: 2,
      group: 3,
    });
  });

  it('the first line names the group and the idle ranks', () => {
    expect(describeRun(parse('allreduce', '--ranks', '4', '--group', '2')).split('\n')[0]).toBe(
      '# webccl perf allreduce: 4 ranks (worker threads), group of 2 (world ranks 0..1; 2..3 idle), transport shm, buffers shm, algo auto',
    );
    expect(
      describeRun(parse('allreduce', '--ranks', '4', '--group', '3', '--transport', 'tcp', '--nodes', '2')).split(
        '\n',
      )[0],
    ).toBe(
      '# webccl perf allreduce: 4 ranks (2 processes × 2 threads), group of 3 (world ranks 0..2; 3 idle), transport tcp, buffers shm, algo auto',
    );
    expect(describeRun(parse('allreduce', '--ranks', '2', '--group', '2')).split('\n')[0]).toMatch(
      /group of 2 \(world ranks 0\.\.1\), transport/,
    );
  });

  it('ignores -o for collectives without a reduction', () => {
    expect(parse('allgather', '-o', 'max').ops).toEqual(['sum']);
  });

  it('drops avg from -o all when every datatype is an integer', () => {
    expect(parse('allreduce', '-d', 'i32', '-o', 'all').ops).toEqual(['sum', 'prod', 'max', 'min']);
  });

  it('answers help', () => {
    expect(parsePerfArgs(['-h'])).toBe('help');
    expect(parsePerfArgs(['allreduce', '--help'])).toBe('help');
  });

  it.each([
    [[], /name a collective/],
    [
      ['alltoallx'],
      /unknown collective "alltoallx" \(expected allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter, sendrecv, pingpong\)/,
    ],
    [['alltoallv'], /unknown collective "alltoallv"/],
    [['allreduce', '--ranks', '4', '--group', '5'], /--group 5 is larger than the world: --ranks 4/],
    [['allreduce', '--group', '3'], /--group 3 is larger than the world: --ranks 2/],
    [['allreduce', '--ranks', '4', '--group', '0'], /--group expects an integer in 1..64, got "0"/],
    [['allreduce', '--ranks', '4', '--group', 'half'], /--group expects an integer in 1..64, got "half"/],
    [['allreduce', '--ranks', '4', '--group', '-1'], /--group expects an integer/],
    [['allreduce', '--ranks', '4', '--group'], /--group needs a value/],
    [
      ['gather', '--ranks', '4', '--group', '2', '-r', '2'],
      /invalid root 2 \(root should be in the 0..1 range, a rank of the --group\)/,
    ],
    [['scatter', '--ranks', '2', '-r', '2'], /invalid root 2 \(root should be in the 0..1 range\)/],
    [['sendrecv', '--ranks', '1'], /sendrecv needs at least 2 ranks .*: give --ranks at least 2/],
    [['sendrecv', '--ranks', '4', '--group', '1'], /sendrecv needs at least 2 ranks .*: give --group at least 2/],
    [['pingpong', '--ranks', '4'], /pingpong runs between exactly 2 ranks, not 4: give --ranks 2/],
    [['pingpong', '--ranks', '4', '--group', '3'], /pingpong runs between exactly 2 ranks, not 3: give --group 2/],
    [['pingpong', '--ranks', '1'], /pingpong runs between exactly 2 ranks, not 1/],
    [['allreduce', 'allgather'], /unexpected argument/],
    [['allreduce', '-x', '1'], /unknown option -x/],
    [['allreduce', '--bogus=1'], /unknown option --bogus/],
    [['allreduce', '-b'], /-b needs a value/],
    [['allreduce', '-b', 'lots'], /-b expects a size/],
    [['allreduce', '-b', '1M', '-e', '1K'], /larger than -e/],
    [['allreduce', '-f', '0'], /-f expects an integer/],
    [['allreduce', '-n', '0'], /-n expects an integer/],
    [['allreduce', '-n', 'many'], /-n expects an integer/],
    [['allreduce', '-w', '-1'], /-w expects an integer/],
    [['allreduce', '-c', '2'], /-c expects an integer in 0..1/],
    [['allreduce', '-d', 'float128'], /unknown datatype "float128"/],
    [['allreduce', '-o', 'xor'], /unknown op "xor"/],
    [['allreduce', '-d', 'i32', '-o', 'avg'], /avg is defined for float/],
    [['allreduce', '-a', 'ring2'], /unknown algorithm "ring2"/],
    [['allreduce', '--ranks', '0'], /--ranks expects an integer in 1..64/],
    [['allreduce', '--ranks', '65'], /--ranks expects an integer in 1..64/],
    [['broadcast', '--ranks', '2', '-r', '2'], /invalid root 2/],
    [['allreduce', '--transport', 'ws', '--ranks', '1'], /--transport ws needs at least 2 ranks/],
    [['allreduce', '--transport', 'ws', '--ranks', '4', '--nodes', '1'], /no byte crosses a WebSocket/],
    [['allreduce', '--transport', 'ws', '-a', 'direct'], /with --transport ws use auto, ring, doubling, hierarchical/],
    [
      ['allreduce', '-a', 'ring'],
      /-a ring is a network algorithm, for --transport tcp; with --transport shm use auto, direct, twoshot/,
    ],
    [['allreduce', '-a', 'hierarchical', '--transport', 'shm'], /-a hierarchical is a network algorithm/],
    [
      ['allreduce', '--transport', 'tcp', '-a', 'direct'],
      /-a direct is a shared-memory algorithm, for --transport shm; with --transport tcp use auto, ring, doubling, hierarchical/,
    ],
    [['allreduce', '--transport', 'tcp', '-a', 'twoshot'], /-a twoshot is a shared-memory algorithm/],
    [
      ['allreduce', '--transport', 'tcp', '-a', 'butterfly'],
      /unknown algorithm "butterfly" \(expected auto, ring, doubling, hierarchical, tree with --transport tcp\)/,
    ],
    [['allreduce', '--transport', 'tcp', '--ranks', '3', '--nodes', '2'], /--ranks 3 is not a multiple of --nodes 2/],
    [['allreduce', '--transport', 'tcp', '--ranks', '4', '--nodes', '8'], /--ranks 4 is not a multiple of --nodes 8/],
    [['allreduce', '--transport', 'tcp', '--ranks', '4', '--nodes', '1'], /needs at least 2 nodes/],
    [['allreduce', '--transport', 'tcp', '--ranks', '1'], /--transport tcp needs at least 2 ranks/],
    [['allreduce', '--transport', 'tcp', '--nodes', '0'], /--nodes expects an integer in 1..64/],
    [['allreduce', '--transport', 'tcp', '--nodes', 'two'], /--nodes expects an integer/],
    [['allreduce', '--nodes', '2'], /--nodes 2 needs --transport tcp/],
    [['allreduce', '--transport', 'carrier-pigeon'], /unknown transport/],
    [['allreduce', '--buffers', 'gpu'], /--buffers expects shm or js/],
    [['allreduce', '--plot', 'chart.png'], /ending in .svg/],
    [['allreduce', '--time', '0'], /--time expects seconds/],
    [['allreduce', '--reps', '0'], /--reps expects an integer in 1..100/],
  ])('refuses %j', (argv, message) => {
    expect(() => parsePerfArgs(argv as string[])).toThrow(PerfUsageError);
    expect(() => parsePerfArgs(argv as string[])).toThrow(message);
  });
});

describe('perfMain exit codes', () => {
  it('bad flags: the message and the usage on stderr, exit code 2, nothing on stdout', async () => {
    const c = capture();
    expect(await perfMain(['allreduce', '-b', 'huge'], { io: c.io })).toBe(2);
    expect(c.out.join('')).toBe('');
    const err = c.err.join('');
    expect(err).toMatch(/^webccl perf: -b expects a size such as 8, 1K, 64M or 1G, got "huge"/);
    expect(err).toMatch(/usage: webccl perf/);
  });

  it('an unknown transport is a usage error too', async () => {
    const c = capture();
    expect(await perfMain(['allreduce', '--transport', 'pigeon'], { io: c.io })).toBe(2);
    expect(c.err.join('')).toMatch(/unknown transport "pigeon"/);
  });

  it('--transport ws: node processes as with tcp (one per rank by default)', () => {
    expect(parsePerfArgs(['allreduce', '--transport', 'ws', '--ranks', '4'])).toMatchObject({
      transport: 'ws',
      nodes: 4,
    });
    expect(
      parsePerfArgs(['allreduce', '--transport', 'ws', '--ranks', '4', '--nodes', '2', '-a', 'ring']),
    ).toMatchObject({ transport: 'ws', nodes: 2, algo: 'ring' });
  });

  it('an algorithm of the other transport is a usage error, before anything starts', async () => {
    const c = capture();
    expect(await perfMain(['allreduce', '--transport', 'tcp', '-a', 'direct'], { io: c.io })).toBe(2);
    expect(c.out.join('')).toBe('');
    expect(c.err.join('')).toMatch(/^webccl perf: -a direct is a shared-memory algorithm/);
  });

  it('a bad --group is a usage error, before anything starts', async () => {
    const c = capture();
    expect(await perfMain(['allreduce', '--ranks', '4', '--group', '8'], { io: c.io })).toBe(2);
    expect(c.out.join('')).toBe('');
    expect(c.err.join('')).toMatch(/^webccl perf: --group 8 is larger than the world: --ranks 4\n/);
  });

  it('help goes to stdout with exit code 0', async () => {
    const c = capture();
    expect(await perfMain(['--help'], { io: c.io })).toBe(0);
    expect(c.out.join('')).toMatch(/-b, --minbytes SIZE/);
    expect(c.out.join('')).toMatch(/--group N/);
    expect(c.out.join('')).toMatch(
      /<allreduce\|allgather\|reducescatter\|broadcast\|reduce\|alltoall\|gather\|scatter\|sendrecv\|pingpong>/,
    );
    expect(c.err.join('')).toBe('');
  });
});
