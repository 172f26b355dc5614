/* pg_bare.c — see pg_bare.h. */
#include "pg_bare.h"

#include <stdio.h>
#include <time.h>

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Runs `sql`; 0 when the server answered `want`, else -1 (on stderr). */
static int run(PGconn *conn, const char *sql, ExecStatusType want) {
  PGresult *r = PQexec(conn, sql);
  int ok = PQresultStatus(r) == want;
  if (!ok)
    fprintf(stderr, "bare commit: %s: %s", sql, PQresultErrorMessage(r));
  PQclear(r);
  return ok ? 0 : -1;
}

PGconn *pg_bare_open(const char *conninfo, char *err, size_t n) {
  PGconn *conn = PQconnectdb(conninfo);
  if (PQstatus(conn) != CONNECTION_OK) {
    snprintf(err, n, "connect: %s", PQerrorMessage(conn));
    PQfinish(conn);
    return NULL;
  }
  PGresult *r =
      PQexec(conn, "CREATE TABLE bench_commit (id bigint PRIMARY KEY, "
                   "result text)");
  if (PQresultStatus(r) == PGRES_COMMAND_OK) {
    PQclear(r);
    r = PQprepare(conn, "insert",
                  "INSERT INTO bench_commit VALUES ($1, 'step result')", 1,
                  NULL);
  }
  if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    snprintf(err, n, "bench_commit: %s", PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(conn);
    return NULL;
  }
  PQclear(r);
  return conn;
}

int pg_bare_commit(PGconn *conn, long id) {
  char text[24];
  snprintf(text, sizeof text, "%ld", id);
  const char *params[] = {text};
  if (run(conn, "BEGIN", PGRES_COMMAND_OK) != 0)
    return -1;
  PGresult *r = PQexecPrepared(conn, "insert", 1, params, NULL, NULL, 0);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok)
    fprintf(stderr, "bare commit: insert: %s", PQresultErrorMessage(r));
  PQclear(r);
  return ok ? run(conn, "COMMIT", PGRES_COMMAND_OK) : -1;
}

int pg_bare_commit_one_msg(PGconn *conn, long id) {
  char sql[160];
  snprintf(sql, sizeof sql,
           "BEGIN; INSERT INTO bench_commit VALUES (%ld, 'step result'); "
           "COMMIT",
           id);
  return run(conn, sql, PGRES_COMMAND_OK);
}

int pg_bare_time(PGconn *conn, int (*commit)(PGconn *, long), size_t warmup,
                 size_t n, long *next_id, int64_t *us) {
  for (size_t i = 0; i < warmup + n; i++) {
    int64_t t = now_us();
    if (commit(conn, (*next_id)++) != 0)
      return -1;
    if (i >= warmup)
      us[i - warmup] = now_us() - t;
  }
  return 0;
}
