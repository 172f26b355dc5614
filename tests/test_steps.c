/* test_steps.c — the step semantics (doc/reference/semantics.md's table),
 * row by row, against the real engine: a fresh SQLite journal per test,
 * workers = 0, and a virtual clock (nothing here sleeps; time moves only
 * when a test advances it).
 *
 * Workflows are ordinary duro.h entrypoints defined below.  What their step
 * callbacks saw (how often they ran, with which attempt number, deadline,
 * ids, rc's) is recorded in the static `C`, which fork mode gives each test
 * fresh, and setup() clears for CK_FORK=no runs.
 *
 * Each "nothing runs" claim is asserted twice: harness_advance() reports
 * zero activations, and the callback counters did not move. */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "harness.h"
#include "suite_run.h"
#include "view_dry_run.h"
#include "view_metrics.h"

#define SEC 1000LL
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)

#define WF "wf"

static harness H;

/* ---- what the workflows saw ------------------------------------------- */

enum { MAXN = 64 };

static struct {
  int top;                /* entries into run() */
  int calls[8];           /* callback executions, by slot */
  uint32_t attempt[MAXN]; /* attempt numbers seen by cb_flaky / cb_slow */
  int64_t deadline[MAXN]; /* their duro_attempt_deadline_ms */
  int64_t started[MAXN];  /* virtual time when they started */
  int cancelled_before[MAXN], cancelled_after[MAXN];
  int n_attempt;
  uint32_t succeed_on; /* cb_flaky succeeds on this attempt (0 = never) */
  int final;           /* cb_flaky fails with duro_attempt_fail_final */
  const duro_step_config *cfg; /* the config wf_flaky passes */
  int rc[MAXN];                /* step rc's recorded by run() */
  int n_rc;
  char seen[16][512]; /* strings run() or a callback copied out */
  int n_seen;
  char keys[8][256]; /* idempotency keys */
  int create_rc[8];  /* duro_workflow_create by attempt number */
  int unknown_binding_null, unknown_create_rc;
  int64_t until;            /* wf_sleep_until's target */
  const char *timeout;      /* wf_event_timeout's timeout */
  int after_wait;           /* wf_sticky: the rc's of the ignored calls */
  const char *self_id;      /* instance id a callback controls itself by */
  int error_is[8];          /* duro_error_is answers, by slot */
  int result_rc;            /* cb_bad_json: what duro_attempt_result returned */
  int send_rc[8];           /* duro_workflow_send_event by attempt number */
  int send_refused_rc;      /* the same from run(), outside a callback */
  int send_missing_rc;      /* the same to an instance that does not exist */
  duro_workflow *parent_wf; /* the PARENT binding, as run() saw it */
} C;

/* What wf_any passes to duro_wait_any (C.rc and C.seen: what it got). */
static struct {
  const char *const *types;
  size_t n;
  int64_t deadline;
  int twice;   /* a second wait on the same types after the first */
  int nap;     /* a sleep after the first wait (a later replay) */
  int as_wait; /* the code changed: a waitForEvent at the same key */
} A;

static duro_retries R;
static duro_step_config CFG;

/* Clock reading in the test's own frame: T0 plus what the test advanced. */
static int64_t now(void) { return duro_clock_now(&H.clock); }

static void setup(void) {
  memset(&C, 0, sizeof C);
  memset(&A, 0, sizeof A);
  memset(&R, 0, sizeof R);
  memset(&CFG, 0, sizeof CFG);
  harness_open(&H);
}

static json_t *last_desc;

static void teardown(void) {
  json_decref(last_desc);
  last_desc = NULL;
  harness_close(&H);
}

static void copy_seen(const char *s) {
  ck_assert_int_lt(C.n_seen, 16);
  snprintf(C.seen[C.n_seen++], sizeof C.seen[0], "%s", s ? s : "(null)");
}

/* ---- helpers ----------------------------------------------------------- */

static void create(const char *wf, const char *id, const char *params) {
  int rc = duro_instance_create(H.e, wf, id, params, -1, NULL);
  ck_assert_msg(rc == 0, "create %s/%s: %s", wf, id, duro_err_name(rc));
}

/* The describe JSON of an instance; valid until the next desc() call. */
static json_t *desc(const char *wf, const char *id) {
  json_decref(last_desc);
  last_desc = harness_describe(&H, wf, id);
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

static json_int_t jint(json_t *o, const char *key) {
  json_t *v = jget(o, key);
  ck_assert_msg(json_is_integer(v), "\"%s\" is not an integer", key);
  return json_integer_value(v);
}

/* Asserts that `v` equals the JSON text `expected`. */
#define assert_json(v, expected)                                               \
  do {                                                                         \
    json_t *want_ = json_loads((expected), JSON_DECODE_ANY, NULL);             \
    ck_assert_msg(want_ != NULL, "bad expected JSON %s", (expected));          \
    char *got_ = json_dumps((v), JSON_COMPACT | JSON_ENCODE_ANY);              \
    ck_assert_msg(json_equal((v), want_), "JSON %s, expected %s",              \
                  got_ ? got_ : "(null)", (expected));                         \
    free(got_);                                                                \
    json_decref(want_);                                                        \
  } while (0)

/* The step `key` in a describe JSON (the test fails when it is missing). */
static json_t *step_of(json_t *d, const char *key) {
  json_t *s = harness_step(d, key);
  ck_assert_msg(s != NULL, "describe has no step \"%s\"", key);
  return s;
}

static size_t n_steps(json_t *d) { return json_array_size(jget(d, "steps")); }

/* An {name,message} error object; message NULL = any, else a substring. */
static void assert_error(json_t *err, const char *name, const char *message) {
  ck_assert_msg(json_is_object(err), "error is not an object");
  ck_assert_str_eq(jstr(err, "name"), name);
  if (message)
    ck_assert_msg(strstr(jstr(err, "message"), message) != NULL,
                  "error message \"%s\" lacks \"%s\"", jstr(err, "message"),
                  message);
}

static void assert_status(const char *id, const char *status) {
  ck_assert_str_eq(harness_status(&H, WF, id), status);
}

/* Advances by `ms` and asserts that nothing ran. */
static void advance_nothing(int64_t ms) {
  int top = C.top;
  ck_assert_uint_eq(harness_advance(&H, ms), 0);
  ck_assert_int_eq(C.top, top);
}

/* ---- generic callbacks ----------------------------------------------- */

typedef struct fixed {
  int slot;
  const char *result;
} fixed;

/* Counts itself in C.calls[slot] and returns a fixed result. */
static int cb_fixed(duro_attempt *a, void *arg) {
  const fixed *f = arg;
  C.calls[f->slot]++;
  duro_attempt_result(a, f->result);
  return 0;
}

/* Fails (retryably, or finally with C.final) until attempt C.succeed_on. */
static int cb_flaky(duro_attempt *a, void *arg) {
  (void)arg;
  uint32_t n = duro_attempt_number(a);
  ck_assert_int_lt(C.n_attempt, MAXN);
  C.attempt[C.n_attempt] = n;
  C.deadline[C.n_attempt] = duro_attempt_deadline_ms(a);
  C.started[C.n_attempt] = now();
  C.n_attempt++;
  C.calls[0]++;
  if (C.final)
    return duro_attempt_fail_final(a, "card declined: %s",
                                   "insufficient funds");
  if (C.succeed_on && n == C.succeed_on) {
    char buf[64];
    snprintf(buf, sizeof buf, "{\"ok\":%u}", (unsigned)n);
    return duro_attempt_result(a, buf);
  }
  return duro_attempt_fail(a, "boom %u", (unsigned)n);
}

/* One duro_do with the test's config; output = the step's result. */
static duro_rc wf_flaky(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *r;
  DURO_TRY(duro_do(step, "flaky", C.cfg, cb_flaky, NULL, &r));
  return duro_set_output(step, r);
}

static void start_flaky(const duro_step_config *cfg) {
  C.cfg = cfg;
  harness_register(&H, WF, wf_flaky);
  harness_start(&H);
  create(WF, "f1", NULL);
}

/* ---- duro_do: retries, back-off, final failures ------------------------ */

START_TEST(test_retry_limit_exhausted) {
  R = (duro_retries){
      .limit = 2, .delay = "1 minute", .backoff = DURO_BACKOFF_CONSTANT};
  CFG.retries = &R;
  start_flaky(&CFG);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.calls[0], 1);
  assert_status("f1", "waiting"); /* a back-off is a suspension */
  json_t *d = desc(WF, "f1");
  ck_assert_int_eq(jint(d, "wake_ms"), T0_MS + MIN);
  ck_assert_int_eq(jint(step_of(d, "flaky#1"), "wake_ms"), T0_MS + MIN);
  ck_assert_str_eq(jstr(step_of(d, "flaky#1"), "status"), "waiting");

  advance_nothing(MIN - 1);
  ck_assert_int_eq(C.calls[0], 1);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  ck_assert_int_eq(C.calls[0], 2);
  assert_status("f1", "waiting");

  advance_nothing(MIN - 1);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  ck_assert_int_eq(C.calls[0], 3);

  /* limit 2 => exactly 3 executions, numbered 1, 2, 3 */
  ck_assert_int_eq(C.n_attempt, 3);
  for (int i = 0; i < 3; i++)
    ck_assert_uint_eq(C.attempt[i], (uint32_t)i + 1);
  assert_status("f1", "errored");
  d = desc(WF, "f1");
  assert_error(jget(d, "error"), "Error", NULL);
  ck_assert_str_eq(jstr(jget(d, "error"), "message"), "boom 3");
  ck_assert(json_is_null(jget(d, "output")));
  ck_assert(json_is_null(jget(d, "wake_ms")));
  ck_assert(json_is_integer(jget(d, "ended_ms")));
  json_t *s = step_of(d, "flaky#1");
  ck_assert_str_eq(jstr(s, "status"), "errored");
  ck_assert_str_eq(jstr(s, "type"), "do");
  assert_error(jget(s, "error"), "Error", "boom 3");
  json_t *att = jget(s, "attempts");
  ck_assert_uint_eq(json_array_size(att), 3);
  for (size_t i = 0; i < 3; i++) {
    json_t *a = json_array_get(att, i);
    char msg[16];
    snprintf(msg, sizeof msg, "boom %zu", i + 1);
    ck_assert_int_eq(jint(a, "number"), (json_int_t)i + 1);
    assert_error(jget(a, "error"), "Error", NULL);
    ck_assert_str_eq(jstr(jget(a, "error"), "message"), msg);
    ck_assert_int_eq(jint(a, "started_ms"), T0_MS + (json_int_t)i * MIN);
    ck_assert_str_eq(jstr(a, "build"), "test");
  }

  /* and it stays that way */
  advance_nothing(30 * DAY);
  ck_assert_int_eq(C.calls[0], 3);
}
END_TEST

/* Back-off shapes with delay 1 s: the waits between attempts 1-2, 2-3,
 * 3-4. */
static const struct {
  duro_backoff how;
  int64_t waits[3];
} shapes[] = {
    {DURO_BACKOFF_EXPONENTIAL, {1 * SEC, 2 * SEC, 4 * SEC}},
    {DURO_BACKOFF_CONSTANT, {1 * SEC, 1 * SEC, 1 * SEC}},
    {DURO_BACKOFF_LINEAR, {1 * SEC, 2 * SEC, 3 * SEC}},
};

START_TEST(test_backoff_shapes) {
  R = (duro_retries){
      .limit = 3, .delay = "1 second", .backoff = shapes[_i].how};
  CFG.retries = &R;
  start_flaky(&CFG);

  ck_assert_uint_eq(harness_run(&H), 1);
  for (int k = 0; k < 3; k++) {
    int64_t w = shapes[_i].waits[k];
    assert_status("f1", "waiting");
    json_t *d = desc(WF, "f1");
    ck_assert_int_eq(jint(d, "wake_ms"), now() + w);
    advance_nothing(w - 1);
    ck_assert_int_eq(C.calls[0], k + 1);
    ck_assert_uint_eq(harness_advance(&H, 1), 1);
    ck_assert_int_eq(C.calls[0], k + 2);
    ck_assert_uint_eq(C.attempt[k + 1], (uint32_t)k + 2);
    ck_assert_int_eq(C.started[k + 1] - C.started[k], w);
  }
  ck_assert_int_eq(C.calls[0], 4);
  assert_status("f1", "errored");
  ck_assert_str_eq(jstr(jget(desc(WF, "f1"), "error"), "message"), "boom 4");
}
END_TEST

START_TEST(test_third_attempt_succeeds) {
  R = (duro_retries){.limit = 2, .delay = "10 seconds"}; /* exponential */
  CFG.retries = &R;
  C.succeed_on = 3;
  start_flaky(&CFG);

  harness_run(&H);
  advance_nothing(10 * SEC - 1);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  advance_nothing(20 * SEC - 1);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  ck_assert_int_eq(C.calls[0], 3);
  ck_assert_uint_eq(C.attempt[2], 3);

  assert_status("f1", "complete");
  json_t *d = desc(WF, "f1");
  assert_json(jget(d, "output"), "{\"ok\":3}");
  ck_assert(json_is_null(jget(d, "error")));
  json_t *s = step_of(d, "flaky#1");
  ck_assert_str_eq(jstr(s, "status"), "complete");
  assert_json(jget(s, "result"), "{\"ok\":3}");
  ck_assert(json_is_null(jget(s, "error")));
  json_t *att = jget(s, "attempts");
  ck_assert_uint_eq(json_array_size(att), 3);
  assert_error(jget(json_array_get(att, 0), "error"), "Error", "boom 1");
  assert_error(jget(json_array_get(att, 1), "error"), "Error", "boom 2");
  ck_assert(json_is_null(jget(json_array_get(att, 2), "error")));
  advance_nothing(DAY);
  ck_assert_int_eq(C.calls[0], 3);
}
END_TEST

START_TEST(test_final_failure_skips_retries) {
  R = (duro_retries){.limit = 5, .delay = "1 second"};
  CFG.retries = &R;
  C.final = 1;
  start_flaky(&CFG);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.calls[0], 1);
  assert_status("f1", "errored");
  json_t *d = desc(WF, "f1");
  /* the plugin's own message survives (Cloudflare's emulator loses it) */
  assert_error(jget(d, "error"), "NonRetryableError", NULL);
  ck_assert_str_eq(jstr(jget(d, "error"), "message"),
                   "card declined: insufficient funds");
  json_t *s = step_of(d, "flaky#1");
  ck_assert_str_eq(jstr(s, "status"), "errored");
  ck_assert_uint_eq(json_array_size(jget(s, "attempts")), 1);
  assert_error(jget(json_array_get(jget(s, "attempts"), 0), "error"),
               "NonRetryableError", "card declined: insufficient funds");
  advance_nothing(DAY);
  ck_assert_int_eq(C.calls[0], 1);
}
END_TEST

START_TEST(test_default_config) {
  start_flaky(NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  /* default timeout: 10 minutes per attempt */
  ck_assert_int_eq(C.deadline[0], T0_MS + 10 * MIN);
  static const int64_t waits[] = {10 * SEC, 20 * SEC, 40 * SEC, 80 * SEC,
                                  160 * SEC};
  for (int k = 0; k < 5; k++) {
    assert_status("f1", "waiting");
    advance_nothing(waits[k] - 1);
    ck_assert_int_eq(C.calls[0], k + 1);
    ck_assert_uint_eq(harness_advance(&H, 1), 1);
    ck_assert_int_eq(C.calls[0], k + 2);
    ck_assert_int_eq(C.deadline[k + 1], now() + 10 * MIN);
  }
  /* 5 retries = 6 executions, then errored */
  ck_assert_int_eq(C.calls[0], 6);
  for (int i = 0; i < 6; i++)
    ck_assert_uint_eq(C.attempt[i], (uint32_t)i + 1);
  assert_status("f1", "errored");
  json_t *d = desc(WF, "f1");
  ck_assert_str_eq(jstr(jget(d, "error"), "message"), "boom 6");
  ck_assert_uint_eq(json_array_size(jget(step_of(d, "flaky#1"), "attempts")),
                    6);
  advance_nothing(DAY);
  ck_assert_int_eq(C.calls[0], 6);
}
END_TEST

START_TEST(test_limit_zero_no_retries) {
  CFG.retries = &(duro_retries){.limit = 0};
  start_flaky(&CFG);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.calls[0], 1);
  assert_status("f1", "errored");
  json_t *d = desc(WF, "f1");
  ck_assert_str_eq(jstr(jget(d, "error"), "message"), "boom 1");
  ck_assert_uint_eq(json_array_size(jget(step_of(d, "flaky#1"), "attempts")),
                    1);
  advance_nothing(DAY);
  ck_assert_int_eq(C.calls[0], 1);
}
END_TEST

/* a, then b retried until its third attempt, then c. */
static duro_rc wf_abc_retry(duro_step *step, const duro_event *ev,
                            duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *ra;
  DURO_TRY(duro_do(step, "a", NULL, cb_fixed, &(fixed){1, "\"a\""}, &ra));
  copy_seen(ra);
  DURO_TRY(duro_do(step, "b", C.cfg, cb_flaky, NULL, NULL));
  DURO_TRY(duro_do(step, "c", NULL, cb_fixed, &(fixed){2, "\"c\""}, NULL));
  return duro_set_output(step, "{\"done\":true}");
}

START_TEST(test_completed_step_not_rerun) {
  R = (duro_retries){
      .limit = 4, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT};
  CFG.retries = &R;
  C.cfg = &CFG;
  C.succeed_on = 3;
  harness_register(&H, WF, wf_abc_retry);
  harness_start(&H);
  create(WF, "r1", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_uint_eq(harness_advance(&H, SEC), 1);
  ck_assert_uint_eq(harness_advance(&H, SEC), 1);
  assert_status("r1", "complete");
  ck_assert_int_eq(C.calls[1], 1); /* a: once, whatever happened after it */
  ck_assert_int_eq(C.calls[0], 3); /* b: three attempts */
  ck_assert_int_eq(C.calls[2], 1); /* c: once */
  ck_assert_int_eq(C.top, 3);      /* run() itself: once per activation */
  /* the replayed a handed back its journaled result every time */
  ck_assert_int_eq(C.n_seen, 3);
  for (int i = 0; i < 3; i++)
    ck_assert_str_eq(C.seen[i], "\"a\"");
  json_t *d = desc(WF, "r1");
  ck_assert_uint_eq(json_array_size(jget(step_of(d, "a#1"), "attempts")), 1);
  ck_assert_uint_eq(json_array_size(jget(step_of(d, "b#1"), "attempts")), 3);
}
END_TEST

/* ---- the counters' history (GET /metrics/history) ----------------------- */

/* Series `name` of a history, as 60 numbers, oldest bucket first. */
static json_int_t hist_at(json_t *h, const char *name, size_t i) {
  json_t *arr = json_object_get(jget(h, "series"), name);
  ck_assert_msg(json_array_size(arr) == 60, "series %s has %zu buckets", name,
                json_array_size(arr));
  return json_integer_value(json_array_get(arr, i));
}

static json_int_t hist_sum(json_t *h, const char *name) {
  json_int_t n = 0;
  for (size_t i = 0; i < 60; i++)
    n += hist_at(h, name, i);
  return n;
}

/* Each counter lands in the 10 s bucket it grew in, the newest last; a
 * bucket leaves the history ten minutes after it began. */
START_TEST(test_metrics_history) {
  R = (duro_retries){
      .limit = 4, .delay = "10 seconds", .backoff = DURO_BACKOFF_CONSTANT};
  CFG.retries = &R;
  C.cfg = &CFG;
  C.succeed_on = 2;
  harness_register(&H, WF, wf_abc_retry);
  harness_start(&H);
  /* T0 begins a bucket: a completes, b fails and is retried in 10 s. */
  create(WF, "h1", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "h1", "note", NULL), 0);
  json_t *h = duro_engine_metrics_history(H.e);
  ck_assert_int_eq(jint(h, "bucket_ms"), 10 * SEC);
  ck_assert_int_eq(jint(h, "now_ms"), T0_MS);
  ck_assert_int_eq(jint(h, "start_ms"), T0_MS - 59 * 10 * SEC);
  ck_assert_int_eq(jint(h, "since_ms"), T0_MS);
  ck_assert_uint_eq(json_object_size(jget(h, "series")), 6);
  static const struct {
    const char *name;
    json_int_t first, second; /* in T0's bucket, in the next */
  } want[] = {{"steps_completed", 1, 2},   {"attempts_failed", 1, 0},
              {"retries_scheduled", 1, 0}, {"instances_created", 1, 0},
              {"activations", 1, 1},       {"events_sent", 1, 0}};
  for (size_t k = 0; k < 6; k++) {
    ck_assert_msg(hist_at(h, want[k].name, 59) == want[k].first &&
                      hist_sum(h, want[k].name) == want[k].first,
                  "%s at T0", want[k].name);
  }
  json_decref(h);

  /* 10 s on: the retry succeeds and c completes, in the next bucket. */
  ck_assert_uint_eq(harness_advance(&H, 10 * SEC), 1);
  assert_status("h1", "complete");
  h = duro_engine_metrics_history(H.e);
  for (size_t k = 0; k < 6; k++)
    ck_assert_msg(hist_at(h, want[k].name, 58) == want[k].first &&
                      hist_at(h, want[k].name, 59) == want[k].second &&
                      hist_sum(h, want[k].name) ==
                          want[k].first + want[k].second,
                  "%s at T0 + 10 s", want[k].name);
  json_decref(h);

  /* Ten minutes after T0 its bucket is gone, the next is the oldest. */
  advance_nothing(10 * MIN - 10 * SEC);
  h = duro_engine_metrics_history(H.e);
  ck_assert_int_eq(jint(h, "start_ms"), T0_MS + 10 * SEC);
  for (size_t k = 0; k < 6; k++)
    ck_assert_msg(hist_at(h, want[k].name, 0) == want[k].second &&
                      hist_sum(h, want[k].name) == want[k].second,
                  "%s at T0 + 10 min", want[k].name);
  json_decref(h);
  /* and 10 s later nothing is left */
  advance_nothing(10 * SEC);
  h = duro_engine_metrics_history(H.e);
  for (size_t k = 0; k < 6; k++)
    ck_assert_int_eq(hist_sum(h, want[k].name), 0);
  json_decref(h);
}
END_TEST

/* A final failure handled by run(): it records the error and goes on. */
static duro_rc wf_handled(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  duro_rc rc = duro_do(step, "charge", NULL, cb_flaky, NULL, NULL);
  C.rc[C.n_rc++] = rc;
  if (rc == DURO_SUSPEND)
    return rc;
  if (rc == DURO_ERROR)
    copy_seen(duro_step_error(step));
  DURO_TRY(duro_do(step, "refund", NULL, cb_fixed,
                   &(fixed){1, "{\"refunded\":true}"}, NULL));
  DURO_TRY(duro_sleep(step, "cool down", "1 minute"));
  return duro_set_output(step, "{\"recovered\":true}");
}

START_TEST(test_error_handled_in_run) {
  C.final = 1;
  harness_register(&H, WF, wf_handled);
  harness_start(&H);
  create(WF, "h1", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("h1", "waiting");
  ck_assert_uint_eq(harness_advance(&H, MIN), 1);
  assert_status("h1", "complete");

  ck_assert_int_eq(C.calls[0], 1); /* the failed step is not retried */
  ck_assert_int_eq(C.calls[1], 1);
  ck_assert_int_eq(C.n_rc, 2); /* replay returns the journaled error */
  ck_assert_int_eq(C.rc[0], DURO_ERROR);
  ck_assert_int_eq(C.rc[1], DURO_ERROR);
  ck_assert_int_eq(C.n_seen, 2);
  ck_assert_str_eq(C.seen[0], C.seen[1]);
  json_t *e = json_loads(C.seen[0], 0, NULL);
  ck_assert_msg(e != NULL, "duro_step_error is not JSON: %s", C.seen[0]);
  assert_error(e, "NonRetryableError", NULL);
  ck_assert_str_eq(jstr(e, "message"), "card declined: insufficient funds");
  json_decref(e);

  json_t *d = desc(WF, "h1");
  ck_assert(json_is_null(jget(d, "error")));
  assert_json(jget(d, "output"), "{\"recovered\":true}");
  ck_assert_str_eq(jstr(step_of(d, "charge#1"), "status"), "errored");
  ck_assert_str_eq(jstr(step_of(d, "refund#1"), "status"), "complete");
  ck_assert_str_eq(jstr(step_of(d, "cool down#1"), "status"), "complete");
}
END_TEST

/* ---- per-attempt timeout --------------------------------------------------
 */

/* Attempt 1 sets a result and then overruns its deadline (it moves the
 * virtual clock itself); attempt 2 is quick. */
static int cb_slow(duro_attempt *a, void *arg) {
  (void)arg;
  int i = C.n_attempt++;
  C.attempt[i] = duro_attempt_number(a);
  C.deadline[i] = duro_attempt_deadline_ms(a);
  C.started[i] = now();
  C.cancelled_before[i] = duro_attempt_cancelled(a);
  if (C.attempt[i] == 1) {
    duro_attempt_result(a, "{\"attempt\":1}");
    duro_clock_advance(&H.clock, MIN + SEC);
  } else {
    duro_attempt_result(a, "{\"attempt\":2}");
  }
  C.cancelled_after[i] = duro_attempt_cancelled(a);
  return 0;
}

static duro_rc wf_timeout(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *r;
  DURO_TRY(duro_do(step, "slow", C.cfg, cb_slow, NULL, &r));
  return duro_set_output(step, r);
}

START_TEST(test_attempt_timeout) {
  R = (duro_retries){
      .limit = 2, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT};
  CFG = (duro_step_config){.retries = &R, .timeout = "1 minute"};
  C.cfg = &CFG;
  harness_register(&H, WF, wf_timeout);
  harness_start(&H);
  create(WF, "t1", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.n_attempt, 1);
  ck_assert_int_eq(C.deadline[0], T0_MS + MIN);
  ck_assert_int_eq(C.cancelled_before[0], 0);
  ck_assert_int_eq(C.cancelled_after[0], 1);
  /* the late result was discarded: the step is retrying */
  assert_status("t1", "waiting");
  json_t *d = desc(WF, "t1");
  json_t *s = step_of(d, "slow#1");
  ck_assert_str_eq(jstr(s, "status"), "waiting");
  ck_assert(json_is_null(jget(s, "result")));
  assert_error(jget(json_array_get(jget(s, "attempts"), 0), "error"),
               "TimeoutError", "1 minute");
  /* back-off counts from the attempt's end */
  ck_assert_int_eq(jint(d, "wake_ms"), T0_MS + MIN + SEC + SEC);

  advance_nothing(SEC - 1);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  ck_assert_int_eq(C.n_attempt, 2);
  ck_assert_uint_eq(C.attempt[1], 2);
  ck_assert_int_eq(C.deadline[1], C.started[1] + MIN);
  ck_assert_int_eq(C.cancelled_before[1], 0);
  ck_assert_int_eq(C.cancelled_after[1], 0);
  assert_status("t1", "complete");
  d = desc(WF, "t1");
  assert_json(jget(d, "output"), "{\"attempt\":2}");
  assert_json(jget(step_of(d, "slow#1"), "result"), "{\"attempt\":2}");
}
END_TEST

/* The last attempt timing out errors the instance with the TimeoutError. */
START_TEST(test_attempt_timeout_exhausted) {
  CFG = (duro_step_config){.retries = &(duro_retries){.limit = 0},
                           .timeout = "30 seconds"};
  C.cfg = &CFG;
  harness_register(&H, WF, wf_timeout);
  harness_start(&H);
  create(WF, "t2", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.deadline[0], T0_MS + 30 * SEC);
  assert_status("t2", "errored");
  assert_error(jget(desc(WF, "t2"), "error"), "TimeoutError", "30 seconds");
}
END_TEST

/* ---- timeouts and steps of the wall clock ---------------------------------
 *
 * An attempt's timeout is an interval: it runs on the clock's monotonic
 * reading, which a step of the wall clock (NTP, settimeofday) leaves
 * alone.  C.cfg's step moves the wall by C.until inside its callback. */

static void sleep_real_ms(int64_t ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

/* Steps the wall by C.until; with C.final set, also lets C.until of
 * monotonic time pass and then spins (in real time, 10 s at most) until
 * it is told it is cancelled; else gives the watchdog (a look every
 * 100 ms) half a second to get it wrong. */
static int cb_wall_step(duro_attempt *a, void *arg) {
  (void)arg;
  int i = C.n_attempt++;
  C.attempt[i] = duro_attempt_number(a);
  duro_clock_step_wall(&H.clock, C.until);
  if (C.final) {
    duro_clock_advance(&H.clock, 2 * MIN);
    for (int waited = 0; waited < 10000 && !duro_attempt_cancelled(a);
         waited += 10)
      sleep_real_ms(10);
  } else if (C.succeed_on) {
    sleep_real_ms(500);
  }
  C.cancelled_after[i] = duro_attempt_cancelled(a);
  return duro_attempt_result(a, "\"on time\"");
}

static duro_rc wf_wall_step(duro_step *step, const duro_event *ev,
                            duro_env *env) {
  (void)ev;
  (void)env;
  const char *r;
  DURO_TRY(duro_do(step, "work", C.cfg, cb_wall_step, NULL, &r));
  return duro_set_output(step, r);
}

/* Polls the instance (real time) until it is `want`. */
static void wait_status(const char *id, const char *want) {
  for (int waited = 0; waited < 15000; waited += 10) {
    if (!strcmp(harness_status(&H, WF, id), want))
      return;
    sleep_real_ms(10);
  }
  ck_abort_msg("%s still %s after 15 s, not %s", id, harness_status(&H, WF, id),
               want);
}

/* A callback during which the wall clock jumps an hour ahead returned
 * within its 1-minute timeout: its result stands. */
START_TEST(test_wall_step_ahead_is_no_timeout) {
  R = (duro_retries){.limit = 0};
  CFG = (duro_step_config){.retries = &R, .timeout = "1 minute"};
  C.cfg = &CFG;
  C.until = HOUR;
  harness_register(&H, WF, wf_wall_step);
  harness_start(&H);
  create(WF, "w1", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.n_attempt, 1);
  ck_assert_int_eq(C.cancelled_after[0], 0);
  assert_status("w1", "complete");
  assert_json(jget(desc(WF, "w1"), "output"), "\"on time\"");
}
END_TEST

/* The same with a worker thread and its watchdog looking: the healthy
 * callback is not given up on (it was, within 0.1 s, on the wall clock,
 * and its step ran twice at once). */
START_TEST(test_wall_step_ahead_watchdog_waits) {
  harness_close(&H);
  harness_open_workers_virtual(&H, 1);
  R = (duro_retries){.limit = 0};
  CFG = (duro_step_config){.retries = &R, .timeout = "1 minute"};
  C.cfg = &CFG;
  C.until = HOUR;
  C.succeed_on = 1; /* sleep in the callback */
  harness_register(&H, WF, wf_wall_step);
  harness_start(&H);
  create(WF, "w2", NULL);
  wait_status("w2", "complete");
  ck_assert_int_eq(C.n_attempt, 1);
  ck_assert_int_eq(C.cancelled_after[0], 0);
  json_t *s = step_of(desc(WF, "w2"), "work#1");
  ck_assert_uint_eq(json_array_size(jget(s, "attempts")), 1);
  assert_json(jget(s, "result"), "\"on time\"");
}
END_TEST

/* The wall clock steps an hour back, then the callback overruns its
 * 1-minute timeout: the watchdog gives up on it all the same (on the wall
 * clock it waited an hour more). */
START_TEST(test_wall_step_back_watchdog_abandons) {
  harness_close(&H);
  harness_open_workers_virtual(&H, 1);
  R = (duro_retries){.limit = 0};
  CFG = (duro_step_config){.retries = &R, .timeout = "1 minute"};
  C.cfg = &CFG;
  C.until = -HOUR;
  C.final = 1; /* overrun, spin until cancelled */
  harness_register(&H, WF, wf_wall_step);
  harness_start(&H);
  create(WF, "w3", NULL);
  wait_status("w3", "errored");
  ck_assert_int_eq(C.n_attempt, 1);
  ck_assert_int_eq(C.cancelled_after[0], 1);
  assert_error(jget(desc(WF, "w3"), "error"), "TimeoutError", "1 minute");
}
END_TEST

/* ---- when an instance started ------------------------------------------ */

/* Attempt 1 takes 6 s and fails; attempt 2 succeeds. */
static int cb_started(duro_attempt *a, void *arg) {
  (void)arg;
  C.n_attempt++;
  if (duro_attempt_number(a) > 1)
    return duro_attempt_result(a, "2");
  duro_clock_advance(&H.clock, 6 * SEC);
  return duro_attempt_fail(a, "slow and failed");
}

static duro_rc wf_started(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev;
  (void)env;
  DURO_TRY(duro_do(step, "first", C.cfg, cb_started, NULL, NULL));
  return duro_set_output(step, "1");
}

/* started_ms is when the first activation began, not when it ended (6 s
 * later), and is not moved by the activation that runs the step again. */
START_TEST(test_started_when_first_activation_began) {
  R = (duro_retries){
      .limit = 1, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT};
  CFG = (duro_step_config){.retries = &R};
  C.cfg = &CFG;
  harness_register(&H, WF, wf_started);
  harness_start(&H);
  duro_clock_advance(&H.clock, SEC);
  create(WF, "st", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("st", "waiting");
  ck_assert_int_eq(jint(desc(WF, "st"), "started_ms"), T0_MS + SEC);
  ck_assert_uint_eq(harness_advance(&H, SEC), 1);
  assert_status("st", "complete");
  json_t *d = desc(WF, "st");
  ck_assert_int_eq(jint(d, "created_ms"), T0_MS + SEC);
  ck_assert_int_eq(jint(d, "started_ms"), T0_MS + SEC);
  ck_assert_int_eq(jint(d, "ended_ms"), T0_MS + 8 * SEC);
}
END_TEST

/* ---- cached results and step keys ---------------------------------------- */

static int cb_x(duro_attempt *a, void *arg) {
  (void)arg;
  int n = ++C.calls[2];
  snprintf(C.keys[n - 1], sizeof C.keys[0], "%s",
           duro_attempt_idempotency_key(a));
  char buf[16];
  snprintf(buf, sizeof buf, "%d", n);
  return duro_attempt_result(a, buf);
}

static duro_rc wf_keys(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *ra, *rx;
  /* odd spacing: the journal must hand back the text, not a re-encoding */
  DURO_TRY(
      duro_do(step, "a", NULL, cb_fixed, &(fixed){1, "{ \"v\" : 42 }"}, &ra));
  copy_seen(ra);
  for (int i = 0; i < 2; i++)
    DURO_TRY(duro_do(step, "x", NULL, cb_x, NULL, NULL));
  DURO_TRY(duro_do(step, "y", NULL, cb_fixed, &(fixed){3, "\"y\""}, NULL));
  DURO_TRY(duro_do(step, "x", NULL, cb_x, NULL, &rx));
  copy_seen(rx);
  DURO_TRY(duro_sleep(step, "nap", "1 second"));
  return duro_set_output(step, ra);
}

START_TEST(test_cached_results_and_keys) {
  harness_register(&H, WF, wf_keys);
  harness_start(&H);
  create(WF, "keys-1", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("keys-1", "waiting");
  ck_assert_uint_eq(harness_advance(&H, SEC), 1);
  assert_status("keys-1", "complete");

  ck_assert_int_eq(C.top, 2);
  ck_assert_int_eq(C.calls[1], 1); /* a */
  ck_assert_int_eq(C.calls[2], 3); /* x, three occurrences, once each */
  ck_assert_int_eq(C.calls[3], 1); /* y */
  ck_assert_int_eq(C.n_seen, 4);
  ck_assert_str_eq(C.seen[0], "{ \"v\" : 42 }"); /* from the callback */
  ck_assert_str_eq(C.seen[1], "3");
  ck_assert_str_eq(C.seen[2], "{ \"v\" : 42 }"); /* replayed, same text */
  ck_assert_str_eq(C.seen[3], "3");
  ck_assert_str_eq(C.keys[0], "keys-1/x#1");
  ck_assert_str_eq(C.keys[1], "keys-1/x#2");
  ck_assert_str_eq(C.keys[2], "keys-1/x#3");

  json_t *d = desc(WF, "keys-1");
  static const struct {
    const char *key, *name, *type, *result;
    int count;
  } want[] = {
      {"a#1", "a", "do", "{\"v\":42}", 1}, {"x#1", "x", "do", "1", 1},
      {"x#2", "x", "do", "2", 2},          {"y#1", "y", "do", "\"y\"", 1},
      {"x#3", "x", "do", "3", 3},          {"nap#1", "nap", "sleep", "null", 1},
  };
  ck_assert_uint_eq(n_steps(d), 6);
  for (size_t i = 0; i < 6; i++) {
    json_t *s = json_array_get(jget(d, "steps"), i); /* in call order */
    ck_assert_str_eq(jstr(s, "key"), want[i].key);
    ck_assert_str_eq(jstr(s, "name"), want[i].name);
    ck_assert_str_eq(jstr(s, "type"), want[i].type);
    ck_assert_int_eq(jint(s, "count"), want[i].count);
    ck_assert_str_eq(jstr(s, "status"), "complete");
    assert_json(jget(s, "result"), want[i].result);
  }
  assert_json(jget(d, "output"), "{\"v\":42}");
}
END_TEST

/* ---- sleeps
 * ------------------------------------------------------------------ */

/* Sleeps for params.d, then one step. */
static duro_rc wf_sleep(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  C.top++;
  json_t *p = json_loads(ev->params, 0, NULL);
  ck_assert_ptr_nonnull(p);
  char d[64];
  snprintf(d, sizeof d, "%s", json_string_value(json_object_get(p, "d")));
  json_decref(p);
  DURO_TRY(duro_sleep(step, "nap", d));
  DURO_TRY(duro_do(step, "after", NULL, cb_fixed, &(fixed){1, "1"}, NULL));
  return duro_set_output(step, "\"woke\"");
}

static const struct {
  const char *text;
  int64_t ms;
} sleeps[] = {
    {"1 hour", HOUR},         {"3 days", 3 * DAY}, {"30d", 30 * DAY},
    {"10 seconds", 10 * SEC}, {"500", 500},        {"365 days", 365 * DAY},
};

START_TEST(test_sleep_durations) {
  harness_register(&H, WF, wf_sleep);
  harness_start(&H);
  char params[96];
  snprintf(params, sizeof params, "{\"d\":\"%s\"}", sleeps[_i].text);
  create(WF, "s1", params);

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("s1", "waiting");
  json_t *d = desc(WF, "s1");
  ck_assert_int_eq(jint(d, "wake_ms"), T0_MS + sleeps[_i].ms);
  json_t *s = step_of(d, "nap#1");
  ck_assert_str_eq(jstr(s, "type"), "sleep");
  ck_assert_str_eq(jstr(s, "status"), "waiting");
  ck_assert_int_eq(jint(s, "wake_ms"), T0_MS + sleeps[_i].ms);

  advance_nothing(sleeps[_i].ms - 1);
  assert_status("s1", "waiting");
  ck_assert_int_eq(C.calls[1], 0);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  assert_status("s1", "complete");
  ck_assert_int_eq(C.calls[1], 1);
  d = desc(WF, "s1");
  ck_assert_str_eq(jstr(step_of(d, "nap#1"), "status"), "complete");
  assert_json(jget(d, "output"), "\"woke\"");
}
END_TEST

/* ---- watches: a callback when an instance ends ------------------------ */

static int watch_calls;
static char watch_status[32];

static void on_watch(void *ctx, const char *status) {
  (void)ctx;
  watch_calls++;
  snprintf(watch_status, sizeof watch_status, "%s", status);
}

START_TEST(test_watch_fire_and_cancel) {
  harness_register(&H, WF, wf_sleep);
  harness_start(&H);
  watch_calls = 0;
  create(WF, "w1", "{\"d\":\"10 seconds\"}");
  create(WF, "w2", "{\"d\":\"10 seconds\"}");
  create(WF, "w3", "{\"d\":\"10 seconds\"}");
  ck_assert_uint_eq(harness_run(&H), 3);
  duro_watch *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  ck_assert_int_eq(duro_instance_watch(H.e, WF, "w1", on_watch, NULL, &a), 0);
  ck_assert_int_eq(duro_instance_watch(H.e, WF, "w1", on_watch, NULL, &b), 0);
  ck_assert_int_eq(duro_instance_watch(H.e, WF, "w2", on_watch, NULL, &c), 0);
  ck_assert_int_eq(duro_instance_watch(H.e, WF, "ghost", on_watch, NULL, &d),
                   DURO_E_NOT_FOUND);
  ck_assert_ptr_null(d);
  ck_assert_int_eq(duro_instance_watch(H.e, WF, "w3", on_watch, NULL, &d), 0);
  /* Cancelled before the end: never called. */
  ck_assert_int_eq(duro_watch_cancel(H.e, b), 0);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "w3"), 0);
  ck_assert_int_eq(watch_calls, 1); /* the terminate of an idle instance */
  ck_assert_str_eq(watch_status, "terminated");
  ck_assert_int_eq(duro_watch_cancel(H.e, d), 1);
  ck_assert_uint_eq(harness_advance(&H, 10 * SEC), 2);
  /* Ended, then given back: called once each. */
  ck_assert_int_eq(watch_calls, 3);
  ck_assert_str_eq(watch_status, "complete");
  ck_assert_int_eq(duro_watch_cancel(H.e, a), 1);
  ck_assert_int_eq(duro_watch_cancel(H.e, c), 1);
  /* Registered on an ended instance: said so, never called. */
  ck_assert_int_eq(duro_instance_watch(H.e, WF, "w1", on_watch, NULL, &a),
                   DURO_WATCH_ENDED);
  ck_assert_ptr_null(a);
  ck_assert_int_eq(watch_calls, 3);
  /* The light read: the row, no steps. */
  json_t *j = NULL;
  ck_assert_int_eq(duro_instance_summary(H.e, WF, "w1", &j), 0);
  ck_assert_uint_eq(json_object_size(j), 9);
  ck_assert_str_eq(jstr(j, "status"), "complete");
  ck_assert(json_is_null(jget(j, "deadline_ms"))); /* no timeout */
  assert_json(jget(j, "output"), "\"woke\"");
  ck_assert_ptr_null(json_object_get(j, "steps"));
  json_decref(j);
  ck_assert_int_eq(duro_instance_summary(H.e, WF, "ghost", &j),
                   DURO_E_NOT_FOUND);
}
END_TEST

static duro_rc wf_sleep_until(duro_step *step, const duro_event *ev,
                              duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  DURO_TRY(duro_sleep_until(step, "until", C.until));
  DURO_TRY(duro_do(step, "after", NULL, cb_fixed, &(fixed){1, "1"}, NULL));
  return duro_set_output(step, "{}");
}

START_TEST(test_sleep_until) {
  harness_register(&H, WF, wf_sleep_until);
  harness_start(&H);
  C.until = T0_MS + 90 * MIN;
  create(WF, "u1", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("u1", "waiting");
  ck_assert_int_eq(jint(desc(WF, "u1"), "wake_ms"), T0_MS + 90 * MIN);
  advance_nothing(90 * MIN - 1);
  ck_assert_int_eq(C.calls[1], 0);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  assert_status("u1", "complete");
  ck_assert_int_eq(C.calls[1], 1);
}
END_TEST

START_TEST(test_sleep_until_past) {
  harness_register(&H, WF, wf_sleep_until);
  harness_start(&H);
  C.until = T0_MS - HOUR;
  create(WF, "u2", NULL);

  ck_assert_uint_eq(harness_run(&H), 1); /* one activation, no wait */
  assert_status("u2", "complete");
  ck_assert_int_eq(C.calls[1], 1);
}
END_TEST

/* Invalid sleeps return DURO_ERROR (caught here); a 365-day one is fine. */
static duro_rc wf_sleep_invalid(duro_step *step, const duro_event *ev,
                                duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  C.rc[0] = duro_sleep(step, "bad", "soon");
  copy_seen(duro_step_error(step));
  C.rc[1] = duro_sleep(step, "too long", "366 days");
  copy_seen(duro_step_error(step));
  C.rc[2] = duro_sleep_until(step, "too far", now() + 366 * DAY);
  copy_seen(duro_step_error(step));
  C.rc[3] = duro_sleep(step, "empty", "");
  C.rc[4] = duro_sleep(step, "negative", "-5 seconds");
  DURO_TRY(duro_sleep(step, "year", "365 days"));
  return duro_set_output(step, "{}");
}

START_TEST(test_sleep_invalid) {
  harness_register(&H, WF, wf_sleep_invalid);
  harness_start(&H);
  create(WF, "i1", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  for (int i = 0; i < 5; i++)
    ck_assert_msg(C.rc[i] == DURO_ERROR, "call %d returned %d", i, C.rc[i]);
  for (int i = 0; i < 3; i++) {
    json_t *e = json_loads(C.seen[i], 0, NULL);
    ck_assert_msg(e != NULL, "%s", C.seen[i]);
    assert_error(e, "duration.invalid", NULL);
    json_decref(e);
  }
  ck_assert(strstr(C.seen[0], "soon") != NULL);
  /* the refused sleeps left no trace; the valid one waits a year */
  assert_status("i1", "waiting");
  json_t *d = desc(WF, "i1");
  ck_assert_uint_eq(n_steps(d), 1);
  ck_assert_int_eq(jint(step_of(d, "year#1"), "wake_ms"), T0_MS + 365 * DAY);
  ck_assert_uint_eq(harness_advance(&H, 365 * DAY), 1);
  assert_status("i1", "complete");
}
END_TEST

/* An uncaught invalid sleep errors the instance with duration.invalid. */
static duro_rc wf_sleep_invalid_uncaught(duro_step *step, const duro_event *ev,
                                         duro_env *env) {
  (void)ev;
  (void)env;
  DURO_TRY(duro_sleep(step, "bad", "400 days"));
  return duro_set_output(step, "{}");
}

START_TEST(test_sleep_invalid_uncaught) {
  harness_register(&H, WF, wf_sleep_invalid_uncaught);
  harness_start(&H);
  create(WF, "i2", NULL);
  harness_run(&H);
  assert_status("i2", "errored");
  assert_error(jget(desc(WF, "i2"), "error"), "duration.invalid", "400 days");
}
END_TEST

/* Values at the edge of int64 neither overflow (UBSan halts the test if
 * they do) nor pass: a sleep_until far in the past completes, one far in
 * the future is refused, a retry delay or timeout past 365 days is
 * duration.invalid, a linear back-off of a year stays a year. */
static duro_rc wf_extremes(duro_step *step, const duro_event *ev,
                           duro_env *env) {
  (void)ev;
  (void)env;
  C.rc[0] = duro_sleep_until(step, "far past", INT64_MIN);
  C.rc[1] = duro_sleep_until(step, "far future", INT64_MAX);
  duro_step_config cfg = {.timeout = "400 days"};
  C.rc[2] =
      duro_do(step, "long timeout", &cfg, cb_fixed, &(fixed){1, "1"}, NULL);
  copy_seen(duro_step_error(step));
  duro_retries r = {
      .limit = 5, .delay = "366 days", .backoff = DURO_BACKOFF_LINEAR};
  duro_step_config cfg2 = {.retries = &r};
  C.rc[3] =
      duro_do(step, "long delay", &cfg2, cb_fixed, &(fixed){1, "1"}, NULL);
  return duro_set_output(step, "{}");
}

START_TEST(test_duration_extremes) {
  harness_register(&H, WF, wf_extremes);
  harness_start(&H);
  create(WF, "x1", NULL);
  harness_run(&H);
  ck_assert_int_eq(C.rc[0], DURO_OK);
  ck_assert_int_eq(C.rc[1], DURO_ERROR);
  ck_assert_int_eq(C.rc[2], DURO_ERROR);
  json_t *e = json_loads(C.seen[0], 0, NULL);
  ck_assert_msg(e != NULL, "%s", C.seen[0]);
  assert_error(e, "duration.invalid", NULL);
  json_decref(e);
  ck_assert_int_eq(C.rc[3], DURO_ERROR);
  assert_status("x1", "complete");
}
END_TEST

/* A year-long linear back-off, many attempts in: capped, not overflowed. */
static int cb_always_fails(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[0]++;
  return duro_attempt_fail(a, "no");
}

static duro_rc wf_year_backoff(duro_step *step, const duro_event *ev,
                               duro_env *env) {
  (void)ev;
  (void)env;
  duro_retries r = {
      .limit = 100, .delay = "200 days", .backoff = DURO_BACKOFF_LINEAR};
  duro_step_config cfg = {.retries = &r};
  DURO_TRY(duro_do(step, "f", &cfg, cb_always_fails, NULL, NULL));
  return duro_set_output(step, "{}");
}

START_TEST(test_backoff_capped_at_a_year) {
  harness_register(&H, WF, wf_year_backoff);
  harness_start(&H);
  create(WF, "y1", NULL);
  harness_run(&H);
  ck_assert_int_eq(jint(desc(WF, "y1"), "wake_ms"), T0_MS + 200 * DAY);
  harness_advance(&H, 200 * DAY);
  /* attempt 2 failed: 2 x 200 days, capped at 365 */
  ck_assert_int_eq(C.calls[0], 2);
  ck_assert_int_eq(jint(desc(WF, "y1"), "wake_ms"),
                   T0_MS + 200 * DAY + 365 * DAY);
}
END_TEST

/* ---- events ----------------------------------------------------------------
 */

static duro_rc wf_event(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *e;
  DURO_TRY(duro_wait_for_event(step, "approval", "approve", "2 days", &e));
  return duro_set_output(step, e);
}

START_TEST(test_event_delivered_later) {
  harness_register(&H, WF, wf_event);
  harness_start(&H);
  create(WF, "e1", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e1", "waiting");
  json_t *d = desc(WF, "e1");
  json_t *s = step_of(d, "approval#1");
  ck_assert_str_eq(jstr(s, "type"), "waitForEvent");
  ck_assert_str_eq(jstr(s, "status"), "waiting");
  ck_assert_int_eq(jint(s, "wake_ms"), T0_MS + 2 * DAY); /* its timeout */
  advance_nothing(5 * MIN);
  assert_status("e1", "waiting");

  ck_assert_int_eq(
      duro_instance_send_event(H.e, WF, "e1", "approve", "{\"by\":\"ann\"}"),
      0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e1", "complete");
  d = desc(WF, "e1");
  json_t *out = jget(d, "output");
  ck_assert_str_eq(jstr(out, "type"), "approve");
  assert_json(jget(out, "payload"), "{\"by\":\"ann\"}");
  ck_assert_str_eq(jstr(out, "timestamp"), "2026-01-01T00:05:00.000Z");
  s = step_of(d, "approval#1");
  ck_assert_str_eq(jstr(s, "status"), "complete");
  ck_assert(json_equal(jget(s, "result"), out));
  ck_assert_int_eq(C.top, 2);
  advance_nothing(3 * DAY); /* the timeout is gone with the wait */
}
END_TEST

/* Sleeps, then three waits for "go"; output = the three events. */
static duro_rc wf_event_seq(duro_step *step, const duro_event *ev,
                            duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *e1, *e2, *e3;
  DURO_TRY(duro_sleep(step, "nap", "1 hour"));
  DURO_TRY(duro_wait_for_event(step, "w", "go", NULL, &e1));
  DURO_TRY(duro_wait_for_event(step, "w", "go", NULL, &e2));
  DURO_TRY(duro_wait_for_event(step, "w", "go", NULL, &e3));
  static char out[2048];
  snprintf(out, sizeof out, "[%s,%s,%s]", e1, e2, e3);
  return duro_set_output(step, out);
}

START_TEST(test_events_buffered_in_order) {
  harness_register(&H, WF, wf_event_seq);
  harness_start(&H);
  create(WF, "e2", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e2", "waiting");
  /* sent while it sleeps: stored, and no activation */
  advance_nothing(MIN);
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "e2", "go", "{\"n\":1}"),
                   0);
  ck_assert_uint_eq(harness_run(&H), 0);
  advance_nothing(MIN);
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "e2", "go", "{\"n\":2}"),
                   0);
  ck_assert_uint_eq(harness_run(&H), 0);
  assert_status("e2", "waiting");

  /* the sleep ends: both buffered events are delivered, oldest first, and
   * the third wait waits */
  ck_assert_uint_eq(harness_advance(&H, HOUR - 2 * MIN), 1);
  assert_status("e2", "waiting");
  json_t *d = desc(WF, "e2");
  assert_json(jget(jget(step_of(d, "w#1"), "result"), "payload"), "{\"n\":1}");
  assert_json(jget(jget(step_of(d, "w#2"), "result"), "payload"), "{\"n\":2}");
  ck_assert_str_eq(jstr(step_of(d, "w#3"), "status"), "waiting");

  advance_nothing(MIN);
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "e2", "go", "{\"n\":3}"),
                   0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e2", "complete");
  json_t *out = jget(desc(WF, "e2"), "output");
  ck_assert_uint_eq(json_array_size(out), 3);
  static const char *const ts[] = {"2026-01-01T00:01:00.000Z",
                                   "2026-01-01T00:02:00.000Z",
                                   "2026-01-01T01:01:00.000Z"};
  for (size_t i = 0; i < 3; i++) {
    json_t *e = json_array_get(out, i);
    ck_assert_str_eq(jstr(e, "type"), "go");
    ck_assert_int_eq(jint(jget(e, "payload"), "n"), (json_int_t)i + 1);
    ck_assert_str_eq(jstr(e, "timestamp"), ts[i]);
  }
}
END_TEST

/* An event sent before the instance ever ran is delivered too. */
START_TEST(test_event_before_first_activation) {
  harness_register(&H, WF, wf_event);
  harness_start(&H);
  create(WF, "e3", NULL);
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "e3", "approve", NULL), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e3", "complete");
  json_t *out = jget(desc(WF, "e3"), "output");
  ck_assert(json_is_null(jget(out, "payload"))); /* payload NULL = null */
}
END_TEST

/* A step sends the event to its own instance while the activation runs:
 * the wait after it must still get it. */
static int cb_send_self(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[1]++;
  C.rc[0] = duro_instance_send_event(H.e, WF, C.self_id, "approve", "7");
  return duro_attempt_result(a, "null");
}

static duro_rc wf_event_self(duro_step *step, const duro_event *ev,
                             duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *e;
  DURO_TRY(duro_do(step, "send", NULL, cb_send_self, NULL, NULL));
  DURO_TRY(duro_wait_for_event(step, "approval", "approve", NULL, &e));
  return duro_set_output(step, e);
}

START_TEST(test_event_sent_during_activation) {
  harness_register(&H, WF, wf_event_self);
  harness_start(&H);
  C.self_id = "e4";
  create(WF, "e4", NULL);
  harness_run(&H);
  ck_assert_int_eq(C.rc[0], 0);
  ck_assert_int_eq(C.calls[1], 1);
  assert_status("e4", "complete");
  assert_json(jget(jget(desc(WF, "e4"), "output"), "payload"), "7");
}
END_TEST

/* Waits for "go", then for "other" (which may be buffered). */
static duro_rc wf_event_types(duro_step *step, const duro_event *ev,
                              duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *e1, *e2;
  DURO_TRY(duro_wait_for_event(step, "w", "go", NULL, &e1));
  DURO_TRY(duro_wait_for_event(step, "o", "other", "1 minute", &e2));
  static char out[1024];
  snprintf(out, sizeof out, "[%s,%s]", e1, e2);
  return duro_set_output(step, out);
}

START_TEST(test_event_other_type_does_not_wake) {
  harness_register(&H, WF, wf_event_types);
  harness_start(&H);
  create(WF, "e5", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e5", "waiting");
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "e5", "other", "\"o\""),
                   0);
  ck_assert_uint_eq(harness_run(&H), 0);
  ck_assert_int_eq(C.top, 1);
  assert_status("e5", "waiting");
  ck_assert_str_eq(jstr(step_of(desc(WF, "e5"), "w#1"), "status"), "waiting");

  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "e5", "go", "\"g\""), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e5", "complete"); /* "other" was kept for the 2nd wait */
  json_t *out = jget(desc(WF, "e5"), "output");
  assert_json(jget(json_array_get(out, 0), "payload"), "\"g\"");
  assert_json(jget(json_array_get(out, 1), "payload"), "\"o\"");
}
END_TEST

/* A wait whose timeout (C.timeout) is caught; a step runs after it. */
static duro_rc wf_event_timeout(duro_step *step, const duro_event *ev,
                                duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *e;
  duro_rc rc = duro_wait_for_event(step, "w", "go", C.timeout, &e);
  if (rc == DURO_SUSPEND)
    return rc;
  C.rc[C.n_rc++] = rc;
  if (rc == DURO_ERROR)
    copy_seen(duro_step_error(step));
  DURO_TRY(duro_do(step, "after", NULL, cb_fixed, &(fixed){1, "1"}, NULL));
  return duro_set_output(step, rc == DURO_ERROR ? "{\"timedOut\":true}" : e);
}

static const struct {
  const char *timeout;
  int64_t ms;
  const char *text; /* in the message */
} timeouts[] = {
    {NULL, DAY, "1 day"},
    {"90 minutes", 90 * MIN, "90 minutes"},
};

START_TEST(test_event_timeout_caught) {
  harness_register(&H, WF, wf_event_timeout);
  harness_start(&H);
  C.timeout = timeouts[_i].timeout;
  create(WF, "e6", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("e6", "waiting");
  ck_assert_int_eq(jint(desc(WF, "e6"), "wake_ms"), T0_MS + timeouts[_i].ms);
  advance_nothing(timeouts[_i].ms - 1);
  assert_status("e6", "waiting");
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  assert_status("e6", "complete");
  ck_assert_int_eq(C.n_rc, 1);
  ck_assert_int_eq(C.rc[0], DURO_ERROR);
  json_t *e = json_loads(C.seen[0], 0, NULL);
  ck_assert_ptr_nonnull(e);
  assert_error(e, "TimeoutError", timeouts[_i].text);
  json_decref(e);
  ck_assert_int_eq(C.calls[1], 1); /* the flow went on */
  json_t *d = desc(WF, "e6");
  assert_json(jget(d, "output"), "{\"timedOut\":true}");
  ck_assert_str_eq(jstr(step_of(d, "w#1"), "status"), "errored");
  assert_error(jget(step_of(d, "w#1"), "error"), "TimeoutError", NULL);
  /* a late event is refused, and changes nothing */
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "e6", "go", "1"),
                   DURO_E_INSTANCE_ENDED);
  ck_assert_uint_eq(harness_run(&H), 0);
  assert_status("e6", "complete");
}
END_TEST

static duro_rc wf_event_timeout_uncaught(duro_step *step, const duro_event *ev,
                                         duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *e;
  DURO_TRY(duro_wait_for_event(step, "w", "go", "1 hour", &e));
  return duro_set_output(step, e);
}

START_TEST(test_event_timeout_uncaught) {
  harness_register(&H, WF, wf_event_timeout_uncaught);
  harness_start(&H);
  create(WF, "e7", NULL);
  harness_run(&H);
  advance_nothing(HOUR - 1);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  assert_status("e7", "errored");
  assert_error(jget(desc(WF, "e7"), "error"), "TimeoutError", "\"go\"");
}
END_TEST

/* ---- duro_wait_any ---------------------------------------------------------
 */

static const char *const ANSWERS[] = {"approve", "reject"};

/* Waits for the first of A's types (with A's deadline); a timeout or a
 * bad call is caught and recorded, and the flow goes on to "after". */
static duro_rc wf_any(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *e = NULL, *e2 = NULL;
  duro_rc rc =
      A.as_wait ? duro_wait_for_event(step, "review", "approve", NULL, &e)
                : duro_wait_any(step, "review", A.types, A.n, A.deadline, &e);
  if (rc == DURO_SUSPEND)
    return rc;
  C.rc[C.n_rc++] = rc;
  copy_seen(rc == DURO_OK ? e : duro_step_error(step));
  if (A.nap)
    DURO_TRY(duro_sleep(step, "nap", "1 hour"));
  if (A.twice && rc == DURO_OK)
    DURO_TRY(duro_wait_any(step, "review", A.types, A.n, A.deadline, &e2));
  DURO_TRY(duro_do(step, "after", NULL, cb_fixed, &(fixed){1, "1"}, NULL));
  static char out[2048];
  if (rc != DURO_OK)
    return duro_set_output(step, "{\"timedOut\":true}");
  snprintf(out, sizeof out, "[%s,%s]", e, e2 ? e2 : "null");
  return duro_set_output(step, out);
}

static void start_any(const char *const *types, size_t n, int64_t deadline) {
  A.types = types;
  A.n = n;
  A.deadline = deadline;
  harness_register(&H, WF, wf_any);
  harness_start(&H);
}

static void send_ev(const char *id, const char *type, const char *payload) {
  int rc = duro_instance_send_event(H.e, WF, id, type, payload);
  ck_assert_msg(rc == 0, "send %s to %s: %s", type, id, duro_err_name(rc));
}

/* The step "review#1" waits, as does the instance, for `wait_type`. */
static void assert_waits_any(const char *id, const char *wait_type,
                             int64_t deadline) {
  assert_status(id, "waiting");
  json_t *d = desc(WF, id);
  ck_assert_str_eq(jstr(d, "wait_type"), wait_type);
  ck_assert_int_eq(jint(d, "wake_ms"), deadline);
  json_t *s = step_of(d, "review#1");
  ck_assert_str_eq(jstr(s, "type"), "waitAny");
  ck_assert_str_eq(jstr(s, "status"), "waiting");
  ck_assert_int_eq(jint(s, "wake_ms"), deadline);
}

/* Event i of the instance (arrival order) and who consumed it (NULL:
 * nobody yet). */
static void assert_event(const char *id, size_t i, const char *type,
                         const char *consumed_by) {
  json_t *e = json_array_get(jget(desc(WF, id), "events"), i);
  ck_assert_ptr_nonnull(e);
  ck_assert_str_eq(jstr(e, "type"), type);
  json_t *by = jget(e, "consumed_by");
  if (consumed_by)
    ck_assert_str_eq(json_string_value(by), consumed_by);
  else
    ck_assert(json_is_null(by));
}

/* Two listed types sent while it waits: the earlier sent wins, the other
 * stays for the next wait, which takes it at once. */
START_TEST(test_wait_any_earlier_wins) {
  A.twice = 1;
  start_any(ANSWERS, 2, T0_MS + 2 * DAY);
  create(WF, "a1", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_waits_any("a1", "approve|reject", T0_MS + 2 * DAY);

  advance_nothing(MIN);
  send_ev("a1", "reject", "{\"n\":1}");
  send_ev("a1", "approve", "{\"n\":2}");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("a1", "complete");
  json_t *out = jget(desc(WF, "a1"), "output");
  ck_assert_str_eq(jstr(json_array_get(out, 0), "type"), "reject");
  ck_assert_int_eq(jint(jget(json_array_get(out, 0), "payload"), "n"), 1);
  ck_assert_str_eq(jstr(json_array_get(out, 0), "timestamp"),
                   "2026-01-01T00:01:00.000Z");
  ck_assert_str_eq(jstr(json_array_get(out, 1), "type"), "approve");
  assert_event("a1", 0, "reject", "review#1");
  assert_event("a1", 1, "approve", "review#2");
  ck_assert_int_eq(C.top, 2);
}
END_TEST

/* Events sent before the wait are buffered: the earliest listed one is
 * taken at the first call, with no wait. */
START_TEST(test_wait_any_buffered) {
  start_any(ANSWERS, 2, T0_MS + DAY);
  create(WF, "a2", NULL);
  send_ev("a2", "other", "0");
  send_ev("a2", "approve", "1");
  send_ev("a2", "reject", "2");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("a2", "complete");
  ck_assert_int_eq(C.top, 1);
  ck_assert_int_eq(C.rc[0], DURO_OK);
  json_t *e = json_loads(C.seen[0], 0, NULL);
  ck_assert_ptr_nonnull(e);
  ck_assert_str_eq(jstr(e, "type"), "approve");
  assert_json(jget(e, "payload"), "1");
  json_decref(e);
  assert_event("a2", 0, "other", NULL);
  assert_event("a2", 1, "approve", "review#1");
  assert_event("a2", 2, "reject", NULL); /* one consumed, never two */
}
END_TEST

/* Types not listed neither wake it nor are consumed, however close their
 * names (a part of a listed type, one with more, another case). */
START_TEST(test_wait_any_unlisted_ignored) {
  static const char *const types[] = {"order.paid", "order_shipped"};
  start_any(types, 2, T0_MS + DAY);
  create(WF, "a3", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  static const char *const others[] = {
      "order",         "paid",       "order.paid.x", "order.pai",
      "orderXshipped", "Order.paid", "shipped",      "order"};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    send_ev("a3", others[i], "0");
    ck_assert_uint_eq(harness_run(&H), 0);
  }
  ck_assert_int_eq(C.top, 1);
  assert_waits_any("a3", "order.paid|order_shipped", T0_MS + DAY);
  send_ev("a3", "order_shipped", "\"s\"");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("a3", "complete");
  json_t *out = jget(desc(WF, "a3"), "output");
  ck_assert_str_eq(jstr(json_array_get(out, 0), "type"), "order_shipped");
  for (size_t i = 0; i < sizeof others / sizeof *others; i++)
    assert_event("a3", i, others[i], NULL);
}
END_TEST

/* At the absolute deadline, and not a millisecond before, it times out:
 * a TimeoutError naming the step and the types, which run() catches. */
START_TEST(test_wait_any_deadline) {
  int64_t deadline = T0_MS + 3 * HOUR + 17;
  start_any(ANSWERS, 2, deadline);
  harness_advance(&H, 10 * MIN);
  create(WF, "a4", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_waits_any("a4", "approve|reject", deadline);
  send_ev("a4", "other", "0");
  ck_assert_uint_eq(harness_run(&H), 0);
  advance_nothing(deadline - now() - 1);
  assert_status("a4", "waiting");
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  assert_status("a4", "complete");
  ck_assert_int_eq(C.n_rc, 1);
  ck_assert_int_eq(C.rc[0], DURO_ERROR);
  json_t *e = json_loads(C.seen[0], 0, NULL);
  ck_assert_ptr_nonnull(e);
  assert_error(e, "TimeoutError", "\"review#1\"");
  assert_error(e, "TimeoutError", "\"approve\" or \"reject\"");
  assert_error(e, "TimeoutError", "2026-01-01T03:00:00.017Z");
  json_decref(e);
  ck_assert_int_eq(C.calls[1], 1); /* the flow went on */
  json_t *d = desc(WF, "a4");
  assert_json(jget(d, "output"), "{\"timedOut\":true}");
  ck_assert_str_eq(jstr(step_of(d, "review#1"), "status"), "errored");
  assert_error(jget(step_of(d, "review#1"), "error"), "TimeoutError", NULL);
  assert_event("a4", 0, "other", NULL);
}
END_TEST

/* Three types: the timeout's message names each. */
START_TEST(test_wait_any_three_types_timeout) {
  static const char *const types[] = {"a", "b", "c"};
  start_any(types, 3, T0_MS + HOUR);
  create(WF, "a5", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_waits_any("a5", "a|b|c", T0_MS + HOUR);
  ck_assert_uint_eq(harness_advance(&H, HOUR), 1);
  ck_assert_int_eq(C.rc[0], DURO_ERROR);
  json_t *e = json_loads(C.seen[0], 0, NULL);
  ck_assert_ptr_nonnull(e);
  assert_error(e, "TimeoutError", "\"a\", \"b\" or \"c\"");
  json_decref(e);
}
END_TEST

/* deadline_ms <= 0: the default of duro_wait_for_event, 24 hours from the
 * wait's first call. */
START_TEST(test_wait_any_default_deadline) {
  static const int64_t deadlines[] = {0, -1, INT64_MIN};
  start_any(ANSWERS, 2, deadlines[_i]);
  harness_advance(&H, 7 * MIN);
  create(WF, "a6", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  int64_t first = T0_MS + 7 * MIN;
  assert_waits_any("a6", "approve|reject", first + DAY);
  /* later activations keep the deadline of the first call */
  harness_advance(&H, HOUR);
  send_ev("a6", "other", "0");
  advance_nothing(DAY - HOUR - 1);
  assert_waits_any("a6", "approve|reject", first + DAY);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  ck_assert_int_eq(C.rc[0], DURO_ERROR);
  json_t *e = json_loads(C.seen[0], 0, NULL);
  assert_error(e, "TimeoutError", "2026-01-02T00:07:00.000Z");
  json_decref(e);
}
END_TEST

/* A deadline already past at the first call: an event already there is
 * taken, else it times out at once. */
START_TEST(test_wait_any_deadline_past) {
  start_any(ANSWERS, 2, T0_MS - 1);
  harness_advance(&H, MIN);
  create(WF, "a7", NULL);
  create(WF, "a8", NULL);
  send_ev("a7", "reject", "7");
  ck_assert_uint_eq(harness_run(&H), 2);
  assert_status("a7", "complete");
  assert_status("a8", "complete");
  ck_assert_int_eq(C.n_rc, 2);
  json_t *d = desc(WF, "a7");
  ck_assert_str_eq(jstr(json_array_get(jget(d, "output"), 0), "type"),
                   "reject");
  d = desc(WF, "a8");
  assert_json(jget(d, "output"), "{\"timedOut\":true}");
  assert_error(jget(step_of(d, "review#1"), "error"), "TimeoutError",
               "\"review#1\"");
}
END_TEST

/* The deadline is journaled at the first call: a replay whose code passes
 * another keeps the first. */
START_TEST(test_wait_any_deadline_journaled) {
  start_any(ANSWERS, 2, T0_MS + HOUR);
  create(WF, "a9", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  A.deadline = T0_MS + 5 * HOUR;
  /* a pause and a resume at once: it runs again, the timers as they were */
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "a9"), 0);
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "a9"), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.top, 2);
  assert_waits_any("a9", "approve|reject", T0_MS + HOUR);
  ck_assert_uint_eq(harness_advance(&H, HOUR), 1);
  assert_status("a9", "complete");
  ck_assert_int_eq(C.rc[C.n_rc - 1], DURO_ERROR);
}
END_TEST

/* Once journaled, the result is the journal's on every replay: the same
 * event, and no other consumed (a second event of the type stays). */
START_TEST(test_wait_any_replay_same_event) {
  A.nap = 1;
  start_any(ANSWERS, 2, T0_MS + DAY);
  create(WF, "b1", NULL);
  send_ev("b1", "approve", "{\"n\":1}");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("b1", "waiting"); /* in its nap */
  send_ev("b1", "approve", "{\"n\":2}");
  send_ev("b1", "reject", "{\"n\":3}");
  ck_assert_uint_eq(harness_advance(&H, HOUR), 1);
  assert_status("b1", "complete");
  ck_assert_int_eq(C.top, 2);
  ck_assert_int_eq(C.n_seen, 2);
  ck_assert_str_eq(C.seen[0], C.seen[1]);
  json_t *e = json_loads(C.seen[1], 0, NULL);
  ck_assert_int_eq(jint(jget(e, "payload"), "n"), 1);
  json_decref(e);
  assert_event("b1", 0, "approve", "review#1");
  assert_event("b1", 1, "approve", NULL);
  assert_event("b1", 2, "reject", NULL);
  ck_assert_uint_eq(n_steps(desc(WF, "b1")), 3); /* review, nap, after */
}
END_TEST

/* The replayed code asks for a waitForEvent where the journal has the
 * waitAny (and the reverse): replay.diverged naming both kinds, before
 * anything of the new code runs. */
START_TEST(test_wait_any_divergence) {
  A.nap = 1;
  A.as_wait = _i;
  start_any(ANSWERS, 2, T0_MS + DAY);
  create(WF, "b2", NULL);
  send_ev("b2", "approve", "1");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("b2", "waiting");
  A.as_wait = !_i;
  ck_assert_uint_eq(harness_advance(&H, HOUR), 1);
  assert_status("b2", "errored");
  json_t *err = jget(desc(WF, "b2"), "error");
  assert_error(err, "replay.diverged", "\"review#1\" (waitAny)");
  assert_error(err, "replay.diverged", "\"review#1\" (waitForEvent)");
  ck_assert_int_eq(C.calls[1], 0);
}
END_TEST

/* duro check --replay: the dry run reports the same divergence. */
START_TEST(test_wait_any_dry_run_divergence) {
  A.nap = 1;
  start_any(ANSWERS, 2, T0_MS + DAY);
  create(WF, "b3", NULL);
  send_ev("b3", "reject", "1");
  ck_assert_uint_eq(harness_run(&H), 1);
  json_t *rep = NULL;
  ck_assert_int_eq(duro_engine_dry_run(H.e, WF, wf_any, &rep), 0);
  ck_assert_int_eq(jint(rep, "diverged"), 0);
  json_decref(rep);
  A.as_wait = 1;
  ck_assert_int_eq(duro_engine_dry_run(H.e, WF, wf_any, &rep), 0);
  ck_assert_int_eq(jint(rep, "diverged"), 1);
  json_t *one = json_array_get(jget(rep, "instances"), 0);
  ck_assert_str_eq(jstr(one, "status"), "diverged");
  assert_error(jget(one, "error"), "replay.diverged", "(waitAny)");
  json_decref(rep);
  assert_status("b3", "waiting"); /* nothing changed */
}
END_TEST

/* A waitAny is a step: limits.steps counts it. */
static duro_rc wf_any_loop(duro_step *step, const duro_event *ev,
                           duro_env *env) {
  (void)ev, (void)env;
  C.top++;
  for (int i = 0; i < 5; i++) {
    const char *e;
    DURO_TRY(duro_wait_any(step, "review", ANSWERS, 2, 0, &e));
  }
  return duro_set_output(step, "{}");
}

START_TEST(test_wait_any_step_limit) {
  duro_workflow_limits lim = {.max_steps = 3};
  ck_assert_int_eq(duro_engine_register(H.e, WF, NULL, wf_any_loop, &lim, NULL),
                   0);
  harness_start(&H);
  create(WF, "b4", NULL);
  for (int i = 0; i < 5; i++)
    send_ev("b4", i % 2 ? "reject" : "approve", "0");
  harness_run(&H);
  assert_status("b4", "errored");
  json_t *d = desc(WF, "b4");
  assert_error(jget(d, "error"), "step.limit_exceeded", "\"review#4\"");
  ck_assert_uint_eq(n_steps(d), 3);
  assert_event("b4", 2, "approve", "review#3");
  assert_event("b4", 3, "reject", NULL);
}
END_TEST

static const char *const NULL_TYPE[] = {"approve", NULL};
static const char *const EMPTY_TYPE[] = {"", "approve"};
static const char *const SEP_TYPE[] = {"approve|reject"};
static const char *const LONG_TYPE[] = {
    "approve", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
               "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"};
static const char *MANY[DURO_WAIT_ANY_MAX + 1];

static const struct {
  const char *const *types;
  size_t n;
  int64_t deadline;
  const char *name, *message; /* the error, and a part of its message */
} bad_any[] = {
    {ANSWERS, 0, 0, "Error", "needs at least one event type"},
    {NULL, 2, 0, "Error", "types is NULL"},
    {NULL_TYPE, 2, 0, "Error", "event type 1 is NULL"},
    {EMPTY_TYPE, 2, 0, "Error", "event type 0 is empty"},
    {SEP_TYPE, 1, 0, "Error", "'|'"},
    {LONG_TYPE, 2, 0, "Error", "over 100 bytes"},
    {MANY, DURO_WAIT_ANY_MAX + 1, 0, "Error", "at most 64"},
    {ANSWERS, 2, T0_MS + 366 * DAY, "duration.invalid", "365 days"},
    {ANSWERS, 2, INT64_MAX, "duration.invalid", "365 days"},
};

/* A call it cannot take fails with an error naming the step, journals
 * nothing and waits for nothing. */
START_TEST(test_wait_any_bad_input) {
  for (size_t i = 0; i < sizeof MANY / sizeof *MANY; i++)
    MANY[i] = "t";
  start_any(bad_any[_i].types, bad_any[_i].n, bad_any[_i].deadline);
  create(WF, "b5", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("b5", "complete");
  ck_assert_int_eq(C.rc[0], DURO_ERROR);
  json_t *e = json_loads(C.seen[0], 0, NULL);
  ck_assert_ptr_nonnull(e);
  assert_error(e, bad_any[_i].name, bad_any[_i].message);
  assert_error(e, bad_any[_i].name, "\"review#1\"");
  json_decref(e);
  json_t *d = desc(WF, "b5");
  ck_assert_ptr_null(harness_step(d, "review#1"));
  ck_assert(json_is_null(jget(d, "wait_type")));
}
END_TEST

/* Repeats are one type: the wait shows it once. */
START_TEST(test_wait_any_repeats) {
  static const char *const types[] = {"b", "a", "b", "a"};
  start_any(types, 4, 0);
  create(WF, "b6", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_waits_any("b6", "b|a", T0_MS + DAY);
  send_ev("b6", "a", "1");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("b6", "complete");
}
END_TEST

/* ---- instance lifecycle: create ------------------------------------------ */

static duro_rc wf_simple(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  C.top++;
  DURO_TRY(duro_do(step, "work", NULL, cb_fixed, &(fixed){1, "true"}, NULL));
  return duro_set_output(step, ev->params);
}

START_TEST(test_create_with_id_and_duplicate) {
  harness_register(&H, WF, wf_simple);
  harness_start(&H);
  char *id = NULL;
  ck_assert_int_eq(
      duro_instance_create(H.e, WF, "order-1", "{\"v\":1}", -1, &id), 0);
  ck_assert_str_eq(id, "order-1");
  free(id);
  assert_status("order-1", "queued");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("order-1", "complete");

  id = (char *)"untouched";
  ck_assert_int_eq(
      duro_instance_create(H.e, WF, "order-1", "{\"v\":2}", -1, &id),
      DURO_E_ALREADY_EXISTS);
  ck_assert_ptr_null(id);
  ck_assert_str_eq(duro_err_name(DURO_E_ALREADY_EXISTS),
                   "instance.already_exists");
  ck_assert_uint_eq(harness_run(&H), 0);
  ck_assert_int_eq(C.top, 1);
  json_t *d = desc(WF, "order-1");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  assert_json(jget(d, "params"), "{\"v\":1}");
  assert_json(jget(d, "output"), "{\"v\":1}");

  /* a duplicate of a still-queued instance is refused the same way */
  create(WF, "order-2", "[1]");
  ck_assert_int_eq(duro_instance_create(H.e, WF, "order-2", "[2]", -1, NULL),
                   DURO_E_ALREADY_EXISTS);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_json(jget(desc(WF, "order-2"), "output"), "[1]");
}
END_TEST

START_TEST(test_create_random_id) {
  harness_register(&H, WF, wf_simple);
  harness_start(&H);
  char *a = NULL, *b = NULL;
  ck_assert_int_eq(duro_instance_create(H.e, WF, NULL, NULL, -1, &a), 0);
  ck_assert_int_eq(duro_instance_create(H.e, WF, NULL, NULL, -1, &b), 0);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(b);
  ck_assert(duro_instance_id_valid(a));
  ck_assert_uint_eq(strlen(a), 36); /* a UUID */
  ck_assert_str_ne(a, b);
  ck_assert_uint_eq(harness_run(&H), 2);
  assert_status(a, "complete");
  json_t *d = desc(WF, a);
  ck_assert_str_eq(jstr(d, "id"), a);
  ck_assert(json_is_null(jget(d, "params"))); /* no params = null */
  free(a);
  free(b);
}
END_TEST

START_TEST(test_create_invalid) {
  harness_register(&H, WF, wf_simple);
  harness_start(&H);
  char id100[101], id101[102];
  memset(id100, 'a', 100);
  id100[100] = '\0';
  memset(id101, 'b', 101);
  id101[101] = '\0';
  const char *bad[] = {"", id101, "has space", "a/b", "tab\tid", "é"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    ck_assert_msg(duro_instance_create(H.e, WF, bad[i], "{}", -1, NULL) ==
                      DURO_E_INVALID_ID,
                  "id \"%s\" accepted", bad[i]);
  ck_assert_int_eq(duro_instance_create(H.e, WF, id100, "{}", -1, NULL), 0);
  ck_assert_int_eq(duro_instance_create(H.e, WF, "ok_id.1:2-3", NULL, -1, NULL),
                   0);
  ck_assert_int_eq(duro_instance_create(H.e, "nope", "x", "{}", -1, NULL),
                   DURO_E_WORKFLOW_NOT_FOUND);
  const char *bad_params[] = {"{", "not json", "{\"a\":}", ""};
  for (size_t i = 0; i < sizeof bad_params / sizeof *bad_params; i++)
    ck_assert_msg(duro_instance_create(H.e, WF, "p", bad_params[i], -1, NULL) ==
                      DURO_E_INVALID_PARAMS,
                  "params \"%s\" accepted", bad_params[i]);
  /* nothing of the refused ones was stored */
  ck_assert_int_eq(duro_instance_create(H.e, WF, "p", "{}", -1, NULL), 0);
  ck_assert_uint_eq(harness_run(&H), 3);
  json_t *list = NULL;
  ck_assert_int_eq(duro_instance_list(H.e, WF, NULL, 100, NULL, &list), 0);
  ck_assert_uint_eq(json_array_size(json_object_get(list, "instances")), 3);
  json_decref(list);
}
END_TEST

static json_t *batch_error(json_t *res, json_int_t index) {
  size_t i;
  json_t *e;
  json_array_foreach(jget(res, "errors"), i, e) {
    if (jint(e, "index") == index)
      return e;
  }
  ck_abort_msg("no error for index %lld", (long long)index);
  return NULL;
}

START_TEST(test_create_batch) {
  harness_register(&H, WF, wf_simple);
  harness_start(&H);
  create(WF, "old", "\"old\"");
  duro_create_req reqs[] = {
      {.id = "b1", .params = "1", .retention_ms = -1},
      {.id = "b2", .params = "2", .retention_ms = -1},
      {.id = "b1", .params = "3", .retention_ms = -1},  /* dup in batch */
      {.id = "old", .params = "4", .retention_ms = -1}, /* exists */
      {.id = NULL, .params = "5", .retention_ms = -1},  /* random */
      {.id = "bad id", .params = "6", .retention_ms = -1},
      {.id = "b3", .params = "{", .retention_ms = -1},
  };
  json_t *res = NULL;
  ck_assert_int_eq(duro_instance_create_batch(H.e, WF, reqs,
                                              sizeof reqs / sizeof *reqs, &res),
                   0);
  ck_assert_ptr_nonnull(res);
  json_t *created = jget(res, "created");
  ck_assert_uint_eq(json_array_size(created), 3);
  ck_assert_str_eq(jstr(json_array_get(created, 0), "id"), "b1");
  ck_assert_str_eq(jstr(json_array_get(created, 1), "id"), "b2");
  char random_id[64];
  snprintf(random_id, sizeof random_id, "%s",
           jstr(json_array_get(created, 2), "id"));
  ck_assert(duro_instance_id_valid(random_id));

  ck_assert_uint_eq(json_array_size(jget(res, "errors")), 4);
  json_t *e = batch_error(res, 2);
  ck_assert_str_eq(jstr(e, "id"), "b1");
  ck_assert_str_eq(jstr(e, "code"), "instance.duplicate_in_batch");
  ck_assert(json_is_string(jget(e, "message")));
  e = batch_error(res, 3);
  ck_assert_str_eq(jstr(e, "id"), "old");
  ck_assert_str_eq(jstr(e, "code"), "instance.already_exists");
  ck_assert_str_eq(jstr(batch_error(res, 5), "code"), "instance.invalid_id");
  ck_assert_str_eq(jstr(batch_error(res, 6), "code"),
                   "instance.invalid_params");
  json_decref(res);

  ck_assert_uint_eq(harness_run(&H), 4); /* old, b1, b2, the random one */
  assert_json(jget(desc(WF, "b1"), "output"), "1");
  assert_json(jget(desc(WF, "old"), "params"), "\"old\"");
  assert_json(jget(desc(WF, random_id), "output"), "5");

  /* unknown workflow fails the call itself */
  res = NULL;
  ck_assert_int_eq(duro_instance_create_batch(H.e, "nope", reqs, 1, &res),
                   DURO_E_WORKFLOW_NOT_FOUND);
  ck_assert_ptr_null(res);
}
END_TEST

/* ---- pause, resume, terminate ---------------------------------------------
 */

static void start_sleeper(const char *id, const char *duration) {
  harness_register(&H, WF, wf_sleep);
  harness_start(&H);
  char params[96];
  snprintf(params, sizeof params, "{\"d\":\"%s\"}", duration);
  create(WF, id, params);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status(id, "waiting");
}

START_TEST(test_pause_sleep_keeps_remaining) {
  start_sleeper("p1", "1 hour");
  advance_nothing(10 * MIN);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "p1"), 0);
  assert_status("p1", "paused");
  ck_assert(json_is_null(jget(desc(WF, "p1"), "wake_ms")));
  /* pausing again is harmless */
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "p1"), 0);
  assert_status("p1", "paused");

  /* the sleep's time passes: nothing happens */
  advance_nothing(2 * HOUR);
  assert_status("p1", "paused");
  ck_assert_int_eq(C.calls[1], 0);

  /* resume at T0+2h10: 50 minutes of the sleep remain */
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "p1"), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("p1", "waiting");
  json_t *d = desc(WF, "p1");
  ck_assert_int_eq(jint(d, "wake_ms"), T0_MS + 3 * HOUR);
  ck_assert_int_eq(jint(step_of(d, "nap#1"), "wake_ms"), T0_MS + 3 * HOUR);
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "p1"),
                   DURO_E_CANNOT_RESUME); /* not paused any more */
  advance_nothing(50 * MIN - 1);
  ck_assert_int_eq(C.calls[1], 0);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  assert_status("p1", "complete");
  ck_assert_int_eq(C.calls[1], 1);
}
END_TEST

/* Step a pauses its own instance from inside its callback. */
static int cb_pause_self(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[1]++;
  C.rc[0] = duro_instance_pause(H.e, WF, C.self_id);
  copy_seen(harness_status(&H, WF, C.self_id));
  duro_clock_advance(&H.clock, MIN); /* the step goes on a while */
  copy_seen(harness_status(&H, WF, C.self_id));
  return duro_attempt_result(a, "\"a\"");
}

static int cb_terminate_self(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[1]++;
  C.rc[0] = duro_instance_terminate(H.e, WF, C.self_id);
  C.rc[1] = duro_instance_restart(H.e, WF, C.self_id, NULL, 0);
  return duro_attempt_result(a, "\"a\"");
}

static duro_rc wf_control_in_step(duro_step *step, const duro_event *ev,
                                  duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  DURO_TRY(duro_do(step, "a", NULL, C.final ? cb_terminate_self : cb_pause_self,
                   NULL, NULL));
  DURO_TRY(duro_do(step, "b", NULL, cb_fixed, &(fixed){2, "\"b\""}, NULL));
  return duro_set_output(step, "\"done\"");
}

START_TEST(test_pause_inside_step) {
  harness_register(&H, WF, wf_control_in_step);
  harness_start(&H);
  C.self_id = "p2";
  create(WF, "p2", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.rc[0], 0);
  ck_assert_str_eq(C.seen[0], "waitingForPause");
  ck_assert_str_eq(C.seen[1], "waitingForPause");
  assert_status("p2", "paused");
  ck_assert_int_eq(C.calls[1], 1);
  ck_assert_int_eq(C.calls[2], 0); /* b did not run */
  json_t *d = desc(WF, "p2");
  ck_assert_str_eq(jstr(step_of(d, "a#1"), "status"), "complete");
  ck_assert_uint_eq(n_steps(d), 1);

  advance_nothing(DAY);
  assert_status("p2", "paused");
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "p2"), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("p2", "complete");
  ck_assert_int_eq(C.calls[1], 1); /* a is not rerun */
  ck_assert_int_eq(C.calls[2], 1);
}
END_TEST

START_TEST(test_terminate_inside_step) {
  harness_register(&H, WF, wf_control_in_step);
  harness_start(&H);
  C.self_id = "k2";
  C.final = 1; /* selects cb_terminate_self */
  create(WF, "k2", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.rc[0], 0);
  ck_assert_int_eq(C.rc[1], DURO_E_CANNOT_RESTART); /* it is running */
  assert_status("k2", "terminated");
  ck_assert_int_eq(C.calls[2], 0);
  ck_assert_uint_eq(n_steps(desc(WF, "k2")), 1);
  advance_nothing(DAY);
  ck_assert_int_eq(C.calls[2], 0);
}
END_TEST

START_TEST(test_terminate_waiting) {
  start_sleeper("k1", "1 hour");
  advance_nothing(MIN);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "k1"), 0);
  assert_status("k1", "terminated");
  json_t *d = desc(WF, "k1");
  ck_assert_int_eq(jint(d, "ended_ms"), T0_MS + MIN);
  ck_assert(json_is_null(jget(d, "wake_ms")));
  advance_nothing(2 * HOUR);
  assert_status("k1", "terminated");
  ck_assert_int_eq(C.calls[1], 0);
  ck_assert_int_eq(C.top, 1);
  /* an ended instance refuses every transition but restart */
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "k1"),
                   DURO_E_CANNOT_TERMINATE);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "k1"), DURO_E_CANNOT_PAUSE);
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "k1"), DURO_E_CANNOT_RESUME);
}
END_TEST

START_TEST(test_complete_refuses_transitions) {
  harness_register(&H, WF, wf_simple);
  harness_start(&H);
  create(WF, "c1", "{}");
  harness_run(&H);
  assert_status("c1", "complete");
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "c1"),
                   DURO_E_CANNOT_TERMINATE);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "c1"), DURO_E_CANNOT_PAUSE);
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "c1"), DURO_E_CANNOT_RESUME);
  assert_status("c1", "complete");
  ck_assert_uint_eq(harness_run(&H), 0);
  ck_assert_int_eq(C.top, 1);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "missing"), DURO_E_NOT_FOUND);
  ck_assert_int_eq(duro_instance_terminate(H.e, "nope", "c1"),
                   DURO_E_WORKFLOW_NOT_FOUND);
}
END_TEST

/* A pause that lands while a failing attempt runs: the instance ends the
 * activation paused, and the back-off's remaining time is kept. */
static int cb_pause_then_fail(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[0]++;
  C.attempt[C.n_attempt++] = duro_attempt_number(a);
  if (duro_attempt_number(a) == 1) {
    C.rc[0] = duro_instance_pause(H.e, WF, C.self_id);
    return duro_attempt_fail(a, "flaky");
  }
  return duro_attempt_result(a, "\"ok\"");
}

static duro_rc wf_pause_backoff(duro_step *step, const duro_event *ev,
                                duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 2, .delay = "1 minute", .backoff = DURO_BACKOFF_CONSTANT}};
  DURO_TRY(duro_do(step, "a", &cfg, cb_pause_then_fail, NULL, NULL));
  return duro_set_output(step, "\"done\"");
}

START_TEST(test_pause_during_backoff) {
  harness_register(&H, WF, wf_pause_backoff);
  harness_start(&H);
  C.self_id = "pb";
  create(WF, "pb", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.rc[0], 0);
  assert_status("pb", "paused");
  advance_nothing(HOUR); /* far past the 1-minute back-off */
  ck_assert_int_eq(C.calls[0], 1);
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "pb"), 0);
  harness_run(&H);
  ck_assert_int_eq(C.calls[0], 1);
  assert_status("pb", "waiting");
  advance_nothing(MIN - 1); /* the whole minute still remains */
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  ck_assert_int_eq(C.calls[0], 2);
  ck_assert_uint_eq(C.attempt[1], 2);
  assert_status("pb", "complete");
}
END_TEST

/* Paused while waiting for an event: an event sent meanwhile does not run
 * it; resume delivers it; and the wait's timeout was frozen too. */
START_TEST(test_pause_waiting_for_event) {
  harness_register(&H, WF, wf_event_timeout);
  harness_start(&H);
  C.timeout = "1 hour";
  create(WF, "pe", NULL);
  create(WF, "pt", NULL);
  ck_assert_uint_eq(harness_run(&H), 2);
  advance_nothing(10 * MIN);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "pe"), 0);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "pt"), 0);
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "pe", "go", "1"), 0);
  ck_assert_uint_eq(harness_run(&H), 0);
  assert_status("pe", "paused");
  advance_nothing(2 * HOUR);
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "pe"), 0);
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "pt"), 0);
  ck_assert_uint_eq(harness_run(&H), 2);
  assert_status("pe", "complete");
  assert_json(jget(jget(desc(WF, "pe"), "output"), "payload"), "1");
  /* pt had 50 minutes of its timeout left when paused */
  assert_status("pt", "waiting");
  ck_assert_int_eq(jint(desc(WF, "pt"), "wake_ms"), now() + 50 * MIN);
  advance_nothing(50 * MIN - 1);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  assert_status("pt", "complete");
  assert_json(jget(desc(WF, "pt"), "output"), "{\"timedOut\":true}");
}
END_TEST

/* A pause requested during a step and withdrawn (resume) before the step
 * ends never takes effect. */
static int cb_pause_resume_self(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[1]++;
  C.rc[0] = duro_instance_pause(H.e, WF, C.self_id);
  copy_seen(harness_status(&H, WF, C.self_id));
  C.rc[1] = duro_instance_resume(H.e, WF, C.self_id);
  copy_seen(harness_status(&H, WF, C.self_id));
  C.rc[2] = duro_instance_resume(H.e, WF, C.self_id);
  return duro_attempt_result(a, "\"a\"");
}

static duro_rc wf_pause_withdrawn(duro_step *step, const duro_event *ev,
                                  duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  DURO_TRY(duro_do(step, "a", NULL, cb_pause_resume_self, NULL, NULL));
  DURO_TRY(duro_do(step, "b", NULL, cb_fixed, &(fixed){2, "\"b\""}, NULL));
  return duro_set_output(step, "\"done\"");
}

START_TEST(test_pause_withdrawn_by_resume) {
  harness_register(&H, WF, wf_pause_withdrawn);
  harness_start(&H);
  C.self_id = "pw";
  create(WF, "pw", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.rc[0], 0);
  ck_assert_str_eq(C.seen[0], "waitingForPause");
  ck_assert_int_eq(C.rc[1], 0);
  ck_assert_str_eq(C.seen[1], "running");
  ck_assert_int_eq(C.rc[2], DURO_E_CANNOT_RESUME);
  assert_status("pw", "complete");
  ck_assert_int_eq(C.calls[2], 1);
}
END_TEST

/* Pause and terminate of a queued instance (created, not yet run). */
START_TEST(test_control_queued) {
  harness_register(&H, WF, wf_simple);
  harness_start(&H);
  create(WF, "q1", "1");
  create(WF, "q2", "2");
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "q1"), 0);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "q2"), 0);
  ck_assert_uint_eq(harness_run(&H), 0);
  assert_status("q1", "paused");
  assert_status("q2", "terminated");
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "q1"), 0);
  assert_status("q1", "terminated");
  ck_assert_uint_eq(harness_run(&H), 0);
  ck_assert_int_eq(C.top, 0);
}
END_TEST

/* ---- restart
 * ------------------------------------------------------------------ */

static duro_rc wf_abcd(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  DURO_TRY(duro_do(step, "a", NULL, cb_fixed, &(fixed){1, "\"a\""}, NULL));
  DURO_TRY(duro_do(step, "b", NULL, cb_fixed, &(fixed){2, "\"b\""}, NULL));
  DURO_TRY(duro_do(step, "c", NULL, cb_fixed, &(fixed){3, "\"c\""}, NULL));
  DURO_TRY(duro_do(step, "d", NULL, cb_fixed, &(fixed){4, "\"d\""}, NULL));
  return duro_set_output(step, "\"abcd\"");
}

static void start_abcd(const char *id) {
  harness_register(&H, WF, wf_abcd);
  harness_start(&H);
  create(WF, id, NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status(id, "complete");
  for (int i = 1; i <= 4; i++)
    ck_assert_int_eq(C.calls[i], 1);
}

START_TEST(test_restart_all) {
  start_abcd("r1");
  advance_nothing(MIN);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r1", NULL, 0), 0);
  assert_status("r1", "queued");
  json_t *d = desc(WF, "r1");
  ck_assert_uint_eq(n_steps(d), 0);
  ck_assert(json_is_null(jget(d, "output")));
  ck_assert(json_is_null(jget(d, "ended_ms")));
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("r1", "complete");
  for (int i = 1; i <= 4; i++)
    ck_assert_int_eq(C.calls[i], 2);
  d = desc(WF, "r1");
  ck_assert_uint_eq(n_steps(d), 4);
  assert_json(jget(d, "output"), "\"abcd\"");
  json_t *att = jget(step_of(d, "a#1"), "attempts");
  ck_assert_uint_eq(json_array_size(att), 1); /* the old attempt is gone */
  ck_assert_int_eq(jint(json_array_get(att, 0), "started_ms"), T0_MS + MIN);
}
END_TEST

START_TEST(test_restart_from_step) {
  start_abcd("r2");
  advance_nothing(MIN);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r2", "c", 0), 0);
  json_t *d = desc(WF, "r2");
  ck_assert_uint_eq(n_steps(d), 2);
  step_of(d, "a#1");
  step_of(d, "b#1");
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("r2", "complete");
  ck_assert_int_eq(C.calls[1], 1); /* kept */
  ck_assert_int_eq(C.calls[2], 1);
  ck_assert_int_eq(C.calls[3], 2); /* rerun */
  ck_assert_int_eq(C.calls[4], 2);
  d = desc(WF, "r2");
  ck_assert_int_eq(jint(step_of(d, "a#1"), "started_ms"), T0_MS);
  ck_assert_int_eq(jint(step_of(d, "b#1"), "started_ms"), T0_MS);
  ck_assert_int_eq(jint(step_of(d, "c#1"), "started_ms"), T0_MS + MIN);
  ck_assert_int_eq(jint(step_of(d, "d#1"), "started_ms"), T0_MS + MIN);
}
END_TEST

START_TEST(test_restart_refused) {
  start_abcd("r3");
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r3", "zzz", 0),
                   DURO_E_CANNOT_RESTART);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r3", "c", 2),
                   DURO_E_CANNOT_RESTART);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "missing", NULL, 0),
                   DURO_E_NOT_FOUND);
  /* the refused restarts left the instance alone */
  assert_status("r3", "complete");
  ck_assert_uint_eq(n_steps(desc(WF, "r3")), 4);
  ck_assert_uint_eq(harness_run(&H), 0);
  /* a queued instance cannot be restarted either */
  create(WF, "r4", NULL);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r4", NULL, 0),
                   DURO_E_CANNOT_RESTART);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("r4", "complete");
}
END_TEST

START_TEST(test_restart_waiting_refused) {
  start_sleeper("r5", "1 hour");
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r5", NULL, 0),
                   DURO_E_CANNOT_RESTART);
  ck_assert_int_eq(duro_instance_pause(H.e, WF, "r5"), 0);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "r5", NULL, 0),
                   DURO_E_CANNOT_RESTART); /* paused is not ended */
  ck_assert_int_eq(duro_instance_resume(H.e, WF, "r5"), 0);
  harness_run(&H);
  assert_status("r5", "waiting");
  ck_assert_uint_eq(harness_advance(&H, HOUR), 1);
  assert_status("r5", "complete");
  ck_assert_int_eq(C.calls[1], 1);
}
END_TEST

START_TEST(test_restart_errored_and_terminated) {
  C.final = 1;
  start_flaky(NULL);
  harness_run(&H);
  assert_status("f1", "errored");
  advance_nothing(MIN);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "f1", NULL, 0), 0);
  C.final = 0;
  C.succeed_on = 1;
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("f1", "complete");
  ck_assert_int_eq(C.calls[0], 2);
  ck_assert_uint_eq(C.attempt[1], 1); /* attempts start over */
  json_t *d = desc(WF, "f1");
  ck_assert(json_is_null(jget(d, "error")));
  assert_json(jget(d, "output"), "{\"ok\":1}");
  ck_assert_uint_eq(json_array_size(jget(step_of(d, "flaky#1"), "attempts")),
                    1);

  /* terminated: a fresh instance of another workflow */
  C.final = 1;
  create(WF, "f2", NULL);
  ck_assert_int_eq(duro_instance_terminate(H.e, WF, "f2"), 0);
  assert_status("f2", "terminated");
  ck_assert_uint_eq(harness_run(&H), 0);
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "f2", NULL, 0), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("f2", "errored");
}
END_TEST

/* ---- step results: limits and validation ----------------------------------
 */

static int cb_big(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[2]++;
  size_t n = 2 * 1024 * 1024;
  char *s = malloc(n + 3);
  ck_assert_ptr_nonnull(s);
  s[0] = '"';
  memset(s + 1, 'x', n);
  s[n + 1] = '"';
  s[n + 2] = '\0';
  duro_attempt_result(a, s);
  free(s);
  return 0;
}

/* Sets a result that is not JSON; returns what duro_attempt_result said,
 * or (C.n_rc set) ignores it and returns 0, or (C.succeed_on set) sets a
 * valid result after it. */
static int cb_bad_json(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[2]++;
  C.result_rc = duro_attempt_result(a, "{\"a\": 1,\n \"b\": }");
  if (C.succeed_on)
    return duro_attempt_result(a, "{\"b\":2}");
  return C.n_rc ? 0 : C.result_rc;
}

static duro_rc wf_big(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  DURO_TRY(duro_do(step, "a", NULL, cb_fixed, &(fixed){1, "{\"a\":1}"}, NULL));
  DURO_TRY(
      duro_do(step, "big", NULL, C.final ? cb_bad_json : cb_big, NULL, NULL));
  return duro_set_output(step, "\"unreachable\"");
}

START_TEST(test_output_too_large) {
  harness_register(&H, WF, wf_big);
  harness_start(&H);
  create(WF, "o1", NULL);
  harness_run(&H);
  assert_status("o1", "errored");
  ck_assert_int_eq(C.calls[2], 1); /* not retried: it would not shrink */
  json_t *d = desc(WF, "o1");
  assert_error(jget(d, "error"), "step.output_too_large", "2097154");
  assert_error(jget(d, "error"), "step.output_too_large", "1048576");
  json_t *s = step_of(d, "big#1");
  ck_assert_str_eq(jstr(s, "status"), "errored");
  ck_assert(json_is_null(jget(s, "result")));
  assert_error(jget(s, "error"), "step.output_too_large", NULL);
  /* what was stored before is still there */
  ck_assert_str_eq(jstr(step_of(d, "a#1"), "status"), "complete");
  assert_json(jget(step_of(d, "a#1"), "result"), "{\"a\":1}");
  advance_nothing(DAY);
}
END_TEST

/* _i = 0: the callback returns duro_attempt_result's code; 1: it ignores
 * it and returns 0.  Either way the attempt fails at once, naming the
 * step and where the parse stopped. */
START_TEST(test_invalid_output) {
  harness_register(&H, WF, wf_big);
  harness_start(&H);
  C.final = 1; /* selects cb_bad_json */
  C.n_rc = _i;
  create(WF, "o2", NULL);
  harness_run(&H);
  assert_status("o2", "errored");
  ck_assert_int_eq(C.calls[2], 1);
  ck_assert_int_eq(C.result_rc, DURO_E_INVALID_OUTPUT);
  json_t *d = desc(WF, "o2");
  assert_error(jget(d, "error"), DURO_ERR_INVALID_OUTPUT,
               "step \"big#1\" attempt 1: the result is not valid JSON");
  assert_error(jget(d, "error"), DURO_ERR_INVALID_OUTPUT, "line 2, column 7");
  ck_assert(json_is_null(jget(step_of(d, "big#1"), "result")));
  assert_json(jget(step_of(d, "a#1"), "result"), "{\"a\":1}");
}
END_TEST

/* A valid result set after an invalid one is the step's result. */
START_TEST(test_invalid_then_valid_output) {
  harness_register(&H, WF, wf_big);
  harness_start(&H);
  C.final = 1;
  C.succeed_on = 1;
  create(WF, "o3", NULL);
  harness_run(&H);
  ck_assert_int_eq(C.result_rc, DURO_E_INVALID_OUTPUT);
  json_t *d = desc(WF, "o3");
  assert_json(jget(step_of(d, "big#1"), "result"), "{\"b\":2}");
  assert_status("o3", "complete");
}
END_TEST

static duro_rc wf_bad_output(duro_step *step, const duro_event *ev,
                             duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  return duro_set_output(step, "{\"total\": 12,}");
}

START_TEST(test_set_output_invalid) {
  harness_register(&H, WF, wf_bad_output);
  harness_start(&H);
  create(WF, "o4", NULL);
  harness_run(&H);
  assert_status("o4", "errored");
  json_t *err = jget(desc(WF, "o4"), "error");
  assert_error(err, DURO_ERR_INVALID_OUTPUT, "the output is not valid JSON: ");
  assert_error(err, DURO_ERR_INVALID_OUTPUT, "line 1, column 14");
  ck_assert_ptr_null(strstr(jstr(err, "message"), "step"));
}
END_TEST

/* ---- run()'s own failure and error names --------------------------------
 */

/* A sleep, then duro_fail: the first activation is told to suspend (the
 * call is sticky), the second fails the instance with the message. */
static duro_rc wf_fail(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  C.top++;
  C.error_is[C.n_rc] = duro_error_is(step, DURO_ERR_ERROR);
  duro_rc slept = duro_sleep(step, "nap", "1 minute");
  duro_rc failed = duro_fail(step, "order %s has no lines", ev->params);
  ck_assert_int_lt(C.n_rc, MAXN);
  C.rc[C.n_rc++] = failed;
  copy_seen(duro_step_error(step));
  C.error_is[C.n_rc + 3] = duro_error_is(step, DURO_ERR_ERROR);
  if (slept != DURO_OK)
    return slept;
  return failed;
}

START_TEST(test_run_fails_with_message) {
  harness_register(&H, WF, wf_fail);
  harness_start(&H);
  create(WF, "r1", "\"A-17\"");

  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("r1", "waiting");
  ck_assert_int_eq(C.rc[0], DURO_SUSPEND);
  ck_assert_str_eq(C.seen[0], "null"); /* nothing failed yet */
  ck_assert_uint_eq(harness_advance(&H, MIN), 1);
  assert_status("r1", "errored");
  ck_assert_int_eq(C.rc[1], DURO_ERROR);
  ck_assert_int_eq(C.error_is[1], 0); /* before duro_fail */
  ck_assert_int_eq(C.error_is[5], 1); /* after it */
  json_t *e = json_loads(C.seen[1], 0, NULL);
  ck_assert_ptr_nonnull(e);
  assert_error(e, DURO_ERR_ERROR, NULL);
  ck_assert_str_eq(jstr(e, "message"), "order \"A-17\" has no lines");
  json_decref(e);
  json_t *d = desc(WF, "r1");
  assert_error(jget(d, "error"), "Error", NULL);
  ck_assert_str_eq(jstr(jget(d, "error"), "message"),
                   "order \"A-17\" has no lines");
  ck_assert_str_eq(jstr(step_of(d, "nap#1"), "status"), "complete");
  advance_nothing(DAY); /* ended: never runs again */
}
END_TEST

/* A duro_do whose only attempt overruns its timeout is recognised with
 * duro_error_is, and run() handles it. */
static duro_rc wf_timeout_is(duro_step *step, const duro_event *ev,
                             duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  const char *r;
  duro_rc rc = duro_do(step, "slow", C.cfg, cb_slow, NULL, &r);
  C.rc[C.n_rc++] = rc;
  C.error_is[0] = duro_error_is(step, DURO_ERR_TIMEOUT);
  C.error_is[1] = duro_error_is(step, DURO_ERR_ERROR);
  C.error_is[2] = duro_error_is(step, DURO_ERR_NON_RETRYABLE);
  if (rc == DURO_ERROR && duro_error_is(step, DURO_ERR_TIMEOUT))
    return duro_set_output(step, "\"gave up\"");
  return rc == DURO_OK ? duro_set_output(step, r) : rc;
}

START_TEST(test_error_is_timeout) {
  CFG = (duro_step_config){.retries = &(duro_retries){.limit = 0},
                           .timeout = "1 minute"};
  C.cfg = &CFG;
  harness_register(&H, WF, wf_timeout_is);
  harness_start(&H);
  create(WF, "t9", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.rc[0], DURO_ERROR);
  ck_assert_int_eq(C.error_is[0], 1);
  ck_assert_int_eq(C.error_is[1], 0);
  ck_assert_int_eq(C.error_is[2], 0);
  assert_status("t9", "complete");
  assert_json(jget(desc(WF, "t9"), "output"), "\"gave up\"");
}
END_TEST

/* The names duro.h lists are the ones the engine writes. */
START_TEST(test_error_names_match) {
  ck_assert_str_eq(DURO_ERR_OUTPUT_TOO_LARGE,
                   duro_err_name(DURO_E_OUTPUT_TOO_LARGE));
  ck_assert_str_eq(DURO_ERR_INVALID_OUTPUT,
                   duro_err_name(DURO_E_INVALID_OUTPUT));
  ck_assert_str_eq(DURO_ERR_STEP_LIMIT, duro_err_name(DURO_E_STEP_LIMIT));
  ck_assert_str_eq(DURO_ERR_STATE_TOO_LARGE,
                   duro_err_name(DURO_E_STATE_TOO_LARGE));
  ck_assert_str_eq(DURO_ERR_INVALID_DURATION,
                   duro_err_name(DURO_E_INVALID_DURATION));
  ck_assert_str_eq(DURO_ERR_BUILD_UNAVAILABLE,
                   duro_err_name(DURO_E_BUILD_UNAVAILABLE));
}
END_TEST

/* ---- bindings
 * ----------------------------------------------------------------- */

static duro_rc wf_child(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  C.calls[5]++;
  copy_seen(ev->params);
  return duro_set_output(step, "{\"child\":true}");
}

static int cb_spawn(duro_attempt *a, void *arg) {
  duro_env *env = arg;
  uint32_t n = duro_attempt_number(a);
  C.calls[1]++;
  ck_assert_uint_lt(n, 8);
  C.create_rc[n] = duro_workflow_create(duro_env_workflow(env, "CHILD"),
                                        "child-1", "{\"from\":\"parent\"}");
  C.unknown_binding_null = duro_env_workflow(env, "NOPE") == NULL;
  C.unknown_create_rc =
      duro_workflow_create(duro_env_workflow(env, "NOPE"), "x", "{}");
  if (n == 1)
    return duro_attempt_fail(a, "lost the response");
  if (C.create_rc[n] != 0 && C.create_rc[n] != DURO_E_ALREADY_EXISTS)
    return duro_attempt_fail_final(a, "create: %d", C.create_rc[n]);
  return duro_attempt_result(a, "\"child-1\"");
}

static duro_rc wf_parent(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  C.top++;
  const char *r;
  duro_step_config cfg = {.retries =
                              &(duro_retries){.limit = 2, .delay = "1 second"}};
  DURO_TRY(duro_do(step, "spawn", &cfg, cb_spawn, env, &r));
  return duro_set_output(step, r);
}

/* ---- a child signals its parent
 * ------------------------------------------------------- */

/* Sends child.done to the parent; attempt 1 then fails, so its send must
 * be dropped, attempt 2 completes and its send lands with the result. */
static int cb_notify(duro_attempt *a, void *arg) {
  duro_env *env = arg;
  uint32_t n = duro_attempt_number(a);
  ck_assert_uint_lt(n, 8);
  C.calls[3]++;
  duro_workflow *parent = duro_env_workflow(env, "PARENT");
  char payload[32];
  snprintf(payload, sizeof payload, "{\"attempt\":%u}", (unsigned)n);
  C.send_rc[n] = duro_workflow_send_event(parent, "p", "child.done", payload);
  C.send_missing_rc =
      duro_workflow_send_event(parent, "nobody", "child.done", NULL);
  if (n == 1)
    return duro_attempt_fail(a, "lost the response");
  return duro_attempt_result(a, "true");
}

static duro_rc wf_signalling_child(duro_step *step, const duro_event *ev,
                                   duro_env *env) {
  (void)ev;
  C.calls[5]++;
  C.send_refused_rc = duro_workflow_send_event(duro_env_workflow(env, "PARENT"),
                                               "p", "child.done", NULL);
  duro_step_config cfg = {.retries =
                              &(duro_retries){.limit = 2, .delay = "1 second"}};
  DURO_TRY(duro_do(step, "notify", &cfg, cb_notify, env, NULL));
  return DURO_OK;
}

static int cb_spawn_signalling(duro_attempt *a, void *arg) {
  int rc =
      duro_workflow_create(duro_env_workflow(arg, "CHILD"), "child-1", NULL);
  if (rc != 0 && rc != DURO_E_ALREADY_EXISTS)
    return duro_attempt_fail(a, "create: %d", rc);
  return duro_attempt_result(a, "\"child-1\"");
}

static duro_rc wf_waiting_parent(duro_step *step, const duro_event *ev,
                                 duro_env *env) {
  (void)ev;
  C.top++;
  const char *e;
  C.parent_wf = duro_env_workflow(env, "PARENT");
  DURO_TRY(duro_do(step, "spawn", NULL, cb_spawn_signalling, env, NULL));
  DURO_TRY(duro_wait_for_event(step, "child", "child.done", "1 hour", &e));
  return duro_set_output(step, e);
}

START_TEST(test_child_signals_parent) {
  harness_register_binding(&H, "parent", "PARENT", wf_waiting_parent);
  harness_register_binding(&H, "child", "CHILD", wf_signalling_child);
  harness_start(&H);
  create("parent", "p", NULL);

  ck_assert_uint_eq(harness_run(&H), 2); /* the parent, then the child */
  ck_assert_int_eq(C.send_rc[1], 0);
  ck_assert_int_eq(C.send_missing_rc, DURO_E_NOT_FOUND);
  ck_assert_int_eq(C.send_refused_rc, DURO_E_INVALID_ARGUMENT);
  /* attempt 1 failed: its event was never stored, the parent waits on */
  ck_assert_str_eq(harness_status(&H, "parent", "p"), "waiting");
  ck_assert_str_eq(harness_status(&H, "child", "child-1"), "waiting");
  ck_assert_str_eq(jstr(step_of(desc("parent", "p"), "child#1"), "status"),
                   "waiting");

  /* attempt 2 completes: its event lands with its result and wakes the
   * parent at once */
  ck_assert_uint_eq(harness_advance(&H, SEC), 2);
  ck_assert_int_eq(C.calls[3], 2);
  ck_assert_str_eq(harness_status(&H, "child", "child-1"), "complete");
  ck_assert_str_eq(harness_status(&H, "parent", "p"), "complete");
  json_t *out = jget(desc("parent", "p"), "output");
  ck_assert_str_eq(jstr(out, "type"), "child.done");
  assert_json(jget(out, "payload"), "{\"attempt\":2}");
  advance_nothing(DAY);
}
END_TEST

/* Outside any activation (a queue or cron handler's place; here the test's
 * own thread) a send is stored before it returns. */
START_TEST(test_send_event_outside_activation) {
  harness_register_binding(&H, "parent", "PARENT", wf_waiting_parent);
  harness_register_binding(&H, "child", "CHILD", wf_simple);
  harness_start(&H);
  create("parent", "p", NULL);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, "parent", "p"), "waiting");
  ck_assert_ptr_nonnull(C.parent_wf);
  ck_assert_int_eq(duro_workflow_send_event(C.parent_wf, "p", "", NULL),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(
      duro_workflow_send_event(C.parent_wf, "p", "child.done", "{oops"),
      DURO_E_INVALID_PARAMS);
  ck_assert_int_eq(duro_workflow_send_event(NULL, "p", "child.done", NULL),
                   DURO_E_BINDING_NOT_FOUND);
  ck_assert_int_eq(
      duro_workflow_send_event(C.parent_wf, "p", "child.done", "[1]"), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_str_eq(harness_status(&H, "parent", "p"), "complete");
  assert_json(jget(jget(desc("parent", "p"), "output"), "payload"), "[1]");
}
END_TEST

START_TEST(test_binding_creates_child) {
  harness_register_binding(&H, "parent", "PARENT", wf_parent);
  harness_register_binding(&H, "child", "CHILD", wf_child);
  harness_start(&H);
  create("parent", "p", NULL);

  ck_assert_uint_eq(harness_run(&H), 2); /* the parent, then the child */
  ck_assert_int_eq(C.create_rc[1], 0);
  ck_assert_int_eq(C.unknown_binding_null, 1);
  ck_assert_int_eq(C.unknown_create_rc, DURO_E_BINDING_NOT_FOUND);
  ck_assert_int_eq(C.calls[5], 1);
  ck_assert_str_eq(C.seen[0], "{\"from\":\"parent\"}");
  ck_assert_str_eq(harness_status(&H, "child", "child-1"), "complete");
  ck_assert_str_eq(harness_status(&H, "parent", "p"), "waiting");

  ck_assert_uint_eq(harness_advance(&H, SEC), 1);
  ck_assert_int_eq(C.calls[1], 2);
  ck_assert_int_eq(C.create_rc[2], DURO_E_ALREADY_EXISTS);
  ck_assert_str_eq(harness_status(&H, "parent", "p"), "complete");
  ck_assert_int_eq(C.calls[5], 1); /* one child, not two */
  json_t *d = desc("child", "child-1");
  assert_json(jget(d, "params"), "{\"from\":\"parent\"}");
}
END_TEST

/* ---- durability across a clean restart of the engine ----------------------
 */

static duro_rc wf_durable(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  DURO_TRY(duro_do(step, "a", NULL, cb_fixed, &(fixed){1, "\"a\""}, NULL));
  DURO_TRY(duro_do(step, "b", NULL, cb_fixed, &(fixed){2, "\"b\""}, NULL));
  DURO_TRY(duro_sleep(step, "nap", "1 hour"));
  const char *r;
  DURO_TRY(duro_do(step, "c", NULL, cb_fixed, &(fixed){3, "\"c\""}, &r));
  return duro_set_output(step, r);
}

/* _i = 0: reopen before the sleep is due; 1: the host was down past it. */
START_TEST(test_durable_across_reopen) {
  harness_register(&H, WF, wf_durable);
  harness_start(&H);
  create(WF, "d1", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("d1", "waiting");
  create(WF, "d2", NULL); /* queued, never ran before the restart */

  if (_i == 1)
    duro_clock_advance(&H.clock, 2 * HOUR); /* while the host is down */
  harness_reopen(&H);
  if (_i == 0) {
    ck_assert_uint_eq(harness_run(&H), 1); /* only d2 */
    assert_status("d1", "waiting");
    assert_status("d2", "waiting");
    ck_assert_int_eq(C.calls[3], 0);
    ck_assert_uint_eq(harness_advance(&H, HOUR), 2);
  } else {
    ck_assert_uint_eq(harness_run(&H), 2); /* d1 wakes; d2 starts */
    assert_status("d2", "waiting");
    ck_assert_uint_eq(harness_advance(&H, HOUR), 1);
  }
  assert_status("d1", "complete");
  assert_status("d2", "complete");
  /* two instances: each step ran exactly once per instance */
  ck_assert_int_eq(C.calls[1], 2);
  ck_assert_int_eq(C.calls[2], 2);
  ck_assert_int_eq(C.calls[3], 2);
  ck_assert_int_eq(C.top, 4);
  json_t *d = desc(WF, "d1");
  assert_json(jget(d, "output"), "\"c\"");
  ck_assert_int_eq(jint(step_of(d, "a#1"), "started_ms"), T0_MS);
  ck_assert_uint_eq(json_array_size(jget(step_of(d, "a#1"), "attempts")), 1);
}
END_TEST

/* An event that woke a waiting instance is committed; the engine closes
 * before the activation ran.  After the restart the instance must still
 * get it, not sit until its wait times out. */
START_TEST(test_event_survives_reopen) {
  harness_register(&H, WF, wf_event);
  harness_start(&H);
  create(WF, "er1", NULL);
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("er1", "waiting");
  ck_assert_int_eq(
      duro_instance_send_event(H.e, WF, "er1", "approve", "{\"n\":1}"), 0);
  harness_reopen(&H); /* the woken activation never ran */
  ck_assert_uint_eq(harness_run(&H), 1);
  assert_status("er1", "complete");
  assert_json(jget(jget(desc(WF, "er1"), "output"), "payload"), "{\"n\":1}");
}
END_TEST

/* A retry's back-off survives a restart of the engine; attempt numbers go
 * on from the journal. */
START_TEST(test_backoff_across_reopen) {
  R = (duro_retries){
      .limit = 3, .delay = "1 minute", .backoff = DURO_BACKOFF_CONSTANT};
  CFG.retries = &R;
  C.succeed_on = 2;
  start_flaky(&CFG);
  ck_assert_uint_eq(harness_run(&H), 1);
  harness_reopen(&H);
  ck_assert_uint_eq(harness_run(&H), 0);
  advance_nothing(MIN - 1);
  ck_assert_uint_eq(harness_advance(&H, 1), 1);
  ck_assert_uint_eq(C.attempt[1], 2);
  assert_status("f1", "complete");
  assert_json(jget(desc(WF, "f1"), "output"), "{\"ok\":2}");
}
END_TEST

/* ---- sticky suspension
 * -------------------------------------------------------- */

/* Ignores every return code. */
static duro_rc wf_sticky(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  int base = C.n_rc;
  C.top++;
  const char *r = "unset", *e = "unset";
  C.rc[base + 0] = duro_sleep(step, "nap", "1 hour");
  C.rc[base + 1] = duro_do(step, "after", NULL, cb_fixed, &(fixed){1, "1"}, &r);
  C.rc[base + 2] = duro_sleep(step, "nap2", "1 second");
  C.rc[base + 3] = duro_wait_for_event(step, "w", "go", NULL, &e);
  C.rc[base + 4] =
      duro_do(step, "later", NULL, cb_fixed, &(fixed){2, "2"}, NULL);
  C.rc[base + 5] = duro_set_output(step, "\"finished\"");
  C.rc[base + 6] = r == NULL; /* results are NULLed on DURO_SUSPEND */
  C.n_rc += 7;
  return DURO_OK; /* as if everything had worked */
}

START_TEST(test_sticky_suspension) {
  harness_register(&H, WF, wf_sticky);
  harness_start(&H);
  create(WF, "y1", NULL);

  ck_assert_uint_eq(harness_run(&H), 1);
  ck_assert_int_eq(C.rc[0], DURO_SUSPEND);
  for (int i = 1; i <= 5; i++)
    ck_assert_msg(C.rc[i] == DURO_SUSPEND, "call %d returned %d", i, C.rc[i]);
  ck_assert_int_eq(C.rc[6], 1);
  ck_assert_int_eq(C.calls[1], 0);
  ck_assert_int_eq(C.calls[2], 0);
  /* returning DURO_OK did not complete it: it sleeps */
  assert_status("y1", "waiting");
  json_t *d = desc(WF, "y1");
  ck_assert_uint_eq(n_steps(d), 1);
  step_of(d, "nap#1");
  ck_assert(json_is_null(jget(d, "output")));

  /* nap ends: "after" runs, nap2 suspends again, the rest does nothing */
  ck_assert_uint_eq(harness_advance(&H, HOUR), 1);
  ck_assert_int_eq(C.rc[7], DURO_OK);
  ck_assert_int_eq(C.rc[8], DURO_OK);
  ck_assert_int_eq(C.rc[9], DURO_SUSPEND);
  ck_assert_int_eq(C.rc[10], DURO_SUSPEND);
  ck_assert_int_eq(C.rc[11], DURO_SUSPEND);
  ck_assert_int_eq(C.rc[12], DURO_SUSPEND);
  ck_assert_int_eq(C.calls[1], 1);
  ck_assert_int_eq(C.calls[2], 0);
  assert_status("y1", "waiting");
  d = desc(WF, "y1");
  ck_assert_uint_eq(n_steps(d), 3);
  ck_assert_ptr_null(harness_step(d, "w#1"));
  ck_assert_ptr_null(harness_step(d, "later#1"));

  /* nap2 ends: the wait suspends, "later" still does not run */
  ck_assert_uint_eq(harness_advance(&H, SEC), 1);
  ck_assert_int_eq(C.rc[17], DURO_SUSPEND);
  ck_assert_int_eq(C.rc[18], DURO_SUSPEND);
  ck_assert_int_eq(C.rc[19], DURO_SUSPEND);
  ck_assert_int_eq(C.calls[2], 0);
  ck_assert_uint_eq(n_steps(desc(WF, "y1")), 4);

  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "y1", "go", "1"), 0);
  ck_assert_uint_eq(harness_run(&H), 1);
  for (int i = 21; i <= 26; i++)
    ck_assert_msg(C.rc[i] == DURO_OK, "call %d returned %d", i, C.rc[i]);
  ck_assert_int_eq(C.calls[1], 1);
  ck_assert_int_eq(C.calls[2], 1);
  assert_status("y1", "complete");
  assert_json(jget(desc(WF, "y1"), "output"), "\"finished\"");
}
END_TEST

/* ---- logging
 * -------------------------------------------------------------------- */

static int cb_log(duro_attempt *a, void *arg) {
  (void)arg;
  C.calls[1]++;
  duro_log(DURO_LOG_ERROR, "MARK-in-step attempt %u",
           (unsigned)duro_attempt_number(a));
  return duro_attempt_result(a, "1");
}

static duro_rc wf_log(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  C.top++;
  duro_log(DURO_LOG_ERROR, "MARK-top");
  DURO_TRY(duro_do(step, "a", NULL, cb_log, NULL, NULL));
  duro_log(DURO_LOG_ERROR, "MARK-mid");
  DURO_TRY(duro_sleep(step, "nap", "1 minute"));
  duro_log(DURO_LOG_ERROR, "MARK-end");
  return duro_set_output(step, "{}");
}

static size_t count_in(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
    n++;
  return n;
}

START_TEST(test_log_once_not_on_replay) {
  harness_register(&H, WF, wf_log);
  harness_start(&H);
  create(WF, "l1", NULL);

  /* capture stderr, where log lines go */
  char path[] = "/tmp/duro-log-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  ck_assert_int_ge(saved, 0);
  ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);

  size_t ran = harness_run(&H);
  ran += harness_advance(&H, MIN);

  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  static char buf[65536];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  ck_assert_int_ge(n, 0);
  buf[n] = '\0';

  ck_assert_uint_eq(ran, 2);
  assert_status("l1", "complete");
  ck_assert_int_eq(C.top, 2);
  ck_assert_msg(count_in(buf, "MARK-top") == 1, "MARK-top %zu times in:\n%s",
                count_in(buf, "MARK-top"), buf);
  ck_assert_msg(count_in(buf, "MARK-mid") == 1, "MARK-mid %zu times in:\n%s",
                count_in(buf, "MARK-mid"), buf);
  ck_assert_msg(count_in(buf, "MARK-end") == 1, "MARK-end %zu times in:\n%s",
                count_in(buf, "MARK-end"), buf);
  ck_assert_uint_eq(count_in(buf, "MARK-in-step attempt 1"), 1);
  /* the line names the instance and the step */
  ck_assert_ptr_nonnull(strstr(buf, "wf/l1 a#1 attempt 1"));
}
END_TEST

/* ---- suite
 * ---------------------------------------------------------------------- */

static TCase *tcase(Suite *s, const char *name) {
  TCase *tc = tcase_create(name);
  tcase_add_checked_fixture(tc, setup, teardown);
  suite_add_tcase(s, tc);
  return tc;
}

static Suite *steps_suite(void) {
  Suite *s = suite_create("steps");
  TCase *tc = tcase(s, "do");
  tcase_add_test(tc, test_watch_fire_and_cancel);
  tcase_add_test(tc, test_retry_limit_exhausted);
  tcase_add_loop_test(tc, test_backoff_shapes, 0,
                      sizeof shapes / sizeof *shapes);
  tcase_add_test(tc, test_third_attempt_succeeds);
  tcase_add_test(tc, test_final_failure_skips_retries);
  tcase_add_test(tc, test_default_config);
  tcase_add_test(tc, test_limit_zero_no_retries);
  tcase_add_test(tc, test_completed_step_not_rerun);
  tcase_add_test(tc, test_metrics_history);
  tcase_add_test(tc, test_error_handled_in_run);
  tcase_add_test(tc, test_attempt_timeout);
  tcase_add_test(tc, test_attempt_timeout_exhausted);
  tcase_add_test(tc, test_wall_step_ahead_is_no_timeout);
  tcase_add_test(tc, test_wall_step_ahead_watchdog_waits);
  tcase_add_test(tc, test_wall_step_back_watchdog_abandons);
  tcase_add_test(tc, test_started_when_first_activation_began);
  tcase_add_test(tc, test_cached_results_and_keys);
  tcase_add_test(tc, test_output_too_large);
  tcase_add_loop_test(tc, test_invalid_output, 0, 2);
  tcase_add_test(tc, test_invalid_then_valid_output);
  tcase_add_test(tc, test_set_output_invalid);

  tc = tcase(s, "errors");
  tcase_add_test(tc, test_run_fails_with_message);
  tcase_add_test(tc, test_error_is_timeout);
  tcase_add_test(tc, test_error_names_match);

  tc = tcase(s, "sleep");
  tcase_add_loop_test(tc, test_sleep_durations, 0,
                      sizeof sleeps / sizeof *sleeps);
  tcase_add_test(tc, test_sleep_until);
  tcase_add_test(tc, test_sleep_until_past);
  tcase_add_test(tc, test_sleep_invalid);
  tcase_add_test(tc, test_sleep_invalid_uncaught);
  tcase_add_test(tc, test_duration_extremes);
  tcase_add_test(tc, test_backoff_capped_at_a_year);

  tc = tcase(s, "events");
  tcase_add_test(tc, test_event_delivered_later);
  tcase_add_test(tc, test_events_buffered_in_order);
  tcase_add_test(tc, test_event_before_first_activation);
  tcase_add_test(tc, test_event_sent_during_activation);
  tcase_add_test(tc, test_event_other_type_does_not_wake);
  tcase_add_loop_test(tc, test_event_timeout_caught, 0,
                      sizeof timeouts / sizeof *timeouts);
  tcase_add_test(tc, test_event_timeout_uncaught);

  tc = tcase(s, "wait_any");
  tcase_add_test(tc, test_wait_any_earlier_wins);
  tcase_add_test(tc, test_wait_any_buffered);
  tcase_add_test(tc, test_wait_any_unlisted_ignored);
  tcase_add_test(tc, test_wait_any_deadline);
  tcase_add_test(tc, test_wait_any_three_types_timeout);
  tcase_add_loop_test(tc, test_wait_any_default_deadline, 0, 3);
  tcase_add_test(tc, test_wait_any_deadline_past);
  tcase_add_test(tc, test_wait_any_deadline_journaled);
  tcase_add_test(tc, test_wait_any_replay_same_event);
  tcase_add_loop_test(tc, test_wait_any_divergence, 0, 2);
  tcase_add_test(tc, test_wait_any_dry_run_divergence);
  tcase_add_test(tc, test_wait_any_step_limit);
  tcase_add_loop_test(tc, test_wait_any_bad_input, 0,
                      sizeof bad_any / sizeof *bad_any);
  tcase_add_test(tc, test_wait_any_repeats);

  tc = tcase(s, "create");
  tcase_add_test(tc, test_create_with_id_and_duplicate);
  tcase_add_test(tc, test_create_random_id);
  tcase_add_test(tc, test_create_invalid);
  tcase_add_test(tc, test_create_batch);

  tc = tcase(s, "control");
  tcase_add_test(tc, test_pause_sleep_keeps_remaining);
  tcase_add_test(tc, test_pause_inside_step);
  tcase_add_test(tc, test_terminate_inside_step);
  tcase_add_test(tc, test_terminate_waiting);
  tcase_add_test(tc, test_complete_refuses_transitions);
  tcase_add_test(tc, test_pause_during_backoff);
  tcase_add_test(tc, test_pause_waiting_for_event);
  tcase_add_test(tc, test_pause_withdrawn_by_resume);
  tcase_add_test(tc, test_control_queued);

  tc = tcase(s, "restart");
  tcase_add_test(tc, test_restart_all);
  tcase_add_test(tc, test_restart_from_step);
  tcase_add_test(tc, test_restart_refused);
  tcase_add_test(tc, test_restart_waiting_refused);
  tcase_add_test(tc, test_restart_errored_and_terminated);

  tc = tcase(s, "bindings");
  tcase_add_test(tc, test_binding_creates_child);
  tcase_add_test(tc, test_child_signals_parent);
  tcase_add_test(tc, test_send_event_outside_activation);

  tc = tcase(s, "durability");
  tcase_add_loop_test(tc, test_durable_across_reopen, 0, 2);
  tcase_add_test(tc, test_event_survives_reopen);
  tcase_add_test(tc, test_backoff_across_reopen);
  tcase_add_test(tc, test_sticky_suspension);
  tcase_add_test(tc, test_log_once_not_on_replay);
  return s;
}

int main(void) { return suite_run(steps_suite()); }
