/* pg_fixture.h — a Check suite's throwaway PostgreSQL cluster
 * (pg_cluster.h) and a new database on it for each case.
 *
 * pg_fixture_up() and pg_fixture_down() are for an unchecked fixture, run
 * by Check's runner process, so a case that fails cannot skip the stop;
 * a failed start is reported by the first case that asks for a database. */
#ifndef DURO_TEST_PG_FIXTURE_H
#define DURO_TEST_PG_FIXTURE_H

#include <stddef.h>

#include "pg_cluster.h"

typedef struct pg_fixture {
  const char *suite; /* names the suite in a failed stop's message */
  pg_cluster cluster;
  char err[1024]; /* why the start failed */
} pg_fixture;

void pg_fixture_up(pg_fixture *f);
void pg_fixture_down(pg_fixture *f);

/* Creates the database `name` on f's cluster (asserting) and writes its
 * connection string to `conninfo` (libpq takes the last dbname given). */
void pg_fixture_database(pg_fixture *f, const char *name, char *conninfo,
                         size_t n);

/* The same on the server of the connection string `server`. */
void pg_create_database(const char *server, const char *name, char *conninfo,
                        size_t n);

/* The one integer `sql` returns, read on a connection of its own
 * (asserting one row). */
long long pg_query_int(const char *conninfo, const char *sql);

#endif
