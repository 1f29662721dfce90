/*
 * The native side of bench/sync-floor.mjs: N threads pass B barriers, each thread waiting as
 * the mode says, and the time per barrier is printed as one JSON line.
 *
 *   cc -O2 -pthread -o barrier barrier.c && ./barrier N B MODE
 *
 * MODE futex: spin 1 us, then sleep on the barrier's generation word (FUTEX_WAIT), woken by the
 *             last thread to arrive (FUTEX_WAKE of all): what Atomics.wait/notify do in JS,
 *             without V8's process-wide wait list and its mutex.
 * MODE yield: sched_yield() between looks, never sleeping (Open MPI's progress loop with
 *             mpi_yield_when_idle, which it turns on when ranks outnumber cores).
 * MODE spin:  look again at once.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { SPIN, YIELD, FUTEX };
static _Atomic int arrived, generation;
static int nthreads, barriers, mode;
static double seconds;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pass(void) {
  int g = atomic_load(&generation);
  if (atomic_fetch_add(&arrived, 1) == nthreads - 1) {
    atomic_store(&arrived, 0);
    atomic_fetch_add(&generation, 1);
    if (mode == FUTEX) syscall(SYS_futex, &generation, FUTEX_WAKE_PRIVATE, nthreads, NULL, NULL, 0);
    return;
  }
  double until = now_us() + 1;
  while (atomic_load(&generation) == g) {
    if (mode == YIELD) sched_yield();
    else if (mode == FUTEX && now_us() > until) syscall(SYS_futex, &generation, FUTEX_WAIT_PRIVATE, g, NULL, NULL, 0);
  }
}

static void *run(void *arg) {
  /* warm-up: the threads start apart, and the first barrier would count that wait */
  for (int b = 0; b < (barriers < 2000 ? barriers : 2000); b++) pass();
  double t0 = now_us();
  for (int b = 0; b < barriers; b++) pass();
  if (arg == NULL) seconds = (now_us() - t0) / 1e6;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: barrier THREADS BARRIERS spin|yield|futex\n");
    return 2;
  }
  nthreads = atoi(argv[1]);
  barriers = atoi(argv[2]);
  mode = !strcmp(argv[3], "yield") ? YIELD : !strcmp(argv[3], "futex") ? FUTEX : SPIN;
  if (nthreads < 2 || nthreads > 64 || barriers < 1) return 2;
  pthread_t t[64];
  for (long i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, run, i == 0 ? NULL : (void *)i);
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  printf("{\"threads\":%d,\"mode\":\"%s\",\"us\":%.2f}\n", nthreads, argv[3], seconds * 1e6 / barriers);
  return 0;
}
