/* test_cron_host.c — cron triggers on a real `duro run` (DURO_BIN,
 * tests/host_run.h) of the faults plugin (FAULTS_PLUGIN), whose scheduled
 * handler takes 300 ms a tick and writes one side-log record per tick.
 *
 * Every case runs an every-minute handler trigger under the default
 * `overlap: skip`, stops the host, moves the trigger's first sight ten
 * minutes back in its SQLite journal (so the next start finds the ticks
 * of an outage) and starts it again; then, per catch_up:
 *
 *  - all: every missed tick fires late and completes, none is skipped,
 *    and the on-time tick right after the outage fires too;
 *  - latest: the newest missed tick fires late, the others stay missed,
 *    and the on-time tick after it fires as well;
 *  - all with max_catch_up 3: three fire late, the rest are missed.
 *
 * The start-up log line, GET /crons, the tick rows and the handler's own
 * records must all tell the same story. */
#include <check.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"
#include "sidelog_read.h"

#ifndef FAULTS_PLUGIN
#error "build with -DFAULTS_PLUGIN=\"<path of libfaults.so>\""
#endif

#define SETTLE_MS 30000
#define OUTAGE_MIN 10

static char db_path[400], side_log[400];

static json_int_t jint(json_t *o, const char *key) {
  return json_integer_value(json_object_get(o, key));
}

static sqlite3 *db_open(void) {
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  return db;
}

static long long db_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s",
                sqlite3_errmsg(db));
  long long v =
      sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  return v;
}

static void db_exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK, "%s: %s",
                sql, err ? err : "");
}

/* A host whose one trigger is `* * * * *` with the given catch_up line
 * ("catch_up: all, max_catch_up: 3"), the overlap left at its default. */
static void start(host_run *h, const char *policy) {
  char rest[600];
  snprintf(rest, sizeof rest,
           "      - { name: fault-flow, binding: FAULT_FLOW, class_name: "
           "Fault }\n"
           "    triggers:\n"
           "      crons:\n"
           "        - { schedule: \"* * * * *\", %s }\n",
           policy);
  host_init(h, "cron");
  host_setenv(h, "DURO_FAULTS_LOG", side_log);
  host_write_config(h, db_path, "{ workers: 2 }", "faults", FAULTS_PLUGIN,
                    rest);
  host_start(h);
}

/* The trigger is seen once, the host stopped, and then, as if no host had
 * run for OUTAGE_MIN minutes, its first sight moves that far back, with
 * no tick rows and no counts. */
static void outage(host_run *h, const char *policy) {
  snprintf(db_path, sizeof db_path, "%s/var/duro.db", proc_tmp_dir);
  snprintf(side_log, sizeof side_log, "%s/faults.log", proc_tmp_dir);
  start(h, policy);
  /* seen: its row is written by the scheduler's first pass, which may
   * come a moment after the "ready" line */
  sqlite3 *db = db_open();
  for (int64_t until = proc_now_ms() + SETTLE_MS;
       db_int(db, "SELECT COUNT(*) FROM cron_triggers") == 0 &&
       proc_now_ms() < until;)
    proc_sleep_ms(20);
  sqlite3_close(db);
  host_stop(h, proc_now_ms() + SETTLE_MS, 0);
  db = db_open();
  ck_assert_int_eq(db_int(db, "SELECT COUNT(*) FROM cron_triggers"), 1);
  char sql[300];
  snprintf(sql, sizeof sql,
           "UPDATE cron_triggers SET since_ms=since_ms-%d, complete=0, "
           "failed=0, missed=0, skipped=0; DELETE FROM cron_ticks",
           OUTAGE_MIN * 60000);
  db_exec(db, sql);
  sqlite3_close(db);
  remove(side_log);
  start(h, policy);
}

/* The start-up line's numbers: ticks that came while no host ran, fired
 * late, missed. */
static void log_line(const host_run *h, long *came, long *late, long *missed) {
  host_wait_lines(h, "fired late", 1, proc_now_ms() + SETTLE_MS);
  int n = 0;
  char *text = proc_slurp(h->log);
  char *line = host_lines_with(text, "fired late", &n);
  free(text);
  ck_assert_int_eq(n, 1);
  const char *p = strstr(line, "): ");
  ck_assert_ptr_nonnull(p);
  char policy[16];
  ck_assert_msg(sscanf(p,
                       "): %ld tick(s) came while no host ran: %ld fired "
                       "late (catch_up: %15[a-z]), %ld missed",
                       came, late, policy, missed) == 4,
                "%s", line);
  free(line);
}

/* GET /crons once no handler runs and `complete` ticks at least have
 * ended: the trigger's entry (caller decrefs). */
static json_t *settled(const host_run *h, long complete) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    http_resp r;
    host_request(h, &r, "GET", "/crons", NULL);
    ck_assert_int_eq(r.status, 200);
    json_t *o = json_incref(json_array_get(r.json, 0));
    http_resp_free(&r);
    /* every tick fired accounted for (a skipped one fails below) */
    if (jint(o, "running") == 0 &&
        jint(o, "complete") + jint(o, "skipped") + jint(o, "failed") >=
            complete)
      return o;
    json_decref(o);
    ck_assert_msg(proc_now_ms() < deadline, "the ticks never settled");
    proc_sleep_ms(100);
  }
}

/* The handler's records: how many, and whether any tick ran twice. */
static long handler_ticks(int *twice) {
  char *text = proc_slurp(side_log);
  long n = 0;
  *twice = 0;
  for (char *p = text; p && (p = strstr(p, "tick ")); p++, n++) {
    char needle[40];
    long long ms = atoll(p + 5);
    snprintf(needle, sizeof needle, "tick %lld ", ms);
    *twice |= strstr(p + 1, needle) != NULL;
  }
  free(text);
  return n;
}

/* Every tick the handler recorded ran in a worker process of the
 * plugin's, not in the engine (the token starts with its pid). */
static void ticks_ran_in_worker(pid_t engine) {
  size_t n = 0;
  sidelog_rec *v = sidelog_read(side_log, &n);
  size_t ticks = 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(v[i].kind, "tick") != 0)
      continue;
    ticks++;
    int pid = atoi(v[i].token);
    ck_assert_msg(pid > 0 && pid != (int)engine,
                  "tick %s ran in pid %d, the engine is %d", v[i].inst, pid,
                  (int)engine);
  }
  free(v);
  ck_assert_uint_gt(ticks, 0);
}

/* After the host stopped, the tick rows agree with the trigger's counts,
 * nothing was skipped, and the complete ticks are every minute from the
 * oldest late one on: `late` of them late, then the on-time ones. */
static void check_rows(long came, long late) {
  sqlite3 *db = db_open();
  long long complete = db_int(db, "SELECT complete FROM cron_triggers");
  ck_assert_int_eq(db_int(db, "SELECT COUNT(*) FROM cron_ticks WHERE "
                              "state='complete'"),
                   complete);
  ck_assert_int_eq(db_int(db, "SELECT skipped FROM cron_triggers"), 0);
  ck_assert_int_eq(db_int(db, "SELECT COUNT(*) FROM cron_ticks WHERE "
                              "state NOT IN ('complete','missed')"),
                   0);
  ck_assert_int_eq(db_int(db, "SELECT missed FROM cron_triggers"), came - late);
  ck_assert_int_eq(db_int(db, "SELECT COUNT(*) FROM cron_ticks WHERE "
                              "state='missed'"),
                   came - late);
  /* no gap: complete ticks are consecutive minutes, after every missed */
  ck_assert_int_eq(db_int(db, "SELECT (MAX(tick_ms)-MIN(tick_ms))/60000+1 FROM "
                              "cron_ticks WHERE state='complete'"),
                   complete);
  ck_assert_int_eq(db_int(db, "SELECT COUNT(*) FROM cron_ticks WHERE "
                              "state='missed' AND tick_ms>(SELECT MIN(tick_ms) "
                              "FROM cron_ticks WHERE state='complete')"),
                   0);
  ck_assert_int_ge(complete, late + 1); /* the on-time tick after the outage */
  int twice;
  ck_assert_int_eq(handler_ticks(&twice), complete);
  ck_assert(!twice);
  sqlite3_close(db);
}

static void catch_up_case(const char *policy, long want_late) {
  host_run H;
  outage(&H, policy);
  long came, late, missed;
  log_line(&H, &came, &late, &missed);
  /* ten minutes back, less the minute that is on time */
  ck_assert_int_ge(came, OUTAGE_MIN - 1);
  ck_assert_int_le(came, OUTAGE_MIN);
  ck_assert_int_eq(late, want_late < 0 ? came : want_late);
  late = want_late < 0 ? came : want_late;
  ck_assert_int_eq(missed, came - late);
  json_t *o = settled(&H, late + 1);
  ck_assert_int_eq(jint(o, "skipped"), 0);
  ck_assert_int_eq(jint(o, "failed"), 0);
  ck_assert_int_eq(jint(o, "missed"), came - late);
  ck_assert_str_eq(jstr(o, "overlap"), "skip");
  json_decref(o);
  ticks_ran_in_worker(host_last_engine(&H));
  host_stop(&H, proc_now_ms() + SETTLE_MS, 0);
  check_rows(came, late);
}

START_TEST(catch_up_all_fires_every_missed_tick) {
  catch_up_case("catch_up: all", -1);
}
END_TEST

START_TEST(catch_up_latest_then_the_on_time_tick) {
  catch_up_case("catch_up: latest", 1);
}
END_TEST

START_TEST(catch_up_all_capped_counts_the_rest_missed) {
  catch_up_case("catch_up: all, max_catch_up: 3", 3);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cron_host");
  TCase *tc = tcase_create("catch_up");
  proc_fixtures(tc, "duro-cron-host");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, catch_up_all_fires_every_missed_tick);
  tcase_add_test(tc, catch_up_latest_then_the_on_time_tick);
  tcase_add_test(tc, catch_up_all_capped_counts_the_rest_missed);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
