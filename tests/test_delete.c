/* test_delete.c — deleting one instance (duro_instance_delete), and the
 * retention sweep's by the way an instance ended, against the real
 * engine on a virtual clock (and on PostgreSQL in `make test`):
 *
 *  - an ended instance (complete, errored, terminated) goes at once with
 *    every row of it: steps, attempts, events, log lines, counted in the
 *    answer; a read then finds nothing, the workflow's counts by status
 *    drop it, and its id can be created again and runs afresh;
 *  - a live one (queued, waiting, paused) is refused with
 *    DURO_E_CANNOT_DELETE naming its status, and is left as it was;
 *  - with terminate, a live one is terminated (durably, as a terminate
 *    does) and then deleted;
 *  - one an engine thread runs (a step in its callback) is refused, and
 *    with terminate the callback is given up on and the instance deleted
 *    once its activation let go of it;
 *  - unknown workflows and instances are the usual not-found codes;
 *  - an ended instance is kept its workflow's retention for the way it
 *    ended (complete, errored, terminated), chosen at its end: again at
 *    each end after a restart, and as a reload left it by then; its
 *    create's own retention wins over all three. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "error.h"
#include "harness.h"
#include "journal.h"
#include "suite_run.h"

#define SEC 1000LL
#define WF "wf"

static harness H;

/* What the callbacks saw, and the gate a blocking step waits at. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int in_step; /* the blocking step's callback runs */
  int release; /* ... and may return */
} G = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static int charge(duro_attempt *a, void *arg) {
  (void)arg;
  duro_log(DURO_LOG_INFO, "charging, attempt %u", duro_attempt_number(a));
  if (duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "card service down");
  return duro_attempt_result(a, "\"charged\"");
}

/* charge (its first attempt fails, retried after a second), then waits
 * for "approve"; params "fail" ends it errored after the charge. */
static duro_rc order(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  static const duro_retries retries = {
      .limit = 3, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT};
  static const duro_step_config cfg = {.retries = &retries};
  duro_log(DURO_LOG_INFO, "started");
  DURO_TRY(duro_do(step, "charge", &cfg, charge, NULL, NULL));
  if (ev->params && strstr(ev->params, "fail"))
    return duro_fail(step, "the order was declined");
  const char *event;
  DURO_TRY(duro_wait_for_event(step, "approval", "approve", "1 hour", &event));
  return duro_set_output(step, "\"shipped\"");
}

/* A step whose callback blocks until the test releases it. */
static int block(duro_attempt *a, void *arg) {
  (void)a, (void)arg;
  pthread_mutex_lock(&G.mu);
  G.in_step = 1;
  pthread_cond_broadcast(&G.cv);
  while (!G.release)
    pthread_cond_wait(&G.cv, &G.mu);
  pthread_mutex_unlock(&G.mu);
  return duro_attempt_result(a, "1");
}

static duro_rc blocker(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "block", NULL, block, NULL, NULL));
  return duro_set_output(step, "1");
}

static void setup(void) {
  G.in_step = G.release = 0;
  harness_open(&H);
  harness_register(&H, WF, order);
  harness_start(&H);
}

static void teardown(void) { harness_close(&H); }

/* Releases a blocked step, if any, before the engine closes, and waits
 * (at most 30 s) for its thread to be back from the callback: a thread
 * the terminate gave up on still counts as stuck until then, and an
 * engine closed with a stuck thread is left to the process (not freed,
 * which the leak checker would report). */
static void teardown_workers(void) {
  pthread_mutex_lock(&G.mu);
  G.release = 1;
  pthread_cond_broadcast(&G.cv);
  pthread_mutex_unlock(&G.mu);
  for (int i = 0; i < 3000; i++) {
    duro_health_report r;
    duro_engine_health_report(H.e, &r);
    uint32_t stuck = r.stuck_workers;
    duro_health_report_clear(&r);
    if (!stuck)
      break;
    usleep(10000);
  }
  harness_close(&H);
}

static void create(const char *id, const char *params) {
  ck_assert_int_eq(duro_instance_create(H.e, WF, id, params, -1, NULL), 0);
}

static void assert_status(const char *id, const char *status) {
  ck_assert_str_eq(harness_status(&H, WF, id), status);
}

static int64_t rowid_of(const char *wf, const char *id) {
  journal_instance in = {0};
  ck_assert_int_eq(journal_instance_get(engine_journal(H.e), wf, id, &in), 0);
  int64_t rowid = in.rowid;
  journal_instance_clear(&in);
  return rowid;
}

/* How many rows of each kind the journal holds for instance `rowid`. */
static void count_rows(int64_t rowid, size_t *steps, size_t *events,
                       size_t *logs) {
  journal *j = engine_journal(H.e);
  journal_step *s = NULL;
  ck_assert_int_eq(journal_steps_load(j, rowid, &s, steps), 0);
  journal_steps_free(s, *steps);
  journal_event *e = NULL;
  ck_assert_int_eq(journal_events_all(j, rowid, &e, events), 0);
  journal_events_free(e, *events);
  journal_log *l = NULL;
  ck_assert_int_eq(journal_logs_read(j, rowid, 0, 100, &l, logs), 0);
  journal_logs_free(l, *logs);
}

/* The workflow's count of instances with `status` (GET /workflows/{wf}). */
static json_int_t counted(const char *status) {
  json_t *o = NULL;
  ck_assert_int_eq(duro_workflow_stats(H.e, WF, &o), 0);
  json_int_t n = json_integer_value(
      json_object_get(json_object_get(o, "instances"), status));
  json_decref(o);
  return n;
}

/* A complete instance: charge (two attempts), an event, the wait. */
static void complete_one(const char *id) {
  create(id, NULL);
  harness_run(&H);
  harness_advance(&H, SEC);
  assert_status(id, "waiting");
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, id, "approve", "{}"), 0);
  harness_run(&H);
  assert_status(id, "complete");
}

#define assert_has(text, part)                                                 \
  ck_assert_msg(strstr((text), (part)) != NULL, "\"%s\" lacks \"%s\"", (text), \
                (part))

START_TEST(ended_goes_with_every_row) {
  complete_one("d1");
  int64_t rowid = rowid_of(WF, "d1");
  size_t steps, events, logs;
  count_rows(rowid, &steps, &events, &logs);
  ck_assert_uint_eq(steps, 2); /* charge, approval */
  ck_assert_uint_eq(events, 1);
  ck_assert_uint_ge(logs, 3);
  ck_assert_int_eq(counted("complete"), 1);

  duro_deleted d;
  char *why = NULL;
  ck_assert_int_eq(duro_instance_delete(H.e, WF, "d1", 0, &d, &why), 0);
  ck_assert_ptr_null(why);
  ck_assert_int_eq(d.elsewhere, 0);
  ck_assert_int_eq(d.status, DURO_STATUS_COMPLETE);
  ck_assert_int_eq(d.terminated, 0);
  ck_assert_int_eq(d.steps, 2);
  ck_assert_int_eq(d.attempts, 1); /* charge's failed one */
  ck_assert_int_eq(d.events, 1);
  ck_assert_int_eq(d.logs, (int64_t)logs);

  duro_status st;
  ck_assert_int_eq(duro_instance_status(H.e, WF, "d1", &st), DURO_E_NOT_FOUND);
  count_rows(rowid, &steps, &events, &logs);
  ck_assert_uint_eq(steps + events + logs, 0);
  ck_assert_int_eq(counted("complete"), 0);
  /* a second delete finds nothing */
  ck_assert_int_eq(duro_instance_delete(H.e, WF, "d1", 0, NULL, NULL),
                   DURO_E_NOT_FOUND);

  /* its id is free again: a new instance, run from the top */
  create("d1", NULL);
  assert_status("d1", "queued");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("d1", "waiting");
  json_t *desc = harness_describe(&H, WF, "d1");
  ck_assert_uint_eq(json_array_size(json_object_get(desc, "events")), 0);
  json_decref(desc);
}
END_TEST

START_TEST(errored_and_terminated_are_deleted) {
  create("e1", "\"fail\"");
  harness_run(&H);
  harness_advance(&H, SEC);
  assert_status("e1", "errored");
  create("t1", NULL);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "t1"), 0);
  assert_status("t1", "terminated");

  duro_deleted d;
  ck_assert_int_eq(duro_instance_delete(H.e, WF, "e1", 0, &d, NULL), 0);
  ck_assert_int_eq(d.status, DURO_STATUS_ERRORED);
  ck_assert_int_eq(duro_instance_delete(H.e, WF, "t1", 0, &d, NULL), 0);
  ck_assert_int_eq(d.status, DURO_STATUS_TERMINATED);
  ck_assert_int_eq(d.terminated, 0); /* it had ended before */
  ck_assert_int_eq(counted("errored") + counted("terminated"), 0);
}
END_TEST

/* Refused while live, and left as it was. */
static void refused(const char *id, const char *status) {
  char *why = NULL;
  ck_assert_int_eq(duro_instance_delete(H.e, WF, id, 0, NULL, &why),
                   DURO_E_CANNOT_DELETE);
  ck_assert_ptr_nonnull(why);
  char want[128];
  snprintf(want, sizeof want,
           "instance is %s; only an ended instance (complete, errored, "
           "terminated) can be deleted",
           status);
  assert_has(why, want);
  free(why);
  assert_status(id, status);
}

START_TEST(live_is_refused_naming_its_status) {
  create("q1", NULL);
  refused("q1", "queued");
  harness_run(&H);
  harness_advance(&H, SEC);
  refused("q1", "waiting");
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "q1"), 0);
  refused("q1", "paused");
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "q1"), 0);
  /* nothing was lost: it goes on to complete */
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "q1", "approve", "1"), 0);
  harness_run(&H);
  assert_status("q1", "complete");
  size_t steps, events, logs;
  count_rows(rowid_of(WF, "q1"), &steps, &events, &logs);
  ck_assert_uint_eq(steps, 2);
  ck_assert_uint_eq(events, 1);
}
END_TEST

START_TEST(terminate_then_delete) {
  create("w1", NULL); /* waiting for its event */
  create("q2", NULL);
  harness_run(&H);
  harness_advance(&H, SEC);
  assert_status("w1", "waiting");
  create("p1", NULL);
  harness_run(&H);
  harness_advance(&H, SEC);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "p1"), 0);
  create("q3", NULL); /* queued, never run */

  const char *ids[] = {"w1", "q3", "p1"};
  for (size_t i = 0; i < 3; i++) {
    int64_t rowid = rowid_of(WF, ids[i]);
    duro_deleted d;
    ck_assert_int_eq(duro_instance_delete(H.e, WF, ids[i], 1, &d, NULL), 0);
    ck_assert_int_eq(d.status, DURO_STATUS_TERMINATED);
    ck_assert_int_eq(d.terminated, 1);
    duro_status st;
    ck_assert_int_eq(duro_instance_status(H.e, WF, ids[i], &st),
                     DURO_E_NOT_FOUND);
    size_t steps, events, logs;
    count_rows(rowid, &steps, &events, &logs);
    ck_assert_uint_eq(steps + events + logs, 0);
  }
  /* nothing of theirs is left to run; the other one is untouched */
  ck_assert_uint_eq(harness_run(&H), 0);
  assert_status("q2", "waiting");
  ck_assert_int_eq(counted("waiting"), 1);
  ck_assert_int_eq(
      counted("terminated") + counted("queued") + counted("paused"), 0);
}
END_TEST

START_TEST(unknown_is_not_found) {
  ck_assert_int_eq(duro_instance_delete(H.e, "nope", "x", 0, NULL, NULL),
                   DURO_E_WORKFLOW_NOT_FOUND);
  ck_assert_int_eq(duro_instance_delete(H.e, WF, "x", 1, NULL, NULL),
                   DURO_E_NOT_FOUND);
  ck_assert_int_eq(duro_instance_delete(H.e, WF, "bad id!", 0, NULL, NULL),
                   DURO_E_INVALID_ID);
}
END_TEST

static int step_entered(void) { return G.in_step; }

/* An engine thread runs the instance's step: never deleted under it. */
START_TEST(running_is_refused_then_terminated_and_deleted) {
  G.in_step = G.release = 0;
  harness_open_workers(&H, 2);
  harness_register(&H, "blocker", blocker);
  harness_start(&H);
  ck_assert_int_eq(duro_instance_create(H.e, "blocker", "r1", NULL, -1, NULL),
                   0);
  ck_assert(harness_wait_for(&G.mu, &G.cv, step_entered));

  char *why = NULL;
  ck_assert_int_eq(duro_instance_delete(H.e, "blocker", "r1", 0, NULL, &why),
                   DURO_E_CANNOT_DELETE);
  assert_has(why, "instance is running;");
  free(why);
  ck_assert_str_eq(harness_status(&H, "blocker", "r1"), "running");

  int64_t rowid = rowid_of("blocker", "r1");
  duro_deleted d;
  ck_assert_int_eq(duro_instance_delete(H.e, "blocker", "r1", 1, &d, NULL), 0);
  ck_assert_int_eq(d.status, DURO_STATUS_TERMINATED);
  ck_assert_int_eq(d.terminated, 1);
  duro_status st;
  ck_assert_int_eq(duro_instance_status(H.e, "blocker", "r1", &st),
                   DURO_E_NOT_FOUND);
  size_t steps, events, logs;
  count_rows(rowid, &steps, &events, &logs);
  ck_assert_uint_eq(steps + events + logs, 0);
  /* the callback given up on returns: nothing of it is stored */
  pthread_mutex_lock(&G.mu);
  G.release = 1;
  pthread_cond_broadcast(&G.cv);
  pthread_mutex_unlock(&G.mu);
  ck_assert_int_eq(duro_instance_status(H.e, "blocker", "r1", &st),
                   DURO_E_NOT_FOUND);
}
END_TEST

#define DAY (24 * 3600 * SEC)

/* The workflow kept 1 day complete, 3 days errored, 2 days terminated. */
static void setup_retention(void) {
  harness_open(&H);
  duro_workflow_limits lim = {.retention_ms = DAY,
                              .retention_errored_ms = 3 * DAY,
                              .retention_terminated_ms = 2 * DAY};
  ck_assert_int_eq(duro_engine_register(H.e, WF, NULL, order, &lim, "test"), 0);
  harness_start(&H);
}

/* Moves the clock to `at` ms after T0, sweeps, and says which of the ids
 * are still there, as "id id ...". */
static void kept_at(int64_t at, const char *const *ids, const char *want) {
  ck_assert_uint_eq(harness_advance(&H, T0_MS + at - duro_clock_now(&H.clock)),
                    0);
  ck_assert_int_eq(duro_engine_sweep(H.e, NULL), 0);
  char got[256] = "";
  for (size_t i = 0; ids[i]; i++) {
    duro_status st;
    int rc = duro_instance_status(H.e, WF, ids[i], &st);
    ck_assert(rc == 0 || rc == DURO_E_NOT_FOUND);
    if (rc == 0)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s",
               got[0] ? " " : "", ids[i]);
  }
  ck_assert_str_eq(got, want);
}

START_TEST(retention_by_outcome) {
  /* complete, and complete after a restart of its terminated run */
  complete_one("c1");
  create("r1", NULL);
  harness_run(&H);
  harness_advance(&H, SEC);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "r1"), 0);
  create("e1", "\"fail\"");
  harness_run(&H);
  harness_advance(&H, SEC);
  assert_status("e1", "errored");
  create("t1", NULL);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "t1"), 0);
  /* its own retention, for whatever end */
  ck_assert_int_eq(duro_instance_create(H.e, WF, "o1", NULL, 5 * DAY, NULL), 0);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "o1"), 0);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r1", "approval", 1), 0);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "r1", "approve", "1"), 0);
  harness_run(&H);
  assert_status("r1", "complete");
  ck_assert_int_lt(duro_clock_now(&H.clock), T0_MS + 10 * SEC);

  const char *ids[] = {"c1", "r1", "e1", "t1", "o1", NULL};
  kept_at(DAY - 10 * SEC, ids, "c1 r1 e1 t1 o1");
  kept_at(DAY + 10 * SEC, ids, "e1 t1 o1");
  kept_at(2 * DAY + 10 * SEC, ids, "e1 o1");
  kept_at(3 * DAY + 10 * SEC, ids, "o1");
  kept_at(5 * DAY + 10 * SEC, ids, "");
}
END_TEST

/* A reload's retention holds for the instances that end after it; those
 * ended before keep theirs. */
START_TEST(retention_reloaded) {
  create("e1", "\"fail\"");
  harness_run(&H);
  harness_advance(&H, SEC);
  assert_status("e1", "errored");
  create("e2", "\"fail\"");
  const duro_workflow_limits shorter = {.retention_ms = DAY,
                                        .retention_errored_ms = DAY / 2};
  ck_assert_int_eq(duro_engine_set_limits(H.e, WF, &shorter, 0, 0, 0, 0), 0);
  harness_run(&H);
  harness_advance(&H, SEC);
  assert_status("e2", "errored");
  const char *ids[] = {"e1", "e2", NULL};
  kept_at(DAY / 2 + 10 * SEC, ids, "e1");
  kept_at(3 * DAY + 10 * SEC, ids, "");
}
END_TEST

static Suite *delete_suite(void) {
  Suite *s = suite_create("delete");
  TCase *tc = tcase_create("delete");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, ended_goes_with_every_row);
  tcase_add_test(tc, errored_and_terminated_are_deleted);
  tcase_add_test(tc, live_is_refused_naming_its_status);
  tcase_add_test(tc, terminate_then_delete);
  tcase_add_test(tc, unknown_is_not_found);
  suite_add_tcase(s, tc);
  tc = tcase_create("retention");
  tcase_add_checked_fixture(tc, setup_retention, teardown);
  tcase_add_test(tc, retention_by_outcome);
  tcase_add_test(tc, retention_reloaded);
  suite_add_tcase(s, tc);
  tc = tcase_create("running");
  tcase_add_checked_fixture(tc, NULL, teardown_workers);
  tcase_add_test(tc, running_is_refused_then_terminated_and_deleted);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(delete_suite()); }
