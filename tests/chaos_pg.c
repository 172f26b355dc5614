/* chaos_pg.c — see chaos_pg.h. */
#include "chaos_pg.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_cluster.h"

static pg_cluster cluster = {.postmaster = -1};

int chaos_pg_start(char *conninfo, size_t n, char *err, size_t err_n) {
  if (pg_cluster_start(&cluster, err, err_n) != 0)
    return -1;
  snprintf(conninfo, n, "%s", cluster.conninfo);
  return 0;
}

void chaos_pg_stop(void) {
  char err[512];
  if (cluster.dir[0] && pg_cluster_stop(&cluster, err, sizeof err) != 0)
    fprintf(stderr, "chaos: %s\n", err);
}

#define ENDED "('complete','errored','terminated')"

/* The single number `sql` selects, or -1 with the reason in `why`. */
static long long count(PGconn *c, const char *sql, char *why, size_t n) {
  PGresult *r = PQexec(c, sql);
  long long v = -1;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
    v = atoll(PQgetvalue(r, 0, 0));
  else
    snprintf(why, n, "%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  return v;
}

static PGconn *connect_to(const char *conninfo, char *why, size_t n) {
  PGconn *c = PQconnectdb(conninfo);
  if (PQstatus(c) != CONNECTION_OK) {
    snprintf(why, n, "connect: %s", PQerrorMessage(c));
    PQfinish(c);
    return NULL;
  }
  return c;
}

int chaos_pg_owners_known(const char *conninfo, char *why, size_t n) {
  PGconn *c = connect_to(conninfo, why, n);
  if (!c)
    return 0;
  long long orphans =
      count(c,
            "SELECT count(*) FROM instances WHERE status NOT IN " ENDED
            " AND owner<>0 AND owner NOT IN (SELECT id FROM hosts)",
            why, n);
  if (orphans > 0)
    snprintf(why, n,
             "%lld unended instance(s) owned by a host id with no hosts row",
             orphans);
  PQfinish(c);
  return orphans == 0;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int chaos_pg_settled(const char *conninfo, int live, int wait_ms, char *why,
                     size_t n) {
  PGconn *c = connect_to(conninfo, why, n);
  if (!c)
    return 0;
  int ok = 0;
  for (int waited = 0;; waited += 200) {
    long long alive =
                  count(c, "SELECT count(*) FROM hosts WHERE NOT dead", why, n),
              dead = count(c, "SELECT count(*) FROM hosts WHERE dead", why, n),
              misplaced = count(
                  c,
                  "SELECT count(*) FROM instances WHERE status NOT IN " ENDED
                  " AND owner NOT IN (SELECT id FROM hosts WHERE NOT dead)",
                  why, n);
    if (alive < 0 || dead < 0 || misplaced < 0)
      break;
    ok = alive == live && dead == 0 && misplaced == 0;
    if (ok)
      break;
    if (waited >= wait_ms) {
      snprintf(why, n,
               "%lld host(s) not dead (want %d), %lld dead host row(s) left, "
               "%lld unended instance(s) not owned by a live host",
               alive, live, dead, misplaced);
      break;
    }
    sleep_ms(200);
  }
  PQfinish(c);
  return ok;
}

int chaos_pg_none_alive(const char *conninfo, char *why, size_t n) {
  PGconn *c = connect_to(conninfo, why, n);
  if (!c)
    return 0;
  long long alive =
      count(c, "SELECT count(*) FROM hosts WHERE NOT dead", why, n);
  if (alive > 0)
    snprintf(why, n, "%lld host(s) not dead after every host stopped", alive);
  PQfinish(c);
  return alive == 0;
}

static void dump_query(PGconn *c, FILE *f, const char *sql) {
  PGresult *r = PQexec(c, sql);
  fprintf(f, "-- %s\n", sql);
  if (PQresultStatus(r) != PGRES_TUPLES_OK)
    fprintf(f, "error: %s", PQerrorMessage(c));
  for (int i = 0; i < PQntuples(r); i++)
    for (int j = 0; j < PQnfields(r); j++)
      fprintf(f, "%s%s", PQgetvalue(r, i, j),
              j + 1 < PQnfields(r) ? "\t" : "\n");
  PQclear(r);
}

void chaos_pg_dump(const char *conninfo, const char *path) {
  char why[512];
  FILE *f = fopen(path, "w");
  PGconn *c = f ? connect_to(conninfo, why, sizeof why) : NULL;
  if (c) {
    dump_query(c, f,
               "SELECT id, name, pid, started, heartbeat, dead FROM hosts "
               "ORDER BY id");
    dump_query(c, f,
               "SELECT id, status, owner, restarts, control FROM instances "
               "ORDER BY id");
    PQfinish(c);
  } else if (f) {
    fprintf(f, "%s\n", why);
  }
  if (f)
    fclose(f);
}
