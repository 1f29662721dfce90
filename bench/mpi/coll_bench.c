/*
 * The MPI side of bench/compare: the same sweep and the same timing method as `webccl perf`,
 * so that busbw figures sit side by side. float32, sum, out-of-place, root 0.
 *
 *   mpicc -O2 -o coll_bench coll_bench.c
 *   mpirun -np 2 ./coll_bench -o allreduce -b 8 -e 64M -f 4 [-w 5] [-n N | -t 0.2] [-c 1] [-r 1]
 *
 * Sizes (nccl-tests): allreduce, broadcast, reduce: the vector's bytes; allgather: the whole
 * output; reducescatter (MPI_Reduce_scatter_block): the whole input; alltoall (MPI_Alltoall):
 * the whole input (n blocks); gather (MPI_Gather) and scatter (MPI_Scatter): the root's whole
 * buffer (n blocks); sendrecv: the bytes each rank sends to rank+1 while it receives from
 * rank-1 (MPI_Irecv + MPI_Isend + MPI_Waitall, as nccl-tests' sendrecv); pingpong (2 ranks):
 * one message, rank 0 MPI_Send then MPI_Recv, rank 1 the reverse, time = half the round trip
 * (osu_latency's convention). At least one element per rank block, as webccl perf rounds.
 *
 * Timing, for each size: the sweep starts with a warm-up (largest size w calls, smallest
 * 100 + w calls). Per size: 1 untimed call; with -n 0 (auto) the iteration count comes from
 * the slowest rank's time per call (over max(w,1) calls, then over about 20 ms of calls) so
 * that a timed block lasts -t seconds, clamped to 5..20000; then a barrier and the timed calls
 * back to back (-r R: R such blocks). time = max over ranks of the mean time per call (the
 * median over blocks of it, with -r).
 * busbw = size/time x 2(n-1)/n (allreduce), (n-1)/n (allgather, reducescatter, alltoall,
 * gather, scatter), 1 (bcast, reduce, sendrecv, pingpong).
 *
 * With -c 1, rank r fills element i with 1 + (r+i)%4 (small integers: float sums are exact),
 * runs the op once more and counts the elements that differ from the closed form; #wrong is
 * the sum over ranks. The block ops (alltoall, gather, scatter, sendrecv, pingpong) fill the
 * block from rank s to rank d with 1 + (i + s + 11 d) % 127, as webccl perf does, so a block
 * delivered to or taken from the wrong rank counts as wrong.
 *
 * Output: one JSON object per line, from rank 0; lines starting with # are comments.
 */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, REDUCE, ALLTOALL, GATHER, SCATTER, SENDRECV, PINGPONG, NOPS };
static const char *op_names[NOPS] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce",
                                     "alltoall", "gather", "scatter", "sendrecv", "pingpong"};

typedef struct {
  int op;
  long min_bytes, max_bytes, step_factor;
  int warmup, iters, check, reps;
  double target_sec;
} options;

static int rank, nranks;

static long parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  long mult = 1;
  switch (*end) {
    case 'K': case 'k': mult = 1L << 10; break;
    case 'M': case 'm': mult = 1L << 20; break;
    case 'G': case 'g': mult = 1L << 30; break;
    default: break;
  }
  return (long)(v * mult);
}

static void usage(void) {
  if (rank == 0) fprintf(stderr, "usage: coll_bench -o allreduce|allgather|reducescatter|broadcast|reduce|alltoall|gather|scatter|sendrecv|pingpong [-b 8] [-e 64M] [-f 2] [-w 5] [-n 0] [-t 0.2] [-c 1] [-r 1]\n");
  MPI_Finalize();
  exit(2);
}

static void parse_args(int argc, char **argv, options *o) {
  o->op = ALLREDUCE; o->min_bytes = 8; o->max_bytes = 64L << 20; o->step_factor = 2;
  o->warmup = 5; o->iters = 0; o->check = 1; o->target_sec = 0.2; o->reps = 1;
  for (int k = 1; k < argc; k++) {
    if (k + 1 >= argc || argv[k][0] != '-' || strlen(argv[k]) != 2) usage();
    const char *v = argv[++k];
    switch (argv[k - 1][1]) {
      case 'o':
        o->op = -1;
        for (int j = 0; j < NOPS; j++) if (!strcmp(v, op_names[j])) o->op = j;
        if (o->op < 0) usage();
        break;
      case 'b': o->min_bytes = parse_size(v); break;
      case 'e': o->max_bytes = parse_size(v); break;
      case 'f': o->step_factor = atol(v); break;
      case 'w': o->warmup = atoi(v); break;
      case 'n': o->iters = atoi(v); break;
      case 't': o->target_sec = atof(v); break;
      case 'c': o->check = atoi(v); break;
      case 'r': o->reps = atoi(v); break;
      default: usage();
    }
  }
  if (o->min_bytes < 1 || o->max_bytes < o->min_bytes || o->step_factor < 2 || o->reps < 1 || o->reps > 100) usage();
  if ((o->op == SENDRECV && nranks < 2) || (o->op == PINGPONG && nranks != 2)) {
    if (rank == 0) fprintf(stderr, "coll_bench: %s needs %s ranks\n", op_names[o->op], o->op == PINGPONG ? "exactly 2" : "at least 2");
    usage();
  }
}

/* Elements per call: the count argument, and the send / receive buffer lengths. */
typedef struct { long bytes, count, send, recv; } shape;

static shape shape_of(int op, long size) {
  long elems = size / 4 > 0 ? size / 4 : 1;
  long per = elems / nranks > 0 ? elems / nranks : 1;
  shape s = {elems * 4, elems, elems, elems};
  if (op == ALLGATHER) { s.bytes = per * nranks * 4; s.count = per; s.send = per; s.recv = per * nranks; }
  if (op == REDUCESCATTER || op == SCATTER) { s.bytes = per * nranks * 4; s.count = per; s.send = per * nranks; s.recv = per; }
  if (op == GATHER) { s.bytes = per * nranks * 4; s.count = per; s.send = per; s.recv = per * nranks; }
  if (op == ALLTOALL) { s.bytes = per * nranks * 4; s.count = per; s.send = per * nranks; s.recv = per * nranks; }
  return s;
}

static float *sendbuf, *recvbuf;

static void run(int op, const shape *s) {
  switch (op) {
    case ALLREDUCE: MPI_Allreduce(sendbuf, recvbuf, (int)s->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(sendbuf, (int)s->count, MPI_FLOAT, recvbuf, (int)s->count, MPI_FLOAT, MPI_COMM_WORLD); break;
    case REDUCESCATTER: MPI_Reduce_scatter_block(sendbuf, recvbuf, (int)s->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case BROADCAST:
      /* Out-of-place as webccl's broadcast(x, {out}): the root's input lands in every output. */
      if (rank == 0) memcpy(recvbuf, sendbuf, s->count * sizeof(float));
      MPI_Bcast(recvbuf, (int)s->count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case REDUCE: MPI_Reduce(sendbuf, recvbuf, (int)s->count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(sendbuf, (int)s->count, MPI_FLOAT, recvbuf, (int)s->count, MPI_FLOAT, MPI_COMM_WORLD); break;
    case GATHER: MPI_Gather(sendbuf, (int)s->count, MPI_FLOAT, recvbuf, (int)s->count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case SCATTER: MPI_Scatter(sendbuf, (int)s->count, MPI_FLOAT, recvbuf, (int)s->count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case SENDRECV: {
      MPI_Request req[2];
      MPI_Irecv(recvbuf, (int)s->count, MPI_FLOAT, (rank + nranks - 1) % nranks, 0, MPI_COMM_WORLD, &req[0]);
      MPI_Isend(sendbuf, (int)s->count, MPI_FLOAT, (rank + 1) % nranks, 0, MPI_COMM_WORLD, &req[1]);
      MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
      break;
    }
    case PINGPONG:
      if (rank == 0) {
        MPI_Send(sendbuf, (int)s->count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(recvbuf, (int)s->count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(recvbuf, (int)s->count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sendbuf, (int)s->count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
      }
      break;
  }
}

/* The block from rank src to rank dst, element i (webccl perf's blockValue). */
static float block_value(int src, int dst, long i) { return (float)(1 + (i + src + 11L * dst) % 127); }

static int is_block_op(int op) { return op == ALLTOALL || op == GATHER || op == SCATTER || op == SENDRECV || op == PINGPONG; }

/* What this rank sends for a block op (block j of its send buffer goes to `dst_of(j)`). */
static void fill_blocks(int op, const shape *s) {
  for (long i = 0; i < s->send; i++) {
    long j = i / s->count, k = i % s->count;
    int dst = op == ALLTOALL || op == SCATTER ? (int)j : op == GATHER ? 0 : op == SENDRECV ? (rank + 1) % nranks : 1 - rank;
    sendbuf[i] = block_value(rank, dst, k);
  }
}

/* What this rank should hold after a block op, at element i of its receive buffer. */
static float want_block(int op, const shape *s, long i) {
  long j = i / s->count, k = i % s->count;
  switch (op) {
    case ALLTOALL: case GATHER: return block_value((int)j, rank, k);
    case SCATTER: return block_value(0, rank, k);
    case SENDRECV: return block_value((rank + nranks - 1) % nranks, rank, k);
    default: return block_value(1 - rank, rank, k);
  }
}

static float value(int r, long i) { return (float)(1 + (r + i) % 4); }

static float sum_over_ranks(long i) {
  float s = 0;
  for (int r = 0; r < nranks; r++) s += value(r, i);
  return s;
}

static long check(int op, const shape *s) {
  if (is_block_op(op)) fill_blocks(op, s);
  else for (long i = 0; i < s->send; i++) sendbuf[i] = value(rank, i);
  memset(recvbuf, 0, s->recv * sizeof(float));
  MPI_Barrier(MPI_COMM_WORLD);
  run(op, s);
  long wrong = 0;
  for (long i = 0; i < s->recv && ((op != REDUCE && op != GATHER) || rank == 0); i++) {
    float want;
    if (is_block_op(op)) {
      if (recvbuf[i] != want_block(op, s, i)) wrong++;
      continue;
    }
    switch (op) {
      case ALLGATHER: want = value((int)(i / s->count), i % s->count); break;
      case REDUCESCATTER: want = sum_over_ranks(rank * s->count + i); break;
      case BROADCAST: want = value(0, i); break;
      default: want = sum_over_ranks(i);
    }
    if (recvbuf[i] != want) wrong++;
  }
  long total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

/* The slowest rank's mean µs per call over `calls` calls. */
static double agreed_mean_us(int op, const shape *s, long calls) {
  double t0 = MPI_Wtime();
  for (long k = 0; k < calls; k++) run(op, s);
  double mean = (MPI_Wtime() - t0) * 1e6 / (double)(calls > 0 ? calls : 1), worst;
  MPI_Allreduce(&mean, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst > 0.01 ? worst : 0.01;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *xs, int n) {
  qsort(xs, n, sizeof(double), cmp_double);
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

static double bus_factor(int op) {
  if (op == ALLREDUCE) return 2.0 * (nranks - 1) / nranks;
  if (op == ALLGATHER || op == REDUCESCATTER || op == ALLTOALL || op == GATHER || op == SCATTER) return (double)(nranks - 1) / nranks;
  return 1.0;
}

/* Messages one call sends one after the other: a ping-pong's time is per message. */
static int legs(int op) { return op == PINGPONG ? 2 : 1; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  options o;
  parse_args(argc, argv, &o);

  shape biggest = shape_of(o.op, o.max_bytes);
  long cap = biggest.send > biggest.recv ? biggest.send : biggest.recv;
  sendbuf = malloc(cap * sizeof(float));
  recvbuf = malloc(cap * sizeof(float));
  for (long i = 0; i < cap; i++) sendbuf[i] = value(rank, i), recvbuf[i] = 0;

  if (rank == 0) printf("# coll_bench %s: %d ranks, float sum, out-of-place, warmup %d, iters %s\n", op_names[o.op], nranks, o.warmup, o.iters ? "fixed" : "auto");
  shape smallest = shape_of(o.op, o.min_bytes);
  for (int k = 0; k < o.warmup; k++) run(o.op, &biggest);
  for (int k = 0; k < 100 + o.warmup; k++) run(o.op, &smallest);

  for (long size = o.min_bytes; size <= o.max_bytes; size *= o.step_factor) {
    shape s = shape_of(o.op, size);
    run(o.op, &s);
    long iters = o.iters;
    if (iters <= 0) {
      double rough = agreed_mean_us(o.op, &s, o.warmup > 1 ? o.warmup : 1);
      long calls = lround(20000.0 / rough);
      double better = agreed_mean_us(o.op, &s, calls < 1 ? 1 : calls > 1000 ? 1000 : calls);
      iters = (long)ceil(o.target_sec * 1e6 / better);
      iters = iters < 5 ? 5 : iters > 20000 ? 20000 : iters;
    } else {
      for (int k = 0; k < o.warmup; k++) run(o.op, &s);
    }
    double blocks[100];
    for (int rep = 0; rep < o.reps; rep++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (long k = 0; k < iters; k++) run(o.op, &s);
      double mean = (MPI_Wtime() - t0) * 1e6 / (double)iters;
      MPI_Reduce(&mean, &blocks[rep], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    }
    double worst = median(blocks, o.reps) / legs(o.op);
    long wrong = o.check ? check(o.op, &s) : -1;
    if (rank == 0) {
      double algbw = (double)s.bytes / (worst * 1e3);
      printf("{\"op\":\"%s\",\"nranks\":%d,\"size\":%ld,\"count\":%ld,\"time_us\":%.4f,\"algbw\":%.6f,\"busbw\":%.6f,\"wrong\":%ld,\"iters\":%ld}\n",
             op_names[o.op], nranks, s.bytes, s.count, worst, algbw, algbw * bus_factor(o.op), wrong, iters);
      fflush(stdout);
    }
  }
  free(sendbuf);
  free(recvbuf);
  MPI_Finalize();
  return 0;
}
