/* test_ledger.c — what a new engine makes of the crash ledger a dead one
 * left, on a virtual clock.
 *
 * The real crashes (a plugin that segfaults, aborts, overflows its stack
 * or calls exit() under a real supervisor) are test_faults.  Here the
 * ledger is staged by hand, as the dead engine's threads and the crash
 * handlers would have left it, so each rule is checked exactly: a blamed
 * attempt becomes a failed attempt `plugin.crashed` and the step's retry
 * policy applies at its next call (back-off on the virtual clock,
 * attempt numbers, retries spent); engine.max_crashes crashes of one step
 * end the instance errored whatever its policy; a crash in run() outside
 * any step ends it at once; a death nobody was blamed for (a SIGKILL from
 * outside) records nothing; an exit that skipped the handlers is laid on
 * the callbacks that were running; a stale slot for a completed step or
 * an ended instance records nothing. */
#include <check.h>
#include <signal.h>
#include <string.h>

#include "harness.h"
#include "journal.h"
#include "ledger.h"
#include "suite_run.h"

#define WF "flow"
#define MIN (60 * 1000LL)

static harness H;
static ledger *L;
static duro_retries R = {
    .limit = 5, .delay = "1 minute", .backoff = DURO_BACKOFF_CONSTANT};
static int calls_a, calls_boom;
static uint32_t boom_attempt;

static int step_a(duro_attempt *a, void *arg) {
  (void)arg;
  calls_a++;
  return duro_attempt_result(a, "1");
}

static int step_boom(duro_attempt *a, void *arg) {
  (void)arg;
  calls_boom++;
  boom_attempt = duro_attempt_number(a);
  return duro_attempt_result(a, "2");
}

static duro_rc flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  duro_step_config cfg = {.retries = &R};
  DURO_TRY(duro_do(step, "a", NULL, step_a, NULL, NULL));
  DURO_TRY(duro_do(step, "boom", &cfg, step_boom, NULL, NULL));
  return duro_set_output(step, "\"done\"");
}

static void setup(void) {
  harness_open(&H);
  harness_register(&H, WF, flow);
  harness_start(&H);
  L = ledger_create_private(ledger_slots_for(0));
  ck_assert_ptr_nonnull(L);
}

static void teardown(void) {
  harness_close(&H);
  ledger_free(L);
}

static void create(const char *id) {
  ck_assert_int_eq(duro_instance_create(H.e, WF, id, NULL, -1, NULL), 0);
}

static int64_t rowid_of(const char *id) {
  journal *j;
  char err[256];
  ck_assert_msg(journal_open(H.db, 0, &j, err, sizeof err) == 0, "%s", err);
  journal_instance in = {0};
  ck_assert_int_eq(journal_instance_get(j, WF, id, &in), 0);
  int64_t rowid = in.rowid;
  journal_instance_clear(&in);
  journal_close(j);
  return rowid;
}

typedef struct staged {
  const char *id;
  ledger_state state;
  const char *name; /* the step, for LEDGER_ATTEMPT */
  int64_t seq;
  uint32_t attempt;
  int blamed; /* the handlers caught this thread */
} staged;

/* Leaves the ledger as a dead engine would have (one slot), and how the
 * supervisor saw it die; then reopens the engine on it. */
static void crash(const staged *st, ledger_death how, int code) {
  ledger_slot *s = ledger_claim(L, st->state);
  ck_assert_ptr_nonnull(s);
  s->rowid = rowid_of(st->id);
  ledger_copy(s->workflow, sizeof s->workflow, WF);
  ledger_copy(s->id, sizeof s->id, st->id);
  if (st->name) {
    char key[64];
    snprintf(key, sizeof key, "%s#1", st->name);
    ledger_copy(s->key, sizeof s->key, key);
    ledger_copy(s->name, sizeof s->name, st->name);
    s->count = 1;
    s->seq = st->seq;
    s->attempt = st->attempt;
    s->started_ms = s->step_started_ms = duro_clock_now(&H.clock);
  }
  int index = -1;
  for (uint32_t i = 0; i < ledger_size(L); i++)
    if (ledger_slot_at(L, i) == s)
      index = (int)i;
  if (st->blamed)
    ledger_blame(L, index, how == LEDGER_DEATH_EXIT, code);
  ledger_rotate(L, how, code);
  harness_set_ledger(&H, L, 3);
}

static const staged boom1 = {"i1", LEDGER_ATTEMPT, "boom", 2, 1, 1};

static json_t *boom_step(json_t *d) { return harness_step(d, "boom#1"); }

static const char *error_name(json_t *o) {
  return json_string_value(
      json_object_get(json_object_get(o, "error"), "name"));
}

/* A blamed attempt is a failed attempt; the back-off follows, then the
 * next attempt (number 2) runs and completes. */
START_TEST(crash_is_a_failed_attempt) {
  create("i1");
  crash(&boom1, LEDGER_DEATH_SIGNAL, SIGSEGV);
  json_t *d = harness_describe(&H, WF, "i1");
  json_t *att = json_object_get(boom_step(d), "attempts");
  ck_assert_uint_eq(json_array_size(att), 1);
  ck_assert_str_eq(error_name(json_array_get(att, 0)), "plugin.crashed");
  const char *msg = json_string_value(json_object_get(
      json_object_get(json_array_get(att, 0), "error"), "message"));
  ck_assert_msg(strstr(msg, "SIGSEGV"), "message: %s", msg);
  json_decref(d);

  harness_run(&H);
  ck_assert_int_eq(calls_a, 1);
  ck_assert_int_eq(calls_boom, 0); /* the back-off of the crashed attempt */
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "waiting");
  harness_advance(&H, MIN - 1);
  ck_assert_int_eq(calls_boom, 0);
  harness_advance(&H, 1);
  ck_assert_int_eq(calls_boom, 1);
  ck_assert_uint_eq(boom_attempt, 2);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
  d = harness_describe(&H, WF, "i1");
  ck_assert_uint_eq(json_array_size(json_object_get(boom_step(d), "attempts")),
                    2);
  json_decref(d);
}
END_TEST

/* max_crashes crashes of one step end the instance, whatever retries its
 * policy has left; another instance is untouched. */
START_TEST(max_crashes_errors_the_instance) {
  create("i1");
  create("i2");
  for (uint32_t n = 1; n <= 3; n++) {
    staged st = boom1;
    st.attempt = n;
    crash(&st, LEDGER_DEATH_SIGNAL, SIGABRT);
    if (n < 3)
      ck_assert_str_ne(harness_status(&H, WF, "i1"), "errored");
  }
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "errored");
  json_t *d = harness_describe(&H, WF, "i1");
  ck_assert_str_eq(error_name(d), "plugin.crashed");
  ck_assert_str_eq(json_string_value(json_object_get(boom_step(d), "status")),
                   "errored");
  json_decref(d);
  harness_advance(&H, 10 * MIN);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "errored");
  ck_assert_str_eq(harness_status(&H, WF, "i2"), "complete");
  ck_assert_int_eq(calls_boom, 1); /* i2's only */
}
END_TEST

/* A crash that spends the last retry: the step fails with the crash's
 * error at its next call, and run() returning it errors the instance. */
START_TEST(crash_spends_the_last_retry) {
  R.limit = 0;
  create("i1");
  crash(&boom1, LEDGER_DEATH_SIGNAL, SIGBUS);
  harness_run(&H);
  ck_assert_int_eq(calls_boom, 0);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "errored");
  json_t *d = harness_describe(&H, WF, "i1");
  ck_assert_str_eq(error_name(d), "plugin.crashed");
  json_decref(d);
}
END_TEST

/* run() crashing outside a step would crash on every activation. */
START_TEST(crash_outside_a_step_errors_at_once) {
  create("i1");
  staged st = {"i1", LEDGER_ACTIVATION, NULL, 0, 0, 1};
  crash(&st, LEDGER_DEATH_SIGNAL, SIGSEGV);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "errored");
  json_t *d = harness_describe(&H, WF, "i1");
  ck_assert_str_eq(error_name(d), "plugin.crashed");
  json_decref(d);
  harness_run(&H);
  ck_assert_int_eq(calls_a, 0);
}
END_TEST

/* A SIGKILL from outside blames nobody: the attempt just runs again, as
 * number 1. */
START_TEST(unblamed_kill_records_nothing) {
  create("i1");
  staged st = boom1;
  st.blamed = 0;
  crash(&st, LEDGER_DEATH_SIGNAL, SIGKILL);
  harness_run(&H);
  ck_assert_int_eq(calls_boom, 1);
  ck_assert_uint_eq(boom_attempt, 1);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
}
END_TEST

/* _exit() from a callback skips the exit handlers: with nobody blamed, an
 * unasked exit is laid on the callbacks that were running. */
START_TEST(unblamed_exit_counts_running_attempts) {
  create("i1");
  staged st = boom1;
  st.blamed = 0;
  crash(&st, LEDGER_DEATH_EXIT, 0);
  json_t *d = harness_describe(&H, WF, "i1");
  json_t *att = json_object_get(boom_step(d), "attempts");
  ck_assert_uint_eq(json_array_size(att), 1);
  ck_assert_str_eq(error_name(json_array_get(att, 0)), "plugin.crashed");
  json_decref(d);
}
END_TEST

/* A slot naming an instance that ended meanwhile records nothing. */
START_TEST(ended_instance_is_left_alone) {
  create("i1");
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
  crash(&boom1, LEDGER_DEATH_SIGNAL, SIGSEGV);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
  json_t *d = harness_describe(&H, WF, "i1");
  ck_assert_uint_eq(json_array_size(json_object_get(boom_step(d), "attempts")),
                    1);
  json_decref(d);
}
END_TEST

/* The ledger is cleared once recorded: a clean restart counts nothing
 * twice. */
START_TEST(recorded_once) {
  create("i1");
  crash(&boom1, LEDGER_DEATH_SIGNAL, SIGSEGV);
  harness_reopen(&H);
  harness_reopen(&H);
  json_t *d = harness_describe(&H, WF, "i1");
  ck_assert_uint_eq(json_array_size(json_object_get(boom_step(d), "attempts")),
                    1);
  json_decref(d);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ledger");
  TCase *tc = tcase_create("crashes");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, crash_is_a_failed_attempt);
  tcase_add_test(tc, max_crashes_errors_the_instance);
  tcase_add_test(tc, crash_spends_the_last_retry);
  tcase_add_test(tc, crash_outside_a_step_errors_at_once);
  tcase_add_test(tc, unblamed_kill_records_nothing);
  tcase_add_test(tc, unblamed_exit_counts_running_attempts);
  tcase_add_test(tc, ended_instance_is_left_alone);
  tcase_add_test(tc, recorded_once);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
