/* pg_fixture.c — see pg_fixture.h. */
#include "pg_fixture.h"

#include <check.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>

void pg_fixture_up(pg_fixture *f) {
  f->cluster.postmaster = -1;
  pg_cluster_start(&f->cluster, f->err, sizeof f->err);
}

void pg_fixture_down(pg_fixture *f) {
  char err[1024];
  if (pg_cluster_stop(&f->cluster, err, sizeof err) != 0)
    fprintf(stderr, "%s: %s\n", f->suite, err);
}

void pg_fixture_database(pg_fixture *f, const char *name, char *conninfo,
                         size_t n) {
  ck_assert_msg(f->cluster.dir[0], "no cluster: %s", f->err);
  pg_create_database(f->cluster.conninfo, name, conninfo, n);
}

void pg_create_database(const char *server, const char *name, char *conninfo,
                        size_t n) {
  PGconn *c = PQconnectdb(server);
  ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
  char sql[160];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  PGresult *r = PQexec(c, sql);
  ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
                PQresultErrorMessage(r));
  PQclear(r);
  PQfinish(c);
  ck_assert_int_lt(snprintf(conninfo, n, "%s dbname=%s", server, name), (int)n);
}

long long pg_query_int(const char *conninfo, const char *sql) {
  PGconn *c = PQconnectdb(conninfo);
  ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
  PGresult *r = PQexec(c, sql);
  ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1,
                "%s: %s", sql, PQresultErrorMessage(r));
  long long v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  PQfinish(c);
  return v;
}
