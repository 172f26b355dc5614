/* test_event_cursor.c — the ids of an instance's event stream
 * (host/engine/instance_events.c) as cursors, on a virtual clock: a read
 * after the last id returns an event stamped before an item already
 * sent (its request came first, its commit last) once, and nothing
 * twice; the ids of the older form ("ms-kind-a-b") are still read; a
 * malformed one is refused. */
#include <check.h>
#include <string.h>

#include "core.h"
#include "error.h"
#include "harness.h"
#include "journal.h"
#include "suite_run.h"

static harness h;

static int work(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

/* A step, then a wait for "go". */
static duro_rc waiter(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "a", NULL, work, NULL, NULL));
  const char *got;
  DURO_TRY(duro_wait_for_event(step, "go", "go", "1 hour", &got));
  return duro_set_output(step, "1");
}

static void setup(void) {
  harness_open(&h);
  harness_register(&h, "waiter", waiter);
  harness_start(&h);
}

static void teardown(void) { harness_close(&h); }

/* The items after `after`, and the last one's id into last (when any). */
static json_t *since(const char *after, char *last, size_t len) {
  json_t *items = NULL;
  int ended = 0;
  ck_assert_int_eq(duro_instance_events_since(h.e, "waiter", "w1", after, 256,
                                              &items, &ended),
                   0);
  size_t n = json_array_size(items);
  if (n && last)
    snprintf(
        last, len, "%s",
        json_string_value(json_object_get(json_array_get(items, n - 1), "id")));
  return items;
}

/* An event of `type` for w1 stamped at `ts`, committed now, as an event
 * whose request came at ts and whose commit came late would be. */
static void late_event(const char *type, int64_t ts) {
  journal_instance in = {0};
  ck_assert_int_eq(
      journal_instance_get(engine_journal(h.e), "waiter", "w1", &in), 0);
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_EVENT_INSERT);
  op->rowid = in.rowid;
  op->event_type = type;
  op->event_payload = "{}";
  op->ts_ms = ts;
  ck_assert_int_eq(journal_commit(engine_journal(h.e), &b), 0);
  journal_batch_free(&b);
  journal_instance_clear(&in);
}

static size_t count_events(const json_t *items, const char *type) {
  size_t i, n = 0;
  json_t *it;
  json_array_foreach(items, i, it) {
    const char *t =
        json_string_value(json_object_get(json_object_get(it, "data"), "type"));
    n += !strcmp(json_string_value(json_object_get(it, "event")),
                 "event_received") &&
         t && !strcmp(t, type);
  }
  return n;
}

START_TEST(a_late_event_is_sent_once) {
  harness_create(&h, "waiter", "w1", NULL, 0);
  harness_run(&h);
  char last[160] = "";
  json_t *first = since(NULL, last, sizeof last);
  ck_assert_uint_ge(json_array_size(first), 3);
  ck_assert_uint_eq(count_events(first, "other"), 0);
  json_decref(first);

  /* stamped at the instance's creation, before the step already sent */
  late_event("other", T0_MS);
  json_t *next = since(last, last, sizeof last);
  ck_assert_uint_eq(json_array_size(next), 1);
  ck_assert_uint_eq(count_events(next, "other"), 1);
  json_decref(next);
  /* nothing again */
  json_t *none = since(last, NULL, 0);
  ck_assert_uint_eq(json_array_size(none), 0);
  json_decref(none);

  /* the whole history has it, once */
  json_t *all = since(NULL, NULL, 0);
  ck_assert_uint_eq(count_events(all, "other"), 1);
  json_decref(all);
}
END_TEST

START_TEST(older_ids_are_read_and_bad_ones_refused) {
  harness_create(&h, "waiter", "w1", NULL, 0);
  harness_run(&h);
  json_t *all = since(NULL, NULL, 0);
  /* the first item's id, cut to the older form: what follows it */
  char old[160];
  snprintf(old, sizeof old, "%s",
           json_string_value(json_object_get(json_array_get(all, 0), "id")));
  *strrchr(old, '-') = '\0';
  json_t *rest = since(old, NULL, 0);
  ck_assert_uint_eq(json_array_size(rest), json_array_size(all) - 1);
  json_decref(rest);
  json_decref(all);
  json_t *items = NULL;
  int ended = 0;
  ck_assert_int_eq(duro_instance_events_since(h.e, "waiter", "w1", "1-2-3", 10,
                                              &items, &ended),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(duro_instance_events_since(h.e, "waiter", "w1", "1-2-3-4-x",
                                              10, &items, &ended),
                   DURO_E_INVALID_ARGUMENT);
}
END_TEST

static Suite *cursor_suite(void) {
  Suite *s = suite_create("event_cursor");
  TCase *tc = tcase_create("cursor");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, a_late_event_is_sent_once);
  tcase_add_test(tc, older_ids_are_read_and_bad_ones_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(cursor_suite()); }
