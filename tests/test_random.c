/* test_random.c — random sequences of lifecycle operations against the
 * engine, checked against invariants after every operation.
 *
 * A seeded generator picks creates (from a small id pool, so duplicates
 * happen), pauses, resumes, terminates, restarts (whole or from a step),
 * events and clock jumps.  After each: every call answered with a
 * documented code, every instance has a legal status, no step ran more
 * attempts than its retry limit allows, and a complete instance carries
 * exactly the output its steps imply.  At the end everything is resumed,
 * approved and left to run: each instance must end complete or
 * terminated (the flow cannot error, so errored is a failure).  Inline
 * (workers = 0) on a virtual clock, so a failing seed replays exactly; a
 * second case runs the same mix on worker threads with real time to shake
 * out races. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "suite_run.h"

#define POOL 12
#define OPS 600

/* Every status but errored: nothing in this flow can error (b fails once,
 * well within its two retries, and the wait's timeout is caught), and no
 * operation here errors an instance, so an errored one is a bug. */
static const char *const legal[] = {"queued",          "running", "waiting",
                                    "waitingForPause", "paused",  "terminated",
                                    "complete"};

static int flaky(duro_attempt *a, void *arg) {
  (void)arg;
  /* fails its first attempt, so retries and back-off are in the mix */
  if (duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "first attempt fails");
  return duro_attempt_result(a, "2");
}

static int one(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

/* a (1) -> b (flaky, 2) -> sleep -> wait "go" (caught timeout) -> c (1);
 * output: the sum of results, plus 10 if the event came. */
static duro_rc flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  /* {"fast":1}: real-time durations for the threaded case */
  int fast = strstr(ev->params, "fast") != NULL;
  duro_step_config cfg = {
      .retries = &(duro_retries){.limit = 2, .delay = fast ? "5" : "1 minute"}};
  const char *a, *b, *c, *e;
  DURO_TRY(duro_do(step, "a", NULL, one, NULL, &a));
  DURO_TRY(duro_do(step, "b", &cfg, flaky, NULL, &b));
  DURO_TRY(duro_sleep(step, "nap", fast ? "10" : "30 minutes"));
  duro_rc rc =
      duro_wait_for_event(step, "go", "go", fast ? "100" : "2 hours", &e);
  if (rc == DURO_SUSPEND)
    return rc;
  DURO_TRY(duro_do(step, "c", NULL, one, NULL, &c));
  char out[32];
  snprintf(out, sizeof out, "%d",
           atoi(a) + atoi(b) + atoi(c) + (rc == DURO_OK ? 10 : 0));
  return duro_set_output(step, out);
}

static int is_legal(const char *s) {
  for (size_t i = 0; i < sizeof legal / sizeof *legal; i++)
    if (!strcmp(legal[i], s))
      return 1;
  return 0;
}

/* The invariants every instance keeps, whatever happened to it. */
static void check_instance(harness *h, const char *id) {
  json_t *d = NULL;
  int rc = duro_instance_describe(h->e, "wf", id, &d);
  if (rc == DURO_E_NOT_FOUND)
    return;
  ck_assert_int_eq(rc, 0);
  const char *st = json_string_value(json_object_get(d, "status"));
  if (!is_legal(st)) {
    char *error = json_dumps(json_object_get(d, "error"), JSON_ENCODE_ANY);
    ck_abort_msg("%s: status %s, error %s", id, st, error ? error : "none");
  }
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(d, "steps"), i, s) {
    size_t n = json_array_size(json_object_get(s, "attempts"));
    ck_assert_msg(n <= 3, "%s: step %s ran %zu attempts (limit 2 retries)", id,
                  json_string_value(json_object_get(s, "key")), n);
  }
  if (!strcmp(st, "complete")) {
    json_int_t out = json_integer_value(json_object_get(d, "output"));
    ck_assert_msg(out == 4 || out == 14, "%s: output %lld", id, (long long)out);
  }
  json_decref(d);
}

static int expect_codes(int rc, const int *ok, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (rc == ok[i])
      return 1;
  return 0;
}

static void random_ops(harness *h, unsigned seed, int inline_mode,
                       const char *params) {
  srand(seed);
  char ids[POOL][16];
  for (int i = 0; i < POOL; i++)
    snprintf(ids[i], sizeof ids[i], "r%d", i);
  for (int op = 0; op < OPS; op++) {
    const char *id = ids[rand() % POOL];
    int rc, pick = rand() % 10;
    switch (pick) {
    case 0:
    case 1:
      rc = duro_instance_create(h->e, "wf", id, params, -1, NULL);
      ck_assert_msg(rc == 0 || rc == DURO_E_ALREADY_EXISTS, "create %d", rc);
      break;
    case 2: {
      static const int ok[] = {0, DURO_E_NOT_FOUND, DURO_E_CANNOT_PAUSE};
      rc = duro_instance_pause(h->e, "wf", id);
      ck_assert_msg(expect_codes(rc, ok, 3), "pause %d", rc);
      break;
    }
    case 3: {
      static const int ok[] = {0, DURO_E_NOT_FOUND, DURO_E_CANNOT_RESUME};
      rc = duro_instance_resume(h->e, "wf", id);
      ck_assert_msg(expect_codes(rc, ok, 3), "resume %d", rc);
      break;
    }
    case 4: {
      static const int ok[] = {0, DURO_E_NOT_FOUND, DURO_E_CANNOT_TERMINATE};
      if (rand() % 3 == 0) {
        rc = duro_instance_terminate(h->e, "wf", id);
        ck_assert_msg(expect_codes(rc, ok, 3), "terminate %d", rc);
      }
      break;
    }
    case 5: {
      static const int ok[] = {0, DURO_E_NOT_FOUND, DURO_E_CANNOT_RESTART};
      static const char *const from[] = {NULL, "a", "b",   "nap",
                                         "go", "c", "nope"};
      rc = duro_instance_restart(h->e, "wf", id, from[rand() % 7], 1);
      ck_assert_msg(expect_codes(rc, ok, 3), "restart %d", rc);
      break;
    }
    case 6:
    case 7:
      rc = duro_instance_send_event(h->e, "wf", id, "go", "{}");
      ck_assert_msg(rc == 0 || rc == DURO_E_NOT_FOUND ||
                        rc == DURO_E_INSTANCE_ENDED,
                    "event %d", rc);
      break;
    default:
      if (inline_mode)
        harness_advance(h, (int64_t)(rand() % 120) * 60 * 1000);
      else
        usleep((useconds_t)(rand() % 3000));
    }
    if (inline_mode)
      harness_run(h);
    else
      duro_engine_poll_due(h->e); /* the host loop's timer, by hand */
    for (int i = 0; i < POOL; i++)
      check_instance(h, ids[i]);
  }

  /* Let everything finish: resume, approve, and give time. */
  for (int round = 0; round < 400; round++) {
    int open = 0;
    for (int i = 0; i < POOL; i++) {
      duro_status st;
      if (duro_instance_status(h->e, "wf", ids[i], &st) != 0)
        continue;
      if (st == DURO_STATUS_PAUSED)
        duro_instance_resume(h->e, "wf", ids[i]);
      if (st != DURO_STATUS_COMPLETE && st != DURO_STATUS_ERRORED &&
          st != DURO_STATUS_TERMINATED) {
        open++;
        duro_instance_send_event(h->e, "wf", ids[i], "go", "{}");
      }
    }
    if (!open)
      break;
    if (inline_mode) {
      harness_advance(h, 3LL * 3600 * 1000);
    } else {
      usleep(20 * 1000);
      duro_engine_poll_due(h->e);
    }
  }
  for (int i = 0; i < POOL; i++) {
    check_instance(h, ids[i]);
    duro_status st;
    if (duro_instance_status(h->e, "wf", ids[i], &st) == 0)
      ck_assert_msg(st == DURO_STATUS_COMPLETE || st == DURO_STATUS_TERMINATED,
                    "seed %u: %s did not end complete or terminated (%s)", seed,
                    ids[i], duro_status_name(st));
  }
}

START_TEST(random_lifecycles_inline) {
  /* each seed replays exactly: a failure names it */
  for (unsigned seed = 1; seed <= 8; seed++) {
    harness h;
    harness_open(&h);
    harness_register(&h, "wf", flow);
    harness_start(&h);
    random_ops(&h, seed, 1, "{}");
    harness_close(&h);
  }
}
END_TEST

/* Real workers and real time; the workflow's durations are long, so
 * instances stay mid-flight while operations race with activations. */
START_TEST(random_lifecycles_threaded) {
  harness h;
  harness_open_workers(&h, 4);
  harness_register(&h, "wf", flow);
  harness_start(&h);
  random_ops(&h, 42, 0, "{\"fast\":1}");
  harness_close(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("random");
  TCase *tc = tcase_create("random");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, random_lifecycles_inline);
  tcase_add_test(tc, random_lifecycles_threaded);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
