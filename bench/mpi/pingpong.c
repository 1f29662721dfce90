/*
 * The MPI side of bench/pingpong.mjs: a blocking MPI_Send / MPI_Recv ping-pong between ranks 0
 * and 1, timed as the webccl side times its send/recv ping-pong.
 *
 *   mpicc -O2 -o pingpong pingpong.c
 *   mpirun -np 2 ./pingpong -b 8 -e 1M -f 8 -n 10000 [-w 200] [-r 3]
 *
 * Per size: -w untimed round trips, then -r blocks of n round trips each (n = -n scaled down
 * for sizes above 8 KiB: n x 8 KiB / size, at least 20); time = the median block's time per
 * round trip / 2 (one-way latency, as OSU's osu_latency reports it).
 * Output from rank 0: one JSON object per line {"bytes","iters","us"}; # lines are comments.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (long)v;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void round_trips(char *buf, long bytes, int iters, int rank) {
  for (int i = 0; i < iters; i++) {
    if (rank == 0) {
      MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
  }
}

int main(int argc, char **argv) {
  long b = 8, e = 1 << 20, f = 8;
  int n = 10000, w = 200, reps = 3;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) b = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) e = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f")) f = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) n = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) w = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
  }
  if (size != 2 || f < 2 || reps < 1 || reps > 64) {
    if (rank == 0) fprintf(stderr, "pingpong: needs exactly 2 ranks, -f >= 2, 1 <= -r <= 64\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char *buf = calloc((size_t)e + 1, 1);
  if (rank == 0) printf("# MPI send/recv ping-pong, one-way latency = round trip / 2\n");
  for (long bytes = b; bytes <= e; bytes *= f) {
    int iters = bytes > 8192 ? (int)((double)n * 8192 / bytes) : n;
    if (iters < 20) iters = 20;
    round_trips(buf, bytes, w, rank);
    double t[64];
    for (int r = 0; r < reps; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      round_trips(buf, bytes, iters, rank);
      t[r] = (MPI_Wtime() - t0) / iters / 2;
    }
    qsort(t, reps, sizeof t[0], cmp);
    if (rank == 0) printf("{\"bytes\":%ld,\"iters\":%d,\"us\":%.4f}\n", bytes, iters, t[reps / 2] * 1e6);
    fflush(stdout);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
