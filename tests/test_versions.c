/* test_versions.c — a workflow's code changing under its in-flight
 * instances, on a virtual clock.
 *
 * One workflow whose code depends on `version`, as a redeployed build
 * would: v1 journals A, a sleep, B; the later versions insert, rename,
 * remove or reorder a step, or only change the output.  An instance
 * journaled under v1 that wakes under another version must either replay
 * cleanly (the same steps in the same order) or stop with
 * `replay.diverged` naming the journaled and the requested step, before
 * any step of the new code runs; on_divergence decides whether it errors
 * or pauses for an operator, who can roll the code back and resume. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#include "harness.h"
#include "suite_run.h"
#include "view_dry_run.h"

#define WF "flow"
#define MIN (60 * 1000LL)

enum {
  V1,
  V2_SAME,
  V2_RENAMED,
  V2_RENAMED_LATE,
  V2_INSERTED,
  V2_REMOVED,
  V2_REORDERED
};

/* Each version's steps, in call order: "nap" is the sleep. */
static const char *const code[][4] = {
    [V1] = {"A", "nap", "B"},
    [V2_SAME] = {"A", "nap", "B"},
    [V2_RENAMED] = {"A2", "nap", "B"},
    [V2_RENAMED_LATE] = {"A", "nap", "B2"},
    [V2_INSERTED] = {"A", "X", "nap", "B"},
    [V2_REMOVED] = {"nap", "B"},
    [V2_REORDERED] = {"nap", "A", "B"},
};

static harness H;
static int version;
static int ran; /* step callbacks run */
static char last_ran[16];

static int step_cb(duro_attempt *a, void *arg) {
  ran++;
  snprintf(last_ran, sizeof last_ran, "%s", (const char *)arg);
  return duro_attempt_result(a, "1");
}

static duro_rc flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  for (int i = 0; i < 4 && code[version][i]; i++) {
    const char *name = code[version][i];
    if (!strcmp(name, "nap"))
      DURO_TRY(duro_sleep(step, "nap", "1 minute"));
    else
      DURO_TRY(duro_do(step, name, NULL, step_cb, (void *)name, NULL));
  }
  return duro_set_output(step, version == V2_SAME ? "2" : "1");
}

static void start(int pause_on_divergence) {
  harness_open(&H);
  duro_workflow_limits lim = {.pause_on_divergence = pause_on_divergence};
  ck_assert_int_eq(duro_engine_register(H.e, WF, NULL, flow, &lim, "v"), 0);
  harness_start(&H);
  version = V1;
  ck_assert_int_eq(duro_instance_create(H.e, WF, "i1", NULL, -1, NULL), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "waiting");
  ck_assert_int_eq(ran, 1); /* A */
}

static const char *error_field(json_t *d, const char *field) {
  return json_string_value(json_object_get(json_object_get(d, "error"), field));
}

/* The same steps in the same order replay cleanly, whatever else changed. */
START_TEST(same_steps_replay) {
  start(0);
  version = V2_SAME;
  harness_advance(&H, MIN);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
  ck_assert_int_eq(ran, 2); /* A was not run again; B ran */
  json_t *d = harness_describe(&H, WF, "i1");
  ck_assert_int_eq(json_integer_value(json_object_get(d, "output")), 2);
  json_decref(d);
  harness_close(&H);
}
END_TEST

static const struct {
  int version;
  const char *journaled, *requested; /* both named in the message */
} changes[] = {
    {V2_RENAMED, "A#1", "A2#1"},
    {V2_INSERTED, "nap#1", "X#1"},
    {V2_REMOVED, "A#1", "nap#1"},
    {V2_REORDERED, "A#1", "nap#1"},
};

/* Each change is caught before any of the new code's steps runs. */
START_TEST(change_is_caught) {
  start(0);
  version = changes[_i].version;
  harness_advance(&H, MIN);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "errored");
  json_t *d = harness_describe(&H, WF, "i1");
  ck_assert_str_eq(error_field(d, "name"), "replay.diverged");
  const char *msg = error_field(d, "message");
  ck_assert_msg(strstr(msg, changes[_i].requested), "%s", msg);
  ck_assert_msg(strstr(msg, changes[_i].journaled), "%s", msg);
  json_decref(d);
  ck_assert_int_eq(ran, 1); /* nothing of the new code ran */
  harness_close(&H);
}
END_TEST

/* A step renamed past the journal's end is no divergence: B was never
 * journaled, so B2 simply runs. */
START_TEST(change_past_the_journal_runs) {
  start(0);
  version = V2_RENAMED_LATE;
  harness_advance(&H, MIN);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
  ck_assert_int_eq(ran, 2);
  ck_assert_str_eq(last_ran, "B2");
  harness_close(&H);
}
END_TEST

/* on_divergence: pause — the instance waits for an operator, with the
 * reason; rolling the code back and resuming completes it. */
START_TEST(pause_then_roll_back) {
  start(1);
  version = V2_INSERTED;
  harness_advance(&H, MIN);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "paused");
  json_t *d = harness_describe(&H, WF, "i1");
  ck_assert_str_eq(error_field(d, "name"), "replay.diverged");
  json_decref(d);
  harness_advance(&H, 10 * MIN);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "paused");
  version = V1;
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "i1"), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
  d = harness_describe(&H, WF, "i1");
  ck_assert(json_is_null(json_object_get(d, "error")));
  json_decref(d);
  ck_assert_int_eq(ran, 2); /* A, then B; never X */
  ck_assert_str_eq(last_ran, "B");
  harness_close(&H);
}
END_TEST

/* The dry run: every in-flight instance replayed on the new code, nothing
 * run, waited or written; exactly the diverging ones are reported. */
START_TEST(dry_run_reports_divergence_and_changes_nothing) {
  start(0);
  ck_assert_int_eq(duro_instance_create(H.e, WF, "i2", NULL, -1, NULL), 0);
  harness_run(&H);
  json_t *before = harness_describe(&H, WF, "i1");
  char *before_text = json_dumps(before, JSON_SORT_KEYS);
  json_decref(before);
  int ran_before = ran;

  version = V2_SAME;
  json_t *rep = NULL;
  ck_assert_int_eq(duro_engine_dry_run(H.e, WF, flow, &rep), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(rep, "diverged")), 0);
  json_t *list = json_object_get(rep, "instances");
  ck_assert_uint_eq(json_array_size(list), 2);
  json_t *one = json_array_get(list, 0);
  ck_assert_str_eq(json_string_value(json_object_get(one, "status")),
                   "replays");
  ck_assert_str_eq(json_string_value(json_object_get(one, "next")), "nap#1");
  json_decref(rep);

  version = V2_INSERTED;
  ck_assert_int_eq(duro_engine_dry_run(H.e, WF, flow, &rep), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(rep, "diverged")), 2);
  one = json_array_get(json_object_get(rep, "instances"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(one, "status")),
                   "diverged");
  const char *msg = json_string_value(
      json_object_get(json_object_get(one, "error"), "message"));
  ck_assert_msg(strstr(msg, "X#1") && strstr(msg, "nap#1"), "%s", msg);
  json_decref(rep);

  ck_assert_int_eq(ran, ran_before); /* no callback ran */
  json_t *after = harness_describe(&H, WF, "i1");
  char *after_text = json_dumps(after, JSON_SORT_KEYS);
  json_decref(after);
  ck_assert_str_eq(after_text, before_text);
  free(before_text);
  free(after_text);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "waiting");
  harness_close(&H);
}
END_TEST

/* ---- builds: pinned and latest ------------------------------------------ */

/* Two builds of one workflow: each says which it is in its output. */
static duro_rc flow_build(duro_step *step, int build) {
  DURO_TRY(duro_do(step, "A", NULL, step_cb, (void *)"A", NULL));
  DURO_TRY(duro_sleep(step, "nap", "1 minute"));
  DURO_TRY(duro_do(step, "B", NULL, step_cb, (void *)"B", NULL));
  return duro_set_output(step, build == 1 ? "\"v1\"" : "\"v2\"");
}
static duro_rc flow_v1(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return flow_build(step, 1);
}
static duro_rc flow_v2(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return flow_build(step, 2);
}

static const char *output_of(const char *id) {
  static char out[32];
  json_t *d = harness_describe(&H, WF, id);
  const char *o = json_string_value(json_object_get(d, "output"));
  snprintf(out, sizeof out, "%s", o ? o : "");
  json_decref(d);
  return out;
}

static void open_builds(int latest) {
  harness_open(&H);
  duro_workflow_limits lim = {.versioning_latest = latest};
  ck_assert_int_eq(duro_engine_register(H.e, WF, NULL, flow_v1, &lim, "h1"), 0);
  harness_start(&H);
  ck_assert_int_eq(duro_instance_create(H.e, WF, "old", NULL, -1, NULL), 0);
  harness_run(&H); /* on h1, asleep */
  ck_assert_int_eq(duro_engine_add_build(H.e, WF, "h2", flow_v2, 1), 0);
  ck_assert_int_eq(duro_instance_create(H.e, WF, "new", NULL, -1, NULL), 0);
  harness_run(&H);
}

/* versioning: pinned — an instance finishes on the build it started on;
 * new ones start on the newest; the old build is needed until then. */
START_TEST(pinned_finishes_on_its_build) {
  open_builds(0);
  ck_assert_int_eq(duro_engine_retire_build(H.e, WF, "h1"), DURO_E_BUSY);
  ck_assert_int_eq(duro_engine_retire_build(H.e, WF, "h2"), DURO_E_BUSY);
  harness_advance(&H, MIN);
  ck_assert_str_eq(output_of("old"), "v1");
  ck_assert_str_eq(output_of("new"), "v2");
  /* every attempt records the build it ran on */
  json_t *d = harness_describe(&H, WF, "old");
  json_t *steps = json_object_get(d, "steps");
  ck_assert_str_eq(
      json_string_value(json_object_get(
          json_array_get(json_object_get(json_array_get(steps, 2), "attempts"),
                         0),
          "build")),
      "h1");
  json_decref(d);
  ck_assert_int_eq(duro_engine_retire_build(H.e, WF, "h1"), 0);
  ck_assert_int_eq(duro_engine_retire_build(H.e, WF, "h1"), DURO_E_NOT_FOUND);
  harness_close(&H);
}
END_TEST

/* versioning: latest — every activation runs the newest build. */
START_TEST(latest_moves_to_the_newest) {
  open_builds(1);
  harness_advance(&H, MIN);
  ck_assert_str_eq(output_of("old"), "v2");
  ck_assert_str_eq(output_of("new"), "v2");
  ck_assert_int_eq(duro_engine_retire_build(H.e, WF, "h1"), 0);
  harness_close(&H);
}
END_TEST

static void reopen_with(const char *newest, duro_run_fn run, const char *older,
                        duro_run_fn older_run) {
  duro_engine_close(H.e);
  duro_engine_options opt = {.db_path = H.db,
                             .backend = harness_backend(),
                             .synchronous_full = 0,
                             .clock = &H.clock};
  char err[256];
  ck_assert_msg(duro_engine_open(&opt, &H.e, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(duro_engine_register(H.e, WF, NULL, run, NULL, newest), 0);
  if (older)
    ck_assert_int_eq(duro_engine_add_build(H.e, WF, older, older_run, 0), 0);
  harness_start(&H);
}

/* Pinned across a restart: the host loads the pinned build (from its build
 * store) beside the newest. */
START_TEST(pinned_across_a_restart) {
  open_builds(0);
  reopen_with("h2", flow_v2, "h1", flow_v1);
  harness_advance(&H, MIN);
  ck_assert_str_eq(output_of("old"), "v1");
  ck_assert_str_eq(output_of("new"), "v2");
  harness_close(&H);
}
END_TEST

/* A pinned build that is gone: the instance waits for an operator,
 * paused with build.unavailable, rather than replay on other code. */
START_TEST(missing_pinned_build_pauses) {
  open_builds(0);
  reopen_with("h2", flow_v2, NULL, NULL);
  harness_advance(&H, MIN);
  ck_assert_str_eq(harness_status(&H, WF, "old"), "paused");
  json_t *d = harness_describe(&H, WF, "old");
  ck_assert_str_eq(error_field(d, "name"), "build.unavailable");
  json_decref(d);
  ck_assert_str_eq(output_of("new"), "v2");
  harness_close(&H);
}
END_TEST

/* ---- builds held (engine/holds.c) ---------------------------------------
 *
 * A held build runs none of its code: an instance that would run it
 * waits (wait_type the hold's reason) without a step or a pin; a newer
 * build made the newest and a wake let one that never ran start there,
 * while one pinned to the held build waits on until the release. */
#define HOLD "test.hold"

static const char *wait_type_of(const char *id) {
  static char t[32];
  json_t *d = harness_describe(&H, WF, id);
  const char *w = json_string_value(json_object_get(d, "wait_type"));
  snprintf(t, sizeof t, "%s", w ? w : "");
  json_decref(d);
  return t;
}

START_TEST(held_build_runs_nothing) {
  harness_open(&H);
  ck_assert_int_eq(duro_engine_register(H.e, WF, NULL, flow_v1, NULL, "h1"), 0);
  harness_start(&H);
  ck_assert_int_eq(duro_instance_create(H.e, WF, "old", NULL, -1, NULL), 0);
  harness_run(&H); /* on h1, asleep after A */
  ran = 0;
  const char *wfs[] = {WF};
  ck_assert_int_eq(duro_engine_hold_build(H.e, wfs, 1, "h1", HOLD), 0);
  ck_assert_int_eq(duro_instance_create(H.e, WF, "new", NULL, -1, NULL), 0);
  harness_advance(&H, MIN); /* old wakes; both meet the hold */
  ck_assert_int_eq(ran, 0);
  ck_assert_str_eq(harness_status(&H, WF, "old"), "waiting");
  ck_assert_str_eq(wait_type_of("old"), HOLD);
  ck_assert_str_eq(harness_status(&H, WF, "new"), "waiting");
  ck_assert_str_eq(wait_type_of("new"), HOLD);
  json_t *d = harness_describe(&H, WF, "new");
  ck_assert(json_is_null(json_object_get(d, "build"))); /* never pinned */
  json_decref(d);

  /* A new build and a wake: "new" starts on it, "old" (pinned) waits. */
  ck_assert_int_eq(duro_engine_add_build(H.e, WF, "h2", flow_v2, 1), 0);
  size_t woken = 0;
  ck_assert_int_eq(duro_engine_wake_held(H.e, HOLD, &woken), 0);
  ck_assert_uint_eq(woken, 2);
  harness_run(&H);          /* "new" runs A on h2 and sleeps */
  harness_advance(&H, MIN); /* then B */
  ck_assert_str_eq(output_of("new"), "v2");
  ck_assert_str_eq(harness_status(&H, WF, "old"), "waiting");
  ck_assert_str_eq(wait_type_of("old"), HOLD);

  /* Released: the pinned one finishes on its build, A not run again. */
  ran = 0;
  ck_assert_int_eq(duro_engine_release_build(H.e, wfs, 1, "h1", &woken), 0);
  ck_assert_uint_eq(woken, 1);
  harness_run(&H);
  ck_assert_str_eq(output_of("old"), "v1");
  ck_assert_int_eq(ran, 1); /* B */
  ck_assert_int_eq(duro_engine_release_build(H.e, wfs, 1, "h1", NULL),
                   DURO_E_NOT_FOUND);
  harness_close(&H);
}
END_TEST

int main(void) {
  Suite *s = suite_create("versions");
  TCase *tc = tcase_create("divergence");
  tcase_add_test(tc, same_steps_replay);
  tcase_add_loop_test(tc, change_is_caught, 0,
                      (int)(sizeof changes / sizeof *changes));
  tcase_add_test(tc, change_past_the_journal_runs);
  tcase_add_test(tc, pause_then_roll_back);
  tcase_add_test(tc, dry_run_reports_divergence_and_changes_nothing);
  suite_add_tcase(s, tc);
  TCase *builds = tcase_create("builds");
  tcase_add_test(builds, pinned_finishes_on_its_build);
  tcase_add_test(builds, latest_moves_to_the_newest);
  tcase_add_test(builds, pinned_across_a_restart);
  tcase_add_test(builds, missing_pinned_build_pauses);
  tcase_add_test(builds, held_build_runs_nothing);
  suite_add_tcase(s, builds);
  return suite_run(s);
}
