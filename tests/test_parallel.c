/* test_parallel.c — duro_do_all (host/engine/step_parallel.c) on the
 * real engine with a fresh journal (SQLite, or DURO_TEST_PG's server),
 * workers = 0 and a virtual clock.  The callbacks run here one after
 * another (code in the engine holds its thread); test_workers runs them
 * side by side in a worker process.
 *
 *   results_in_call_order   five branches complete: results in call
 *                           order, each a do step keyed name#k after the
 *                           name's earlier calls, each callback run once;
 *   failure_spares_others   a branch that fails for good: the others
 *                           complete, the call fails with its error,
 *                           which run() may handle;
 *   retry_runs_only_it      a branch that fails once waits out its
 *                           back-off (the instance sleeps), then only it
 *                           runs again: the others answer from the
 *                           journal;
 *   fail_fast_starts_no_more  with DURO_FAIL_FAST and one in flight, the
 *                           branches after a failure never start, and a
 *                           replay returns the same failure;
 *   first_wins              with DURO_FIRST and one in flight, the first
 *                           to complete ends the call;
 *   bad_calls_refused       no branches, too many, a branch without a
 *                           callback, unknown flags: errors that say so;
 *   counts_toward_steps     each branch counts toward limits.steps;
 *   replay_diverges         code that asks for another step where the
 *                           journal has a branch stops at
 *                           replay.diverged, and duro check --replay
 *                           says so beforehand. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "harness.h"
#include "suite_run.h"
#include "view_dry_run.h"

#define SEC 1000LL
#define WF "par"

static harness H;
static json_t *last_desc;

static struct {
  int runs[16];      /* callbacks run, by branch */
  int fail_once[16]; /* fail their first attempt (retryable) */
  int fail[16];      /* fail for good */
  int rc;            /* duro_do_all's, as run() saw it */
  char error[256];   /* duro_step_error() after a DURO_ERROR */
  char results[256]; /* the branches' results, "r0,r1,-" */
  int handled;       /* run() handled the error */
  int changed;       /* the code changed: a sleep where b#1 was */
} T;

static void setup(void) {
  memset(&T, 0, sizeof T);
  T.rc = -99;
  harness_open(&H);
}

static void teardown(void) {
  json_decref(last_desc);
  last_desc = NULL;
  harness_close(&H);
}

static int64_t param(const duro_event *ev, const char *pointer, int64_t dflt) {
  int64_t v = dflt;
  duro_json_integer(ev->params, pointer, &v);
  return v;
}

static int branch_fn(duro_attempt *a, void *arg) {
  int i = (int)(intptr_t)arg;
  T.runs[i]++;
  if (T.fail[i])
    return duro_attempt_fail_final(a, "branch %d is broken", i);
  if (T.fail_once[i] && duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "branch %d not yet", i);
  char json[16];
  snprintf(json, sizeof json, "\"r%d\"", i);
  return duro_attempt_result(a, json);
}

/* {"n": N, "max": M, "flags": F, "before": B (duro_do calls of the same
 * name first), "catch": 1 (run() handles the call's error)}: one
 * duro_do_all; its results joined into T.results. */
static duro_rc wf_par(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = (int)param(ev, "/n", 3);
  if (T.changed) {
    DURO_TRY(duro_sleep(step, "b", "1 minute"));
    return duro_set_output(step, "\"changed\"");
  }
  for (int64_t k = 0; k < param(ev, "/before", 0); k++)
    DURO_TRY(duro_do(step, "b", NULL, branch_fn, (void *)(intptr_t)15, NULL));
  duro_retries quick = {
      .limit = 2, .delay = "10 seconds", .backoff = DURO_BACKOFF_CONSTANT};
  duro_step_config cfg = {.retries = &quick};
  duro_branch b[16];
  for (int i = 0; i < n && i < 16; i++)
    b[i] =
        (duro_branch){.fn = branch_fn, .arg = (void *)(intptr_t)i, .cfg = &cfg};
  duro_rc rc =
      duro_do_all(step, "b", b, (size_t)n, (uint32_t)param(ev, "/max", 0),
                  (uint32_t)param(ev, "/flags", 0));
  T.rc = rc;
  if (rc == DURO_SUSPEND)
    return rc;
  size_t at = 0;
  T.results[0] = '\0';
  for (int i = 0; i < n && i < 16; i++)
    at += (size_t)snprintf(T.results + at, sizeof T.results - at, "%s%s",
                           i ? "," : "",
                           b[i].result  ? b[i].result
                           : b[i].error ? "E"
                                        : "-");
  if (rc == DURO_ERROR) {
    snprintf(T.error, sizeof T.error, "%s", duro_step_error(step));
    if (param(ev, "/catch", 0)) {
      T.handled = 1;
      return duro_set_output(step, "\"handled\"");
    }
    return rc;
  }
  return duro_set_output(step, "\"ok\"");
}

/* ---- helpers ------------------------------------------------------------- */

static void start(void) {
  harness_register(&H, WF, wf_par);
  harness_start(&H);
}

static json_t *desc(const char *id) {
  json_decref(last_desc);
  last_desc = harness_describe(&H, WF, id);
  return last_desc;
}

static const char *step_status(const char *id, const char *key) {
  json_t *s = harness_step(desc(id), key);
  ck_assert_msg(s != NULL, "no step %s", key);
  return json_string_value(json_object_get(s, "status"));
}

/* ---- the cases ----------------------------------------------------------- */

START_TEST(results_in_call_order) {
  start();
  harness_create(&H, WF, "a", "{\"n\":5,\"before\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  ck_assert_int_eq(T.rc, DURO_OK);
  ck_assert_str_eq(T.results, "\"r0\",\"r1\",\"r2\",\"r3\",\"r4\"");
  for (int i = 0; i < 5; i++)
    ck_assert_int_eq(T.runs[i], 1);
  /* b#1 is the duro_do before; the branches go on from b#2 */
  json_t *d = desc("a");
  for (int k = 2; k <= 6; k++) {
    char key[16];
    snprintf(key, sizeof key, "b#%d", k);
    json_t *s = harness_step(d, key);
    ck_assert_msg(s != NULL, "no step %s", key);
    ck_assert_str_eq(json_string_value(json_object_get(s, "type")), "do");
    char want[16];
    snprintf(want, sizeof want, "r%d", k - 2);
    ck_assert_str_eq(json_string_value(json_object_get(s, "result")), want);
  }
  ck_assert_ptr_null(harness_step(d, "b#7"));
}
END_TEST

START_TEST(failure_spares_others) {
  start();
  T.fail[1] = 1;
  harness_create(&H, WF, "a", "{\"n\":4}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_int_eq(T.rc, DURO_ERROR);
  ck_assert_str_eq(T.results, "\"r0\",E,\"r2\",\"r3\"");
  ck_assert_msg(strstr(T.error, "branch 1 is broken"), "%s", T.error);
  ck_assert_str_eq(step_status("a", "b#2"), "errored");
  ck_assert_str_eq(step_status("a", "b#4"), "complete");
  /* handled by run(): the instance completes */
  memset(&T, 0, sizeof T);
  T.fail[1] = 1;
  harness_create(&H, WF, "c", "{\"n\":4,\"catch\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "c"), "complete");
  ck_assert_int_eq(T.handled, 1);
}
END_TEST

START_TEST(retry_runs_only_it) {
  start();
  T.fail_once[2] = 1;
  harness_create(&H, WF, "a", "{\"n\":4}", 0);
  harness_run(&H);
  /* the others completed; branch 2 waits out its 10 s back-off */
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  ck_assert_int_eq(T.rc, DURO_SUSPEND);
  ck_assert_str_eq(step_status("a", "b#1"), "complete");
  ck_assert_str_eq(step_status("a", "b#3"), "waiting");
  harness_advance(&H, 9 * SEC);
  ck_assert_int_eq(T.runs[2], 1);
  harness_advance(&H, 2 * SEC);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  ck_assert_str_eq(T.results, "\"r0\",\"r1\",\"r2\",\"r3\"");
  /* the replay answered the others from the journal */
  ck_assert_int_eq(T.runs[0], 1);
  ck_assert_int_eq(T.runs[1], 1);
  ck_assert_int_eq(T.runs[2], 2);
  ck_assert_int_eq(T.runs[3], 1);
}
END_TEST

START_TEST(fail_fast_starts_no_more) {
  start();
  T.fail[1] = 1;
  T.fail_once[0] = 0;
  harness_create(&H, WF, "a", "{\"n\":5,\"max\":1,\"flags\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.results, "\"r0\",E,-,-,-");
  ck_assert_int_eq(T.runs[2] + T.runs[3] + T.runs[4], 0);
  ck_assert_ptr_null(harness_step(desc("a"), "b#3"));
  /* a replay (a restart from the start) meets the same failure first: it
   * fails the same, starting nothing more */
  memset(&T, 0, sizeof T);
  T.fail[1] = 1;
  harness_create(&H, WF, "c", "{\"n\":5,\"max\":1,\"flags\":1,\"catch\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(T.results, "\"r0\",E,-,-,-");
  ck_assert_int_eq(T.handled, 1);
}
END_TEST

START_TEST(first_wins) {
  start();
  T.fail[0] = 1;
  harness_create(&H, WF, "a", "{\"n\":4,\"max\":1,\"flags\":2}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  ck_assert_int_eq(T.rc, DURO_OK);
  ck_assert_str_eq(T.results, "E,\"r1\",-,-");
  ck_assert_int_eq(T.runs[2] + T.runs[3], 0);
  /* all of them failing: the call fails */
  memset(&T, 0, sizeof T);
  for (int i = 0; i < 3; i++)
    T.fail[i] = 1;
  harness_create(&H, WF, "c", "{\"n\":3,\"flags\":2}", 0);
  harness_run(&H);
  ck_assert_int_eq(T.rc, DURO_ERROR);
  ck_assert_str_eq(T.results, "E,E,E");
}
END_TEST

/* Each case's run(): a call the step runner refuses, and its error. */
static duro_rc wf_bad(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  duro_branch b[2] = {{.fn = branch_fn}, {.fn = NULL}};
  int64_t which = param(ev, "/case", 0);
  duro_rc rc = which == 0   ? duro_do_all(step, "x", b, 0, 0, 0)
               : which == 1 ? duro_do_all(step, "x", b, 1001, 0, 0)
               : which == 2 ? duro_do_all(step, "x", b, 2, 0, 0)
                            : duro_do_all(step, "x", b, 1, 0, 8);
  T.rc = rc;
  snprintf(T.error, sizeof T.error, "%s", duro_step_error(step));
  return rc == DURO_ERROR ? duro_set_output(step, duro_step_error(step)) : rc;
}

START_TEST(bad_calls_refused) {
  harness_register(&H, WF, wf_bad);
  harness_start(&H);
  static const char *const want[] = {"1 to 1000 branches", "1 to 1000 branches",
                                     "branch 1 has no", "unknown flags"};
  for (int c = 0; c < 4; c++) {
    char id[8], params[32];
    snprintf(id, sizeof id, "c%d", c);
    snprintf(params, sizeof params, "{\"case\":%d}", c);
    harness_create(&H, WF, id, params, 0);
    harness_run(&H);
    ck_assert_int_eq(T.rc, DURO_ERROR);
    ck_assert_msg(strstr(T.error, want[c]), "case %d: %s", c, T.error);
  }
}
END_TEST

START_TEST(counts_toward_steps) {
  harness_register(&H, WF, wf_par);
  harness_start(&H);
  ck_assert_int_eq(duro_engine_set_limits(H.e, WF, NULL, 0, 4, 0, 0), 0);
  harness_create(&H, WF, "a", "{\"n\":6}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_msg(strstr(T.error, "limit of 4 steps"), "%s", T.error);
  ck_assert_int_eq(T.runs[0], 0); /* refused before any ran */
}
END_TEST

START_TEST(replay_diverges) {
  start();
  T.fail_once[0] = 1;
  harness_create(&H, WF, "a", "{\"n\":2}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  /* duro check --replay finds the journal as the code asks for it */
  json_t *rep = NULL;
  ck_assert_int_eq(duro_engine_dry_run(H.e, WF, wf_par, &rep), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(rep, "diverged")), 0);
  json_decref(rep);
  /* the next build asks for a sleep where the journal has b#1 */
  T.changed = 1;
  ck_assert_int_eq(duro_engine_dry_run(H.e, WF, wf_par, &rep), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(rep, "diverged")), 1);
  json_decref(rep);
  harness_advance(&H, 11 * SEC);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  json_t *err = json_object_get(desc("a"), "error");
  ck_assert_str_eq(json_string_value(json_object_get(err, "name")),
                   "replay.diverged");
}
END_TEST

static Suite *parallel_suite(void) {
  Suite *s = suite_create("parallel");
  TCase *tc = tcase_create("do_all");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, results_in_call_order);
  tcase_add_test(tc, failure_spares_others);
  tcase_add_test(tc, retry_runs_only_it);
  tcase_add_test(tc, fail_fast_starts_no_more);
  tcase_add_test(tc, first_wins);
  tcase_add_test(tc, bad_calls_refused);
  tcase_add_test(tc, counts_toward_steps);
  tcase_add_test(tc, replay_diverges);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(parallel_suite()); }
