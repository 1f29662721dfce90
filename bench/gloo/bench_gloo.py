#!/usr/bin/env python3
"""The Gloo side of bench/compare: torch.distributed's gloo backend over TCP loopback, with
the same sweep and timing method as `webccl perf` and bench/mpi/coll_bench.c.

    python3 bench_gloo.py --op allreduce --ranks 2 -b 8 -e 64M -f 4 [-w 5] [-n 0] [-t 0.2] [-c 1] [-r 1]

float32, sum, root 0. torch's collectives work in place (all_reduce, broadcast, reduce);
all_gather fills a list of tensors. Sizes follow nccl-tests (allgather: the whole output;
reducescatter: the whole input), at least one element per rank block.

Timing: warm-up (largest size w calls, smallest 100 + w), then per size 1 untimed call, an
iteration count from the slowest rank's time per call (over max(w,1) calls, then about 20 ms
of calls) so that a timed block lasts -t seconds (5..20000 calls), a barrier and the timed
calls back to back (-r R: R such blocks). time = max over ranks of the mean time per call
(the median over blocks of it, with -r).

With -c 1, rank r fills element i with 1 + (r+i)%4, runs the op once more and counts elements
that differ from the closed form (#wrong, summed over ranks).

Output: one JSON object per line from rank 0; an op that this torch's gloo lacks (e.g.
reduce_scatter in torch 1.13) gives one line with "unsupported".
"""
import argparse
import json
import math
import os
import socket
import statistics
import sys
import time


def parse_size(text):
    units = {'': 1, 'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
    text = text.strip().upper().rstrip('B').rstrip('I')
    unit = text[-1] if text and text[-1] in units else ''
    return int(float(text[:-1] if unit else text) * units[unit])


def shape_of(op, size, n):
    elems = max(1, size // 4)
    per = max(1, elems // n)
    if op in ('allgather', 'reducescatter'):
        return per * n * 4, per
    return elems * 4, elems


BUS_FACTOR = {
    'allreduce': lambda n: 2 * (n - 1) / n,
    'allgather': lambda n: (n - 1) / n,
    'reducescatter': lambda n: (n - 1) / n,
    'broadcast': lambda n: 1.0,
    'reduce': lambda n: 1.0,
}


def worker(rank, args, port):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    n = args.ranks
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=n)

    def value(r, count, offset=0):
        return ((torch.arange(offset, offset + count) + r) % 4 + 1).float()

    def make(op, count):
        """Buffers and a call for one size."""
        if op == 'allreduce':
            t = value(rank, count)
            return (lambda: dist.all_reduce(t)), t, []
        if op == 'broadcast':
            t = value(rank, count)
            return (lambda: dist.broadcast(t, src=0)), t, []
        if op == 'reduce':
            t = value(rank, count)
            return (lambda: dist.reduce(t, dst=0)), t, []
        if op == 'allgather':
            t = value(rank, count)
            outs = [torch.zeros(count) for _ in range(n)]
            return (lambda: dist.all_gather(outs, t)), t, outs
        if op == 'reducescatter':
            out = torch.zeros(count)
            ins = [value(rank, count, j * count) for j in range(n)]
            return (lambda: dist.reduce_scatter(out, ins)), out, ins
        raise ValueError(op)

    def check(op, count):
        call, t, lst = make(op, count)
        dist.barrier()
        call()
        total = sum(value(r, count) for r in range(n))
        if op == 'allreduce':
            wrong = int((t != total).sum())
        elif op == 'broadcast':
            wrong = int((t != value(0, count)).sum())
        elif op == 'reduce':
            wrong = int((t != total).sum()) if rank == 0 else 0
        elif op == 'allgather':
            wrong = sum(int((lst[j] != value(j, count)).sum()) for j in range(n))
        else:
            want = sum(value(r, count, rank * count) for r in range(n))
            wrong = int((t != want).sum())
        w = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(w)
        return int(w.item())

    def agreed_mean_us(call, calls):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        mean = torch.tensor([(time.perf_counter() - t0) * 1e6 / max(calls, 1)], dtype=torch.float64)
        dist.all_reduce(mean, op=dist.ReduceOp.MAX)
        return max(float(mean.item()), 0.01)

    op = args.op
    sizes = []
    s = args.b
    while s <= args.e:
        sizes.append(s)
        s *= args.f
    try:
        call, _, _ = make(op, shape_of(op, sizes[-1], n)[1])
        for _ in range(args.w):
            call()
        call, _, _ = make(op, shape_of(op, sizes[0], n)[1])
        for _ in range(100 + args.w):
            call()
    except RuntimeError as e:
        if rank == 0:
            print(json.dumps({'op': op, 'nranks': n, 'unsupported': str(e).split('\n')[0]}), flush=True)
        dist.destroy_process_group()
        return

    if rank == 0:
        print(f'# bench_gloo {op}: {n} ranks, torch {torch.__version__}, float sum, in place, warmup {args.w}', flush=True)
    for size in sizes:
        nbytes, count = shape_of(op, size, n)
        call, _, _ = make(op, count)
        call()
        iters = args.n
        if iters <= 0:
            rough = agreed_mean_us(call, max(args.w, 1))
            better = agreed_mean_us(call, min(1000, max(1, round(20000 / rough))))
            iters = min(20000, max(5, math.ceil(args.t * 1e6 / better)))
        else:
            for _ in range(args.w):
                call()
        blocks = []
        for _ in range(args.r):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            mean = torch.tensor([(time.perf_counter() - t0) * 1e6 / iters], dtype=torch.float64)
            dist.all_reduce(mean, op=dist.ReduceOp.MAX)
            blocks.append(float(mean.item()))
        worst = statistics.median(blocks)
        wrong = check(op, count) if args.c else -1
        if rank == 0:
            algbw = nbytes / (worst * 1e3)
            print(json.dumps({'op': op, 'nranks': n, 'size': nbytes, 'count': count, 'time_us': worst, 'algbw': algbw,
                              'busbw': algbw * BUS_FACTOR[op](n), 'wrong': wrong, 'iters': iters}), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--op', required=True, choices=sorted(BUS_FACTOR))
    p.add_argument('--ranks', type=int, default=2)
    p.add_argument('-b', type=parse_size, default=8)
    p.add_argument('-e', type=parse_size, default=64 << 20)
    p.add_argument('-f', type=int, default=2)
    p.add_argument('-w', type=int, default=5)
    p.add_argument('-n', type=int, default=0, help='timed iterations (0: auto, a block of -t seconds)')
    p.add_argument('-t', type=float, default=0.2)
    p.add_argument('-c', type=int, default=1)
    p.add_argument('-r', type=int, default=1, help='timed blocks per size; report the median')
    args = p.parse_args()
    if args.f < 2 or args.b < 1 or args.e < args.b or not 1 <= args.r <= 100:
        p.error('need -b >= 1, -e >= -b, -f >= 2 and 1 <= -r <= 100')
    try:
        import torch.multiprocessing as mp
    except ImportError:
        print('bench_gloo: torch is not installed (apt-get install python3-torch)', file=sys.stderr)
        sys.exit(3)
    os.environ.setdefault('GLOO_SOCKET_IFNAME', 'lo')
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    mp.spawn(worker, args=(args, port), nprocs=args.ranks, join=True)


if __name__ == '__main__':
    main()
