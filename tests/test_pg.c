/* test_pg.c — the throwaway PostgreSQL cluster the tests start themselves
 * (tests/pg/cluster.sh through tests/pg_cluster.h), met through libpq:
 *
 *  - "sql": one cluster for the TCase, started and stopped by an unchecked
 *    fixture (Check's runner process, so a failed case cannot leave it
 *    running): its settings are the durable ones and it is reached over
 *    its Unix socket; a row committed on one connection is invisible to a
 *    second one before the COMMIT and read back by it after; a rolled-back
 *    row is not; a wrong password and an unknown database are refused with
 *    libpq's own words;
 *  - "lifecycle": a stop leaves no postgres process (neither of the "sql"
 *    cluster nor of one started in the case) and no directory, and is safe
 *    twice; the script's start is idempotent on a running cluster; a kill
 *    ends every server process and cuts its clients off but keeps the
 *    directory, and a start after it brings the cluster back with its
 *    committed rows and the same connection string; without
 *    the server packages the start says to install them and leaves
 *    nothing behind. */
#include <check.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pg_cluster.h"
#include "suite_run.h"

#define MAX_PIDS 64

/* ---- the "sql" TCase's cluster, held by Check's runner process ---------- */

static pg_cluster shared = {.postmaster = -1};
static char shared_err[1024];
/* Its processes while it ran, for "lifecycle" to find gone. */
static pid_t shared_pids[MAX_PIDS];
static size_t shared_npids;

static void shared_start(void) {
  if (pg_cluster_start(&shared, shared_err, sizeof shared_err) == 0)
    shared_npids =
        pg_cluster_processes(shared.postmaster, shared_pids, MAX_PIDS);
}

static void shared_stop(void) {
  char err[1024];
  if (pg_cluster_stop(&shared, err, sizeof err) != 0)
    fprintf(stderr, "test_pg: %s\n", err);
}

/* A connection to the shared cluster; fails the case when it cannot. */
static PGconn *connect_shared(void) {
  ck_assert_msg(shared.dir[0], "no cluster: %s", shared_err);
  PGconn *conn = PQconnectdb(shared.conninfo);
  ck_assert_msg(PQstatus(conn) == CONNECTION_OK, "connect: %s",
                PQerrorMessage(conn));
  return conn;
}

/* Runs a command that returns no rows. */
static void exec_ok(PGconn *conn, const char *sql) {
  PGresult *r = PQexec(conn, sql);
  ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
                PQresultErrorMessage(r));
  PQclear(r);
}

/* The one value of a one-row query, malloc'ed (free it); NULL for SQL NULL. */
static char *query_value(PGconn *conn, const char *sql) {
  PGresult *r = PQexec(conn, sql);
  ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
                PQresultErrorMessage(r));
  ck_assert_msg(PQntuples(r) == 1 && PQnfields(r) == 1, "%s: %d rows", sql,
                PQntuples(r));
  char *v = PQgetisnull(r, 0, 0) ? NULL : strdup(PQgetvalue(r, 0, 0));
  PQclear(r);
  return v;
}

static void assert_value(PGconn *conn, const char *sql, const char *want) {
  char *got = query_value(conn, sql);
  ck_assert_msg(got && strcmp(got, want) == 0, "%s: \"%s\", not \"%s\"", sql,
                got ? got : "NULL", want);
  free(got);
}

/* A connection to the shared cluster with one setting replaced; it must
 * be refused.  Returns libpq's message (free it). */
static char *refused_with(const char *key, const char *value) {
  ck_assert_msg(shared.dir[0], "no cluster: %s", shared_err);
  /* The first dbname is expanded as the whole string; later keys win. */
  const char *keys[] = {"dbname", key, NULL};
  const char *values[] = {shared.conninfo, value, NULL};
  PGconn *conn = PQconnectdbParams(keys, values, 1);
  ck_assert_int_eq(PQstatus(conn), CONNECTION_BAD);
  char *msg = strdup(PQerrorMessage(conn));
  PQfinish(conn);
  return msg;
}

START_TEST(settings_are_durable_on_a_unix_socket) {
  PGconn *conn = connect_shared();
  assert_value(conn, "SHOW fsync", "on");
  assert_value(conn, "SHOW synchronous_commit", "on");
  assert_value(conn, "SHOW full_page_writes", "on");
  assert_value(conn, "SHOW listen_addresses", "");
  assert_value(conn, "SELECT current_database()", "duro");
  assert_value(conn, "SELECT current_user", "duro");
  /* No TCP: the server has no address for this connection. */
  char *addr = query_value(conn, "SELECT inet_server_addr()::text");
  ck_assert_msg(addr == NULL, "connected over TCP to %s", addr);
  ck_assert_str_eq(PQhost(conn), shared.dir);
  PQfinish(conn);
}
END_TEST

START_TEST(committed_row_is_read_from_a_second_connection) {
  PGconn *a = connect_shared(), *b = connect_shared();
  exec_ok(a, "CREATE TABLE steps (id int PRIMARY KEY, result text)");
  exec_ok(a, "BEGIN");
  exec_ok(a, "INSERT INTO steps VALUES (1, 'charged')");
  assert_value(b, "SELECT count(*) FROM steps", "0");
  exec_ok(a, "COMMIT");
  assert_value(b, "SELECT result FROM steps WHERE id = 1", "charged");

  exec_ok(a, "BEGIN");
  exec_ok(a, "INSERT INTO steps VALUES (2, 'shipped')");
  exec_ok(a, "ROLLBACK");
  assert_value(b, "SELECT count(*) FROM steps", "1");
  PQfinish(a);
  PQfinish(b);
}
END_TEST

START_TEST(wrong_password_is_refused) {
  char *msg = refused_with("password", "not-the-password");
  ck_assert_msg(strstr(msg, "password authentication failed for user \"duro\""),
                "%s", msg);
  free(msg);
}
END_TEST

START_TEST(unknown_database_is_refused) {
  char *msg = refused_with("dbname", "no_such_db");
  ck_assert_msg(strstr(msg, "database \"no_such_db\" does not exist"), "%s",
                msg);
  free(msg);
}
END_TEST

/* ---- lifecycle ------------------------------------------------------------
 */

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

START_TEST(shared_cluster_left_no_process) {
  ck_assert_msg(shared_npids >= 2, "the sql cluster had %zu processes",
                shared_npids);
  for (size_t i = 0; i < shared_npids; i++)
    ck_assert_msg(!pg_process_alive(shared_pids[i]), "postgres %ld still runs",
                  (long)shared_pids[i]);
}
END_TEST

START_TEST(stop_leaves_no_process_and_no_directory) {
  pg_cluster c;
  char err[1024];
  ck_assert_msg(pg_cluster_start(&c, err, sizeof err) == 0, "%s", err);
  char dir[sizeof c.dir], conninfo[sizeof c.conninfo];
  snprintf(dir, sizeof dir, "%s", c.dir);
  snprintf(conninfo, sizeof conninfo, "%s", c.conninfo);
  pid_t pids[MAX_PIDS];
  size_t n = pg_cluster_processes(c.postmaster, pids, MAX_PIDS);
  /* Stopped before any assertion: a failed one would skip the stop. */
  int stopped = pg_cluster_stop(&c, err, sizeof err);
  ck_assert_msg(stopped == 0, "%s", err);

  ck_assert_msg(n >= 2 && n <= MAX_PIDS, "%zu processes while running", n);
  ck_assert_int_eq(pids[0] > 0, 1);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(!pg_process_alive(pids[i]), "postgres %ld still runs",
                  (long)pids[i]);
  ck_assert_msg(!exists(dir), "%s is still there", dir);
  ck_assert_str_eq(c.dir, "");
  ck_assert_int_eq(pg_cluster_stop(&c, err, sizeof err), 0);

  PGconn *conn = PQconnectdb(conninfo);
  ck_assert_int_eq(PQstatus(conn), CONNECTION_BAD);
  PQfinish(conn);
}
END_TEST

START_TEST(script_start_and_stop_twice) {
  pg_cluster c;
  char err[1024];
  ck_assert_msg(pg_cluster_start(&c, err, sizeof err) == 0, "%s", err);
  char again[sizeof c.conninfo], said[1024];
  int code =
      pg_cluster_script("start", c.dir, again, sizeof again, said, sizeof said);
  pid_t postmaster = c.postmaster;
  size_t n = pg_cluster_processes(postmaster, NULL, 0);
  char dir[sizeof c.dir], first[sizeof c.conninfo];
  snprintf(dir, sizeof dir, "%s", c.dir);
  snprintf(first, sizeof first, "%s", c.conninfo);
  int stopped = pg_cluster_stop(&c, err, sizeof err);
  ck_assert_msg(stopped == 0, "%s", err);

  ck_assert_msg(code == 0, "second start: exit %d: %s", code, said);
  ck_assert_str_eq(again, first);
  ck_assert_msg(n >= 2, "%zu processes after the second start", n);
  ck_assert_int_eq(pg_process_alive(postmaster), 0);
  code = pg_cluster_script("stop", dir, again, sizeof again, said, sizeof said);
  ck_assert_msg(code == 0, "second stop: exit %d: %s", code, said);
}
END_TEST

/* A kill is a crash of the server: its processes are gone and its clients
 * cut off, its directory stays; the start after it brings the same cluster
 * back (same connection string) with what was committed. */
START_TEST(kill_keeps_the_data_for_a_restart) {
  pg_cluster c;
  char err[1024];
  ck_assert_msg(pg_cluster_start(&c, err, sizeof err) == 0, "%s", err);
  PGconn *conn = PQconnectdb(c.conninfo);
  PGresult *r = PQexec(conn, "CREATE TABLE t(x INT); INSERT INTO t VALUES(7)");
  int created = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  pid_t pids[MAX_PIDS];
  size_t n = pg_cluster_processes(c.postmaster, pids, MAX_PIDS);
  char first[sizeof c.conninfo];
  snprintf(first, sizeof first, "%s", c.conninfo);
  int killed = pg_cluster_kill(&c, err, sizeof err);
  size_t alive = 0;
  for (size_t i = 0; i < n && i < MAX_PIDS; i++)
    alive += (size_t)pg_process_alive(pids[i]);
  int dir_kept = exists(c.dir);
  r = PQexec(conn, "SELECT 1");
  int cut_off = PQresultStatus(r) != PGRES_TUPLES_OK;
  PQclear(r);
  PQfinish(conn);
  int restarted = pg_cluster_restart(&c, err, sizeof err);
  char *x = NULL;
  if (restarted == 0) {
    conn = PQconnectdb(c.conninfo);
    r = PQexec(conn, "SELECT x FROM t");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
      x = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(conn);
  }
  int same = !strcmp(c.conninfo, first);
  /* Stopped before any assertion: a failed one would skip the stop. */
  char stop_err[1024];
  int stopped = pg_cluster_stop(&c, stop_err, sizeof stop_err);

  ck_assert_msg(created, "CREATE TABLE failed");
  ck_assert_msg(killed == 0, "%s", err);
  ck_assert_msg(n >= 2 && alive == 0, "%zu of %zu postgres processes left",
                alive, n);
  ck_assert_msg(dir_kept, "the kill removed the directory");
  ck_assert_msg(cut_off, "a client of the killed server still got rows");
  ck_assert_msg(restarted == 0, "%s", err);
  ck_assert_msg(same, "another connection string after the restart");
  ck_assert_msg(x && !strcmp(x, "7"), "after the restart: %s", x ? x : "none");
  free(x);
  ck_assert_msg(stopped == 0, "%s", stop_err);
}
END_TEST

START_TEST(missing_packages_are_named) {
  const char *old_tmp = getenv("TMPDIR");
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%s/duro-pg-missing-XXXXXX",
           old_tmp && *old_tmp ? old_tmp : "/tmp");
  ck_assert_msg(mkdtemp(tmp) != NULL, "mkdtemp: %s", strerror(errno));
  char *saved = old_tmp ? strdup(old_tmp) : NULL;
  setenv("TMPDIR", tmp, 1);
  setenv("DURO_PG_LIB", "/nonexistent/postgresql", 1);
  pg_cluster c;
  char err[1024];
  int rc = pg_cluster_start(&c, err, sizeof err);
  unsetenv("DURO_PG_LIB");
  if (saved)
    setenv("TMPDIR", saved, 1);
  else
    unsetenv("TMPDIR");
  free(saved);
  int left = rmdir(tmp); /* fails when the start left anything in it */

  ck_assert_int_eq(rc, -1);
  ck_assert_msg(strstr(err, "/nonexistent/postgresql/*/bin") &&
                    strstr(err, "install the Debian packages postgresql"),
                "%s", err);
  ck_assert_msg(left == 0, "the failed start left files: %s", strerror(errno));
  ck_assert_str_eq(c.dir, "");
}
END_TEST

static Suite *pg_suite(void) {
  Suite *s = suite_create("pg");
  TCase *tc = tcase_create("sql");
  tcase_add_unchecked_fixture(tc, shared_start, shared_stop);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, settings_are_durable_on_a_unix_socket);
  tcase_add_test(tc, committed_row_is_read_from_a_second_connection);
  tcase_add_test(tc, wrong_password_is_refused);
  tcase_add_test(tc, unknown_database_is_refused);
  suite_add_tcase(s, tc);

  /* After "sql": its fixture has stopped its cluster by now. */
  tc = tcase_create("lifecycle");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, shared_cluster_left_no_process);
  tcase_add_test(tc, stop_leaves_no_process_and_no_directory);
  tcase_add_test(tc, script_start_and_stop_twice);
  tcase_add_test(tc, kill_keeps_the_data_for_a_restart);
  tcase_add_test(tc, missing_packages_are_named);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(pg_suite()); }
