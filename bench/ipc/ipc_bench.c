/* ipc_bench.c — duro-bench-ipc: what one crossing of a process boundary
 * costs, for the choice of how a worker process that runs plugin code
 * talks to the engine (every new step's result goes to the engine, which
 * commits it and answers before the plugin sees it).
 *
 * A parent (the engine) and a forked child (a worker) play ping-pong: the
 * child sends a request of --size bytes (a step's result), the parent
 * copies it and answers 16 bytes (the commit's acknowledgement).  Two
 * transports:
 *
 *   I1  a SOCK_SEQPACKET socketpair, one message a write, blocking reads;
 *   I2  the same with --batch requests per write (several activations'
 *       steps sent at once), per request;
 *   I3  two single-producer rings in MAP_SHARED memory, the reader spinning
 *       --spin polls before it sleeps on a futex the writer wakes;
 *   I4  the same rings with no spin (a futex sleep as soon as it is empty).
 *
 * For each: the median and p99 round trip in µs, and the CPU both
 * processes spent per round trip (getrusage), since on 2 cores a spinning
 * reader takes CPU from the journal's writer.  Figures, never assertions. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RING_BYTES (1u << 20)
#define ACK_BYTES 16

typedef struct opts {
  int n;     /* round trips */
  int size;  /* request bytes */
  int batch; /* requests per write (I2) */
  int spin;  /* polls before a futex sleep (I3) */
} opts;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double cpu_us(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec +
         ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The child measures (it is the side that waits for the answer, as a
 * worker's fiber waits for its commit); the parent's CPU is read after
 * the child is reaped. */
static void report(const char *name, const char *what, int64_t *rtt, int n,
                   int per, double child_cpu, double parent_cpu) {
  qsort(rtt, (size_t)n, sizeof *rtt, cmp_i64);
  double med = rtt[n / 2] / 1000.0 / per,
         p99 = rtt[n * 99 / 100] / 1000.0 / per;
  double cpu = (child_cpu + parent_cpu) / ((double)n * per);
  printf("%-3s %-44s median %7.2f us  p99 %7.2f us  cpu %6.2f us/rt\n", name,
         what, med, p99, cpu);
}

/* ---- I1, I2: a socketpair ---- */

static void sock_parent(int fd, const opts *o) {
  char *buf = malloc((size_t)o->size * (size_t)o->batch + 64);
  char *copy = malloc((size_t)o->size * (size_t)o->batch + 64);
  char ack[ACK_BYTES * 64] = {0};
  for (;;) {
    ssize_t got = read(fd, buf, (size_t)o->size * (size_t)o->batch + 64);
    if (got <= 0)
      break;
    memcpy(copy, buf, (size_t)got);
    int acks = (int)(got / (o->size ? o->size : 1));
    if (acks < 1)
      acks = 1;
    if (write(fd, ack, (size_t)ACK_BYTES * (size_t)acks) < 0)
      break;
  }
  free(buf);
  free(copy);
}

static void sock_child(int fd, const opts *o, int batch, int64_t *rtt) {
  size_t len = (size_t)o->size * (size_t)batch;
  char *req = calloc(1, len + 1);
  char ack[ACK_BYTES * 64];
  for (int i = 0; i < o->n; i++) {
    int64_t t0 = now_ns();
    if (write(fd, req, len) < 0 || read(fd, ack, sizeof ack) <= 0)
      _exit(1);
    rtt[i] = now_ns() - t0;
  }
  free(req);
}

static void run_sock(const char *name, const opts *o, int batch) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0) {
    perror("socketpair");
    return;
  }
  int64_t *rtt =
      mmap(NULL, sizeof(int64_t) * (size_t)o->n + sizeof(double),
           PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  double *child_cpu = (double *)(rtt + o->n);
  double parent0 = cpu_us(RUSAGE_SELF);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    sock_child(sv[1], o, batch, rtt);
    *child_cpu = cpu_us(RUSAGE_SELF);
    _exit(0);
  }
  close(sv[1]);
  sock_parent(sv[0], o);
  waitpid(pid, NULL, 0);
  close(sv[0]);
  char what[64];
  snprintf(what, sizeof what, "socketpair, %d B, %d per write", o->size, batch);
  report(name, what, rtt, o->n, batch, *child_cpu,
         cpu_us(RUSAGE_SELF) - parent0);
  munmap(rtt, sizeof(int64_t) * (size_t)o->n + sizeof(double));
}

/* ---- I3, I4: rings in shared memory ---- */

typedef struct ring {
  _Atomic uint32_t seq;     /* bumped per message: the futex word */
  _Atomic uint32_t waiting; /* the reader sleeps (the writer must wake it) */
  uint32_t len;
  char data[RING_BYTES];
} ring;

static long futex(_Atomic uint32_t *w, int op, uint32_t v) {
  return syscall(SYS_futex, (uint32_t *)w, op, v, NULL, NULL, 0);
}

static void ring_put(ring *r, const void *p, uint32_t len) {
  memcpy(r->data, p, len);
  r->len = len;
  atomic_fetch_add_explicit(&r->seq, 1, memory_order_release);
  if (atomic_load_explicit(&r->waiting, memory_order_seq_cst))
    futex(&r->seq, FUTEX_WAKE, 1);
}

/* Waits until seq moves past `seen`; returns the new seq. */
static uint32_t ring_wait(ring *r, uint32_t seen, int spin) {
  for (int i = 0; i < spin; i++) {
    uint32_t s = atomic_load_explicit(&r->seq, memory_order_acquire);
    if (s != seen)
      return s;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  for (;;) {
    atomic_store_explicit(&r->waiting, 1, memory_order_seq_cst);
    uint32_t s = atomic_load_explicit(&r->seq, memory_order_acquire);
    if (s != seen) {
      atomic_store_explicit(&r->waiting, 0, memory_order_relaxed);
      return s;
    }
    futex(&r->seq, FUTEX_WAIT, seen);
    atomic_store_explicit(&r->waiting, 0, memory_order_relaxed);
  }
}

static void run_ring(const char *name, const opts *o, int spin) {
  size_t bytes = 2 * sizeof(ring) + sizeof(int64_t) * (size_t)o->n + 8;
  char *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ring *to_engine = (ring *)m, *to_worker = to_engine + 1;
  int64_t *rtt = (int64_t *)(to_worker + 1);
  double *child_cpu = (double *)(rtt + o->n);
  double parent0 = cpu_us(RUSAGE_SELF);
  pid_t pid = fork();
  if (pid == 0) {
    char *req = calloc(1, (size_t)o->size + 1);
    uint32_t seen = 0;
    for (int i = 0; i < o->n; i++) {
      int64_t t0 = now_ns();
      ring_put(to_engine, req, (uint32_t)o->size);
      seen = ring_wait(to_worker, seen, spin);
      rtt[i] = now_ns() - t0;
    }
    ring_put(to_engine, req, 0); /* the end */
    free(req);
    *child_cpu = cpu_us(RUSAGE_SELF);
    _exit(0);
  }
  char *copy = malloc((size_t)o->size + 1);
  char ack[ACK_BYTES] = {0};
  uint32_t seen = 0;
  for (;;) {
    seen = ring_wait(to_engine, seen, spin);
    if (!to_engine->len)
      break;
    memcpy(copy, to_engine->data, to_engine->len);
    ring_put(to_worker, ack, ACK_BYTES);
  }
  free(copy);
  waitpid(pid, NULL, 0);
  char what[64];
  snprintf(what, sizeof what, "shm ring + futex, %d B, spin %d", o->size, spin);
  report(name, what, rtt, o->n, 1, *child_cpu, cpu_us(RUSAGE_SELF) - parent0);
  munmap(m, bytes);
}

int main(int argc, char **argv) {
  opts o = {.n = 100000, .size = 256, .batch = 16, .spin = 2000};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc)
      o.n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc)
      o.size = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
      o.batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin") && i + 1 < argc)
      o.spin = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick"))
      o.n = 2000;
    else {
      fprintf(stderr,
              "usage: duro-bench-ipc [--n N] [--size BYTES] [--batch K] "
              "[--spin POLLS] [--quick]\n");
      return 2;
    }
  }
  if (o.n < 100 || o.size < 1 || o.size > 65536 || o.batch < 1 ||
      o.batch > 64) {
    fprintf(stderr, "duro-bench-ipc: --n >= 100, --size 1..65536, --batch "
                    "1..64\n");
    return 2;
  }
  printf("duro-bench-ipc: %d round trips each (worker -> engine request, "
         "16 B answer)\n",
         o.n);
  run_sock("I1", &o, 1);
  run_sock("I2", &o, o.batch);
  run_ring("I3", &o, o.spin);
  run_ring("I4", &o, 0);
  return 0;
}
