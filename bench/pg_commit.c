/* pg_commit.c — duro-bench-pg: what one bare PostgreSQL commit of one row
 * costs on this machine, the reference a PostgreSQL journal's W2 step
 * latency is compared with (as duro-bench's W2 is with a bare SQLite
 * commit).
 *
 * It starts a throwaway cluster of its own (tests/pg/cluster.sh through
 * tests/pg_cluster.h: a Unix socket, fsync and synchronous_commit on),
 * creates a one-table schema (pg_bare.h, shared with duro-bench's W2 on
 * PostgreSQL), and times N commits (default 2000, after 50
 * untimed ones) of one INSERT each in an explicit transaction, two ways:
 *
 *   PG commit          BEGIN, INSERT (prepared), COMMIT: three round trips,
 *                      as a client that decides between statements does
 *   PG commit, 1 msg   "BEGIN; INSERT ...; COMMIT" in one simple-query
 *                      message: one round trip, the floor
 *
 * each as its mean, p50 and p99 in ms, beside a raw fdatasync of a 4 KiB
 * block in the cluster's directory (under TMPDIR, default /tmp).  The
 * lines are duro-bench's: "NAME value unit [setting]", or --csv. */
#include <fcntl.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pg_bare.h"
#include "pg_cluster.h"

#define WARMUP 50

static int csv;
static char setting[160];

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void report(const char *figure, double value, const char *unit) {
  if (csv)
    printf("%s,%.3f,%s,\"%s\"\n", figure, value, unit, setting);
  else
    printf("%-28s %12.3f %-10s [%s]\n", figure, value, unit, setting);
  fflush(stdout);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Mean, p50 and p99 of `n` durations in µs, reported in ms. */
static void report_spread(const char *name, int64_t *v, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += (double)v[i];
  qsort(v, n, sizeof *v, cmp_i64);
  char fig[64];
  snprintf(fig, sizeof fig, "%s mean", name);
  report(fig, sum / (double)n / 1000.0, "ms");
  snprintf(fig, sizeof fig, "%s p50", name);
  report(fig, (double)v[n / 2] / 1000.0, "ms");
  snprintf(fig, sizeof fig, "%s p99", name);
  report(fig, (double)v[n * 99 / 100] / 1000.0, "ms");
}

/* The one value of a one-row query into `out` ("?" on failure). */
static void value_of(PGconn *conn, const char *sql, char *out, size_t n) {
  PGresult *r = PQexec(conn, sql);
  snprintf(out, n, "%s",
           PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
               ? PQgetvalue(r, 0, 0)
               : "?");
  PQclear(r);
}

/* Times `n` commits of `commit` after WARMUP untimed ones, from row
 * `*next_id` on; reports them under `name`. */
static int measure(PGconn *conn, const char *name,
                   int (*commit)(PGconn *, long), size_t n, long *next_id) {
  int64_t *v = malloc(n * sizeof *v);
  if (!v)
    return -1;
  int rc = pg_bare_time(conn, commit, WARMUP, n, next_id, v);
  if (rc == 0)
    report_spread(name, v, n);
  free(v);
  return rc;
}

/* The median of 200 rewrites + fdatasync of a 4 KiB block in `dir`, in µs. */
static double raw_fdatasync_us(const char *dir) {
  char path[320];
  snprintf(path, sizeof path, "%s/fsync.bin", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return -1;
  char block[4096];
  memset(block, 'x', sizeof block);
  int64_t v[200];
  size_t n = 0;
  for (; n < 200; n++) {
    int64_t t = now_us();
    if (pwrite(fd, block, sizeof block, 0) != (ssize_t)sizeof block ||
        fdatasync(fd) != 0)
      break;
    v[n] = now_us() - t;
  }
  close(fd);
  unlink(path);
  if (n == 0)
    return -1;
  qsort(v, n, sizeof *v, cmp_i64);
  return (double)v[n / 2];
}

static int bench(const pg_cluster *c, size_t commits) {
  char err[1024];
  PGconn *conn = pg_bare_open(c->conninfo, err, sizeof err);
  if (!conn) {
    fprintf(stderr, "duro-bench-pg: %s", err);
    return -1;
  }
  char version[32], fsync[8], sync_commit[16];
  value_of(conn, "SHOW server_version", version, sizeof version);
  version[strcspn(version, " ")] = '\0'; /* "15.18", not the distribution */
  value_of(conn, "SHOW fsync", fsync, sizeof fsync);
  value_of(conn, "SHOW synchronous_commit", sync_commit, sizeof sync_commit);
  snprintf(setting, sizeof setting,
           "PostgreSQL %s fsync=%s synchronous_commit=%s commits=%zu", version,
           fsync, sync_commit, commits);

  long id = 1;
  int ok = measure(conn, "PG commit", pg_bare_commit, commits, &id) == 0 &&
           measure(conn, "PG commit, 1 msg", pg_bare_commit_one_msg, commits,
                   &id) == 0;
  PQfinish(conn);
  /* In the cluster's directory: the filesystem its WAL is on. */
  if (ok)
    report("PG raw fdatasync", raw_fdatasync_us(c->dir) / 1000.0, "ms");
  return ok ? 0 : -1;
}

static int usage(void) {
  fprintf(stderr, "usage: duro-bench-pg [--csv] [--quick] [--commits N]\n");
  return 2;
}

int main(int argc, char **argv) {
  size_t commits = 2000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--csv"))
      csv = 1;
    else if (!strcmp(argv[i], "--quick"))
      commits = 100;
    else if (!strcmp(argv[i], "--commits") && i + 1 < argc &&
             atol(argv[i + 1]) > 0)
      commits = (size_t)atol(argv[++i]);
    else
      return usage();
  }
  pg_cluster c;
  char err[1024];
  if (pg_cluster_start(&c, err, sizeof err) != 0) {
    fprintf(stderr, "duro-bench-pg: %s\n", err);
    return 1;
  }
  if (csv)
    printf("figure,value,unit,setting\n");
  int rc = bench(&c, commits);
  if (pg_cluster_stop(&c, err, sizeof err) != 0) {
    fprintf(stderr, "duro-bench-pg: %s\n", err);
    rc = -1;
  }
  return rc == 0 ? 0 : 1;
}
