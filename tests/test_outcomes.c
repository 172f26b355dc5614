/* test_outcomes.c — each workflow's last hour (host/outcomes): the
 * instances created and ended by how, a minute at a time, and the run
 * times' percentiles, on the virtual clock; minutes older than an hour
 * drop out; GET /workflows/{wf}'s `last_hour`. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "outcomes.h"
#include "suite_run.h"

#define SEC 1000LL
#define MIN (60 * SEC)

static harness H;

static void setup(void) { harness_open(&H); }
static void teardown(void) { harness_close(&H); }

/* Sleeps for /d (a duration), then completes. */
static duro_rc wf_nap(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *d = duro_json_string(ev->params, "/d");
  duro_rc rc = duro_sleep(step, "nap", d ? d : "1 second");
  if (rc != DURO_OK)
    return rc;
  return duro_set_output(step, "null");
}

static int cb_fail(duro_attempt *a, void *arg) {
  (void)arg;
  duro_attempt_fail(a, "down");
  return -1;
}

static duro_retries NONE = {.limit = 0};
static duro_step_config NONE_CFG = {.retries = &NONE};

static duro_rc wf_bad(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return duro_do(step, "fails", &NONE_CFG, cb_fail, NULL, NULL);
}

static duro_rc wf_hold(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return duro_wait_for_event(step, "go", "go", NULL, NULL);
}

static uint64_t sum(const uint64_t *n) {
  uint64_t s = 0;
  for (size_t i = 0; i < OUTCOME_MINUTES; i++)
    s += n[i];
  return s;
}

static void start(void) {
  harness_register(&H, "nap", wf_nap);
  harness_register(&H, "bad", wf_bad);
  harness_register(&H, "hold", wf_hold);
  harness_start(&H);
}

START_TEST(counts_and_run_times_of_the_hour) {
  start();
  char id[32];
  for (int i = 0; i < 99; i++) {
    snprintf(id, sizeof id, "n-%d", i);
    harness_create(&H, "nap", id, "{\"d\":\"10 seconds\"}", 0);
  }
  harness_create(&H, "nap", "long", "{\"d\":\"10 minutes\"}", 0);
  harness_create(&H, "bad", "b-0", NULL, 0);
  harness_create(&H, "hold", "h-0", NULL, 0);
  harness_create(&H, "hold", "h-1", NULL, 0);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_terminate(H.e, "hold", "h-0"), 0);
  harness_run(&H);
  harness_advance(&H, 10 * SEC);
  harness_advance(&H, 10 * MIN - 10 * SEC);
  ck_assert_str_eq(harness_status(&H, "nap", "long"), "complete");
  ck_assert_str_eq(harness_status(&H, "bad", "b-0"), "errored");

  duro_workflow_hour nap;
  duro_workflow_hour_read(H.e, "nap", &nap);
  ck_assert_int_eq(nap.minute_ms, MIN);
  ck_assert_int_eq(sum(nap.created), 100);
  ck_assert_int_eq(sum(nap.completed), 100);
  ck_assert_int_eq(sum(nap.errored) + sum(nap.terminated), 0);
  /* created in the minute ten before now's, the last now */
  ck_assert_int_eq(nap.created[OUTCOME_MINUTES - 11], 100);
  ck_assert_int_eq(nap.completed[OUTCOME_MINUTES - 11], 99);
  ck_assert_int_eq(nap.completed[OUTCOME_MINUTES - 1], 1);
  ck_assert_int_eq(nap.ran, 100);
  /* 99 ran ten seconds, one ten minutes: both percentiles the former,
   * within a bucket's width; the longest exact */
  ck_assert_msg(nap.p50_ms >= 9000 && nap.p50_ms <= 11000, "p50 %lld",
                (long long)nap.p50_ms);
  ck_assert_msg(nap.p99_ms >= 9000 && nap.p99_ms <= 11000, "p99 %lld",
                (long long)nap.p99_ms);
  ck_assert_int_eq(nap.max_ms, 10 * MIN);

  duro_workflow_hour bad, hold;
  duro_workflow_hour_read(H.e, "bad", &bad);
  duro_workflow_hour_read(H.e, "hold", &hold);
  ck_assert_int_eq(sum(bad.errored), 1);
  ck_assert_int_eq(sum(bad.completed), 0);
  ck_assert_int_eq(sum(hold.created), 2);
  ck_assert_int_eq(sum(hold.terminated), 1); /* h-1 waits still */
  ck_assert_int_eq(sum(hold.completed) + sum(hold.errored), 0);

  /* the API's JSON */
  json_t *j = NULL;
  ck_assert_int_eq(duro_workflow_stats(H.e, "nap", &j), 0);
  json_t *lh = json_object_get(j, "last_hour");
  ck_assert_int_eq(json_integer_value(json_object_get(lh, "completed")), 100);
  ck_assert_int_eq(json_integer_value(json_object_get(lh, "errored")), 0);
  json_t *rt = json_object_get(lh, "run_time");
  ck_assert_int_eq(json_integer_value(json_object_get(rt, "max_ms")), 10 * MIN);
  json_t *per = json_object_get(json_object_get(lh, "per_minute"), "created");
  ck_assert_int_eq(json_array_size(per), OUTCOME_MINUTES);
  ck_assert_int_eq(
      json_integer_value(json_array_get(per, OUTCOME_MINUTES - 11)), 100);
  json_decref(j);
}
END_TEST

START_TEST(minutes_older_than_an_hour_drop_out) {
  start();
  harness_create(&H, "nap", "a", "{\"d\":\"1 second\"}", 0);
  harness_run(&H);
  harness_advance(&H, 1 * SEC);
  duro_workflow_hour h;
  duro_workflow_hour_read(H.e, "nap", &h);
  ck_assert_int_eq(sum(h.completed), 1);
  /* 59 minutes on: still in the hour */
  harness_advance(&H, 59 * MIN);
  duro_workflow_hour_read(H.e, "nap", &h);
  ck_assert_int_eq(sum(h.completed), 1);
  ck_assert_int_eq(h.completed[0], 1);
  /* a minute more: gone, though the ring's slot was not used again */
  harness_advance(&H, 1 * MIN);
  duro_workflow_hour_read(H.e, "nap", &h);
  ck_assert_int_eq(sum(h.completed) + sum(h.created), 0);
  ck_assert_int_eq(h.ran, 0);
  ck_assert_int_eq(h.p50_ms, -1);
  /* one created now reuses that slot, emptied first */
  harness_create(&H, "nap", "b", "{\"d\":\"1 second\"}", 0);
  harness_run(&H);
  duro_workflow_hour_read(H.e, "nap", &h);
  ck_assert_int_eq(sum(h.created), 1);
  ck_assert_int_eq(sum(h.completed), 0);
  /* a workflow nothing happened to */
  duro_workflow_hour_read(H.e, "nothing", &h);
  ck_assert_int_eq(sum(h.created), 0);
  ck_assert_int_eq(h.max_ms, -1);
}
END_TEST

static Suite *outcomes_suite(void) {
  Suite *s = suite_create("outcomes");
  TCase *tc = tcase_create("hour");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, counts_and_run_times_of_the_hour);
  tcase_add_test(tc, minutes_older_than_an_hour_drop_out);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(outcomes_suite()); }
