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
 *  - at start, a server that cannot be reached is tried again for
 *    storage.connect_timeout, each failure logged: one that comes up
 *    meanwhile is used, one that never does fails the start with libpq's
 *    message; a wrong password fails it at once, naming the user;
 *  - the server killed mid-run (tests/pg_cluster.h's kill and restart, a
 *    cluster of the case's own) under instances of the faults plugin's
 *    many-step workflow (FAULTS_PLUGIN): creates answer 503 with
 *    Retry-After and /healthz is degraded with the storage error while it
 *    is down; once it is back, without a restart of the host, every
 *    acknowledged create completes, no completed step ran again (the
 *    plugin's log outside the journal, plugins/sidelog.h) and /healthz is
 *    ok. */
#include <check.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host_run.h"
#include "http_client.h"
#include "pg_fixture.h"
#include "proc.h"
#include "sidelog_read.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif
#ifndef FAULTS_PLUGIN
#error "build with -DFAULTS_PLUGIN=\"<path of libfaults.so>\""
#endif

#define SETTLE_MS 20000

static pg_fixture pg = {.suite = "test_pg_host"};

static void cluster_start(void) { pg_fixture_up(&pg); }

static void cluster_stop(void) { pg_fixture_down(&pg); }

#define ORDER_FLOW                                                             \
  "  - name: orders\n"                                                         \
  "    path: " ORDERS_PLUGIN "\n"                                              \
  "    workflows:\n"                                                           \
  "      - { name: order-flow, binding: ORDER_FLOW, class_name: OrderFlow }\n"

#define FAULT_FLOW                                                             \
  "  - name: faults\n"                                                         \
  "    path: " FAULTS_PLUGIN "\n"                                              \
  "    workflows:\n"                                                           \
  "      - { name: fault-flow, binding: FAULT_FLOW, class_name: Fault }\n"

/* A config with its journal at `conninfo`, `storage` (indented lines, may
 * be "") added to the storage mapping, `engine` as the engine mapping and
 * `plugins` (ORDER_FLOW, FAULT_FLOW) as the plugins list. */
static void write_config_of(const host_run *h, const char *conninfo,
                            const char *storage, const char *engine,
                            const char *plugins) {
  FILE *f = fopen(h->config, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f,
          "storage:\n"
          "  path: %s/var/duro.db\n"
          "  postgresql: \"%s\"\n"
          "%s"
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: %s\n"
          "plugins:\n"
          "%s",
          proc_tmp_dir, conninfo, storage, engine, plugins);
  ck_assert(fclose(f) == 0);
}

/* The order-flow plugin's config, its journal at `conninfo`. */
static void write_config(const host_run *h, const char *conninfo) {
  write_config_of(h, conninfo, "  synchronous: normal\n", "{ workers: 2 }",
                  ORDER_FLOW);
}

static int64_t count_rows(const char *sql) {
  return pg_query_int(pg.cluster.conninfo, sql);
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
  ck_assert_msg(pg.cluster.dir[0], "no cluster: %s", pg.err);
  host_run H;
  host_init(&H, "pg");
  write_config(&H, pg.cluster.conninfo);
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

/* `duro run` of the config of `h`, which must exit by itself within
 * `within_ms`: its exit status, with *took_ms how long it ran. */
static int run_to_exit(host_run *h, int within_ms, int64_t *took_ms) {
  int64_t start = proc_now_ms();
  pid_t pid = host_spawn(h, "run");
  proc_live = pid;
  int code = proc_wait_exit(pid, start + within_ms);
  ck_assert_msg(code >= 0, "duro run still running after %d ms", within_ms);
  *took_ms = proc_now_ms() - start;
  return code;
}

/* No server ever comes: the start is tried again for
 * storage.connect_timeout, each failure logged, then fails with libpq's
 * message and a status that is not 0. */
START_TEST(unreachable_server_is_an_error_at_start) {
  host_run H;
  host_init(&H, "nopg");
  char conninfo[600];
  snprintf(conninfo, sizeof conninfo, "host=%s/nowhere dbname=duro user=duro",
           proc_tmp_dir);
  write_config_of(&H, conninfo,
                  "  connect_timeout: 2s\n  synchronous: normal\n",
                  "{ workers: 2 }", ORDER_FLOW);
  int64_t took;
  int code = run_to_exit(&H, SETTLE_MS, &took);
  char *log = proc_slurp(H.log);
  ck_assert_msg(code != 0, "exit 0 without a database:\n%s", proc_tail(log));
  ck_assert_msg(took >= 2000 && took < 10000, "gave up after %lld ms",
                (long long)took);
  int n = 0;
  free(host_lines_with(log, "trying again in", &n));
  ck_assert_msg(n >= 3, "%d retries logged:\n%s", n, proc_tail(log));
  assert_contains(log, "cannot connect to PostgreSQL as user \"duro\"");
  assert_contains(log, "No such file or directory");
  assert_contains(log, "(gave up after 2 s: storage.connect_timeout)");
  ck_assert_msg(strstr(log, "ready:") == NULL, "%s", proc_tail(log));
  free(log);
}
END_TEST

/* A wrong password will not mend itself: no retry, whatever
 * storage.connect_timeout (30 s by default), and the message names the
 * user and says what the server said. */
START_TEST(wrong_password_fails_the_start_at_once) {
  ck_assert_msg(pg.cluster.dir[0], "no cluster: %s", pg.err);
  host_run H;
  host_init(&H, "badpw");
  char conninfo[600];
  const char *pw = strstr(pg.cluster.conninfo, "password=");
  ck_assert_ptr_nonnull(pw);
  snprintf(conninfo, sizeof conninfo, "%.*spassword=wrong",
           (int)(pw - pg.cluster.conninfo), pg.cluster.conninfo);
  write_config(&H, conninfo);
  int64_t took;
  int code = run_to_exit(&H, SETTLE_MS, &took);
  char *log = proc_slurp(H.log);
  ck_assert_msg(code != 0, "exit 0 with a wrong password:\n%s", proc_tail(log));
  ck_assert_msg(took < 10000, "gave up after %lld ms", (long long)took);
  assert_contains(log, "cannot connect to PostgreSQL as user \"duro\"");
  assert_contains(log, "password authentication failed for user \"duro\"");
  ck_assert_msg(strstr(log, "trying again") == NULL, "%s", proc_tail(log));
  free(log);
}
END_TEST

/* ---- the server lost and back -------------------------------------------
 * A cluster of the tcase's own (the unchecked fixture's), killed and
 * restarted by its cases: each case first brings it up, so one that failed
 * with it down does not take the next one down too. */

static pg_fixture outage = {.suite = "test_pg_host"};

static void outage_start(void) { pg_fixture_up(&outage); }

static void outage_stop(void) { pg_fixture_down(&outage); }

static void outage_up(void) {
  ck_assert_msg(outage.cluster.dir[0], "no cluster: %s", outage.err);
  char err[1024];
  ck_assert_msg(pg_cluster_restart(&outage.cluster, err, sizeof err) == 0, "%s",
                err);
}

/* A new database `name` on the cluster, and into `out` the connection
 * string for it: each case its own journal, so a host never meets
 * another case's instances. */
static void outage_database(const char *name, char *out, size_t n) {
  pg_fixture_database(&outage, name, out, n);
}

static void outage_kill(void) {
  char err[1024];
  ck_assert_msg(pg_cluster_kill(&outage.cluster, err, sizeof err) == 0, "%s",
                err);
}

/* The host starts while the server is down, and the server comes up 1.5 s
 * later (a child of the case restarts it): the start waits for it, logging
 * each failed try, and the host then serves. */
START_TEST(start_waits_for_a_server_that_comes_up) {
  outage_up();
  char conninfo[600];
  outage_database("late", conninfo, sizeof conninfo);
  outage_kill();
  host_run H;
  host_init(&H, "late");
  write_config(&H, conninfo);
  pid_t helper = fork();
  ck_assert_int_ge(helper, 0);
  if (helper == 0) {
    proc_sleep_ms(1500);
    char err[1024];
    _exit(pg_cluster_restart(&outage.cluster, err, sizeof err) == 0 ? 0 : 1);
  }
  host_start(&H);
  int st;
  ck_assert_int_eq(waitpid(helper, &st, 0), helper);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "restart failed");
  ck_assert_int_ge(host_count_lines(&H, "cannot connect to PostgreSQL"), 1);
  ck_assert_int_ge(host_count_lines(&H, "trying again in"), 1);
  post(&H, "/workflows/order-flow/instances",
       "{\"id\":\"late1\",\"params\":{\"orderId\":\"late1\",\"email\":"
       "\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
       201);
  host_stop(&H, proc_now_ms() + SETTLE_MS, 0);
}
END_TEST

/* The server restarted (killed, started again) while the host was idle:
 * the first requests after it, each a read on a pool thread's connection
 * or a write on the writer's, all of them cut off by the restart, are
 * answered as if nothing had happened: the connections are made again
 * and the statement run once more. */
START_TEST(server_restart_while_idle_costs_no_request) {
  outage_up();
  char conninfo[600];
  outage_database("idle", conninfo, sizeof conninfo);
  host_run H;
  host_init(&H, "idle");
  /* full: with normal (synchronous_commit=off) the server's crash may
   * take the last commits with it, the journal's tables included. */
  write_config_of(&H, conninfo, "  synchronous: full\n", "{ workers: 2 }",
                  ORDER_FLOW);
  host_start(&H);
  post(&H, "/workflows/order-flow/instances", "{\"id\":\"idle0\"}", 201);
  /* reads from every thread of the HTTP pool, so each has a connection */
  for (int i = 0; i < 64; i++) {
    http_resp r;
    host_request(&H, &r, "GET", "/workflows/order-flow/instances/idle0", NULL);
    ck_assert_msg(r.status == 200, "GET: %ld %s", r.status, r.body);
    http_resp_free(&r);
  }
  outage_kill();
  outage_up();
  for (int i = 0; i < 64; i++) {
    http_resp r;
    host_request(&H, &r, "GET", "/workflows/order-flow/instances/idle0", NULL);
    ck_assert_msg(r.status == 200, "GET %d after the restart: %ld %s", i,
                  r.status, r.body);
    http_resp_free(&r);
  }
  post(&H, "/workflows/order-flow/instances", "{\"id\":\"idle1\"}", 201);
  host_stop(&H, proc_now_ms() + SETTLE_MS, 0);
}
END_TEST

/* ---- the faults plugin's log (plugins/sidelog.h) */

#define MID_INSTANCES 16
#define MID_STEPS 40
#define MAX_ACKED 64

static const char *faults_log(void) {
  static char path[400];
  snprintf(path, sizeof path, "%s/faults.log", proc_tmp_dir);
  return path;
}

static size_t count_kind(const char *kind) {
  return sidelog_steps(faults_log(), kind);
}

static void assert_no_rerun(void) { sidelog_assert_no_rerun(faults_log()); }

/* POST of instance `id` of fault-flow (MID_STEPS steps): the status, and
 * the reply in `r` (caller's). */
static long create_fault_flow(const host_run *h, const char *id, http_resp *r) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%.31s\",\"params\":{\"fault\":\"none\",\"steps\":%d,"
           "\"hold_ms\":5}}",
           id, MID_STEPS);
  host_request(h, r, "POST", "/workflows/fault-flow/instances", body);
  return r->status;
}

/* /healthz until its "status" is `want`, by `deadline`; the last reply's
 * JSON (caller's). */
static json_t *wait_health(const host_run *h, const char *want,
                           int64_t deadline) {
  for (;;) {
    http_resp r;
    host_request(h, &r, "GET", "/healthz", NULL);
    ck_assert_msg(r.status == 200, "/healthz: %ld %s", r.status, r.body);
    if (!strcmp(jstr(r.json, "status"), want)) {
      json_t *j = json_incref(r.json);
      http_resp_free(&r);
      return j;
    }
    ck_assert_msg(proc_now_ms() < deadline, "/healthz not %s: %s", want,
                  r.body);
    http_resp_free(&r);
    proc_sleep_ms(20);
  }
}

/* The server killed under running instances: writes are refused (503,
 * Retry-After) and /healthz says why while it is down; once it is back,
 * the same host (no engine restart) completes every acknowledged create,
 * runs no completed step again and is healthy. */
START_TEST(server_lost_mid_run_loses_nothing) {
  outage_up();
  char conninfo[600];
  outage_database("midrun", conninfo, sizeof conninfo);
  host_run H;
  host_init(&H, "midrun");
  host_setenv(&H, "DURO_FAULTS_LOG", faults_log());
  /* full: a step whose commit returned is on disk before run() sees its
   * result (normal, synchronous_commit=off, may lose the last ones to a
   * server crash, and the steps would rightly run again). */
  write_config_of(&H, conninfo, "  synchronous: full\n", "{ workers: 4 }",
                  FAULT_FLOW);
  host_start(&H);
  char acked[MAX_ACKED][16];
  int n_acked = 0;
  http_resp r;
  for (int i = 0; i < MID_INSTANCES; i++) {
    snprintf(acked[n_acked], sizeof acked[0], "m%d", i);
    ck_assert_int_eq(create_fault_flow(&H, acked[n_acked++], &r), 201);
    http_resp_free(&r);
  }
  /* mid-run: some steps done, most to come */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (count_kind("seen") < 20) {
    ck_assert_msg(proc_now_ms() < deadline, "no steps ran");
    proc_sleep_ms(5);
  }
  outage_kill();
  size_t seen_at_kill = count_kind("seen");
  ck_assert_msg(seen_at_kill < MID_INSTANCES * MID_STEPS,
                "every step had run before the kill");

  /* Down: creates refused with Retry-After (one that raced the kill may
   * have gone through), /healthz degraded with the storage error. */
  int refused = 0;
  for (int i = 0; refused < 3; i++) {
    ck_assert_msg(i < 50, "creates still accepted with the server down");
    char id[16];
    snprintf(id, sizeof id, "down%d", i);
    long status = create_fault_flow(&H, id, &r);
    if (status == 201) {
      snprintf(acked[n_acked++], sizeof acked[0], "%s", id);
    } else {
      char retry[16];
      ck_assert_msg(status == 503 &&
                        !strcmp(jstr(r.json, "error.code"), "storage.error"),
                    "create while down: %ld %s", status, r.body);
      ck_assert_msg(http_resp_header(&r, "retry-after", retry, sizeof retry) &&
                        !strcmp(retry, "1"),
                    "no \"Retry-After: 1\" in:\n%s", r.headers);
      refused++;
    }
    http_resp_free(&r);
  }
  json_t *health = wait_health(&H, "degraded", proc_now_ms() + SETTLE_MS);
  ck_assert_str_eq(jstr(health, "storage.status"), "writes failing");
  char *said = jdump(health);
  ck_assert_msg(strstr(jstr(health, "storage.error"), "PostgreSQL") ||
                    strstr(jstr(health, "storage.error"), "server"),
                "storage error: %s", said);
  free(said);
  json_decref(health);
  proc_sleep_ms(1500); /* activations fail and back off meanwhile */

  /* Back: the same host takes creates again and finishes everything. */
  outage_up();
  deadline = proc_now_ms() + SETTLE_MS;
  for (int i = 0; i < 4; i++) {
    char id[16];
    snprintf(id, sizeof id, "back%d", i);
    long status;
    while ((status = create_fault_flow(&H, id, &r)) == 503) {
      ck_assert_msg(proc_now_ms() < deadline, "creates still refused");
      http_resp_free(&r);
      proc_sleep_ms(50);
    }
    ck_assert_msg(status == 201, "create after the server came back: %ld %s",
                  status, r.body);
    http_resp_free(&r);
    snprintf(acked[n_acked++], sizeof acked[0], "%s", id);
  }
  for (int i = 0; i < n_acked; i++)
    json_decref(host_wait_status(&H, "fault-flow", acked[i], "complete",
                                 proc_now_ms() + SETTLE_MS));
  json_decref(wait_health(&H, "ok", proc_now_ms() + SETTLE_MS));
  assert_no_rerun();
  ck_assert_int_eq(count_kind("seen"), (size_t)n_acked * MID_STEPS);
  /* the outage did cut activations short: they ran again from the journal */
  ck_assert_int_ge(host_count_lines(&H, "journal commit failed"), 1);
  ck_assert_int_eq(host_count_lines(&H, "engine started"), 1);
  ck_assert_int_ge(host_count_lines(&H, "storage writes succeed again"), 1);
  host_stop(&H, proc_now_ms() + SETTLE_MS, 0);
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
  tcase_add_test(tc, wrong_password_fails_the_start_at_once);
  suite_add_tcase(s, tc);
  TCase *out = tcase_create("outage");
  tcase_add_unchecked_fixture(out, outage_start, outage_stop);
  proc_fixtures(out, "duro-pg-outage");
  tcase_set_timeout(out, 180);
  tcase_add_test(out, start_waits_for_a_server_that_comes_up);
  tcase_add_test(out, server_restart_while_idle_costs_no_request);
  tcase_add_test(out, server_lost_mid_run_loses_nothing);
  suite_add_tcase(s, out);
  return http_suite_run(s);
}
