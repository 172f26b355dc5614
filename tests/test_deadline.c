/* test_deadline.c — an instance's deadline (a workflow's `timeout`, or
 * its create's), on the real engine with a fresh SQLite journal,
 * workers = 0 and a virtual clock (time moves only when a test advances
 * it):
 *
 *   sleep_capped        an instance sleeping past its deadline wakes at
 *                       the deadline and ends errored instance.timed_out,
 *                       its sleep cancelled, its completed step kept;
 *   event_wait_capped   likewise an event wait (24 h by default): an
 *                       event sent after the end is refused;
 *   backoff_capped      a retry's back-off past the deadline: no further
 *                       attempt runs;
 *   attempt_cut         a callback running when the deadline comes: its
 *                       own timeout is cut to the deadline
 *                       (duro_attempt_deadline_ms), its late success is
 *                       not kept, and run() cannot catch the end;
 *   queued_past         an instance first run after its deadline: run()
 *                       is never called;
 *   done_in_time        one that completes before its deadline completes,
 *                       and describe shows the deadline;
 *   workflow_default    the workflow's timeout (duro_engine_set_limits)
 *                       applies to instances created from then on; a
 *                       create's own wins over it;
 *   paused_past         a paused instance stays paused past its deadline;
 *                       resumed, it ends timed out at once;
 *   terminate_first     a terminate asked for before the deadline ends it
 *                       terminated, not timed out;
 *   restart_renews      a restart gives the new run its timeout again,
 *                       from the restart;
 *   survives_reopen     the deadline is on disk: an engine opened again
 *                       ends the instance at the same time. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "harness.h"
#include "suite_run.h"

#define SEC 1000LL
#define MIN (60 * SEC)
#define HOUR (60 * MIN)

#define WF "wf"

static harness H;
static json_t *last_desc;

static struct {
  int top;             /* entries into run() */
  int calls;           /* step callback executions */
  int caught_rc;       /* what the cut step's duro_do returned to run() */
  int64_t cb_deadline; /* duro_attempt_deadline_ms in the slow callback */
} C;

static int64_t now(void) { return duro_clock_now(&H.clock); }

static void setup(void) {
  memset(&C, 0, sizeof C);
  harness_open(&H);
}

static void teardown(void) {
  json_decref(last_desc);
  last_desc = NULL;
  harness_close(&H);
}

/* ---- workflows ----------------------------------------------------------- */

static int cb_ok(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls++;
  duro_attempt_result(a, "{\"ok\":1}");
  return 0;
}

static int cb_fail(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls++;
  duro_attempt_fail(a, "down");
  return -1;
}

/* Runs past the instance's deadline (it moves the virtual clock itself),
 * then succeeds. */
static int cb_slow(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls++;
  C.cb_deadline = duro_attempt_deadline_ms(a);
  duro_clock_advance(&H.clock, 2 * MIN);
  duro_attempt_result(a, "{\"late\":1}");
  return 0;
}

/* A step, then a sleep of an hour. */
static duro_rc wf_sleeper(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev, (void)env;
  C.top++;
  duro_rc rc = duro_do(step, "a", NULL, cb_ok, NULL, NULL);
  if (rc != DURO_OK)
    return rc;
  if ((rc = duro_sleep(step, "nap", "1 hour")) != DURO_OK)
    return rc;
  return duro_set_output(step, "{\"slept\":1}");
}

static duro_rc wf_waiter(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  C.top++;
  return duro_wait_for_event(step, "go", "go", NULL, NULL);
}

static duro_retries HOURLY = {
    .limit = 5, .delay = "1 hour", .backoff = DURO_BACKOFF_CONSTANT};
static duro_step_config HOURLY_CFG = {.retries = &HOURLY};

static duro_rc wf_flaky(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  C.top++;
  return duro_do(step, "flaky", &HOURLY_CFG, cb_fail, NULL, NULL);
}

/* The slow step, whose error run() tries to catch and go on from. */
static duro_rc wf_slow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  C.top++;
  C.caught_rc = duro_do(step, "slow", NULL, cb_slow, NULL, NULL);
  duro_rc rc = duro_do(step, "after", NULL, cb_ok, NULL, NULL);
  if (rc != DURO_OK)
    return rc;
  return duro_set_output(step, "{\"caught\":1}");
}

static duro_rc wf_quick(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  C.top++;
  duro_rc rc = duro_do(step, "a", NULL, cb_ok, NULL, NULL);
  if (rc != DURO_OK)
    return rc;
  return duro_set_output(step, "{\"done\":1}");
}

/* ---- helpers ------------------------------------------------------------- */

static void start(duro_run_fn run) {
  harness_register(&H, WF, run);
  harness_start(&H);
}

/* Creates instance `id` with its own timeout (0: the workflow's). */
static void create(const char *id, int64_t timeout_ms) {
  harness_create(&H, WF, id, NULL, timeout_ms);
}

static json_t *desc(const char *id) {
  json_decref(last_desc);
  last_desc = harness_describe(&H, WF, id);
  return last_desc;
}

static json_t *jget(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  ck_assert_msg(v != NULL, "JSON has no \"%s\"", key);
  return v;
}

static const char *jstr(json_t *o, const char *key) {
  json_t *v = jget(o, key);
  ck_assert_msg(json_is_string(v), "\"%s\" is not a string", key);
  return json_string_value(v);
}

static int64_t jms(json_t *o, const char *key) {
  json_t *v = jget(o, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

static const char *status_of(const char *id) {
  return harness_status(&H, WF, id);
}

/* The instance ended errored instance.timed_out at `when`. */
static void assert_timed_out(const char *id, int64_t when) {
  json_t *d = desc(id);
  ck_assert_str_eq(jstr(d, "status"), "errored");
  ck_assert_str_eq(jstr(jget(d, "error"), "name"), DURO_ERR_TIMED_OUT);
  ck_assert_int_eq(jms(d, "ended_ms"), when);
}

static json_t *step_of(json_t *d, const char *key) {
  json_t *s = harness_step(d, key);
  ck_assert_msg(s != NULL, "describe has no step \"%s\"", key);
  return s;
}

/* ---- the cases ----------------------------------------------------------- */

START_TEST(sleep_capped) {
  start(wf_sleeper);
  int64_t t0 = now();
  create("s", 10 * MIN);
  harness_run(&H);
  json_t *d = desc("s");
  ck_assert_str_eq(jstr(d, "status"), "waiting");
  ck_assert_int_eq(jms(d, "deadline_ms"), t0 + 10 * MIN);
  ck_assert_int_eq(jms(d, "wake_ms"), t0 + 10 * MIN); /* not the hour */
  harness_advance(&H, 10 * MIN - 1);
  ck_assert_str_eq(status_of("s"), "waiting");
  harness_advance(&H, 1);
  assert_timed_out("s", t0 + 10 * MIN);
  d = desc("s");
  ck_assert_str_eq(jstr(step_of(d, "a#1"), "status"), "complete");
  ck_assert_str_eq(jstr(step_of(d, "nap#1"), "status"), "cancelled");
  ck_assert_int_eq(C.calls, 1); /* the completed step never ran again */
  /* nothing more happens */
  harness_advance(&H, 2 * HOUR);
  ck_assert_int_eq(C.calls, 1);
  ck_assert_str_eq(status_of("s"), "errored");
}
END_TEST

START_TEST(event_wait_capped) {
  start(wf_waiter);
  int64_t t0 = now();
  create("w", 5 * MIN);
  harness_run(&H);
  ck_assert_str_eq(status_of("w"), "waiting");
  harness_advance(&H, 5 * MIN);
  assert_timed_out("w", t0 + 5 * MIN);
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "w", "go", "{}"),
                   DURO_E_INSTANCE_ENDED);
}
END_TEST

START_TEST(backoff_capped) {
  start(wf_flaky);
  int64_t t0 = now();
  create("f", 30 * MIN);
  harness_run(&H);
  ck_assert_int_eq(C.calls, 1);
  json_t *d = desc("f");
  ck_assert_int_eq(jms(d, "wake_ms"), t0 + 30 * MIN); /* not the hour */
  harness_advance(&H, 30 * MIN);
  assert_timed_out("f", t0 + 30 * MIN);
  ck_assert_int_eq(C.calls, 1); /* no attempt after the deadline */
  harness_advance(&H, 2 * HOUR);
  ck_assert_int_eq(C.calls, 1);
}
END_TEST

START_TEST(attempt_cut) {
  start(wf_slow);
  int64_t t0 = now();
  create("c", 1 * MIN); /* the step's own timeout is 10 minutes */
  harness_run(&H);
  ck_assert_int_eq(C.calls, 1);
  ck_assert_int_eq(C.cb_deadline, t0 + 1 * MIN);
  /* run() cannot catch it: the call suspends, and what it does next
   * records nothing (no "after" step below) */
  ck_assert_int_eq(C.caught_rc, DURO_SUSPEND);
  json_t *d = desc("c");
  ck_assert_str_eq(jstr(d, "status"), "errored");
  ck_assert_str_eq(jstr(jget(d, "error"), "name"), DURO_ERR_TIMED_OUT);
  json_t *s = step_of(d, "slow#1");
  ck_assert_str_eq(jstr(s, "status"), "errored");
  ck_assert(json_is_null(jget(s, "result"))); /* the late success is not kept */
  ck_assert_ptr_null(harness_step(d, "after#1"));
  harness_advance(&H, HOUR);
  ck_assert_int_eq(C.calls, 1);
}
END_TEST

START_TEST(queued_past) {
  start(wf_quick);
  int64_t t0 = now();
  create("q", 1 * MIN);
  /* it is not run before its deadline passes (a backlog, a host down) */
  duro_clock_advance(&H.clock, 2 * MIN);
  harness_run(&H);
  ck_assert_int_eq(C.top, 0);
  ck_assert_int_eq(C.calls, 0);
  assert_timed_out("q", t0 + 2 * MIN);
}
END_TEST

START_TEST(done_in_time) {
  start(wf_quick);
  int64_t t0 = now();
  create("d", HOUR);
  harness_run(&H);
  json_t *d = desc("d");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  ck_assert_int_eq(jms(d, "deadline_ms"), t0 + HOUR);
  create("n", 0); /* no timeout anywhere: no deadline */
  harness_run(&H);
  d = desc("n");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  ck_assert(json_is_null(jget(d, "deadline_ms")));
}
END_TEST

START_TEST(workflow_default) {
  start(wf_sleeper);
  create("before", 0);
  ck_assert_int_eq(duro_engine_set_limits(H.e, WF, NULL, 20 * MIN, 0, 0, 0), 0);
  int64_t t0 = now();
  create("dflt", 0);
  create("own", 5 * MIN);
  harness_run(&H);
  ck_assert(json_is_null(jget(desc("before"), "deadline_ms")));
  ck_assert_int_eq(jms(desc("dflt"), "deadline_ms"), t0 + 20 * MIN);
  ck_assert_int_eq(jms(desc("own"), "deadline_ms"), t0 + 5 * MIN);
  harness_advance(&H, 5 * MIN);
  assert_timed_out("own", t0 + 5 * MIN);
  ck_assert_str_eq(status_of("dflt"), "waiting");
  harness_advance(&H, 15 * MIN);
  assert_timed_out("dflt", t0 + 20 * MIN);
  ck_assert_str_eq(status_of("before"), "waiting");
  harness_advance(&H, HOUR);
  ck_assert_str_eq(status_of("before"), "complete");
}
END_TEST

START_TEST(paused_past) {
  start(wf_sleeper);
  int64_t t0 = now();
  create("p", 10 * MIN);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "p"), 0);
  harness_advance(&H, 20 * MIN);
  ck_assert_str_eq(status_of("p"), "paused");
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "p"), 0);
  harness_run(&H);
  assert_timed_out("p", t0 + 20 * MIN);
  ck_assert_int_eq(C.calls, 1);
}
END_TEST

START_TEST(terminate_first) {
  start(wf_sleeper);
  create("t", 10 * MIN);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "t"), 0);
  harness_advance(&H, 20 * MIN);
  json_t *d = desc("t");
  ck_assert_str_eq(jstr(d, "status"), "terminated");
}
END_TEST

START_TEST(restart_renews) {
  start(wf_sleeper);
  int64_t t0 = now();
  create("r", 10 * MIN);
  harness_run(&H);
  harness_advance(&H, 10 * MIN);
  assert_timed_out("r", t0 + 10 * MIN);
  harness_advance(&H, 5 * MIN);
  int64_t t1 = now();
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r", NULL, 0), 0);
  harness_run(&H);
  json_t *d = desc("r");
  ck_assert_str_eq(jstr(d, "status"), "waiting");
  ck_assert_int_eq(jms(d, "deadline_ms"), t1 + 10 * MIN);
  ck_assert_int_eq(jms(d, "wake_ms"), t1 + 10 * MIN);
  harness_advance(&H, 10 * MIN);
  assert_timed_out("r", t1 + 10 * MIN);
}
END_TEST

START_TEST(survives_reopen) {
  start(wf_sleeper);
  int64_t t0 = now();
  create("o", 10 * MIN);
  harness_run(&H);
  harness_down_for(&H, 30 * MIN);
  harness_run(&H);
  json_t *d = desc("o");
  ck_assert_str_eq(jstr(d, "status"), "errored");
  ck_assert_str_eq(jstr(jget(d, "error"), "name"), DURO_ERR_TIMED_OUT);
  ck_assert_int_eq(jms(d, "deadline_ms"), t0 + 10 * MIN);
  ck_assert_int_eq(C.calls, 1);
}
END_TEST

static Suite *deadline_suite(void) {
  Suite *s = suite_create("deadline");
  TCase *tc = tcase_create("deadline");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, sleep_capped);
  tcase_add_test(tc, event_wait_capped);
  tcase_add_test(tc, backoff_capped);
  tcase_add_test(tc, attempt_cut);
  tcase_add_test(tc, queued_past);
  tcase_add_test(tc, done_in_time);
  tcase_add_test(tc, workflow_default);
  tcase_add_test(tc, paused_past);
  tcase_add_test(tc, terminate_first);
  tcase_add_test(tc, restart_renews);
  tcase_add_test(tc, survives_reopen);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(deadline_suite()); }
