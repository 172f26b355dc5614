/* test_resources.c — shared resources at step level (host/resources/, the
 * driver the steps naming a resource claim): two workflows sharing one
 * resource of concurrency 2 never have a third callback inside at once,
 * the others' instances waiting (wait_type "resource", holding no
 * thread: four engine threads serve fifty instances) until each is woken
 * for its turn, and all complete; describe says why one waits and
 * /metrics counts them; a duro_do_all whose branches name it waits as
 * a step does; a rate spaces the attempts' starts on the
 * virtual clock, first come first served; a resource the host does not
 * declare fails the step for good, its callback never run; a plugin
 * built against an older minor (a duro_step_config without `resource`)
 * is never read past its struct; a waiting instance terminated leaves
 * the line; a restart holds nothing, its waiters woken at its start. */
#include <check.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "harness.h"
#include "resources.h"
#include "suite_run.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int inside, most, finished, gate_open, calls;

static void reset(void) {
  pthread_mutex_lock(&mu);
  inside = most = finished = gate_open = calls = 0;
  pthread_mutex_unlock(&mu);
}

/* Counts itself in, waits for the gate, counts itself out. */
static int pay(duro_attempt *a, void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  calls++;
  if (++inside > most)
    most = inside;
  pthread_cond_broadcast(&cv);
  while (!gate_open)
    pthread_cond_wait(&cv, &mu);
  inside--;
  finished++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "1");
}

static const duro_step_config payments = {.resource = "payments"};

static duro_rc charge(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "charge", &payments, pay, NULL, NULL));
  return duro_set_output(step, "1");
}

static duro_rc refund(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "refund", &payments, pay, NULL, NULL));
  return duro_set_output(step, "1");
}

static void open_gate(void) {
  pthread_mutex_lock(&mu);
  gate_open = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static int want;
static int inside_reached(void) { return inside == want; }
static int finished_reached(void) { return finished == want; }

/* How many of the instances <prefix>0..n-1 of wf are `status`. */
static int count_status(harness *h, const char *wf, const char *prefix, int n,
                        const char *status) {
  int k = 0;
  char id[32];
  for (int i = 0; i < n; i++) {
    snprintf(id, sizeof id, "%s%d", prefix, i);
    duro_status s;
    if (duro_instance_status(h->e, wf, id, &s) == 0 &&
        !strcmp(duro_status_name(s), status))
      k++;
  }
  return k;
}

/* Waits (at most 60 s) until `want_n` of both workflows' instances are
 * waiting: their last commits follow the claims that turned them away. */
static int all_waiting(harness *h, int per_wf, int want_n) {
  for (int i = 0; i < 12000; i++) {
    if (count_status(h, "charge", "c", per_wf, "waiting") +
            count_status(h, "refund", "r", per_wf, "waiting") ==
        want_n)
      return 1;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

START_TEST(concurrency_holds_across_workflows) {
  reset();
  harness h;
  harness_open_workers_virtual(&h, 4);
  duro_resource_options o = {.concurrency = 2};
  harness_register_resource(&h, "payments", &o);
  harness_register(&h, "charge", charge);
  harness_register(&h, "refund", refund);
  harness_start(&h);
  enum { PER_WF = 25 };
  char id[32];
  for (int i = 0; i < PER_WF; i++) {
    snprintf(id, sizeof id, "c%d", i);
    harness_create(&h, "charge", id, NULL, 0);
    snprintf(id, sizeof id, "r%d", i);
    harness_create(&h, "refund", id, NULL, 0);
  }
  /* two inside, held by the gate; the 48 others wait, their threads
   * free (four threads could not hold 48 instances) */
  want = 2;
  ck_assert(harness_wait_for(&mu, &cv, inside_reached));
  ck_assert(all_waiting(&h, PER_WF, 2 * PER_WF - 2));
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(most, 2);
  ck_assert_int_eq(calls, 2);
  pthread_mutex_unlock(&mu);
  duro_resource_stat st;
  ck_assert_int_eq(duro_resource_stat_read(h.e, "payments", &st), 0);
  ck_assert_uint_eq(st.running, 2);
  ck_assert_uint_eq(st.waiting, 2 * PER_WF - 2);

  /* one of them, as describe shows it */
  const char *waiting_id = NULL, *waiting_wf = NULL;
  for (int i = 0; i < PER_WF && !waiting_id; i++) {
    static char buf[32];
    snprintf(buf, sizeof buf, "r%d", i);
    if (!strcmp(harness_status(&h, "refund", buf), "waiting"))
      waiting_id = buf, waiting_wf = "refund";
  }
  ck_assert_ptr_nonnull(waiting_id);
  json_t *d = harness_describe(&h, waiting_wf, waiting_id);
  ck_assert_str_eq(json_string_value(json_object_get(d, "wait_type")),
                   "resource");
  const char *why = json_string_value(json_object_get(d, "waiting_for"));
  ck_assert_ptr_nonnull(why);
  ck_assert_str_eq(why, "resource payments (2 of 2 running; 48 waiting)");
  json_decref(d);

  char *text = duro_engine_metrics(h.e);
  ck_assert_ptr_nonnull(
      strstr(text, "duro_resource_running{resource=\"payments\"} 2\n"));
  ck_assert_ptr_nonnull(
      strstr(text, "duro_resource_waiting{resource=\"payments\"} 48\n"));
  free(text);

  /* the gate open: each end hands its slot to the line's head, woken
   * alone; the virtual clock never moves, so no recheck helps */
  open_gate();
  want = 2 * PER_WF;
  ck_assert(harness_wait_for(&mu, &cv, finished_reached));
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(most, 2);
  ck_assert_int_eq(calls, 2 * PER_WF);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < 12000; i++) {
    if (count_status(&h, "charge", "c", PER_WF, "complete") +
            count_status(&h, "refund", "r", PER_WF, "complete") ==
        2 * PER_WF)
      break;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  ck_assert_int_eq(count_status(&h, "charge", "c", PER_WF, "complete"), PER_WF);
  ck_assert_int_eq(count_status(&h, "refund", "r", PER_WF, "complete"), PER_WF);
  ck_assert_int_eq(duro_resource_stat_read(h.e, "payments", &st), 0);
  ck_assert_uint_eq(st.running, 0);
  ck_assert_uint_eq(st.waiting, 0);
  ck_assert_uint_eq(st.promised, 0);
  harness_close(&h);
}
END_TEST

/* A duro_do_all whose branches name the resource: while another
 * instance holds its only slot the call waits (the instance waiting for
 * the resource), and once woken its branches run one at a time. */
static duro_rc fan(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  duro_branch b[3] = {{.fn = pay, .cfg = &payments},
                      {.fn = pay, .cfg = &payments},
                      {.fn = pay, .cfg = &payments}};
  DURO_TRY(duro_do_all(step, "fan", b, 3, 0, 0));
  return duro_set_output(step, "1");
}

START_TEST(a_do_all_waits_for_its_branches_resource) {
  reset();
  harness h;
  harness_open_workers_virtual(&h, 2);
  duro_resource_options o = {.concurrency = 1};
  harness_register_resource(&h, "payments", &o);
  harness_register(&h, "charge", charge);
  harness_register(&h, "fan", fan);
  harness_start(&h);
  harness_create(&h, "charge", "holder", NULL, 0);
  want = 1;
  ck_assert(harness_wait_for(&mu, &cv, inside_reached));
  harness_create(&h, "fan", "f", NULL, 0);
  int waited = 0;
  for (int i = 0; i < 12000 && !waited; i++) {
    waited = !strcmp(harness_status(&h, "fan", "f"), "waiting");
    struct timespec ts = {0, 5 * 1000 * 1000};
    if (!waited)
      nanosleep(&ts, NULL);
  }
  ck_assert(waited);
  json_t *d = harness_describe(&h, "fan", "f");
  ck_assert_str_eq(json_string_value(json_object_get(d, "wait_type")),
                   "resource");
  json_decref(d);
  open_gate();
  want = 4;
  ck_assert(harness_wait_for(&mu, &cv, finished_reached));
  for (int i = 0; i < 12000; i++) {
    if (!strcmp(harness_status(&h, "fan", "f"), "complete"))
      break;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  ck_assert_str_eq(harness_status(&h, "fan", "f"), "complete");
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(most, 1);
  ck_assert_int_eq(calls, 4);
  pthread_mutex_unlock(&mu);
  harness_close(&h);
}
END_TEST

/* ---- a rate, on the virtual clock (workers: 0) ---- */

static harness vh;
static char started[16][16];
static int64_t started_at[16];
static int n_started;

static int note_start(duro_attempt *a, void *arg) {
  if (n_started < 16) {
    snprintf(started[n_started], sizeof started[0], "%s", (const char *)arg);
    started_at[n_started] = duro_clock_now(&vh.clock);
  }
  n_started++;
  return duro_attempt_result(a, "1");
}

static const duro_step_config api = {.resource = "api"};

static duro_rc call_api(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  DURO_TRY(
      duro_do(step, "call", &api, note_start, (void *)ev->instance_id, NULL));
  return duro_set_output(step, "1");
}

static void open_rated(uint32_t limit, int64_t period_ms, uint32_t burst) {
  n_started = 0;
  harness_open(&vh);
  duro_resource_options o = {
      .rate_limit = limit, .rate_period_ms = period_ms, .rate_burst = burst};
  harness_register_resource(&vh, "api", &o);
  harness_register(&vh, "call", call_api);
  harness_register(&vh, "call2", call_api);
}

START_TEST(a_rate_spaces_the_starts_in_order) {
  /* two a second: one each 500 ms, whichever workflow */
  open_rated(2, 1000, 0);
  harness_start(&vh);
  char id[16];
  for (int i = 0; i < 6; i++) {
    snprintf(id, sizeof id, "i%d", i);
    harness_create(&vh, i % 2 ? "call2" : "call", id, NULL, 0);
  }
  harness_run(&vh);
  ck_assert_int_eq(n_started, 1);
  ck_assert_str_eq(harness_status(&vh, "call2", "i1"), "waiting");
  json_t *d = harness_describe(&vh, "call2", "i1");
  ck_assert_str_eq(json_string_value(json_object_get(d, "wait_type")),
                   "resource");
  ck_assert_str_eq(json_string_value(json_object_get(d, "waiting_for")),
                   "resource api (rate 2 a 1000 ms; 5 waiting)");
  json_decref(d);
  harness_advance(&vh, 499);
  ck_assert_int_eq(n_started, 1);
  harness_advance(&vh, 1);
  ck_assert_int_eq(n_started, 2);
  for (int t = 0; t < 40; t++)
    harness_advance(&vh, 100);
  ck_assert_int_eq(n_started, 6);
  for (int i = 0; i < 6; i++) {
    snprintf(id, sizeof id, "i%d", i);
    ck_assert_str_eq(started[i], id); /* first come first served */
    ck_assert_int_eq(started_at[i] - T0_MS, 500 * i);
    ck_assert_str_eq(harness_status(&vh, i % 2 ? "call2" : "call", id),
                     "complete");
  }
  harness_close(&vh);
}
END_TEST

START_TEST(a_burst_starts_at_once_then_the_rate) {
  open_rated(2, 1000, 3);
  harness_start(&vh);
  char id[16];
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "i%d", i);
    harness_create(&vh, "call", id, NULL, 0);
  }
  harness_run(&vh);
  ck_assert_int_eq(n_started, 3);
  harness_advance(&vh, 499);
  ck_assert_int_eq(n_started, 3);
  harness_advance(&vh, 1);
  ck_assert_int_eq(n_started, 4);
  harness_advance(&vh, 500);
  ck_assert_int_eq(n_started, 5);
  /* never more than the limit a period past the burst: starts 3.. are
   * 500 ms apart */
  ck_assert_int_eq(started_at[4] - started_at[3], 500);
  harness_close(&vh);
}
END_TEST

START_TEST(a_terminated_waiter_leaves_the_line) {
  open_rated(1, 1000, 0);
  harness_start(&vh);
  harness_create(&vh, "call", "a", NULL, 0);
  harness_create(&vh, "call", "b", NULL, 0);
  harness_create(&vh, "call", "c", NULL, 0);
  harness_run(&vh);
  ck_assert_int_eq(n_started, 1);
  ck_assert_int_eq(duro_instance_terminate(vh.e, "call", "b"), 0);
  harness_run(&vh);
  ck_assert_str_eq(harness_status(&vh, "call", "b"), "terminated");
  duro_resource_stat st;
  ck_assert_int_eq(duro_resource_stat_read(vh.e, "api", &st), 0);
  ck_assert_uint_eq(st.waiting, 1);
  /* c's turn comes where b's would have */
  harness_advance(&vh, 1000);
  ck_assert_int_eq(n_started, 2);
  ck_assert_str_eq(started[1], "c");
  ck_assert_int_eq(started_at[1] - T0_MS, 1000);
  harness_close(&vh);
}
END_TEST

/* Nothing is held across a restart: the attempts that held slots or
 * starts ended with the engine.  The instance waiting for the rate's next
 * start (an hour away) runs at the new engine's start, woken by it, the
 * clock not moved. */
START_TEST(a_restart_holds_nothing) {
  open_rated(1, 3600 * 1000, 0);
  harness_start(&vh);
  harness_create(&vh, "call", "a", NULL, 0);
  harness_create(&vh, "call", "b", NULL, 0);
  harness_run(&vh);
  ck_assert_int_eq(n_started, 1);
  ck_assert_str_eq(harness_status(&vh, "call", "b"), "waiting");
  harness_reopen(&vh);
  harness_run(&vh);
  ck_assert_int_eq(n_started, 2);
  ck_assert_str_eq(started[1], "b");
  ck_assert_int_eq(started_at[1], T0_MS);
  ck_assert_str_eq(harness_status(&vh, "call", "b"), "complete");
  harness_close(&vh);
}
END_TEST

/* ---- a resource nobody declared ---- */

static int never(duro_attempt *a, void *arg) {
  (void)arg;
  calls++;
  return duro_attempt_result(a, "1");
}

static const duro_step_config nosuch = {.resource = "nosuch"};

static duro_rc unknown(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "lookup", &nosuch, never, NULL, NULL));
  return duro_set_output(step, "1");
}

START_TEST(an_unknown_resource_fails_the_step) {
  reset();
  harness h;
  harness_open(&h);
  duro_resource_options o = {.concurrency = 1};
  harness_register_resource(&h, "payments", &o);
  harness_register(&h, "unknown", unknown);
  harness_start(&h);
  harness_create(&h, "unknown", "u", NULL, 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "unknown", "u"), "errored");
  ck_assert_int_eq(calls, 0);
  json_t *d = harness_describe(&h, "unknown", "u");
  json_t *s = harness_step(d, "lookup#1");
  ck_assert_ptr_nonnull(s);
  ck_assert_str_eq(json_string_value(json_object_get(s, "status")), "errored");
  json_t *err = json_object_get(s, "error");
  ck_assert_str_eq(json_string_value(json_object_get(err, "name")),
                   DURO_ERR_RESOURCE_UNKNOWN);
  const char *msg = json_string_value(json_object_get(err, "message"));
  ck_assert_ptr_nonnull(strstr(msg, "\"nosuch\""));
  ck_assert_ptr_nonnull(strstr(msg, "\"lookup#1\""));
  /* not retried: one attempt, failed for good */
  ck_assert_uint_eq(json_array_size(json_object_get(s, "attempts")), 1);
  json_decref(d);
  harness_close(&h);
}
END_TEST

/* ---- a plugin of an older minor ---- */

/* duro_step_config as minor 10 laid it out: no `resource`. */
typedef struct older_step_config {
  const duro_retries *retries;
  const char *timeout;
} older_step_config;

static duro_rc older(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  /* exactly its bytes on the heap: a read past them is caught */
  older_step_config *cfg = malloc(sizeof *cfg);
  *cfg = (older_step_config){.timeout = "1 minute"};
  duro_rc rc = duro_do(step, "old", (const duro_step_config *)(void *)cfg,
                       never, NULL, NULL);
  free(cfg);
  DURO_TRY(rc);
  return duro_set_output(step, "1");
}

/* A whole struct whose `resource` holds what an older plugin would have
 * there: not read, so the step runs as before. */
static const duro_step_config stray = {.resource = "nosuch"};

static duro_rc older_stray(duro_step *step, const duro_event *ev,
                           duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "old", &stray, never, NULL, NULL));
  return duro_set_output(step, "1");
}

START_TEST(an_older_plugin_is_not_read_past_its_config) {
  reset();
  harness h;
  harness_open(&h);
  harness_register(&h, "older", older);
  harness_register(&h, "stray", older_stray);
  uint16_t size = (uint16_t)offsetof(duro_step_config, resource);
  ck_assert_int_eq(
      duro_engine_build_set_step_config_size(h.e, "older", "test", size), 0);
  ck_assert_int_eq(
      duro_engine_build_set_step_config_size(h.e, "stray", "test", size), 0);
  harness_start(&h);
  harness_create(&h, "older", "o", NULL, 0);
  harness_create(&h, "stray", "s", NULL, 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "older", "o"), "complete");
  ck_assert_str_eq(harness_status(&h, "stray", "s"), "complete");
  ck_assert_int_eq(calls, 2);
  harness_close(&h);
}
END_TEST

static Suite *resources_suite(void) {
  Suite *s = suite_create("resources");
  TCase *c = tcase_create("concurrency");
  tcase_add_test(c, concurrency_holds_across_workflows);
  tcase_add_test(c, a_do_all_waits_for_its_branches_resource);
  suite_add_tcase(s, c);
  c = tcase_create("rate");
  tcase_add_test(c, a_rate_spaces_the_starts_in_order);
  tcase_add_test(c, a_burst_starts_at_once_then_the_rate);
  tcase_add_test(c, a_terminated_waiter_leaves_the_line);
  tcase_add_test(c, a_restart_holds_nothing);
  suite_add_tcase(s, c);
  c = tcase_create("config");
  tcase_add_test(c, an_unknown_resource_fails_the_step);
  tcase_add_test(c, an_older_plugin_is_not_read_past_its_config);
  suite_add_tcase(s, c);
  return s;
}

int main(void) { return suite_run(resources_suite()); }
