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
 * outside) cuts the running attempt short (journaled, the re-run is the
 * next attempt, no retry spent); an exit that skipped the handlers is laid on
 * the callbacks that were running; a stale slot for a completed step or
 * an ended instance records nothing.  A queue handler's batch stopped by
 * the death is settled by the next engine: the guilty one's messages are
 * retried under the queue's policy with the crash as their error (into
 * the dead-letter queue when out of retries), a bystander's return at
 * once; messages it acked before the death stay acked. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "journal.h"
#include "ledger.h"
#include "queue.h"
#include "suite_run.h"
#include "view_queue.h"

#define WF "flow"
#define MIN (60 * 1000LL)

static harness H;
static ledger *L;
static duro_retries R = {
    .limit = 5, .delay = "1 minute", .backoff = DURO_BACKOFF_CONSTANT};
static int calls_a, calls_boom, boom_failures;
static uint32_t boom_attempt;
static char boom_key[64]; /* the last attempt's idempotency key */

static int step_a(duro_attempt *a, void *arg) {
  (void)arg;
  calls_a++;
  return duro_attempt_result(a, "1");
}

static int step_boom(duro_attempt *a, void *arg) {
  (void)arg;
  calls_boom++;
  boom_attempt = duro_attempt_number(a);
  snprintf(boom_key, sizeof boom_key, "%s", duro_attempt_idempotency_key(a));
  if (boom_failures > 0) {
    boom_failures--;
    return duro_attempt_fail(a, "boom failed");
  }
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
  journal *j = harness_journal_open(&H);
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

/* A SIGKILL from outside blames nobody: the attempt that was inside its
 * callback is journaled cut short, and the step runs again at once as
 * attempt 2, with the idempotency key every attempt of it has. */
START_TEST(unblamed_kill_cuts_short) {
  create("i1");
  staged st = boom1;
  st.blamed = 0;
  crash(&st, LEDGER_DEATH_SIGNAL, SIGKILL);
  json_t *d = harness_describe(&H, WF, "i1");
  json_t *att = json_object_get(boom_step(d), "attempts");
  ck_assert_uint_eq(json_array_size(att), 1);
  ck_assert_str_eq(error_name(json_array_get(att, 0)), "attempt.cut_short");
  const char *msg = json_string_value(json_object_get(
      json_object_get(json_array_get(att, 0), "error"), "message"));
  ck_assert_msg(strstr(msg, "cut short by the engine's death (SIGKILL) at "),
                "message: %s", msg);
  json_decref(d);
  harness_run(&H);
  ck_assert_int_eq(calls_boom, 1);
  ck_assert_uint_eq(boom_attempt, 2);
  ck_assert_str_eq(boom_key, "i1/boom#1");
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
  d = harness_describe(&H, WF, "i1");
  ck_assert_uint_eq(json_array_size(json_object_get(boom_step(d), "attempts")),
                    2);
  json_decref(d);
}
END_TEST

/* A cut-short attempt spends no retry: with retries.limit 1, the failure
 * of attempt 2 after it is retried (attempt 3), as a first failure is. */
START_TEST(cut_short_spends_no_retry) {
  R.limit = 1;
  boom_failures = 1;
  create("i1");
  staged st = boom1;
  st.blamed = 0;
  crash(&st, LEDGER_DEATH_SIGNAL, SIGKILL);
  harness_run(&H);
  ck_assert_uint_eq(boom_attempt, 2);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "waiting");
  harness_advance(&H, MIN); /* the back-off of a first failure */
  ck_assert_uint_eq(boom_attempt, 3);
  ck_assert_str_eq(harness_status(&H, WF, "i1"), "complete");
  json_t *d = harness_describe(&H, WF, "i1");
  json_t *att = json_object_get(boom_step(d), "attempts");
  ck_assert_uint_eq(json_array_size(att), 3);
  ck_assert_str_eq(error_name(json_array_get(att, 0)), "attempt.cut_short");
  ck_assert_str_eq(error_name(json_array_get(att, 1)), "Error");
  json_decref(d);
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

/* ---- queue handler batches ---------------------------------------------
 */

static const duro_queue_options strict = {.max_retries = 0,
                                          .dead_letter = "dead"};

/* Sends n messages to q and leases them as one push batch would, with
 * the lease token `prefix`; returns the first message's lease id (caller
 * frees). */
static char *lease_batch(const char *q, int n, char prefix[]) {
  for (int i = 0; i < n; i++) {
    char body[32], err[128];
    snprintf(body, sizeof body, "{\"n\":%d}", i);
    ck_assert_int_eq(duro_queue_enqueue(H.e, q, body, 0, NULL, err, sizeof err),
                     0);
  }
  queue_lease_prefix(prefix);
  journal_message *msgs = NULL;
  size_t got = 0;
  char err[128];
  ck_assert_int_eq(queue_lease(H.e, q, (uint32_t)n, 10 * MIN, prefix, &msgs,
                               &got, err, sizeof err),
                   0);
  ck_assert_uint_eq(got, (size_t)n);
  char *first = strdup(msgs[0].lease);
  journal_messages_free(msgs, got);
  return first;
}

/* The ledger as a queue handler's thread leaves it. */
static void crash_batch(const char *q, const char *prefix, uint32_t n,
                        int blamed, ledger_death how, int code) {
  ledger_slot *s = ledger_claim(L, LEDGER_HANDLER);
  ck_assert_ptr_nonnull(s);
  ledger_copy(s->driver, sizeof s->driver, "queues");
  ledger_copy(s->workflow, sizeof s->workflow, q);
  ledger_copy(s->plugin, sizeof s->plugin, "consumer");
  ledger_copy(s->key, sizeof s->key, prefix);
  s->count = n;
  if (blamed)
    ledger_blame(L, (int)(s - ledger_slot_at(L, 0)), 0, code);
  ledger_rotate(L, how, code);
  harness_set_ledger(&H, L, 3);
}

static json_t *stats(const char *q) {
  json_t *o = NULL;
  ck_assert_int_eq(duro_queue_stats(H.e, q, &o), 0);
  return o;
}

static int64_t stat(const char *q, const char *what) {
  json_t *o = stats(q);
  int64_t v = json_integer_value(json_object_get(o, what));
  json_decref(o);
  return v;
}

/* The guilty batch, out of retries (max_retries 0): its unacked messages
 * are in the dead-letter queue at once with the crash as their error; the
 * one acked before the crash is not. */
START_TEST(crashed_batch_goes_by_the_retry_policy) {
  harness_register_queue(&H, "dead", NULL);
  harness_register_queue(&H, "q", &strict);
  char prefix[QUEUE_LEASE_PREFIX];
  char *first = lease_batch("q", 3, prefix);
  const char *acks[] = {first};
  json_t *res = NULL, *msgs = NULL;
  char err[128];
  ck_assert_int_eq(
      duro_queue_ack(H.e, "q", acks, 1, NULL, 0, &res, err, sizeof err), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(res, "acked")), 1);
  json_decref(res);
  free(first);
  crash_batch("q", prefix, 3, 1, LEDGER_DEATH_SIGNAL, SIGSEGV);
  ck_assert_int_eq(stat("q", "ready") + stat("q", "in_flight"), 0);
  ck_assert_int_eq(stat("dead", "ready"), 2);
  ck_assert_int_eq(duro_queue_pull(H.e, "dead", 10, 0, &msgs, err, sizeof err),
                   0);
  ck_assert_uint_eq(json_array_size(msgs), 2);
  size_t i;
  json_t *m;
  json_array_foreach(msgs, i, m) {
    const char *last = json_string_value(json_object_get(m, "last_error"));
    ck_assert_msg(last && strstr(last, "plugin.crashed") &&
                      strstr(last, "SIGSEGV") && strstr(last, "consumer"),
                  "last_error: %s", last ? last : "(none)");
    ck_assert_int_ne(
        json_integer_value(json_object_get(json_object_get(m, "body"), "n")),
        0);
  }
  json_decref(msgs);
}
END_TEST

/* A batch whose thread was not to blame (another thread crashed, or the
 * engine was killed from outside) comes back at once, with its retries
 * left, not when its 10-minute lease ends. */
START_TEST(bystander_batch_returns_at_once) {
  harness_register_queue(&H, "q", NULL);
  char prefix[QUEUE_LEASE_PREFIX];
  free(lease_batch("q", 2, prefix));
  ck_assert_int_eq(stat("q", "in_flight"), 2);
  crash_batch("q", prefix, 2, 0, LEDGER_DEATH_SIGNAL, SIGKILL);
  ck_assert_int_eq(stat("q", "in_flight"), 0);
  ck_assert_int_eq(stat("q", "ready"), 2);
  json_t *msgs = NULL;
  char err[128];
  ck_assert_int_eq(duro_queue_pull(H.e, "q", 10, 0, &msgs, err, sizeof err), 0);
  ck_assert_uint_eq(json_array_size(msgs), 2);
  json_t *m = json_array_get(msgs, 0);
  ck_assert_int_eq(json_integer_value(json_object_get(m, "attempts")), 2);
  ck_assert_ptr_nonnull(strstr(
      json_string_value(json_object_get(m, "last_error")), "engine.stopped"));
  json_decref(msgs);
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
  tcase_add_test(tc, unblamed_kill_cuts_short);
  tcase_add_test(tc, cut_short_spends_no_retry);
  tcase_add_test(tc, unblamed_exit_counts_running_attempts);
  tcase_add_test(tc, ended_instance_is_left_alone);
  tcase_add_test(tc, recorded_once);
  tcase_add_test(tc, crashed_batch_goes_by_the_retry_policy);
  tcase_add_test(tc, bystander_batch_returns_at_once);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
