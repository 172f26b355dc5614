/* test_logs.c — an instance's log lines (host/engine/instance_logs.c) on a
 * virtual clock (and on PostgreSQL in `make test`): duro_log from run()
 * and from step callbacks kept with the instance, the step and attempt
 * that wrote each, in order; run()'s lines once however often it
 * replays; a failed attempt's lines kept; the oldest past limits.logs
 * gone while the numbers go on; reads after a number; lines deleted with
 * their instance by the retention sweep. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "harness.h"
#include "journal.h"
#include "suite_run.h"

static harness h;

/* Logs in run() and in each attempt of a step whose first attempt
 * fails, sleeps, then logs again. */
static int charge(duro_attempt *a, void *arg) {
  (void)arg;
  duro_log(DURO_LOG_INFO, "charging, attempt %u", duro_attempt_number(a));
  if (duro_attempt_number(a) == 1) {
    duro_log(DURO_LOG_WARN, "card service down");
    return duro_attempt_fail(a, "card service down");
  }
  return duro_attempt_result(a, "1");
}

static duro_rc talker(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  duro_log(DURO_LOG_INFO, "started");
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 3, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT}};
  DURO_TRY(duro_do(step, "charge", &cfg, charge, NULL, NULL));
  duro_log(DURO_LOG_INFO, "charged");
  DURO_TRY(duro_sleep(step, "nap", "1 minute"));
  duro_log(DURO_LOG_ERROR, "done");
  return duro_set_output(step, "1");
}

/* Logs five numbered lines from run(), then ends. */
static duro_rc chatty(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  for (int i = 1; i <= 5; i++)
    duro_log(DURO_LOG_INFO, "line %d", i);
  return duro_set_output(step, "1");
}

static void setup(void) {
  harness_open(&h);
  harness_register(&h, "talker", talker);
  duro_workflow_limits lim = {.max_logs = 3, .retention_ms = 1000};
  ck_assert_int_eq(
      duro_engine_register(h.e, "chatty", NULL, chatty, &lim, "test"), 0);
  harness_start(&h);
}

static void teardown(void) { harness_close(&h); }

/* "n level step attempt message" lines, one a line. */
static void logs_text(const char *wf, const char *id, int64_t after, char *out,
                      size_t cap) {
  duro_log_list l = {0};
  ck_assert_int_eq(duro_instance_logs(h.e, wf, id, after, 100, &l), 0);
  out[0] = '\0';
  for (size_t i = 0; i < l.n; i++) {
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "%lld %d %s %u %s\n", (long long)l.v[i].n,
             l.v[i].level, l.v[i].step ? l.v[i].step : "-", l.v[i].attempt,
             l.v[i].message);
  }
  duro_log_list_free(&l);
}

START_TEST(lines_kept_with_step_and_attempt) {
  harness_create(&h, "talker", "t1", NULL, 0);
  harness_run(&h);
  char text[2048];
  logs_text("talker", "t1", 0, text, sizeof text);
  ck_assert_str_eq(text, "1 1 - 0 started\n"
                         "2 1 charge#1 1 charging, attempt 1\n"
                         "3 2 charge#1 1 card service down\n");
  harness_advance(&h, 1000); /* attempt 2; run() replays past "started" */
  harness_advance(&h, 60000);
  ck_assert_str_eq(harness_status(&h, "talker", "t1"), "complete");
  logs_text("talker", "t1", 0, text, sizeof text);
  ck_assert_str_eq(text, "1 1 - 0 started\n"
                         "2 1 charge#1 1 charging, attempt 1\n"
                         "3 2 charge#1 1 card service down\n"
                         "4 1 charge#1 2 charging, attempt 2\n"
                         "5 1 - 0 charged\n"
                         "6 3 - 0 done\n");
  logs_text("talker", "t1", 4, text, sizeof text);
  ck_assert_str_eq(text, "5 1 - 0 charged\n"
                         "6 3 - 0 done\n");
  duro_log_list l = {0};
  ck_assert_int_eq(duro_instance_logs(h.e, "talker", "nope", 0, 10, &l),
                   DURO_E_NOT_FOUND);
  ck_assert_int_eq(duro_instance_logs(h.e, "talker", "t1", 0, 2, &l), 0);
  ck_assert_uint_eq(l.n, 2);
  duro_log_list_free(&l);
}
END_TEST

/* limits.logs 3: lines 3, 4 and 5 stay. */
START_TEST(oldest_go_past_the_bound) {
  harness_create(&h, "chatty", "c1", NULL, 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "chatty", "c1"), "complete");
  char text[1024];
  logs_text("chatty", "c1", 0, text, sizeof text);
  ck_assert_str_eq(text, "3 1 - 0 line 3\n"
                         "4 1 - 0 line 4\n"
                         "5 1 - 0 line 5\n");
}
END_TEST

/* The retention sweep deletes an ended instance's lines with it. */
START_TEST(lines_go_with_the_instance) {
  harness_create(&h, "chatty", "c2", NULL, 0);
  harness_run(&h);
  journal_instance in = {0};
  ck_assert_int_eq(
      journal_instance_get(engine_journal(h.e), "chatty", "c2", &in), 0);
  int64_t rowid = in.rowid;
  journal_instance_clear(&in);
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_SWEEP);
  op->ts_ms = T0_MS + 86400000LL;
  op->from_seq = 100;
  ck_assert_int_eq(journal_commit(engine_journal(h.e), &b), 0);
  ck_assert_int_ge(b.ops[0].out_rowid, 1);
  journal_batch_free(&b);
  journal_log *v = NULL;
  size_t n = 9;
  ck_assert_int_eq(journal_logs_read(engine_journal(h.e), rowid, 0, 10, &v, &n),
                   0);
  ck_assert_uint_eq(n, 0);
  journal_logs_free(v, n);
}
END_TEST

static Suite *logs_suite(void) {
  Suite *s = suite_create("logs");
  TCase *tc = tcase_create("logs");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, lines_kept_with_step_and_attempt);
  tcase_add_test(tc, oldest_go_past_the_bound);
  tcase_add_test(tc, lines_go_with_the_instance);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(logs_suite()); }
