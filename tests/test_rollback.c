/* test_rollback.c — rollbacks (host/engine/step_rollback.c) on the real
 * engine with a fresh journal (SQLite, or DURO_TEST_PG's server),
 * workers = 0 and a virtual clock:
 *
 *   newest_first_on_error   three steps with rollbacks, then one that
 *                           fails for good: the instance errors with that
 *                           step's error once the three rollbacks ran,
 *                           newest first, each a journaled step of kind
 *                           "rollback" handed its step's output;
 *   handled_error_undoes_nothing  run() handles the error: no rollback;
 *   failed_rollback_both_errors  a rollback that fails for good: the
 *                           instance's error carries both, and the older
 *                           rollbacks still ran;
 *   rollback_retried_once   a rollback that fails once waits out its
 *                           back-off (the instance waits), then the rest
 *                           run; no forward step ran again, each
 *                           completed rollback ran once — across an
 *                           engine closed and opened again meanwhile;
 *   explicit_rollback       run() calls duro_rollback after an error it
 *                           handles and completes; a later replay runs
 *                           none of them again;
 *   branches_undone         duro_do_all branches with rollbacks, undone
 *                           newest (last-called) first;
 *   bad_rollback_refused    a rollback without a callback fails the step
 *                           before its callback runs;
 *   terminate_with_rollback a waiting instance terminated with its
 *                           rollbacks: they run newest first (run()
 *                           replayed only as far as its journal), then it
 *                           ends terminated; a plain terminate runs none;
 *                           a paused one too; one whose rollback fails
 *                           for good ends terminated with that error; one
 *                           in a rollback's back-off goes on after it;
 *   restart_with_rollback   restart --from s#2 --rollback of a complete
 *                           instance: s#3's then s#2's rollbacks run (as
 *                           journaled steps), then it re-runs from s#2;
 *                           without --from every step's; refused while it
 *                           runs, and no pause is taken while they run;
 *   restart_rollback_runs_none_twice  an errored instance whose
 *                           rollbacks ran: a restart with rollback runs
 *                           none of them again;
 *   restart_rollback_across_reopen  a restart's rollback in its back-off
 *                           when the engine goes down: after it comes
 *                           back the completed one does not run again,
 *                           the rest do, then it restarts;
 *   restart_rollback_fails  a restart's rollback that fails for good: the
 *                           instance ends errored instance.restart_failed
 *                           with that rollback's error, not restarted;
 *   deadline_rollback       on_timeout rollback: an instance waiting at its
 *                           deadline runs its rollbacks, newest first, then
 *                           ends errored instance.timed_out; with the
 *                           setting back to error (live) one undoes
 *                           nothing;
 *   deadline_mid_attempt    the deadline comes inside a callback: that
 *                           step's result is not kept (nothing to undo),
 *                           the completed steps' rollbacks run;
 *   deadline_rollback_retried  a rollback failing once past the deadline
 *                           waits out its own back-off (the deadline gone
 *                           by cuts nothing), across an engine opened
 *                           again: the completed one does not run again;
 *   deadline_rollback_fails  one failing for good: instance.timed_out with
 *                           that rollback's error beside, the older ones
 *                           still run. */
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
#define WF "saga"

static harness H;
static json_t *last_desc;

static struct {
  int forward[8];      /* forward callbacks run, by step */
  int undone[8];       /* rollback callbacks run, by step */
  char order[64];      /* the rollbacks, in the order they ran: "210" */
  char outputs[8][32]; /* the output each rollback was handed */
  int rb_fail[8];      /* its rollback fails for good */
  int rb_fail_once[8]; /* its rollback fails its first attempt */
  int handled;
  int jump_in;     /* the forward callback of step jump_in-1 moves the */
  int64_t jump_ms; /* virtual clock on by jump_ms */
} T;

static void setup(void) {
  memset(&T, 0, sizeof T);
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

static int forward(duro_attempt *a, void *arg) {
  int i = (int)(intptr_t)arg;
  T.forward[i]++;
  if (T.jump_in == i + 1)
    duro_clock_advance(&H.clock, T.jump_ms);
  char json[32];
  snprintf(json, sizeof json, "{\"made\":%d}", i);
  return duro_attempt_result(a, json);
}

static int undo(duro_attempt *a, const char *output, void *arg) {
  int i = (int)(intptr_t)arg;
  T.undone[i]++;
  snprintf(T.outputs[i], sizeof T.outputs[i], "%s", output);
  if (T.rb_fail[i])
    return duro_attempt_fail_final(a, "cannot undo %d", i);
  if (T.rb_fail_once[i] && duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "undo %d not yet", i);
  size_t len = strlen(T.order);
  if (len + 1 < sizeof T.order) {
    T.order[len] = (char)('0' + i);
    T.order[len + 1] = '\0';
  }
  return duro_attempt_result(a, "true");
}

static int broken(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_fail_final(a, "out of stock");
}

static const duro_retries rb_quick = {
    .limit = 2, .delay = "10 seconds", .backoff = DURO_BACKOFF_CONSTANT};
static const duro_rollback_cfg undos[] = {
    {.fn = undo, .arg = (void *)(intptr_t)0, .retries = &rb_quick},
    {.fn = undo, .arg = (void *)(intptr_t)1, .retries = &rb_quick},
    {.fn = undo, .arg = (void *)(intptr_t)2, .retries = &rb_quick},
    {.fn = undo, .arg = (void *)(intptr_t)3, .retries = &rb_quick}};

/* {"n": N (3) steps "s" with rollbacks, then "fail" fails for good;
 * "catch": 1 handles it; "explicit": 1 calls duro_rollback then, and
 * sleeps a minute before completing; "parallel": 1 runs the N steps as
 * one duro_do_all}. */
static duro_rc wf_saga(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = (int)param(ev, "/n", 3);
  if (param(ev, "/parallel", 0)) {
    duro_branch b[4];
    for (int i = 0; i < n && i < 4; i++)
      b[i] = (duro_branch){
          .fn = forward, .arg = (void *)(intptr_t)i, .rollback = &undos[i]};
    DURO_TRY(duro_do_all(step, "s", b, (size_t)n, 0, 0));
  } else {
    for (int i = 0; i < n && i < 4; i++)
      DURO_TRY(duro_do_with_rollback(step, "s", NULL, forward,
                                     (void *)(intptr_t)i, &undos[i], NULL));
  }
  if (param(ev, "/wait", 0)) {
    DURO_TRY(duro_wait_for_event(step, "go", "go", "1 hour", NULL));
    return duro_set_output(step, "\"went\"");
  }
  duro_rc rc = duro_do(step, "fail", NULL, broken, NULL, NULL);
  if (rc != DURO_ERROR)
    return rc;
  if (param(ev, "/explicit", 0)) {
    DURO_TRY(duro_rollback(step));
    DURO_TRY(duro_sleep(step, "after", "1 minute"));
    return duro_set_output(step, "\"cancelled\"");
  }
  if (param(ev, "/catch", 0)) {
    T.handled = 1;
    return duro_set_output(step, "\"handled\"");
  }
  return rc;
}

static duro_rc wf_bad(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  static const duro_rollback_cfg none = {.fn = NULL};
  return duro_do_with_rollback(step, "s", NULL, forward, (void *)(intptr_t)0,
                               &none, NULL);
}

/* ---- helpers ------------------------------------------------------------- */

static void start(void) {
  harness_register(&H, WF, wf_saga);
  harness_start(&H);
}

static json_t *desc(const char *id) {
  json_decref(last_desc);
  last_desc = harness_describe(&H, WF, id);
  return last_desc;
}

static const char *err_field(const char *id, const char *field) {
  json_t *e = json_object_get(desc(id), "error");
  return json_string_value(json_object_get(e, field));
}

/* ---- the cases ----------------------------------------------------------- */

START_TEST(newest_first_on_error) {
  start();
  harness_create(&H, WF, "a", NULL, 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.order, "210");
  ck_assert_str_eq(T.outputs[1], "{\"made\":1}");
  ck_assert_str_eq(err_field("a", "message"), "out of stock");
  ck_assert_ptr_null(
      json_object_get(json_object_get(desc("a"), "error"), "rollback"));
  json_t *s = harness_step(desc("a"), "s#2/rollback");
  ck_assert_ptr_nonnull(s);
  ck_assert_str_eq(json_string_value(json_object_get(s, "type")), "rollback");
  ck_assert_str_eq(json_string_value(json_object_get(s, "status")), "complete");
  ck_assert_str_eq(json_string_value(json_object_get(s, "name")), "s#2");
  /* its attempt, as a do step's */
  ck_assert_uint_eq(json_array_size(json_object_get(s, "attempts")), 1);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(T.forward[i], 1);
    ck_assert_int_eq(T.undone[i], 1);
  }
}
END_TEST

START_TEST(handled_error_undoes_nothing) {
  start();
  harness_create(&H, WF, "a", "{\"catch\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  ck_assert_int_eq(T.handled, 1);
  ck_assert_str_eq(T.order, "");
  ck_assert_ptr_null(harness_step(desc("a"), "s#1/rollback"));
}
END_TEST

START_TEST(failed_rollback_both_errors) {
  start();
  T.rb_fail[1] = 1;
  harness_create(&H, WF, "a", NULL, 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.order, "20"); /* 1 failed; 0 still ran */
  json_t *e = json_object_get(desc("a"), "error");
  ck_assert_str_eq(json_string_value(json_object_get(e, "message")),
                   "out of stock");
  json_t *rb = json_object_get(e, "rollback");
  ck_assert_str_eq(json_string_value(json_object_get(rb, "step")), "s#2");
  ck_assert_str_eq(json_string_value(json_object_get(rb, "message")),
                   "cannot undo 1");
}
END_TEST

START_TEST(rollback_retried_once) {
  start();
  T.rb_fail_once[1] = 1;
  harness_create(&H, WF, "a", NULL, 0);
  harness_run(&H);
  /* 2 undone; 1 waits out its 10 s back-off */
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  ck_assert_str_eq(T.order, "2");
  /* the engine goes down meanwhile and comes back */
  harness_reopen(&H);
  harness_advance(&H, 11 * SEC);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.order, "210");
  ck_assert_str_eq(err_field("a", "message"), "out of stock");
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(T.forward[i], 1);
  ck_assert_int_eq(T.undone[2], 1);
  ck_assert_int_eq(T.undone[1], 2);
  ck_assert_int_eq(T.undone[0], 1);
}
END_TEST

START_TEST(explicit_rollback) {
  start();
  harness_create(&H, WF, "a", "{\"explicit\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  ck_assert_str_eq(T.order, "210");
  harness_advance(&H, 61 * SEC); /* the replay: none runs again */
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  ck_assert_str_eq(T.order, "210");
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(T.undone[i], 1);
}
END_TEST

START_TEST(branches_undone) {
  start();
  harness_create(&H, WF, "a", "{\"parallel\":1,\"n\":4}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.order, "3210");
  ck_assert_ptr_nonnull(harness_step(desc("a"), "s#4/rollback"));
}
END_TEST

START_TEST(bad_rollback_refused) {
  harness_register(&H, WF, wf_bad);
  harness_start(&H);
  harness_create(&H, WF, "a", NULL, 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_msg(strstr(err_field("a", "message"), "has no callback"), "%s",
                err_field("a", "message"));
  ck_assert_int_eq(T.forward[0], 0);
}
END_TEST

START_TEST(terminate_with_rollback) {
  start();
  harness_create(&H, WF, "a", "{\"wait\":1}", 0);
  harness_create(&H, WF, "b", "{\"wait\":1}", 0);
  harness_create(&H, WF, "c", "{\"wait\":1,\"n\":2}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  /* a plain terminate undoes nothing */
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "b"), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "b"), "terminated");
  ck_assert_str_eq(T.order, "");
  /* with rollbacks: answered at once, carried out by an activation */
  ck_assert_int_eq(duro_instance_terminate_rollback(H.e, WF, "a"), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "terminated");
  ck_assert_str_eq(T.order, "210");
  json_t *s = harness_step(desc("a"), "s#3/rollback");
  ck_assert_str_eq(json_string_value(json_object_get(s, "status")), "complete");
  /* a, b and c each ran theirs once (c has two) */
  ck_assert_int_eq(T.forward[0], 3);
  ck_assert_int_eq(T.forward[1], 3);
  ck_assert_int_eq(T.forward[2], 2);
  /* a paused one, whose first rollback (s#2's) fails for good */
  memset(&T, 0, sizeof T);
  T.rb_fail[1] = 1;
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "c"), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "c"), "paused");
  ck_assert_int_eq(duro_instance_terminate_rollback(H.e, WF, "c"), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "c"), "terminated");
  ck_assert_str_eq(T.order, "0");
  json_t *rb = json_object_get(json_object_get(desc("c"), "error"), "rollback");
  ck_assert_str_eq(json_string_value(json_object_get(rb, "step")), "s#2");
  ck_assert_int_eq(T.forward[0] + T.forward[1], 0); /* replayed, not run */
}
END_TEST

START_TEST(terminate_rollback_waits_out_a_retry) {
  start();
  T.rb_fail_once[2] = 1;
  harness_create(&H, WF, "a", "{\"wait\":1}", 0);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_terminate_rollback(H.e, WF, "a"), 0);
  harness_run(&H);
  /* s#3's rollback waits out its 10 s back-off, the request persisted */
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  ck_assert_str_eq(T.order, "");
  harness_reopen(&H);
  harness_advance(&H, 11 * SEC);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "terminated");
  ck_assert_str_eq(T.order, "210");
  ck_assert_int_eq(T.undone[2], 2);
  ck_assert_int_eq(T.undone[1], 1);
}
END_TEST

static int64_t restarts(const char *id) {
  return json_integer_value(json_object_get(desc(id), "restarts"));
}

START_TEST(restart_with_rollback) {
  start();
  harness_create(&H, WF, "a", "{\"catch\":1}", 0);
  harness_create(&H, WF, "w", "{\"wait\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  ck_assert_str_eq(T.order, "");
  /* only an ended instance */
  char *why = NULL;
  ck_assert_int_eq(
      duro_instance_restart_rollback_why(H.e, WF, "w", "s", 2, &why),
      DURO_E_CANNOT_RESTART);
  ck_assert_ptr_nonnull(why);
  free(why);
  ck_assert_int_eq(
      duro_instance_restart_rollback_why(H.e, WF, "a", "s", 2, NULL), 0);
  /* the request is persisted; the instance queued, taking no pause */
  ck_assert_str_eq(harness_status(&H, WF, "a"), "queued");
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "a"), DURO_E_CANNOT_PAUSE);
  memset(&T, 0, sizeof T);
  harness_run(&H);
  /* s#3's, then s#2's; s#1 is before the restart point */
  ck_assert_str_eq(T.order, "21");
  ck_assert_str_eq(T.outputs[2], "{\"made\":2}");
  ck_assert_int_eq(T.undone[0], 0);
  /* then the re-run from s#2: s#1 replayed, s#2 and s#3 run again */
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  ck_assert_int_eq(T.forward[0], 0);
  ck_assert_int_eq(T.forward[1], 1);
  ck_assert_int_eq(T.forward[2], 1);
  ck_assert_int_eq(restarts("a"), 1);
  /* the discarded steps' rollback steps went with them */
  ck_assert_ptr_null(harness_step(desc("a"), "s#2/rollback"));
  /* without --from: every step's, then from the top */
  memset(&T, 0, sizeof T);
  ck_assert_int_eq(
      duro_instance_restart_rollback_why(H.e, WF, "a", NULL, 0, NULL), 0);
  harness_run(&H);
  ck_assert_str_eq(T.order, "210");
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(T.forward[i], 1);
  ck_assert_int_eq(restarts("a"), 2);
}
END_TEST

START_TEST(restart_rollback_runs_none_twice) {
  start();
  harness_create(&H, WF, "a", NULL, 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.order, "210");
  ck_assert_int_eq(
      duro_instance_restart_rollback_why(H.e, WF, "a", "s", 1, NULL), 0);
  harness_run(&H);
  /* none ran again before the restart: the re-run's own error ran the
   * re-run steps' rollbacks once more */
  ck_assert_str_eq(T.order, "210210");
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_int_eq(restarts("a"), 1);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(T.forward[i], 2);
    ck_assert_int_eq(T.undone[i], 2);
  }
}
END_TEST

START_TEST(restart_rollback_across_reopen) {
  start();
  harness_create(&H, WF, "a", "{\"catch\":1}", 0);
  harness_run(&H);
  T.rb_fail_once[1] = 1;
  ck_assert_int_eq(
      duro_instance_restart_rollback_why(H.e, WF, "a", NULL, 0, NULL), 0);
  harness_run(&H);
  /* s#3's done, s#2's waits out its 10 s back-off */
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  ck_assert_str_eq(T.order, "2");
  json_t *s = harness_step(desc("a"), "s#3/rollback");
  ck_assert_str_eq(json_string_value(json_object_get(s, "status")), "complete");
  harness_reopen(&H);
  harness_run(&H); /* nothing is due yet: the back-off holds */
  ck_assert_str_eq(T.order, "2");
  harness_advance(&H, 11 * SEC);
  ck_assert_str_eq(T.order, "210");
  ck_assert_int_eq(T.undone[2], 1);
  ck_assert_int_eq(T.undone[1], 2);
  ck_assert_int_eq(T.undone[0], 1);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
  ck_assert_int_eq(restarts("a"), 1);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(T.forward[i], 2);
}
END_TEST

START_TEST(restart_rollback_fails) {
  start();
  harness_create(&H, WF, "a", "{\"catch\":1}", 0);
  harness_run(&H);
  T.rb_fail[1] = 1;
  ck_assert_int_eq(
      duro_instance_restart_rollback_why(H.e, WF, "a", "s", 1, NULL), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.order, "20"); /* the older one still ran */
  ck_assert_str_eq(err_field("a", "name"), "instance.restart_failed");
  json_t *rb = json_object_get(json_object_get(desc("a"), "error"), "rollback");
  ck_assert_str_eq(json_string_value(json_object_get(rb, "step")), "s#2");
  ck_assert_str_eq(json_string_value(json_object_get(rb, "message")),
                   "cannot undo 1");
  /* not restarted: its steps are still there, none ran again */
  ck_assert_int_eq(restarts("a"), 0);
  ck_assert_ptr_nonnull(harness_step(desc("a"), "fail#1"));
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(T.forward[i], 1);
  /* a plain restart still can */
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "a", NULL, 0), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "complete");
}
END_TEST

/* The workflow's timeout (1 minute) and on_timeout (1: rollback), as a
 * config's, for the instances created from now on. */
static void set_timeout(int rollback) {
  ck_assert_int_eq(duro_engine_set_limits(H.e, WF, NULL, MIN, 0, 0, rollback),
                   0);
}

START_TEST(deadline_rollback) {
  start();
  set_timeout(1);
  harness_create(&H, WF, "a", "{\"wait\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  harness_advance(&H, MIN + SEC);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.order, "210");
  ck_assert_str_eq(err_field("a", "name"), "instance.timed_out");
  ck_assert_ptr_null(
      json_object_get(json_object_get(desc("a"), "error"), "rollback"));
  json_t *s = harness_step(desc("a"), "s#3/rollback");
  ck_assert_str_eq(json_string_value(json_object_get(s, "status")), "complete");
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(T.forward[i], 1);
  /* on_timeout: error again, live: nothing is undone */
  memset(&T, 0, sizeof T);
  set_timeout(0);
  harness_create(&H, WF, "b", "{\"wait\":1}", 0);
  harness_run(&H);
  harness_advance(&H, MIN + SEC);
  ck_assert_str_eq(harness_status(&H, WF, "b"), "errored");
  ck_assert_str_eq(err_field("b", "name"), "instance.timed_out");
  ck_assert_str_eq(T.order, "");
  ck_assert_ptr_null(harness_step(desc("b"), "s#1/rollback"));
}
END_TEST

START_TEST(deadline_mid_attempt) {
  start();
  set_timeout(1);
  T.jump_in = 3; /* s#3's callback runs past the deadline */
  T.jump_ms = 2 * MIN;
  harness_create(&H, WF, "a", "{\"wait\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(err_field("a", "name"), "instance.timed_out");
  /* s#3 did not complete: nothing of it to undo */
  ck_assert_str_eq(T.order, "10");
  ck_assert_int_eq(T.forward[2], 1);
  ck_assert_int_eq(T.undone[2], 0);
  ck_assert_ptr_null(harness_step(desc("a"), "s#3/rollback"));
}
END_TEST

START_TEST(deadline_rollback_retried) {
  start();
  set_timeout(1);
  T.rb_fail_once[1] = 1;
  harness_create(&H, WF, "a", "{\"wait\":1}", 0);
  harness_run(&H);
  harness_advance(&H, MIN + SEC);
  /* s#3's undone; s#2's waits out its 10 s back-off, past the deadline */
  ck_assert_str_eq(harness_status(&H, WF, "a"), "waiting");
  ck_assert_str_eq(T.order, "2");
  harness_reopen(&H);
  set_timeout(1);  /* as the host's config does at each start */
  harness_run(&H); /* its wake is the back-off's, not the deadline's */
  ck_assert_str_eq(T.order, "2");
  ck_assert_int_eq(T.undone[1], 1);
  harness_advance(&H, 11 * SEC);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(err_field("a", "name"), "instance.timed_out");
  ck_assert_str_eq(T.order, "210");
  ck_assert_int_eq(T.undone[2], 1);
  ck_assert_int_eq(T.undone[1], 2);
  ck_assert_int_eq(T.undone[0], 1);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(T.forward[i], 1);
}
END_TEST

START_TEST(deadline_rollback_fails) {
  start();
  set_timeout(1);
  T.rb_fail[1] = 1;
  harness_create(&H, WF, "a", "{\"wait\":1}", 0);
  harness_run(&H);
  harness_advance(&H, MIN + SEC);
  ck_assert_str_eq(harness_status(&H, WF, "a"), "errored");
  ck_assert_str_eq(T.order, "20");
  ck_assert_str_eq(err_field("a", "name"), "instance.timed_out");
  json_t *rb = json_object_get(json_object_get(desc("a"), "error"), "rollback");
  ck_assert_str_eq(json_string_value(json_object_get(rb, "step")), "s#2");
  ck_assert_str_eq(json_string_value(json_object_get(rb, "message")),
                   "cannot undo 1");
}
END_TEST

static Suite *rollback_suite(void) {
  Suite *s = suite_create("rollback");
  TCase *tc = tcase_create("saga");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, newest_first_on_error);
  tcase_add_test(tc, handled_error_undoes_nothing);
  tcase_add_test(tc, failed_rollback_both_errors);
  tcase_add_test(tc, rollback_retried_once);
  tcase_add_test(tc, explicit_rollback);
  tcase_add_test(tc, branches_undone);
  tcase_add_test(tc, bad_rollback_refused);
  tcase_add_test(tc, terminate_with_rollback);
  tcase_add_test(tc, terminate_rollback_waits_out_a_retry);
  tcase_add_test(tc, restart_with_rollback);
  tcase_add_test(tc, restart_rollback_runs_none_twice);
  tcase_add_test(tc, restart_rollback_across_reopen);
  tcase_add_test(tc, restart_rollback_fails);
  tcase_add_test(tc, deadline_rollback);
  tcase_add_test(tc, deadline_mid_attempt);
  tcase_add_test(tc, deadline_rollback_retried);
  tcase_add_test(tc, deadline_rollback_fails);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(rollback_suite()); }
