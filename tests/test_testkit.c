/* test_testkit.c — the test kit (testkit/duro-test.h) as a plugin author
 * uses it, on planted workflows (tests/testkit/planted.c): the virtual
 * clock, mocks, the assertions, crash runs that must catch each broken
 * rule and pass a workflow that keeps them, and exported journals
 * replayed and run on new builds. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "duro-test.h"

DURO_TEST_API;

#ifndef PLANTED_SO
#error PLANTED_SO must name the planted plugin
#endif

static duro_test *open_with(const char *wf, const char *cls) {
  duro_test *t = duro_test_open();
  int rc = duro_test_load(t, PLANTED_SO, wf, cls, NULL);
  ck_assert_msg(rc == 0, "load: %s", duro_test_error_text(t));
  return t;
}

START_TEST(three_days_on_the_virtual_clock) {
  /* three days in no real time: the case's timeout (30 s) is the bound */
  duro_test *t = open_with("good", "Good");
  int64_t start = duro_test_now_ms(t);
  ck_assert_int_eq(duro_test_create(t, "good", "g1", NULL), 0);
  duro_test_run(t);
  ck_assert_str_eq(duro_test_status(t, "good", "g1"), "waiting");
  ck_assert_str_eq(duro_test_step_result(t, "good", "g1", "fetch#1"),
                   "{\"v\":1}");
  /* not yet: two days in, it still sleeps */
  ck_assert_int_ge(duro_test_advance(t, "2 days"), 0);
  ck_assert_str_eq(duro_test_status(t, "good", "g1"), "waiting");
  ck_assert_int_ge(duro_test_advance(t, "1 day"), 1);
  DURO_TEST_ASSERT_STATUS(t, "good", "g1", "complete");
  DURO_TEST_ASSERT_OUTPUT(t, "good", "g1", "{\"done\":true}");
  ck_assert_str_eq(duro_test_step_result(t, "good", "g1", "notify#2"),
                   "{\"n\":2}");
  ck_assert_int_eq(duro_test_calls(t, "good", "notify"), 3);
  ck_assert_int_eq(duro_test_calls(t, "good", "fetch#1"), 1);
  ck_assert_int_eq(duro_test_now_ms(t) - start, 3LL * 86400 * 1000);
  const char *d = duro_test_describe(t, "good", "g1");
  ck_assert_ptr_nonnull(strstr(d, "\"cool off#1\""));
  duro_test_close(t);
}
END_TEST

START_TEST(run_to_end_moves_the_clock_to_each_wake) {
  duro_test *t = open_with("good", "Good");
  ck_assert_int_eq(duro_test_create(t, "good", "g2", NULL), 0);
  ck_assert_int_eq(duro_test_run_to_end(t, "good", "g2", "1 day"), DURO_E_BUSY);
  ck_assert_str_eq(duro_test_status(t, "good", "g2"), "waiting");
  ck_assert_int_eq(duro_test_run_to_end(t, "good", "g2", NULL), 0);
  DURO_TEST_ASSERT_STATUS(t, "good", "g2", "complete");
  duro_test_close(t);
}
END_TEST

START_TEST(events_and_their_timeout) {
  duro_test *t = open_with("approval", "Approval");
  ck_assert_int_eq(duro_test_create(t, "approval", "a1", NULL), 0);
  ck_assert_int_eq(duro_test_create(t, "approval", "a2", NULL), 0);
  duro_test_run(t);
  ck_assert_int_ge(duro_test_advance(t, "1 day"), 0);
  ck_assert_int_eq(
      duro_test_send_event(t, "approval", "a1", "approved", "{\"by\":\"ann\"}"),
      0);
  duro_test_run(t);
  DURO_TEST_ASSERT_OUTPUT(t, "approval", "a1", "{\"by\":\"ann\"}");
  ck_assert_str_eq(duro_test_status(t, "approval", "a2"), "waiting");
  ck_assert_int_ge(duro_test_advance(t, "1 day"), 1);
  DURO_TEST_ASSERT_OUTPUT(t, "approval", "a2", "\"timed out\"");
  ck_assert_int_ne(duro_test_send_event(t, "approval", "a2", "approved", NULL),
                   0);
  duro_test_close(t);
}
END_TEST

START_TEST(a_mocked_result_replaces_the_callback) {
  duro_test *t = open_with("charge", "Charge");
  ck_assert_int_eq(duro_test_mock_result(t, "charge", "charge", "{\"mock\":1}"),
                   0);
  ck_assert_int_eq(duro_test_create(t, "charge", "c1", NULL), 0);
  duro_test_run(t);
  DURO_TEST_ASSERT_OUTPUT(t, "charge", "c1", "{\"mock\":1}");
  ck_assert_int_ne(duro_test_mock_result(t, "charge", "charge", "{oops"), 0);
  ck_assert_ptr_nonnull(strstr(duro_test_error_text(t), "not JSON"));
  duro_test_close(t);
}
END_TEST

START_TEST(mocked_failures_follow_the_retry_policy) {
  duro_test *t = open_with("charge", "Charge");
  ck_assert_int_eq(duro_test_mock_fail(t, "charge", "charge#1", 2, "declined"),
                   0);
  ck_assert_int_eq(duro_test_create(t, "charge", "c2", NULL), 0);
  duro_test_run(t);
  /* the first attempt failed; the second waits out its minute */
  ck_assert_str_eq(duro_test_status(t, "charge", "c2"), "waiting");
  DURO_TEST_ASSERT_ATTEMPTS(t, "charge", "c2", "charge#1", 1);
  ck_assert_int_ge(duro_test_advance(t, "59s"), 0);
  DURO_TEST_ASSERT_ATTEMPTS(t, "charge", "c2", "charge#1", 1);
  ck_assert_int_ge(duro_test_advance(t, "1s"), 1);
  DURO_TEST_ASSERT_ATTEMPTS(t, "charge", "c2", "charge#1", 2);
  ck_assert_int_ge(duro_test_advance(t, "1 minute"), 1);
  DURO_TEST_ASSERT_ATTEMPTS(t, "charge", "c2", "charge#1", 3);
  /* its own callback ran on the third */
  DURO_TEST_ASSERT_OUTPUT(t, "charge", "c2", "{\"charged\":\"real\"}");
  ck_assert_int_eq(duro_test_calls(t, "charge", "charge#1"), 3);
  duro_test_close(t);
}
END_TEST

START_TEST(a_final_failure_ends_the_instance) {
  duro_test *t = open_with("charge", "Charge");
  ck_assert_int_eq(
      duro_test_mock_fail_final(t, "charge", "charge", "card stolen"), 0);
  ck_assert_int_eq(duro_test_create(t, "charge", "c3", NULL), 0);
  ck_assert_int_eq(duro_test_run_to_end(t, "charge", "c3", NULL), 0);
  DURO_TEST_ASSERT_STATUS(t, "charge", "c3", "errored");
  DURO_TEST_ASSERT_ATTEMPTS(t, "charge", "c3", "charge#1", 1);
  ck_assert_ptr_nonnull(
      strstr(duro_test_error(t, "charge", "c3"), "card stolen"));
  duro_test_close(t);
}
END_TEST

static int own_mock(duro_attempt *a, void *arg) {
  (*(int *)arg)++;
  return duro_attempt_result(a, "\"own\"");
}

START_TEST(a_mock_of_the_tests_own) {
  int calls = 0;
  duro_test *t = open_with("charge", "Charge");
  ck_assert_int_eq(duro_test_mock_fn(t, "charge", "charge", own_mock, &calls),
                   0);
  ck_assert_int_eq(duro_test_create(t, "charge", "c4", NULL), 0);
  duro_test_run(t);
  DURO_TEST_ASSERT_OUTPUT(t, "charge", "c4", "\"own\"");
  ck_assert_int_eq(calls, 1);
  duro_test_close(t);
}
END_TEST

static int failures;
static void count_failure(void *ctx) {
  (void)ctx;
  failures++;
}

START_TEST(assertions_report_and_fail) {
  duro_test *t = open_with("charge", "Charge");
  duro_test_on_failure(t, count_failure, NULL);
  ck_assert_int_eq(duro_test_create(t, "charge", "c5", NULL), 0);
  duro_test_run(t);
  failures = 0;
  ck_assert_int_eq(DURO_TEST_ASSERT_STATUS(t, "charge", "c5", "complete"), 0);
  ck_assert_int_eq(failures, 0);
  ck_assert_int_ne(DURO_TEST_ASSERT_STATUS(t, "charge", "c5", "errored"), 0);
  ck_assert_int_ne(DURO_TEST_ASSERT_OUTPUT(t, "charge", "c5", "42"), 0);
  ck_assert_int_ne(DURO_TEST_ASSERT_ATTEMPTS(t, "charge", "c5", "charge#1", 2),
                   0);
  ck_assert_int_eq(failures, 3);
  duro_test_close(t);
}
END_TEST

START_TEST(bad_loads_say_why) {
  duro_test *t = duro_test_open();
  ck_assert_int_ne(duro_test_load(t, PLANTED_SO, "x", "NoSuchClass", NULL), 0);
  ck_assert_ptr_nonnull(strstr(duro_test_error_text(t), "NoSuchClass"));
  ck_assert_int_ne(duro_test_load(t, "/nonexistent/lib.so", "y", "Good", NULL),
                   0);
  ck_assert_ptr_nonnull(strstr(duro_test_error_text(t), "/nonexistent/lib.so"));
  ck_assert_int_ne(duro_test_advance(t, "soon"), 0);
  duro_test_close(t);
}
END_TEST

START_TEST(pipeline_sends_are_kept_for_the_test) {
  duro_test *t = open_with("views", "Views");
  ck_assert_int_eq(duro_test_pipeline(t, "pageviews", "VIEWS"), 0);
  ck_assert_str_eq(duro_test_pipeline_records(t, "pageviews"), "[]");
  ck_assert_int_eq(duro_test_create(t, "views", "v1", NULL), 0);
  duro_test_run(t);
  DURO_TEST_ASSERT_OUTPUT(t, "views", "v1", "\"sent\"");
  duro_test_advance(t, "400 days"); /* nothing is written out */
  ck_assert_str_eq(duro_test_pipeline_records(t, "pageviews"),
                   "[{\"page\":\"/\"},{\"page\":\"/about\"}]");
  ck_assert_ptr_null(duro_test_pipeline_records(t, "nope"));
  ck_assert_int_ne(duro_test_pipeline(t, "late", NULL), 0);
  duro_test_close(t);
}
END_TEST

START_TEST(queue_sends_are_kept_for_the_test) {
  duro_test *t = open_with("notify", "Notify");
  ck_assert_int_eq(duro_test_queue(t, "notes", "NOTES"), 0);
  ck_assert_str_eq(duro_test_queue_messages(t, "notes"), "[]");
  ck_assert_int_eq(duro_test_create(t, "notify", "n1", NULL), 0);
  ck_assert_int_eq(duro_test_create(t, "notify", "n2", NULL), 0);
  duro_test_run(t);
  DURO_TEST_ASSERT_OUTPUT(t, "notify", "n1", "\"sent\"");
  ck_assert_str_eq(duro_test_queue_messages(t, "notes"),
                   "[{\"note\":\"shipped\"},{\"note\":\"shipped\"}]");
  ck_assert_ptr_null(duro_test_queue_messages(t, "nope"));
  ck_assert_int_ne(duro_test_queue(t, "late", NULL), 0); /* after a create */
  duro_test_close(t);
}
END_TEST

START_TEST(cron_ticks_fire_on_the_virtual_clock) {
  duro_test *t = open_with("charge", "Charge");
  ck_assert_int_ne(duro_test_cron(t, "not a schedule", "charge", NULL), 0);
  ck_assert_int_eq(duro_test_cron(t, "0 9 * * *", "charge", NULL), 0);
  duro_test_run(t);
  ck_assert_ptr_null(duro_test_status(t, "charge", "cron-2026-01-01T09:00"));
  ck_assert_int_ge(duro_test_advance(t, "9 hours"), 1);
  DURO_TEST_ASSERT_STATUS(t, "charge", "cron-2026-01-01T09:00", "complete");
  ck_assert_int_ge(duro_test_advance(t, "2 days"), 2);
  DURO_TEST_ASSERT_STATUS(t, "charge", "cron-2026-01-03T09:00", "complete");
  ck_assert_ptr_null(duro_test_status(t, "charge", "cron-2026-01-04T09:00"));
  duro_test_close(t);
}
END_TEST

START_TEST(cron_ticks_call_the_scheduled_handler) {
  duro_test *t = duro_test_open();
  ck_assert_int_eq(duro_test_load(t, PLANTED_SO, "charge", "Charge", "CHARGE"),
                   0);
  ck_assert_int_eq(duro_test_cron(t, "*/30 * * * *", NULL, NULL), 0);
  ck_assert_int_ge(duro_test_advance(t, "1 hour"), 2);
  /* 00:30 and 01:00 */
  DURO_TEST_ASSERT_STATUS(t, "charge", "tick-1767227400000", "complete");
  DURO_TEST_ASSERT_STATUS(t, "charge", "tick-1767229200000", "complete");
  ck_assert_ptr_null(duro_test_status(t, "charge", "tick-1767231000000"));
  duro_test_close(t);
}
END_TEST

/* ---- crash runs ---- */

START_TEST(crash_everywhere_passes_a_workflow_by_the_rules) {
  duro_test *t = open_with("good", "Good");
  size_t n = 0;
  duro_test_crash_report r;
  int rc = duro_test_crash_everywhere(t, "good", NULL, NULL, &n, &r);
  ck_assert_msg(rc == 0, "boundary %zu (%s): %s", r.boundary, r.where,
                r.message);
  /* fetch, the three branches and finish: before, after the callback,
   * after the commit, each */
  ck_assert_uint_eq(n, 15);
  /* the test's own engine is back */
  ck_assert_int_eq(duro_test_create(t, "good", "after", NULL), 0);
  ck_assert_int_eq(duro_test_run_to_end(t, "good", "after", NULL), 0);
  DURO_TEST_ASSERT_STATUS(t, "good", "after", "complete");
  duro_test_close(t);
}
END_TEST

START_TEST(crash_everywhere_catches_the_clock) {
  duro_test *t = open_with("clock", "Clock");
  duro_test_crash_report r;
  ck_assert_int_ne(duro_test_crash_everywhere(t, "clock", NULL, NULL, NULL, &r),
                   0);
  /* the key of the first run's step and of the replay's */
  ck_assert_msg(strstr(r.message, "diverged") &&
                    strstr(r.message, "even day#1") &&
                    strstr(r.message, "odd day#1"),
                "%s", r.message);
  ck_assert_uint_ge(r.boundary, 1);
  ck_assert_str_ne(r.where, "");
  duro_test_close(t);
}
END_TEST

START_TEST(crash_everywhere_catches_randomness) {
  duro_test *t = open_with("random", "Random");
  duro_test_crash_report r;
  ck_assert_int_ne(
      duro_test_crash_everywhere(t, "random", NULL, NULL, NULL, &r), 0);
  ck_assert_msg(strstr(r.message, "diverged") && strstr(r.message, "item "),
                "%s", r.message);
  duro_test_close(t);
}
END_TEST

START_TEST(crash_everywhere_catches_a_step_that_is_not_idempotent) {
  duro_test *t = open_with("counter", "Counter");
  char dir[] = "/tmp/duro-counter-XXXXXX", params[128], path[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/n", dir);
  snprintf(params, sizeof params, "{\"path\":\"%s\"}", path);
  duro_test_crash_report r;
  ck_assert_int_ne(
      duro_test_crash_everywhere(t, "counter", params, NULL, NULL, &r), 0);
  ck_assert_msg(strstr(r.message, "reserve#1") &&
                    strstr(r.message, "not idempotent"),
                "%s", r.message);
  ck_assert_ptr_nonnull(strstr(r.where, "reserve#1's callback returned"));
  unlink(path);
  rmdir(dir);
  duro_test_close(t);
}
END_TEST

START_TEST(crash_everywhere_with_children) {
  duro_test *t = duro_test_open();
  ck_assert_int_eq(duro_test_load(t, PLANTED_SO, "parent", "Parent", NULL), 0);
  ck_assert_int_eq(duro_test_load(t, PLANTED_SO, "charge", "Charge", "CHARGE"),
                   0);
  ck_assert_int_eq(duro_test_create(t, "parent", "p1", NULL), 0);
  ck_assert_int_eq(duro_test_run_to_end(t, "parent", "p1", NULL), 0);
  DURO_TEST_ASSERT_OUTPUT(t, "parent", "p1", "{\"charged\":\"real\"}");
  DURO_TEST_ASSERT_STATUS(t, "charge", "p1-a", "complete");
  size_t n = 0;
  duro_test_crash_report r;
  int rc = duro_test_crash_everywhere(t, "parent", NULL, NULL, &n, &r);
  ck_assert_msg(rc == 0, "boundary %zu (%s): %s", r.boundary, r.where,
                r.message);
  ck_assert_uint_eq(n, 6); /* each child's charge: three each */
  duro_test_close(t);
}
END_TEST

START_TEST(crash_everywhere_with_events) {
  duro_test *t = open_with("approval", "Approval");
  const char *events[] = {"approved", "{\"by\":\"bo\"}", NULL};
  size_t n = 0;
  duro_test_crash_report r;
  int rc = duro_test_crash_everywhere(t, "approval", NULL, events, &n, &r);
  ck_assert_msg(rc == 0, "boundary %zu (%s): %s", r.boundary, r.where,
                r.message);
  ck_assert_uint_eq(n, 3); /* ship: before, returned, committed */
  duro_test_close(t);
}
END_TEST

/* ---- replays of exported journals ---- */

#define DAY_MS (86400LL * 1000)

/* An instance of Good run a day into its three-day sleep, exported
 * (caller frees); *t0 gets the test's start. */
static char *exported_good(int64_t *t0) {
  duro_test *t = open_with("good", "Good");
  *t0 = duro_test_now_ms(t);
  ck_assert_int_eq(duro_test_create(t, "good", "g1", "{\"who\":\"prod\"}"), 0);
  ck_assert_int_ge(duro_test_advance(t, "1 day"), 1);
  ck_assert_str_eq(duro_test_status(t, "good", "g1"), "waiting");
  ck_assert_ptr_null(duro_test_export(t, "good", "nope"));
  const char *doc = duro_test_export(t, "good", "g1");
  ck_assert_ptr_nonnull(doc);
  ck_assert_ptr_nonnull(strstr(doc, "\"duro-journal-1\""));
  char *copy = strdup(doc);
  /* exporting changed nothing */
  ck_assert_str_eq(duro_test_status(t, "good", "g1"), "waiting");
  ck_assert_int_eq(duro_test_calls(t, "good", "fetch"), 1);
  duro_test_close(t);
  return copy;
}

/* Replaces the first `from` in doc with `to` (a new string). */
static char *edited(const char *doc, const char *from, const char *to) {
  const char *at = strstr(doc, from);
  ck_assert_msg(at != NULL, "\"%s\" not in the export:\n%s", from, doc);
  size_t head = (size_t)(at - doc);
  char *out = malloc(strlen(doc) + strlen(to) + 1);
  ck_assert_ptr_nonnull(out);
  memcpy(out, doc, head);
  strcpy(out + head, to);
  strcat(out, at + strlen(from));
  return out;
}

START_TEST(a_build_that_keeps_the_steps_replays_and_runs_on) {
  int64_t t0;
  char *doc = exported_good(&t0);
  duro_test *t = open_with("good", "GoodV2");
  duro_test_replay_report r;
  int rc = duro_test_replay(t, doc, &r);
  ck_assert_msg(rc == 0, "replay: %d %s", rc, duro_test_error_text(t));
  ck_assert_str_eq(r.outcome, "replays");
  ck_assert_str_eq(r.workflow, "good");
  ck_assert_str_eq(r.id, "g1");
  ck_assert_uint_eq(r.journaled, 2);
  ck_assert_str_eq(r.next, "cool off#1");
  ck_assert_str_eq(r.step, "");
  /* nothing ran: the journal's fetch was replayed, not called */
  ck_assert_int_eq(duro_test_calls(t, "good", "fetch"), 0);
  ck_assert_str_eq(duro_test_status(t, "good", "g1"), "waiting");
  /* the clock is at the export's time: the sleep has two days left */
  ck_assert_int_eq(duro_test_now_ms(t), t0 + DAY_MS);
  ck_assert_int_ge(duro_test_advance(t, "1 day"), 0);
  ck_assert_str_eq(duro_test_status(t, "good", "g1"), "waiting");
  ck_assert_int_eq(duro_test_run_to_end(t, "good", "g1", NULL), 0);
  DURO_TEST_ASSERT_STATUS(t, "good", "g1", "complete");
  DURO_TEST_ASSERT_OUTPUT(t, "good", "g1", "{\"done\":\"v2\"}");
  ck_assert_int_eq(duro_test_now_ms(t), t0 + 3 * DAY_MS);
  ck_assert_int_eq(duro_test_calls(t, "good", "fetch"), 0);
  ck_assert_int_eq(duro_test_calls(t, "good", "notify"), 3);
  ck_assert_str_eq(duro_test_step_result(t, "good", "g1", "fetch#1"),
                   "{\"v\":1}");
  duro_test_close(t);
  free(doc);
}
END_TEST

START_TEST(a_renamed_step_diverges_naming_it) {
  int64_t t0;
  char *doc = exported_good(&t0);
  duro_test *t = open_with("good", "GoodRenamed");
  duro_test_replay_report r;
  ck_assert_int_eq(duro_test_replay(t, doc, &r), DURO_ERROR);
  ck_assert_str_eq(r.outcome, "diverged");
  ck_assert_str_eq(r.step, "rest#1");
  ck_assert_str_eq(r.journal_step, "cool off#1");
  ck_assert_msg(strstr(r.message, "\"cool off#1\"") &&
                    strstr(r.message, "\"rest#1\""),
                "%s", r.message);
  ck_assert_msg(strstr(duro_test_error_text(t), "good/g1 diverged"), "%s",
                duro_test_error_text(t));
  /* a dry run: nothing ran or changed */
  ck_assert_int_eq(duro_test_calls(t, "good", "fetch"), 0);
  ck_assert_str_eq(duro_test_status(t, "good", "g1"), "waiting");
  duro_test_close(t);
  free(doc);
}
END_TEST

/* An import from a file, by path, then run by hand. */
START_TEST(an_import_from_a_file_runs_on) {
  int64_t t0;
  char *doc = exported_good(&t0);
  char path[] = "/tmp/duro-journal-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
  close(fd);
  duro_test *t = open_with("good", "Good");
  const char *id = NULL;
  int rc = duro_test_import(t, path, &id);
  ck_assert_msg(rc == 0, "import: %s", duro_test_error_text(t));
  ck_assert_str_eq(id, "g1");
  ck_assert_int_ge(duro_test_advance(t, "2 days"), 1);
  DURO_TEST_ASSERT_OUTPUT(t, "good", "g1", "{\"done\":true}");
  /* once is all: the instance is this test's now */
  ck_assert_int_eq(duro_test_import(t, path, NULL), DURO_E_ALREADY_EXISTS);
  ck_assert_msg(strstr(duro_test_error_text(t), "has that instance already"),
                "%s", duro_test_error_text(t));
  unlink(path);
  duro_test_close(t);
  free(doc);
}
END_TEST

/* Each bad document fails with what and where, and imports nothing. */
START_TEST(bad_documents_say_what_and_where) {
  int64_t t0;
  char *doc = exported_good(&t0);
  duro_test *t = open_with("good", "Good");
  duro_test_replay_report r;
  static const struct {
    const char *from, *to, *says;
  } bad[] = {
      {"{", "{ nonsense", "the document: not a JSON document (line 1"},
      {"duro-journal-1", "duro-journal-9",
       "format: \"duro-journal-9\" is not a format this build reads"},
      {"\"workflow\": \"good\"", "\"workflow\": \"bad\"",
       "workflow \"bad\" is not registered in this test"},
      {"\"kind\": \"sleep\"", "\"kind\": \"nap\"",
       "steps[1].kind: \"nap\" is not a step kind"},
      {"\"params\": \"{\\\"who\\\":\\\"prod\\\"}\"", "\"params\": \"{who\"",
       "params: \"{who\" is not JSON text"},
      {"\"count\": 1", "\"count\": \"one\"",
       "steps[0].count: must be an integer"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *d = edited(doc, bad[i].from, bad[i].to);
    ck_assert_int_lt(duro_test_replay(t, d, &r), 0);
    ck_assert_msg(strstr(duro_test_error_text(t), bad[i].says),
                  "case %zu: want \"%s\" in \"%s\"", i, bad[i].says,
                  duro_test_error_text(t));
    ck_assert_ptr_null(duro_test_status(t, "good", "g1"));
    free(d);
  }
  ck_assert_int_eq(duro_test_import(t, "/nonexistent/journal.json", NULL),
                   DURO_E_IO);
  ck_assert_msg(strstr(duro_test_error_text(t), "/nonexistent/journal.json: "),
                "%s", duro_test_error_text(t));
  duro_test_close(t);
  free(doc);
}
END_TEST

/* An instance that has ended imports, but has nothing to replay. */
START_TEST(an_ended_instance_has_nothing_to_replay) {
  duro_test *t = open_with("good", "Good");
  ck_assert_int_eq(duro_test_create(t, "good", "done", NULL), 0);
  ck_assert_int_eq(duro_test_run_to_end(t, "good", "done", NULL), 0);
  char *doc = strdup(duro_test_export(t, "good", "done"));
  duro_test_close(t);
  t = open_with("good", "GoodV2");
  duro_test_replay_report r;
  ck_assert_int_eq(duro_test_replay(t, doc, &r), DURO_E_INVALID_ARGUMENT);
  ck_assert_msg(strstr(duro_test_error_text(t), "good/done: it is complete"),
                "%s", duro_test_error_text(t));
  DURO_TEST_ASSERT_OUTPUT(t, "good", "done", "{\"done\":true}");
  duro_test_close(t);
  free(doc);
}
END_TEST

int main(void) {
  Suite *s = suite_create("testkit");
  TCase *run = tcase_create("run");
  tcase_add_test(run, three_days_on_the_virtual_clock);
  tcase_add_test(run, run_to_end_moves_the_clock_to_each_wake);
  tcase_add_test(run, events_and_their_timeout);
  tcase_add_test(run, bad_loads_say_why);
  tcase_add_test(run, assertions_report_and_fail);
  tcase_add_test(run, queue_sends_are_kept_for_the_test);
  tcase_add_test(run, pipeline_sends_are_kept_for_the_test);
  tcase_add_test(run, cron_ticks_fire_on_the_virtual_clock);
  tcase_add_test(run, cron_ticks_call_the_scheduled_handler);
  suite_add_tcase(s, run);
  TCase *mock = tcase_create("mock");
  tcase_add_test(mock, a_mocked_result_replaces_the_callback);
  tcase_add_test(mock, mocked_failures_follow_the_retry_policy);
  tcase_add_test(mock, a_final_failure_ends_the_instance);
  tcase_add_test(mock, a_mock_of_the_tests_own);
  suite_add_tcase(s, mock);
  TCase *crash = tcase_create("crash");
  tcase_set_timeout(crash, 240);
  tcase_add_test(crash, crash_everywhere_passes_a_workflow_by_the_rules);
  tcase_add_test(crash, crash_everywhere_catches_the_clock);
  tcase_add_test(crash, crash_everywhere_catches_randomness);
  tcase_add_test(crash, crash_everywhere_catches_a_step_that_is_not_idempotent);
  tcase_add_test(crash, crash_everywhere_with_events);
  tcase_add_test(crash, crash_everywhere_with_children);
  suite_add_tcase(s, crash);
  TCase *replay = tcase_create("replay");
  tcase_add_test(replay, a_build_that_keeps_the_steps_replays_and_runs_on);
  tcase_add_test(replay, a_renamed_step_diverges_naming_it);
  tcase_add_test(replay, an_import_from_a_file_runs_on);
  tcase_add_test(replay, bad_documents_say_what_and_where);
  tcase_add_test(replay, an_ended_instance_has_nothing_to_replay);
  suite_add_tcase(s, replay);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
