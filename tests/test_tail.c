/* test_tail.c — tail handlers (host/tail/) on a virtual clock: a trace
 * item per activation of an observed workflow, with its outcome, the
 * instance's status after it, the lines its code logged (step and
 * attempt) and its failures; none for a workflow nobody observes; a
 * batch once max_batch items wait or the oldest waited batch_timeout,
 * never before; a full buffer drops (counted, and told the next batch);
 * a handler that fails loses its batch, and the next says how many; a
 * consumer without a handler drops what is meant for it. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "harness.h"
#include "suite_run.h"
#include "tail.h"

static harness h;

/* What the handler was given: every item, each batch's size and the
 * dropped count it was told; and what it returns next. */
static json_t *items;
static size_t batches, sizes[64];
static uint64_t told[64];
static int fail_next;

static int collect(const duro_tail_batch *b, duro_env *env) {
  (void)env;
  ck_assert_uint_ge(b->size, sizeof *b);
  json_t *v = json_loads(b->items, 0, NULL);
  ck_assert_msg(json_is_array(v), "items: %s", b->items);
  ck_assert_uint_eq(json_array_size(v), b->n);
  json_array_extend(items, v);
  json_decref(v);
  if (batches < 64) {
    sizes[batches] = b->n;
    told[batches] = b->dropped;
  }
  batches++;
  int rc = fail_next;
  fail_next = 0;
  return rc;
}

/* Logs in run() and in each attempt of a step whose first attempt
 * fails, sleeps a minute, then logs again. */
static int charge(duro_attempt *a, void *arg) {
  (void)arg;
  duro_log(DURO_LOG_INFO, "charging, attempt %u", duro_attempt_number(a));
  if (duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "card service down");
  return duro_attempt_result(a, "1");
}

static duro_rc talker(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  duro_log(DURO_LOG_INFO, "started");
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 3, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT}};
  DURO_TRY(duro_do(step, "charge", &cfg, charge, NULL, NULL));
  DURO_TRY(duro_sleep(step, "nap", "1 minute"));
  duro_log(DURO_LOG_ERROR, "done");
  return duro_set_output(step, "1");
}

static int refuse(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_fail_final(a, "card refused");
}

static duro_rc failer(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "charge", NULL, refuse, NULL, NULL));
  return duro_set_output(step, "1");
}

static duro_rc quick(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return duro_set_output(step, "1");
}

static void open_with(const duro_tail_options *o) {
  items = json_array();
  batches = 0;
  fail_next = 0;
  harness_open(&h);
  ck_assert_int_eq(duro_tail_configure(h.e, o), 0);
  harness_register(&h, "talker", talker);
  harness_register(&h, "failer", failer);
  harness_register(&h, "quick", quick);
  harness_register(&h, "unwatched", quick);
  const char *audit[] = {"audit"};
  duro_tail_observe(h.e, "talker", audit, 1);
  duro_tail_observe(h.e, "failer", audit, 1);
  duro_tail_observe(h.e, "quick", audit, 1);
  duro_tail_set_handler(h.e, "audit", collect, NULL);
  harness_start(&h);
}

static void setup(void) {
  open_with(&(duro_tail_options){.max_batch = 100, .batch_timeout_ms = 1000});
}

static void teardown(void) {
  harness_close(&h);
  json_decref(items);
}

static duro_tail_stats stats(void) {
  duro_tail_stats s;
  ck_assert_int_eq(duro_tail_stats_of(h.e, "audit", &s), 0);
  return s;
}

static const char *str_at(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  ck_assert_msg(s != NULL, "no string %s", key);
  return s;
}

START_TEST(an_item_per_activation) {
  harness_create(&h, "talker", "t1", NULL, 0);
  harness_run(&h);
  /* the first activation ended (its attempt failed, a retry waits): its
   * item waits for the batch's timeout */
  ck_assert_uint_eq(json_array_size(items), 0);
  ck_assert_uint_eq(stats().buffered, 1);
  harness_advance(&h, 1000);  /* the retry, and the first item goes */
  harness_advance(&h, 60000); /* the nap ends, and it completes */
  harness_advance(&h, 1000);
  ck_assert_uint_eq(json_array_size(items), 3);
  ck_assert_uint_eq(stats().delivered, 3);
  ck_assert_uint_eq(stats().buffered, 0);

  json_t *first = json_array_get(items, 0);
  ck_assert_str_eq(str_at(first, "workflow"), "talker");
  ck_assert_str_eq(str_at(first, "instance"), "t1");
  ck_assert_str_eq(str_at(first, "outcome"), "ok");
  ck_assert_str_eq(str_at(first, "status"), "waiting");
  ck_assert_uint_eq(strlen(str_at(first, "trace_id")), 32);
  json_t *logs = json_object_get(first, "logs");
  ck_assert_uint_eq(json_array_size(logs), 2);
  ck_assert_str_eq(str_at(json_array_get(logs, 0), "message"), "started");
  ck_assert(json_is_null(json_object_get(json_array_get(logs, 0), "step")));
  json_t *line = json_array_get(logs, 1);
  ck_assert_str_eq(str_at(line, "message"), "charging, attempt 1");
  ck_assert_str_eq(str_at(line, "step"), "charge#1");
  ck_assert_str_eq(str_at(line, "level"), "info");
  ck_assert_int_eq(json_integer_value(json_object_get(line, "attempt")), 1);
  json_t *ex = json_object_get(first, "exceptions");
  ck_assert_uint_eq(json_array_size(ex), 1);
  ck_assert_str_eq(str_at(json_array_get(ex, 0), "message"),
                   "card service down");
  ck_assert_str_eq(str_at(json_array_get(ex, 0), "step"), "charge#1");

  json_t *second = json_array_get(items, 1);
  ck_assert_str_eq(str_at(second, "status"), "waiting"); /* the nap */
  ck_assert_uint_eq(json_array_size(json_object_get(second, "exceptions")), 0);
  /* run() replays without logging again: the second attempt's line */
  logs = json_object_get(second, "logs");
  ck_assert_uint_eq(json_array_size(logs), 1);
  ck_assert_str_eq(str_at(json_array_get(logs, 0), "message"),
                   "charging, attempt 2");

  json_t *last = json_array_get(items, 2);
  ck_assert_str_eq(str_at(last, "status"), "complete");
  ck_assert_str_eq(str_at(last, "outcome"), "ok");
  logs = json_object_get(last, "logs");
  ck_assert_uint_eq(json_array_size(logs), 1);
  ck_assert_str_eq(str_at(json_array_get(logs, 0), "level"), "error");
  ck_assert_int_eq(json_integer_value(json_object_get(last, "ended_ms")) -
                       json_integer_value(json_object_get(last, "started_ms")),
                   json_integer_value(json_object_get(last, "duration_ms")));
  ck_assert_str_eq(str_at(first, "trace_id"), str_at(last, "trace_id"));
}
END_TEST

START_TEST(an_errored_instance_is_an_exception) {
  harness_create(&h, "failer", "f1", NULL, 0);
  harness_run(&h);
  harness_advance(&h, 1000);
  ck_assert_uint_eq(json_array_size(items), 1);
  json_t *it = json_array_get(items, 0);
  ck_assert_str_eq(str_at(it, "outcome"), "exception");
  ck_assert_str_eq(str_at(it, "status"), "errored");
  json_t *ex = json_object_get(it, "exceptions");
  /* the attempt's failure, then the instance's end */
  ck_assert_uint_eq(json_array_size(ex), 2);
  ck_assert_str_eq(str_at(json_array_get(ex, 0), "message"), "card refused");
  ck_assert(json_is_null(json_object_get(json_array_get(ex, 1), "step")));
}
END_TEST

START_TEST(an_unobserved_workflow_gives_nothing) {
  harness_create(&h, "unwatched", "u1", NULL, 0);
  harness_run(&h);
  harness_advance(&h, 5000);
  ck_assert_str_eq(harness_status(&h, "unwatched", "u1"), "complete");
  ck_assert_uint_eq(json_array_size(items), 0);
  duro_tail_stats s = stats();
  ck_assert_uint_eq(s.delivered + s.dropped + s.buffered, 0);
}
END_TEST

START_TEST(a_whole_batch_goes_at_once) {
  teardown();
  open_with(&(duro_tail_options){.max_batch = 4, .batch_timeout_ms = 60000});
  char id[16];
  for (int i = 0; i < 10; i++) {
    snprintf(id, sizeof id, "q%d", i);
    harness_create(&h, "quick", id, NULL, 0);
  }
  harness_run(&h);
  /* two whole batches, in order; two items wait for the timeout */
  ck_assert_uint_eq(batches, 2);
  ck_assert_uint_eq(sizes[0], 4);
  ck_assert_uint_eq(sizes[1], 4);
  ck_assert_uint_eq(stats().buffered, 2);
  harness_advance(&h, 59999);
  ck_assert_uint_eq(batches, 2);
  harness_advance(&h, 1);
  ck_assert_uint_eq(batches, 3);
  ck_assert_uint_eq(sizes[2], 2);
  for (int i = 0; i < 10; i++) {
    snprintf(id, sizeof id, "q%d", i);
    ck_assert_str_eq(str_at(json_array_get(items, (size_t)i), "instance"), id);
  }
}
END_TEST

START_TEST(a_full_buffer_drops_and_says_so) {
  teardown();
  open_with(&(duro_tail_options){
      .buffer = 5, .max_batch = 3, .batch_timeout_ms = 1000});
  char id[16];
  for (int i = 0; i < 12; i++) {
    snprintf(id, sizeof id, "q%d", i);
    harness_create(&h, "quick", id, NULL, 0);
  }
  /* the activations alone, no tail pass: the buffer fills */
  duro_engine_run_until_idle(h.e);
  duro_tail_stats s = stats();
  ck_assert_uint_eq(s.buffered, 5);
  ck_assert_uint_eq(s.dropped, 7);
  harness_run(&h);
  ck_assert_uint_eq(batches, 1);
  ck_assert_uint_eq(sizes[0], 3);
  ck_assert_uint_eq(told[0], 7);
  harness_advance(&h, 1000);
  ck_assert_uint_eq(batches, 2);
  ck_assert_uint_eq(sizes[1], 2);
  ck_assert_uint_eq(told[1], 0);
  ck_assert_uint_eq(stats().delivered, 5);
}
END_TEST

START_TEST(a_failed_batch_is_lost_and_told) {
  teardown();
  open_with(&(duro_tail_options){.max_batch = 2, .batch_timeout_ms = 1000});
  fail_next = 1;
  harness_create(&h, "quick", "a", NULL, 0);
  harness_create(&h, "quick", "b", NULL, 0);
  harness_run(&h);
  ck_assert_uint_eq(batches, 1);
  duro_tail_stats s = stats();
  ck_assert_uint_eq(s.failed_batches, 1);
  ck_assert_uint_eq(s.dropped, 2);
  ck_assert_uint_eq(s.delivered, 0);
  harness_create(&h, "quick", "c", NULL, 0);
  harness_create(&h, "quick", "d", NULL, 0);
  harness_run(&h);
  ck_assert_uint_eq(batches, 2);
  ck_assert_uint_eq(told[1], 2);
  ck_assert_uint_eq(stats().delivered, 2);
}
END_TEST

START_TEST(a_consumer_without_handler_drops) {
  const char *nobody[] = {"nobody"};
  duro_tail_observe(h.e, "quick", nobody, 1);
  harness_create(&h, "quick", "n1", NULL, 0);
  harness_run(&h);
  harness_advance(&h, 2000);
  duro_tail_stats s;
  ck_assert_int_eq(duro_tail_stats_of(h.e, "nobody", &s), 0);
  ck_assert_uint_eq(s.dropped, 1);
  ck_assert_uint_eq(s.buffered, 0);
  ck_assert_uint_eq(json_array_size(items), 0);
}
END_TEST

static Suite *tail_suite(void) {
  Suite *s = suite_create("tail");
  TCase *tc = tcase_create("items");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, an_item_per_activation);
  tcase_add_test(tc, an_errored_instance_is_an_exception);
  tcase_add_test(tc, an_unobserved_workflow_gives_nothing);
  tcase_add_test(tc, a_whole_batch_goes_at_once);
  tcase_add_test(tc, a_full_buffer_drops_and_says_so);
  tcase_add_test(tc, a_failed_batch_is_lost_and_told);
  tcase_add_test(tc, a_consumer_without_handler_drops);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(tail_suite()); }
