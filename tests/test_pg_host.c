/* test_pg_host.c — a real `duro run` (DURO_BIN, tests/host_run.h) of the
 * order-flow example (ORDERS_PLUGIN) whose journal is in PostgreSQL
 * (storage.postgresql), on a throwaway cluster (tests/pg_cluster.h) that
 * an unchecked fixture starts once for the run:
 *
 *  - an order created over HTTP runs to its wait for the review, an
 *    approval event completes it, and its rows are in the cluster's
 *    database (none in a SQLite file at storage.path); a restarted host
 *    finds the complete instance there;
 *  - the ready line names PostgreSQL, never the connection string (it
 *    holds a password);
 *  - an unreachable server is an error at start that says why. */
#include <check.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_run.h"
#include "http_client.h"
#include "pg_cluster.h"
#include "proc.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define SETTLE_MS 20000

static pg_cluster cluster = {.postmaster = -1};
static char cluster_err[1024];

static void cluster_start(void) {
  pg_cluster_start(&cluster, cluster_err, sizeof cluster_err);
}

static void cluster_stop(void) {
  char err[1024];
  if (pg_cluster_stop(&cluster, err, sizeof err) != 0)
    fprintf(stderr, "test_pg_host: %s\n", err);
}

/* The order-flow plugin's config, its journal at `conninfo`. */
static void write_config(const host_run *h, const char *conninfo) {
  FILE *f = fopen(h->config, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f,
          "storage:\n"
          "  path: %s/var/duro.db\n"
          "  postgresql: \"%s\"\n"
          "  synchronous: normal\n"
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: { workers: 2 }\n"
          "plugins:\n"
          "  - name: orders\n"
          "    path: %s\n"
          "    workflows:\n"
          "      - { name: order-flow, binding: ORDER_FLOW,"
          " class_name: OrderFlow }\n",
          proc_tmp_dir, conninfo, ORDERS_PLUGIN);
  ck_assert(fclose(f) == 0);
}

static int64_t count_rows(const char *sql) {
  PGconn *c = PQconnectdb(cluster.conninfo);
  ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
  PGresult *r = PQexec(c, sql);
  ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1,
                "%s: %s", sql, PQresultErrorMessage(r));
  int64_t n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  PQfinish(c);
  return n;
}

static void post(const host_run *h, const char *path, const char *body,
                 long status) {
  http_resp r;
  host_request(h, &r, "POST", path, body);
  ck_assert_msg(r.status == status, "POST %s: %ld %s", path, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

START_TEST(order_completes_with_its_journal_in_postgresql) {
  ck_assert_msg(cluster.dir[0], "no cluster: %s", cluster_err);
  host_run H;
  host_init(&H, "pg");
  write_config(&H, cluster.conninfo);
  host_start(&H);
  char *log = proc_slurp(H.log);
  int n = 0;
  char *ready = host_lines_with(log, "ready:", &n);
  assert_contains(ready, "storage PostgreSQL");
  ck_assert_msg(strstr(ready, "password") == NULL, "%s", ready);
  free(ready);
  free(log);

  post(&H, "/workflows/order-flow/instances",
       "{\"id\":\"o1\",\"params\":{\"orderId\":\"o1\",\"email\":"
       "\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
       201);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    json_t *d = host_describe(&H, "order-flow", "o1");
    int waits = step_of(d, "manual review#1") != NULL;
    json_decref(d);
    if (waits)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "o1 never waited for review");
    proc_sleep_ms(20);
  }
  post(&H, "/workflows/order-flow/instances/o1/events/approval",
       "{\"approved\":true}", 202);
  json_t *d = host_wait_status(&H, "order-flow", "o1", "complete",
                               proc_now_ms() + SETTLE_MS);
  json_decref(d);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances WHERE "
                              "id='o1' AND status='complete'"),
                   1);
  ck_assert_int_gt(count_rows("SELECT COUNT(*) FROM steps"), 1);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM events WHERE "
                              "type='approval'"),
                   1);
  host_stop(&H, proc_now_ms() + SETTLE_MS, 0);
  char sqlite_file[400];
  snprintf(sqlite_file, sizeof sqlite_file, "%s/var/duro.db", proc_tmp_dir);
  ck_assert_int_ne(access(sqlite_file, F_OK), 0);

  /* a new host finds it there */
  host_start(&H);
  d = host_describe(&H, "order-flow", "o1");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  json_decref(d);
  host_stop(&H, proc_now_ms() + SETTLE_MS, 0);
}
END_TEST

START_TEST(unreachable_server_is_an_error_at_start) {
  host_run H;
  host_init(&H, "nopg");
  char conninfo[600];
  snprintf(conninfo, sizeof conninfo, "host=%s/nowhere dbname=duro",
           proc_tmp_dir);
  write_config(&H, conninfo);
  pid_t pid = host_spawn(&H, "run");
  proc_live = pid;
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (host_running(pid)) {
    ck_assert_msg(proc_now_ms() < deadline, "duro run did not give up");
    proc_sleep_ms(20);
  }
  proc_live = -1;
  char *log = proc_slurp(H.log);
  assert_contains(log, "cannot connect to PostgreSQL");
  free(log);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pg_host");
  TCase *tc = tcase_create("host");
  tcase_add_unchecked_fixture(tc, cluster_start, cluster_stop);
  proc_fixtures(tc, "duro-pg-host");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, order_completes_with_its_journal_in_postgresql);
  tcase_add_test(tc, unreachable_server_is_an_error_at_start);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
