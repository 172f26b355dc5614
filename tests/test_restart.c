/* test_restart.c — what a restart keeps and resets, and what an ended
 * instance is, against the real engine on a virtual clock (workers = 0, a
 * fresh journal per case):
 *
 *  - only an ended instance restarts, and the refusal names the status;
 *    a `from` that names no journaled step lists the ones there are;
 *  - events consumed by discarded steps stay consumed: the re-run's wait
 *    needs a new event, while one buffered and never consumed is kept;
 *  - idempotency keys: the same across a step's retries, new in each
 *    restart's re-run ("@n"), and the kept steps do not run;
 *  - an instance that is terminated closes its pending step
 *    ("cancelled", its ended_ms, no wake), and a restart runs it again;
 *  - an event for an ended instance is refused (DURO_E_INSTANCE_ENDED)
 *    and nothing is stored. */
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

/* What the workflow's callbacks saw. */
static struct {
  int charge_calls, mail_calls;
  int charge_fails;    /* "charge" fails this many attempts first */
  const char *fail_id; /* and always for this instance */
  char keys[16][128];
  int n_keys;
} C;

static void setup(void) {
  memset(&C, 0, sizeof C);
  harness_open(&H);
}

static void teardown(void) { harness_close(&H); }

static void note_key(duro_attempt *a) {
  ck_assert_int_lt(C.n_keys, 16);
  snprintf(C.keys[C.n_keys++], sizeof C.keys[0], "%s",
           duro_attempt_idempotency_key(a));
}

static int charge(duro_attempt *a, void *arg) {
  (void)arg;
  note_key(a);
  const char *key = duro_attempt_idempotency_key(a);
  size_t n = C.fail_id ? strlen(C.fail_id) : 0;
  int always = n && !strncmp(key, C.fail_id, n) && key[n] == '/';
  if (C.charge_calls++ < C.charge_fails || always)
    return duro_attempt_fail(a, "card service down");
  return duro_attempt_result(a, "\"charged\"");
}

static int mail(duro_attempt *a, void *arg) {
  (void)arg;
  note_key(a);
  C.mail_calls++;
  return duro_attempt_result(a, "\"sent\"");
}

/* charge (retried every minute), wait for "approve" (1 hour), mail; the
 * output is the event's payload. */
static duro_rc order(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  static const duro_retries retries = {.limit = 5, .delay = "1 minute"};
  static const duro_step_config cfg = {.retries = &retries};
  const char *r, *event, *m;
  DURO_TRY(duro_do(step, "charge", &cfg, charge, NULL, &r));
  DURO_TRY(duro_wait_for_event(step, "approval", "approve", "1 hour", &event));
  DURO_TRY(duro_do(step, "mail", NULL, mail, NULL, &m));
  json_t *e = json_loads(event, 0, NULL);
  ck_assert_ptr_nonnull(e);
  char *payload =
      json_dumps(json_object_get(e, "payload"), JSON_COMPACT | JSON_ENCODE_ANY);
  duro_rc rc = duro_set_output(step, payload);
  free(payload);
  json_decref(e);
  return rc;
}

static void start(void) {
  harness_register(&H, WF, order);
  harness_start(&H);
}

static void create(const char *id) {
  ck_assert_int_eq(duro_instance_create(H.e, WF, id, NULL, -1, NULL), 0);
}

static void assert_status(const char *id, const char *status) {
  ck_assert_str_eq(harness_status(&H, WF, id), status);
}

static void send(const char *id, const char *payload, int want) {
  int rc = duro_instance_send_event(H.e, WF, id, "approve", payload);
  ck_assert_msg(rc == want, "event %s to %s: %s, expected %s", payload, id,
                duro_err_name(rc), duro_err_name(want));
}

/* The instance's output as compact JSON text, compared with `want`. */
static void assert_output(const char *id, const char *want) {
  json_t *d = harness_describe(&H, WF, id);
  char *got =
      json_dumps(json_object_get(d, "output"), JSON_COMPACT | JSON_ENCODE_ANY);
  ck_assert_str_eq(got, want);
  free(got);
  json_decref(d);
}

/* Runs a fresh instance to completion with the event {"n":1}. */
static void complete_one(const char *id) {
  create(id);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status(id, "waiting");
  send(id, "{\"n\":1}", 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status(id, "complete");
}

/* Restarts and returns the refusal's reason (caller frees). */
static char *refused(const char *id, const char *from, uint32_t count) {
  char *why = NULL;
  int rc = duro_instance_restart_why(H.e, WF, id, from, count, &why);
  ck_assert_msg(rc == DURO_E_CANNOT_RESTART, "restart %s: %s", id,
                duro_err_name(rc));
  ck_assert_ptr_nonnull(why);
  return why;
}

#define assert_has(text, part)                                                 \
  ck_assert_msg(strstr((text), (part)) != NULL, "\"%s\" lacks \"%s\"", (text), \
                (part))

START_TEST(restart_refusal_names_the_status) {
  start();
  create("r1");
  char *why = refused("r1", NULL, 0);
  assert_has(why, "instance is queued; only an ended instance (complete, "
                  "errored, terminated) can be restarted");
  free(why);
  harness_run(&H);
  why = refused("r1", NULL, 0);
  assert_has(why, "instance is waiting; only an ended instance");
  free(why);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "r1"), 0);
  why = refused("r1", "charge", 1);
  assert_has(why, "instance is paused;");
  free(why);
  /* refused, the instance is as it was */
  assert_status("r1", "paused");
  ck_assert_int_eq(C.charge_calls, 1);
}
END_TEST

START_TEST(restart_from_unknown_step_lists_the_steps) {
  start();
  complete_one("r2");
  char *why = refused("r2", "chrage", 0);
  ck_assert_str_eq(why, "the journal has no step \"chrage\"#1; its steps: "
                        "\"charge\"#1, \"approval\"#1, \"mail\"#1");
  free(why);
  why = refused("r2", "charge", 2);
  assert_has(why, "no step \"charge\"#2; its steps: \"charge\"#1");
  free(why);
  /* the plain form still says only the code */
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r2", "x", 1),
                   DURO_E_CANNOT_RESTART);
  assert_status("r2", "complete");
  ck_assert_uint_eq(harness_run(&H), 0);
}
END_TEST

/* The event the first run consumed is history: the re-run of its wait
 * waits for a new one, and takes that one. */
START_TEST(restart_does_not_redeliver_consumed_events) {
  start();
  complete_one("e1");
  assert_output("e1", "{\"n\":1}");

  ck_assert_int_eq(duro_instance_restart(H.e, WF, "e1", "approval", 1), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e1", "waiting"); /* not complete with {"n":1} again */
  ck_assert_uint_eq(harness_advance(&H, 30 * MIN), 0);
  assert_status("e1", "waiting");
  send("e1", "{\"n\":2}", 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e1", "complete");
  assert_output("e1", "{\"n\":2}");
  ck_assert_int_eq(C.charge_calls, 1); /* kept */
  ck_assert_int_eq(C.mail_calls, 2);

  /* from the top, the same */
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "e1", NULL, 0), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e1", "waiting");
  ck_assert_int_eq(C.charge_calls, 2);
}
END_TEST

/* An event that arrived and was never consumed stays buffered across the
 * end and the restart: the re-run's wait takes it. */
START_TEST(restart_keeps_unconsumed_events) {
  start();
  create("e2");
  harness_run(&H);
  send("e2", "{\"n\":1}", 0);
  send("e2", "{\"n\":2}", 0); /* buffered: the flow waits only once */
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e2", "complete");
  assert_output("e2", "{\"n\":1}");

  ck_assert_int_eq(duro_instance_restart(H.e, WF, "e2", "approval", 1), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e2", "complete");
  assert_output("e2", "{\"n\":2}");
}
END_TEST

START_TEST(restart_gives_new_idempotency_keys) {
  C.charge_fails = 1;
  start();
  create("k1");
  ck_assert_uint_eq(harness_run(&H), 1); /* charge fails, backs off */
  ck_assert_uint_eq(harness_advance(&H, MIN), 1);
  assert_status("k1", "waiting");
  send("k1", "{}", 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("k1", "complete");
  ck_assert_int_eq(C.n_keys, 3);
  /* a retry within one run keeps its key */
  ck_assert_str_eq(C.keys[0], "k1/charge#1");
  ck_assert_str_eq(C.keys[1], "k1/charge#1");
  ck_assert_str_eq(C.keys[2], "k1/mail#1");

  ck_assert_int_eq(duro_instance_restart(H.e, WF, "k1", NULL, 0), 0);
  harness_run(&H);
  send("k1", "{}", 0);
  harness_run(&H);
  assert_status("k1", "complete");
  ck_assert_int_eq(C.n_keys, 5);
  ck_assert_str_eq(C.keys[3], "k1/charge#1@1");
  ck_assert_str_eq(C.keys[4], "k1/mail#1@1");

  /* from "mail": charge is kept and does not run; mail's key is new */
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "k1", "mail", 1), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("k1", "complete");
  ck_assert_int_eq(C.n_keys, 6);
  ck_assert_str_eq(C.keys[5], "k1/mail#1@2");
  json_t *d = harness_describe(&H, WF, "k1");
  ck_assert_int_eq(json_integer_value(json_object_get(d, "restarts")), 2);
  json_decref(d);

  /* the count survives a restart of the engine */
  harness_reopen(&H);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "k1", "mail", 1), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_str_eq(C.keys[C.n_keys - 1], "k1/mail#1@3");
}
END_TEST

/* The step's status, ended_ms and wake_ms in a describe. */
static void assert_step(const char *id, const char *key, const char *status,
                        int64_t ended_ms, int has_wake) {
  json_t *d = harness_describe(&H, WF, id);
  json_t *s = harness_step(d, key);
  ck_assert_msg(s != NULL, "%s has no step %s", id, key);
  ck_assert_str_eq(json_string_value(json_object_get(s, "status")), status);
  json_t *ended = json_object_get(s, "ended_ms");
  if (ended_ms < 0)
    ck_assert(json_is_null(ended));
  else
    ck_assert_int_eq(json_integer_value(ended), ended_ms);
  ck_assert_int_eq(!json_is_null(json_object_get(s, "wake_ms")), has_wake);
  json_decref(d);
}

START_TEST(terminate_cancels_the_pending_step) {
  C.fail_id = "t1";
  start();
  create("t1"); /* backing off in charge */
  create("t2"); /* waiting for its event */
  ck_assert_uint_eq(harness_run(&H), 2);
  assert_status("t1", "waiting");
  assert_status("t2", "waiting");
  assert_step("t1", "charge#1", "waiting", -1, 1);
  assert_step("t2", "approval#1", "waiting", -1, 1);

  ck_assert_uint_eq(harness_advance(&H, 10 * SEC), 0);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "t1"), 0);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "t2"), 0);
  int64_t at = T0_MS + 10 * SEC;
  assert_step("t1", "charge#1", "cancelled", at, 0);
  assert_step("t2", "approval#1", "cancelled", at, 0);
  assert_step("t2", "charge#1", "complete", T0_MS, 0); /* as it was */
  ck_assert_uint_eq(harness_advance(&H, 2 * HOUR), 0);

  /* a restart from the cancelled step runs it again */
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "t2", "approval", 1), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_step("t2", "approval#1", "waiting", -1, 1);
  send("t2", "{\"n\":3}", 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("t2", "complete");
  assert_output("t2", "{\"n\":3}");
}
END_TEST

START_TEST(event_to_ended_instance_refused) {
  start();
  complete_one("x1");
  send("x1", "{\"late\":1}", DURO_E_INSTANCE_ENDED);

  create("x2");
  harness_run(&H);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "x2"), 0);
  send("x2", "{\"late\":2}", DURO_E_INSTANCE_ENDED);

  /* nothing was stored: the re-run waits, its wait is not answered by
   * the refused event */
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "x2", NULL, 0), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("x2", "waiting");
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "x1", "approval", 1), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("x1", "waiting");
  /* a paused instance has not ended: its events are kept for it */
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "x1"), 0);
  send("x1", "{\"n\":4}", 0);
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "x1"), 0);
  harness_run(&H);
  assert_status("x1", "complete");
  assert_output("x1", "{\"n\":4}");
}
END_TEST

static Suite *restart_suite(void) {
  Suite *s = suite_create("restart");
  TCase *tc = tcase_create("restart");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, restart_refusal_names_the_status);
  tcase_add_test(tc, restart_from_unknown_step_lists_the_steps);
  tcase_add_test(tc, restart_does_not_redeliver_consumed_events);
  tcase_add_test(tc, restart_keeps_unconsumed_events);
  tcase_add_test(tc, restart_gives_new_idempotency_keys);
  suite_add_tcase(s, tc);
  tc = tcase_create("ended");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, terminate_cancels_the_pending_step);
  tcase_add_test(tc, event_to_ended_instance_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(restart_suite()); }
