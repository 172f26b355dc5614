/* test_flow_rate.c — rate rules of flow control (host/flow/flow.c) on a
 * virtual clock: starts of one key spaced period/limit apart, first come
 * first served; a late pass making up a hundredth of a period at most;
 * another key not held back; a burst starting at once;
 * only starts paced (an instance's later activations pass); a waiting
 * instance terminated gives up its turn; the whole workflow as one key;
 * what waits shown: the rule's counts and busiest keys, describe's
 * waiting_for, /metrics. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#include "flow.h"
#include "harness.h"
#include "suite_run.h"

static harness h;

/* Each start: the instance and the virtual time its step ran. */
static char started[64][32];
static int64_t started_at[64];
static int n_started, n_second;

static int note_start(duro_attempt *a, void *arg) {
  const char *id = arg;
  if (n_started < 64) {
    snprintf(started[n_started], sizeof started[0], "%s", id);
    started_at[n_started] = duro_clock_now(&h.clock);
  }
  n_started++;
  return duro_attempt_result(a, "1");
}

static int note_second(duro_attempt *a, void *arg) {
  (void)arg;
  n_second++;
  return duro_attempt_result(a, "1");
}

/* A step at its start; with {"nap": true} a sleep and a second step. */
static duro_rc paced(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  DURO_TRY(
      duro_do(step, "start", NULL, note_start, (void *)ev->instance_id, NULL));
  if (duro_json_value(ev->params, "/nap")) {
    DURO_TRY(duro_sleep(step, "nap", "1 second"));
    DURO_TRY(duro_do(step, "again", NULL, note_second, NULL, NULL));
  }
  return duro_set_output(step, "1");
}

static void open_reject(const duro_flow_rate *rates, size_t n, int reject) {
  n_started = n_second = 0;
  harness_open(&h);
  duro_workflow_limits lim = {
      .flow_rate = rates, .n_flow_rate = n, .flow_reject = reject};
  ck_assert_int_eq(
      duro_engine_register(h.e, "paced", NULL, paced, &lim, "test"), 0);
  harness_start(&h);
}

static void open_with(const duro_flow_rate *rates, size_t n) {
  open_reject(rates, n, 0);
}

static void teardown(void) { harness_close(&h); }

static void create(const char *id, const char *tenant, int nap) {
  char params[96];
  snprintf(params, sizeof params, "{\"t\":\"%s\"%s}", tenant,
           nap ? ",\"nap\":true" : "");
  harness_create(&h, "paced", id, params, 0);
}

START_TEST(starts_of_a_key_are_spaced_in_order) {
  /* two a second: one each 500 ms */
  const duro_flow_rate rates[] = {{.key = "/t", .limit = 2, .period_ms = 1000}};
  open_with(rates, 1);
  char id[16];
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "a%d", i);
    create(id, "a", 0);
  }
  harness_run(&h);
  ck_assert_int_eq(n_started, 1);
  ck_assert_str_eq(harness_status(&h, "paced", "a1"), "queued");
  harness_advance(&h, 499);
  ck_assert_int_eq(n_started, 1);
  harness_advance(&h, 1);
  ck_assert_int_eq(n_started, 2);
  for (int i = 0; i < 3; i++)
    harness_advance(&h, 500);
  ck_assert_int_eq(n_started, 5);
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "a%d", i);
    ck_assert_str_eq(started[i], id);
    ck_assert_int_eq(started_at[i] - started_at[0], 500 * i);
    ck_assert_str_eq(harness_status(&h, "paced", id), "complete");
  }
}
END_TEST

/* A pass that comes late (the engine was busy, the clock jumped) makes
 * up at most a hundredth of a period's starts at once, not every start
 * due meanwhile: a second's window never sees more than 1 % over. */
START_TEST(a_late_pass_makes_up_a_hundredth_at_most) {
  /* a hundred a second: one each 10 ms */
  const duro_flow_rate rates[] = {
      {.key = "/t", .limit = 100, .period_ms = 1000}};
  open_with(rates, 1);
  char id[16];
  for (int i = 0; i < 50; i++) {
    snprintf(id, sizeof id, "a%d", i);
    create(id, "a", 0);
  }
  harness_run(&h);
  ck_assert_int_eq(n_started, 1);
  harness_advance(&h, 1000); /* 99 starts were due: 10 ms of them come */
  ck_assert_int_eq(n_started, 3);
  harness_advance(&h, 10);
  ck_assert_int_eq(n_started, 4);
  for (int i = 0; i < 46; i++)
    harness_advance(&h, 10);
  ck_assert_int_eq(n_started, 50);
}
END_TEST

START_TEST(another_key_is_not_held_back) {
  const duro_flow_rate rates[] = {
      {.key = "/t", .limit = 1, .period_ms = 60000}};
  open_with(rates, 1);
  create("a0", "a", 0);
  create("a1", "a", 0);
  create("b0", "b", 0);
  harness_run(&h);
  ck_assert_int_eq(n_started, 2);
  ck_assert_str_eq(harness_status(&h, "paced", "b0"), "complete");
  ck_assert_str_eq(harness_status(&h, "paced", "a1"), "queued");
  harness_advance(&h, 60000);
  ck_assert_str_eq(harness_status(&h, "paced", "a1"), "complete");
}
END_TEST

START_TEST(a_burst_starts_at_once) {
  const duro_flow_rate rates[] = {
      {.key = "/t", .limit = 10, .period_ms = 1000, .burst = 3}};
  open_with(rates, 1);
  char id[16];
  for (int i = 0; i < 6; i++) {
    snprintf(id, sizeof id, "a%d", i);
    create(id, "a", 0);
  }
  harness_run(&h);
  ck_assert_int_eq(n_started, 3);
  harness_advance(&h, 100);
  ck_assert_int_eq(n_started, 4);
  harness_advance(&h, 200);
  ck_assert_int_eq(n_started, 6);
}
END_TEST

START_TEST(only_starts_are_paced) {
  /* one start a minute: the first two start a minute apart, and each
   * one's wake after its nap runs on time, not a minute later */
  const duro_flow_rate rates[] = {{.limit = 1, .period_ms = 60000}};
  open_with(rates, 1);
  create("n0", "a", 1);
  create("n1", "b", 1);
  harness_run(&h);
  ck_assert_int_eq(n_started, 1);
  harness_advance(&h, 1000);
  ck_assert_int_eq(n_second, 1);
  ck_assert_str_eq(harness_status(&h, "paced", "n0"), "complete");
  ck_assert_str_eq(harness_status(&h, "paced", "n1"), "queued");
  harness_advance(&h, 59000);
  ck_assert_int_eq(n_started, 2);
  harness_advance(&h, 1000);
  ck_assert_int_eq(n_second, 2);
}
END_TEST

START_TEST(a_waiting_instance_terminated_gives_up_its_turn) {
  const duro_flow_rate rates[] = {{.key = "/t", .limit = 1, .period_ms = 1000}};
  open_with(rates, 1);
  create("a0", "a", 0);
  create("a1", "a", 0);
  create("a2", "a", 0);
  harness_run(&h);
  ck_assert_int_eq(n_started, 1);
  ck_assert_int_eq(duro_instance_terminate(h.e, "paced", "a1"), 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "paced", "a1"), "terminated");
  harness_advance(&h, 1000);
  ck_assert_int_eq(n_started, 2);
  ck_assert_str_eq(started[1], "a2");
}
END_TEST

START_TEST(what_waits_is_shown) {
  const duro_flow_rate rates[] = {
      {.key = "/t", .limit = 1, .period_ms = 60000}};
  open_with(rates, 1);
  char id[16];
  for (int i = 0; i < 4; i++) {
    snprintf(id, sizeof id, "a%d", i);
    create(id, "a", 0);
  }
  create("b0", "b", 0);
  create("b1", "b", 0);
  harness_run(&h);
  duro_flow_stats s;
  ck_assert_int_eq(duro_flow_stats_read(h.e, "paced", 5, &s), 0);
  ck_assert_uint_eq(s.n, 1);
  ck_assert(s.v[0].rate);
  ck_assert_str_eq(s.v[0].key, "/t");
  ck_assert_int_eq(s.v[0].period_ms, 60000);
  ck_assert_uint_eq(s.v[0].keys, 2);
  ck_assert_uint_eq(s.v[0].waiting, 4); /* a1..a3, b1 */
  ck_assert_uint_eq(s.v[0].n_top, 2);
  ck_assert_str_eq(s.v[0].top[0].value, "\"a\""); /* the busiest first */
  ck_assert_uint_eq(s.v[0].top[0].waiting, 3);
  ck_assert_uint_eq(s.v[0].top[1].waiting, 1);
  duro_flow_stats_free(&s);

  json_t *d = harness_describe(&h, "paced", "a2");
  const char *why = json_string_value(json_object_get(d, "waiting_for"));
  ck_assert_ptr_nonnull(why);
  ck_assert_ptr_nonnull(strstr(why, "rate /t=\"a\""));
  json_decref(d);
  d = harness_describe(&h, "paced", "a0"); /* complete: no reason */
  ck_assert_ptr_null(json_object_get(d, "waiting_for"));
  json_decref(d);

  char *text = duro_engine_metrics(h.e);
  ck_assert_ptr_nonnull(
      strstr(text, "duro_flow_waiting{workflow=\"paced\",rule=\"rate /t\"} 4"));
  free(text);
  ck_assert_int_eq(duro_flow_stats_read(h.e, "nowhere", 5, &s),
                   DURO_E_NOT_FOUND);
}
END_TEST

/* on_excess: reject: a create over the rate is refused with when to try
 * again, nothing stored; one of another key, or once its time came, is
 * taken. */
START_TEST(over_the_rate_a_create_is_refused) {
  const duro_flow_rate rates[] = {
      {.key = "/t", .limit = 1, .period_ms = 60000}};
  open_reject(rates, 1, 1);
  create("a0", "a", 0);
  duro_create_req req = {
      .id = "a1", .params = "{\"t\":\"a\"}", .retention_ms = -1};
  duro_create_result res;
  ck_assert_int_eq(duro_instance_create_many(h.e, "paced", &req, 1, &res), 0);
  ck_assert_uint_eq(res.n_created, 0);
  ck_assert_uint_eq(res.n_errors, 1);
  ck_assert_int_eq(res.errors[0].code, DURO_E_FLOW_REJECTED);
  ck_assert_int_eq(res.errors[0].retry_after_ms, 60000);
  duro_create_result_free(&res);
  duro_status st;
  ck_assert_int_eq(duro_instance_status(h.e, "paced", "a1", &st),
                   DURO_E_NOT_FOUND);
  create("b0", "b", 0); /* another key */
  harness_run(&h);
  ck_assert_int_eq(n_started, 2); /* taken ones start at once */
  harness_advance(&h, 30000);
  ck_assert_int_eq(duro_instance_create_many(h.e, "paced", &req, 1, &res), 0);
  ck_assert_int_eq(res.errors[0].retry_after_ms, 30000);
  duro_create_result_free(&res);
  harness_advance(&h, 30000);
  create("a1", "a", 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "paced", "a1"), "complete");
}
END_TEST

static Suite *rate_suite(void) {
  Suite *s = suite_create("flow_rate");
  TCase *tc = tcase_create("rate");
  tcase_add_checked_fixture(tc, NULL, teardown);
  tcase_add_test(tc, starts_of_a_key_are_spaced_in_order);
  tcase_add_test(tc, a_late_pass_makes_up_a_hundredth_at_most);
  tcase_add_test(tc, another_key_is_not_held_back);
  tcase_add_test(tc, a_burst_starts_at_once);
  tcase_add_test(tc, only_starts_are_paced);
  tcase_add_test(tc, a_waiting_instance_terminated_gives_up_its_turn);
  tcase_add_test(tc, what_waits_is_shown);
  tcase_add_test(tc, over_the_rate_a_create_is_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(rate_suite()); }
