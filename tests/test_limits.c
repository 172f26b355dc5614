/* test_limits.c — retention, per-workflow concurrency, and the engine
 * threads an in-engine plugin's callbacks may hold.
 *
 * Retention runs on the virtual clock: an ended instance stays exactly its
 * retention and is then deleted with everything it stored, in bounded
 * steps between the scheduler's other work.  Concurrency and the
 * plugin's bound need real worker threads: steps that hold their
 * activation until the test has seen how many run at once. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "journal.h"
#include "suite_run.h"

#define DAY_MS (24LL * 3600 * 1000)

static int noop(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

static duro_rc one_step(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  DURO_TRY(duro_do(step, "only", NULL, noop, NULL, &r));
  return duro_set_output(step, r);
}

START_TEST(retention_deletes_after_exactly_its_time) {
  harness h;
  harness_open(&h);
  harness_register(&h, "wf", one_step);
  harness_start(&h);
  ck_assert_int_eq(duro_instance_create(h.e, "wf", "keep-30d", "{}", -1, NULL),
                   0);
  ck_assert_int_eq(
      duro_instance_create(h.e, "wf", "keep-1d", "{}", DAY_MS, NULL), 0);
  /* an event nothing waits for: the sweep deletes it with its instance */
  ck_assert_int_eq(duro_instance_send_event(h.e, "wf", "keep-1d", "late", "{}"),
                   0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "wf", "keep-30d"), "complete");

  /* a create's own retention is kept in the journal as an odd number of
   * ms (engine/retention.c): a day and a millisecond */
  size_t swept = 99;
  harness_advance(&h, DAY_MS);
  ck_assert_int_eq(duro_engine_sweep(h.e, &swept), 0);
  ck_assert_uint_eq(swept, 0);
  harness_advance(&h, 1);
  ck_assert_int_eq(duro_engine_sweep(h.e, &swept), 0);
  ck_assert_uint_eq(swept, 1);
  duro_status st;
  ck_assert_int_eq(duro_instance_status(h.e, "wf", "keep-1d", &st),
                   DURO_E_NOT_FOUND);
  ck_assert_str_eq(harness_status(&h, "wf", "keep-30d"), "complete");

  /* The id is free again, and the new instance starts with no journal. */
  ck_assert_int_eq(duro_instance_create(h.e, "wf", "keep-1d", "{}", -1, NULL),
                   0);
  json_t *d = harness_describe(&h, "wf", "keep-1d");
  ck_assert_uint_eq(json_array_size(json_object_get(d, "steps")), 0);
  json_decref(d);

  harness_advance(&h, 29 * DAY_MS - 1);
  ck_assert_int_eq(duro_engine_sweep(h.e, &swept), 0);
  ck_assert_uint_eq(swept, 1);
  ck_assert_int_eq(duro_instance_status(h.e, "wf", "keep-30d", &st),
                   DURO_E_NOT_FOUND);
  harness_close(&h);
}
END_TEST

static duro_rc sleeper(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return duro_sleep(step, "long", "365 days");
}

START_TEST(retention_spares_running_instances) {
  harness h;
  harness_open(&h);
  harness_register(&h, "wf", sleeper);
  harness_start(&h);
  ck_assert_int_eq(duro_instance_create(h.e, "wf", "s", "{}", 1000, NULL), 0);
  harness_run(&h);
  harness_advance(&h, 200 * DAY_MS);
  size_t swept = 99;
  ck_assert_int_eq(duro_engine_sweep(h.e, &swept), 0);
  ck_assert_uint_eq(swept, 0);
  ck_assert_str_eq(harness_status(&h, "wf", "s"), "waiting");
  harness_close(&h);
}
END_TEST

/* A sweep of many instances runs in bounded steps, one a scheduler pass
 * (the test runs the passes: with workers = 0 the engine has no scheduler
 * thread): a sleeper that came due meanwhile is made runnable by the
 * first pass, with most of the sweep still to do, and the passes that
 * follow delete the rest. */
#define EXPIRED 1200
#define PASS_MAX 500 /* scheduler.c's SWEEP_PASS_MAX */

static void count_complete(void *ctx, const char *workflow, duro_status status,
                           int64_t n) {
  if (strcmp(workflow, "wf") == 0 && status == DURO_STATUS_COMPLETE)
    *(int64_t *)ctx += n;
}

static int64_t complete_rows(struct journal *j) {
  int64_t n = 0;
  ck_assert_int_eq(journal_count_by_status(j, count_complete, &n), 0);
  return n;
}

static duro_rc naps(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return duro_sleep(step, "nap", "1 hour");
}

START_TEST(a_large_sweep_takes_bounded_steps_between_wakes) {
  harness h;
  harness_open(&h);
  harness_register(&h, "wf", one_step);
  harness_register(&h, "napper", naps);
  harness_start(&h);
  for (int i = 0; i < EXPIRED; i++) {
    char id[16];
    snprintf(id, sizeof id, "x%d", i);
    ck_assert_int_eq(duro_instance_create(h.e, "wf", id, "{}", DAY_MS, NULL),
                     0);
  }
  ck_assert_int_eq(duro_instance_create(h.e, "napper", "s", NULL, -1, NULL), 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "napper", "s"), "waiting");
  struct journal *j = harness_journal_open(&h);
  ck_assert_int_eq(complete_rows(j), EXPIRED);
  duro_engine_scheduler_pass(h.e); /* the first: the sweep is 5 s away */
  ck_assert_int_eq(complete_rows(j), EXPIRED);

  duro_clock_advance(&h.clock, DAY_MS + 3600 * 1000);
  ck_assert_uint_eq(duro_engine_in_flight(h.e), 0);
  ck_assert_int_eq(duro_engine_scheduler_pass(h.e), 0); /* more to do */
  ck_assert_uint_eq(duro_engine_in_flight(h.e), 1);     /* the sleeper */
  int64_t left = complete_rows(j);
  ck_assert_int_eq(left, EXPIRED - PASS_MAX);
  int passes = 1;
  int64_t wait;
  do {
    wait = duro_engine_scheduler_pass(h.e);
    int64_t now_left = complete_rows(j);
    ck_assert_int_le(left - now_left, PASS_MAX);
    left = now_left;
    passes++;
  } while (wait == 0 && passes < 10);
  ck_assert_int_eq(left, 0);
  ck_assert_int_eq(passes, (EXPIRED + PASS_MAX - 1) / PASS_MAX);
  journal_close(j);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "napper", "s"), "complete");
  harness_close(&h);
}
END_TEST

/* ---- instance state --------------------------------------------------------
 */

static int four_hundred(duro_attempt *a, void *arg) {
  (void)arg;
  char json[403];
  memset(json, 'x', sizeof json);
  json[0] = json[401] = '"';
  json[402] = '\0';
  return duro_attempt_result(a, json);
}

static duro_rc three_big(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  for (int i = 0; i < 3; i++)
    DURO_TRY(duro_do(step, "big", NULL, four_hundred, NULL, &r));
  return DURO_OK;
}

START_TEST(state_limit_fails_the_step_that_crosses_it) {
  harness h;
  harness_open(&h);
  harness_register(&h, "wf", three_big);
  harness_set_state_limit(&h, 1000); /* params "{}" + 2 x 402 fit, 3 do not */
  ck_assert_int_eq(duro_instance_create(h.e, "wf", "s", "{}", -1, NULL), 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "wf", "s"), "errored");
  json_t *d = harness_describe(&h, "wf", "s");
  ck_assert_str_eq(
      json_string_value(json_object_get(json_object_get(d, "error"), "name")),
      "instance.state_too_large");
  ck_assert_str_eq(
      json_string_value(json_object_get(harness_step(d, "big#2"), "status")),
      "complete");
  ck_assert_uint_eq(
      json_array_size(json_object_get(harness_step(d, "big#3"), "attempts")),
      1); /* final: not retried */
  json_decref(d);
  harness_close(&h);
}
END_TEST

/* ---- concurrency ------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int running_now, max_running, finished;

static int hold(duro_attempt *a, void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  running_now++;
  if (running_now > max_running)
    max_running = running_now;
  pthread_mutex_unlock(&mu);
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  pthread_mutex_lock(&mu);
  running_now--;
  finished++;
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc held(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  return duro_do(step, "hold", NULL, hold, NULL, &r);
}

START_TEST(concurrency_limit_caps_running_activations) {
  harness h;
  harness_open_workers(&h, 6);
  duro_engine *e = h.e;
  duro_workflow_limits lim = {.concurrency = 2};
  ck_assert_int_eq(duro_engine_register(e, "capped", NULL, held, &lim, NULL),
                   0);
  ck_assert_int_eq(duro_engine_start(e), 0);
  for (int i = 0; i < 12; i++)
    ck_assert_int_eq(duro_instance_create(e, "capped", NULL, "{}", -1, NULL),
                     0);
  size_t seen_running = 0;
  for (int waited = 0; waited < 20000; waited += 10) {
    pthread_mutex_lock(&mu);
    int done = finished;
    pthread_mutex_unlock(&mu);
    if (done == 12)
      break;
    /* "running" is not stored; the list finds it in memory */
    json_t *list = NULL;
    ck_assert_int_eq(duro_instance_list(e, "capped",
                                        &(duro_list_filter){
                                            .status = (int)DURO_STATUS_RUNNING},
                                        100, NULL, &list),
                     0);
    json_t *items = json_object_get(list, "instances");
    ck_assert_uint_le(json_array_size(items), 2);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
      ck_assert_str_eq(json_string_value(json_object_get(it, "status")),
                       "running");
    }
    if (json_array_size(items) > seen_running)
      seen_running = json_array_size(items);
    json_decref(list);
    usleep(10 * 1000);
  }
  ck_assert_int_eq(finished, 12);
  ck_assert_uint_ge(seen_running, 1);
  /* Six workers were free; the workflow's limit held it to two. */
  ck_assert_int_eq(max_running, 2);
  harness_close(&h);
}
END_TEST

/* ---- a plugin's callbacks on engine threads ------------------------------ */

static int gate_open, blocked_now, blocked_max, quick_done;

/* Blocks until the test opens the gate, counting how many do at once. */
static int block(duro_attempt *a, void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  if (++blocked_now > blocked_max)
    blocked_max = blocked_now;
  while (!gate_open) {
    pthread_mutex_unlock(&mu);
    usleep(5 * 1000);
    pthread_mutex_lock(&mu);
  }
  blocked_now--;
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc blocking(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  return duro_do(step, "block", NULL, block, NULL, &r);
}

static int quick(duro_attempt *a, void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  quick_done++;
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc quick_flow(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  return duro_do(step, "quick", NULL, quick, NULL, &r);
}

/* Instances of wf in `status`, up to 100. */
static size_t count_in(duro_engine *e, const char *wf, duro_status status) {
  json_t *list = NULL;
  ck_assert_int_eq(
      duro_instance_list(e, wf, &(duro_list_filter){.status = (int)status}, 100,
                         NULL, &list),
      0);
  size_t n = json_array_size(json_object_get(list, "instances"));
  json_decref(list);
  return n;
}

static int locked_read(const int *v) {
  pthread_mutex_lock(&mu);
  int n = *v;
  pthread_mutex_unlock(&mu);
  return n;
}

/* Two workflows of plugin "p" (its callbacks on the engine's threads, at
 * most 2 at once) whose callbacks block: 10 activations of them hold 2
 * of the 6 threads, the other 8 begin and wait parked, and 20 instances
 * of a workflow beside them all complete meanwhile; a terminate ends
 * waiting ones at once.  Once the callbacks return, the waiters get
 * their places in turn: never more than 2. */
START_TEST(plugin_threads_cap_blocked_callbacks) {
  harness h;
  harness_open_workers(&h, 6);
  duro_engine *e = h.e;
  duro_workflow_limits lim = {.plugin = "p", .plugin_threads = 2};
  ck_assert_int_eq(duro_engine_register(e, "p1", NULL, blocking, &lim, NULL),
                   0);
  ck_assert_int_eq(duro_engine_register(e, "p2", NULL, blocking, &lim, NULL),
                   0);
  ck_assert_int_eq(
      duro_engine_register(e, "other", NULL, quick_flow, NULL, NULL), 0);
  ck_assert_int_eq(duro_engine_start(e), 0);
  char id[16];
  for (int i = 0; i < 10; i++) {
    snprintf(id, sizeof id, "p-%d", i);
    ck_assert_int_eq(
        duro_instance_create(e, i % 2 ? "p1" : "p2", id, "{}", -1, NULL), 0);
  }
  size_t begun = 0;
  for (int waited = 0; begun < 10 && waited < 10000; waited += 10) {
    usleep(10 * 1000);
    begun = count_in(e, "p1", DURO_STATUS_RUNNING) +
            count_in(e, "p2", DURO_STATUS_RUNNING);
  }
  ck_assert_uint_eq(begun, 10); /* all begun: none waits for a thread */
  for (int i = 0; i < 20; i++)
    ck_assert_int_eq(duro_instance_create(e, "other", NULL, "{}", -1, NULL), 0);
  for (int waited = 0; locked_read(&quick_done) < 20 && waited < 10000;
       waited += 10)
    usleep(10 * 1000);
  ck_assert_int_eq(locked_read(&quick_done), 20);
  ck_assert_int_eq(locked_read(&blocked_max), 2);
  /* a terminate reaches a waiting activation at once, as a running
   * callback's (given up on) */
  for (int i = 1; i < 10; i += 2) {
    snprintf(id, sizeof id, "p-%d", i);
    ck_assert_int_eq(duro_instance_terminate(e, "p1", id), 0);
  }
  size_t terminated = 0;
  for (int waited = 0; terminated < 5 && waited < 5000; waited += 10) {
    usleep(10 * 1000);
    terminated = count_in(e, "p1", DURO_STATUS_TERMINATED);
  }
  ck_assert_uint_eq(terminated, 5);
  pthread_mutex_lock(&mu);
  gate_open = 1;
  pthread_mutex_unlock(&mu);
  size_t done = 0;
  for (int waited = 0; done < 5 && waited < 10000; waited += 10) {
    usleep(10 * 1000);
    done = count_in(e, "p2", DURO_STATUS_COMPLETE);
  }
  ck_assert_uint_eq(done, 5);
  ck_assert_uint_eq(count_in(e, "p1", DURO_STATUS_TERMINATED), 5);
  ck_assert_int_eq(locked_read(&blocked_max), 2);
  harness_close(&h);
}
END_TEST

/* limits.steps counts every kind of step, sleeps and event waits too. */
static duro_rc sleepy(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  for (int i = 0; i < 20; i++)
    DURO_TRY(duro_sleep(step, "nap", "1 second"));
  return duro_set_output(step, "{}");
}

START_TEST(step_limit_counts_sleeps) {
  harness h;
  harness_open(&h);
  duro_workflow_limits lim = {.max_steps = 10};
  ck_assert_int_eq(
      duro_engine_register(h.e, "sleepy", NULL, sleepy, &lim, NULL), 0);
  harness_start(&h);
  ck_assert_int_eq(duro_instance_create(h.e, "sleepy", "s", NULL, -1, NULL), 0);
  for (int i = 0; i < 30; i++)
    harness_advance(&h, 1000);
  ck_assert_str_eq(harness_status(&h, "sleepy", "s"), "errored");
  json_t *d = harness_describe(&h, "sleepy", "s");
  ck_assert_str_eq(
      json_string_value(json_object_get(json_object_get(d, "error"), "name")),
      "step.limit_exceeded");
  ck_assert_uint_eq(json_array_size(json_object_get(d, "steps")), 10);
  json_decref(d);
  harness_close(&h);
}
END_TEST

/* ---- the backlog --------------------------------------------------------
 */

static void create_many(harness *h, const char *prefix, int n) {
  duro_create_req reqs[200];
  char ids[200][16];
  ck_assert_int_le(n, 200);
  for (int i = 0; i < n; i++) {
    snprintf(ids[i], sizeof ids[i], "%s%d", prefix, i);
    reqs[i] = (duro_create_req){.id = ids[i], .retention_ms = -1};
  }
  json_t *res = NULL;
  ck_assert_int_eq(
      duro_instance_create_batch(h->e, "wf", reqs, (size_t)n, &res), 0);
  ck_assert_uint_eq(json_array_size(json_object_get(res, "created")),
                    (size_t)n);
  json_decref(res);
}

/* Instances with an entry in memory: in flight less the backlog in rows
 * (/metrics' duro_backlog_in_journal). */
static size_t engine_entries(harness *h) {
  char *m = duro_engine_metrics(h->e);
  const char *at = strstr(m, "\nduro_backlog_in_journal ");
  ck_assert_ptr_nonnull(at);
  size_t rows = (size_t)strtoull(at + 25, NULL, 10);
  free(m);
  return duro_engine_in_flight(h->e) - rows;
}

static size_t completed(harness *h) {
  json_t *l = NULL;
  ck_assert_int_eq(duro_instance_list(
                       h->e, "wf",
                       &(duro_list_filter){.status = (int)DURO_STATUS_COMPLETE},
                       1000, NULL, &l),
                   0);
  size_t n = json_array_size(json_object_get(l, "instances"));
  json_decref(l);
  return n;
}

/* Past max_runnable, new instances are rows, not memory: 150 creations
 * hold 8 entries; all 150 run as the backlog is pulled in, and a backlog
 * left by a stop is pulled in by the next engine the same way. */
START_TEST(backlog_costs_rows_not_memory) {
  harness h;
  harness_open(&h);
  harness_register(&h, "wf", one_step);
  harness_start(&h);
  harness_set_backlog_limits(&h, 8, 0);
  create_many(&h, "a", 150);
  ck_assert_uint_eq(duro_engine_in_flight(h.e), 150);
  ck_assert_uint_le(engine_entries(&h), 8);
  harness_run(&h);
  ck_assert_uint_eq(completed(&h), 150);
  create_many(&h, "b", 100);
  ck_assert_uint_le(engine_entries(&h), 8);
  harness_reopen(&h); /* recovery finds 100 queued rows */
  ck_assert_uint_le(engine_entries(&h), 8);
  ck_assert_uint_eq(duro_engine_in_flight(h.e), 100);
  harness_run(&h);
  ck_assert_uint_eq(completed(&h), 250);
  harness_close(&h);
}
END_TEST

/* engine.max_queued: creations are refused, overloaded, while that many
 * instances wait, and accepted again once they ran. */
START_TEST(max_queued_refuses_creations) {
  harness h;
  harness_open(&h);
  harness_register(&h, "wf", one_step);
  harness_start(&h);
  harness_set_backlog_limits(&h, 8, 50);
  create_many(&h, "a", 60); /* 0 queued when it came: taken whole */
  ck_assert_int_eq(duro_instance_create(h.e, "wf", "late", NULL, -1, NULL),
                   DURO_E_OVERLOADED);
  harness_run(&h);
  ck_assert_int_eq(duro_instance_create(h.e, "wf", "late", NULL, -1, NULL), 0);
  harness_run(&h);
  ck_assert_uint_eq(completed(&h), 61);
  harness_close(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("limits");
  TCase *tc = tcase_create("limits");
  tcase_add_test(tc, retention_deletes_after_exactly_its_time);
  tcase_add_test(tc, retention_spares_running_instances);
  tcase_add_test(tc, a_large_sweep_takes_bounded_steps_between_wakes);
  tcase_add_test(tc, state_limit_fails_the_step_that_crosses_it);
  tcase_add_test(tc, concurrency_limit_caps_running_activations);
  tcase_add_test(tc, plugin_threads_cap_blocked_callbacks);
  tcase_add_test(tc, step_limit_counts_sleeps);
  tcase_add_test(tc, backlog_costs_rows_not_memory);
  tcase_add_test(tc, max_queued_refuses_creations);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
