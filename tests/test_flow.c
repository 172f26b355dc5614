/* test_flow.c — flow control by key (host/flow/flow.c, the engine's
 * admission gate): a workflow's concurrency rules count running
 * activations per value of a params key, park the rest as queued without
 * a thread, hand a key's turn to its next waiter, leave other keys alone,
 * let a parked instance be terminated without its turn (the next one
 * gets it), and hold across an engine reopened.
 *
 * Real engine threads run the activations; each step blocks on a gate
 * the test opens, so "at most N at once" is read while they are held. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* Per key ("a", "b", "" for none): running now, the most at once. */
enum { KEYS = 4 };
static const char *const key_names[KEYS] = {"a", "b", "c", ""};
static int running[KEYS], most[KEYS], total_now, total_most, finished;
static int gate_open;

static void reset(void) {
  memset(running, 0, sizeof running);
  memset(most, 0, sizeof most);
  total_now = total_most = finished = gate_open = 0;
}

static int key_index(const char *k) {
  for (int i = 0; i < KEYS; i++)
    if (!strcmp(key_names[i], k))
      return i;
  return KEYS - 1;
}

/* Counts itself in while the gate is shut, then out. */
static int hold(duro_attempt *a, void *arg) {
  int k = key_index(arg);
  pthread_mutex_lock(&mu);
  running[k]++;
  total_now++;
  if (running[k] > most[k])
    most[k] = running[k];
  if (total_now > total_most)
    total_most = total_now;
  pthread_cond_broadcast(&cv);
  while (!gate_open)
    pthread_cond_wait(&cv, &mu);
  running[k]--;
  total_now--;
  finished++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc keyed(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *c = duro_json_string(ev->params, "/c");
  return duro_do(step, "hold", NULL, hold, (void *)(c ? c : ""), NULL);
}

/* Waits (at most 60 s) until pred() holds, under mu. */
static int wait_for(int (*pred)(void)) {
  return harness_wait_for(&mu, &cv, pred);
}

static int want_total;
static int total_reached(void) { return total_now == want_total; }
static int want_finished;
static int all_finished(void) { return finished == want_finished; }

static void open_gate(void) {
  pthread_mutex_lock(&mu);
  gate_open = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void create(harness *h, const char *wf, const char *id,
                   const char *key) {
  char params[64];
  if (key)
    snprintf(params, sizeof params, "{\"c\":\"%s\"}", key);
  else
    snprintf(params, sizeof params, "{}");
  ck_assert_int_eq(duro_instance_create(h->e, wf, id, params, -1, NULL), 0);
}

/* Waits (at most 60 s) for the instance to be `want`: its last commit
 * follows its callback's return. */
static int ends_as(harness *h, const char *wf, const char *id,
                   const char *want) {
  for (int i = 0; i < 12000; i++) {
    duro_status s;
    if (duro_instance_status(h->e, wf, id, &s) == 0 &&
        !strcmp(duro_status_name(s), want))
      return 1;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static const char *status_of(harness *h, const char *wf, const char *id) {
  duro_status s;
  ck_assert_int_eq(duro_instance_status(h->e, wf, id, &s), 0);
  return duro_status_name(s);
}

/* Registers "keyed" under rules[0..n) and starts the engine. */
static void start_keyed(harness *h, const duro_flow_concurrency *rules,
                        size_t n) {
  duro_workflow_limits lim = {.flow_concurrency = rules,
                              .n_flow_concurrency = n};
  ck_assert_int_eq(duro_engine_register(h->e, "keyed", NULL, keyed, &lim, NULL),
                   0);
  ck_assert_int_eq(duro_engine_start(h->e), 0);
}

START_TEST(a_key_runs_at_most_its_limit) {
  reset();
  harness h;
  harness_open_workers(&h, 8);
  const duro_flow_concurrency rules[] = {{.key = "/c", .limit = 2}};
  start_keyed(&h, rules, 1);
  char id[16];
  for (int i = 0; i < 6; i++) {
    snprintf(id, sizeof id, "a%d", i);
    create(&h, "keyed", id, "a");
    snprintf(id, sizeof id, "b%d", i);
    create(&h, "keyed", id, "b");
  }
  create(&h, "keyed", "free", NULL); /* no key: not limited by the rule */
  /* two of a, two of b and the free one hold the gate; eight threads
   * could run more, the rule keeps the rest queued */
  want_total = 5;
  ck_assert(wait_for(total_reached));
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(running[key_index("a")], 2);
  ck_assert_int_eq(running[key_index("b")], 2);
  ck_assert_int_eq(running[key_index("")], 1);
  pthread_mutex_unlock(&mu);
  int queued = 0;
  for (int i = 0; i < 6; i++) {
    snprintf(id, sizeof id, "a%d", i);
    queued += !strcmp(status_of(&h, "keyed", id), "queued");
  }
  ck_assert_int_eq(queued, 4);
  open_gate();
  want_finished = 13;
  ck_assert(wait_for(all_finished));
  ck_assert_int_eq(most[key_index("a")], 2);
  ck_assert_int_eq(most[key_index("b")], 2);
  harness_close(&h);
}
END_TEST

START_TEST(rules_combine_with_a_whole_workflow_cap) {
  reset();
  harness h;
  harness_open_workers(&h, 8);
  const duro_flow_concurrency rules[] = {{.key = "/c", .limit = 3},
                                         {.key = NULL, .limit = 4}};
  start_keyed(&h, rules, 2);
  char id[16];
  for (int i = 0; i < 12; i++) {
    snprintf(id, sizeof id, "i%d", i);
    create(&h, "keyed", id, key_names[i % 3]);
  }
  want_total = 4;
  ck_assert(wait_for(total_reached));
  open_gate();
  want_finished = 12;
  ck_assert(wait_for(all_finished));
  ck_assert_int_eq(total_most, 4);
  for (int k = 0; k < 3; k++)
    ck_assert_int_le(most[k], 3);
  harness_close(&h);
}
END_TEST

START_TEST(a_parked_instance_terminated_gives_up_its_turn) {
  reset();
  harness h;
  harness_open_workers(&h, 8);
  const duro_flow_concurrency rules[] = {{.key = "/c", .limit = 1}};
  start_keyed(&h, rules, 1);
  create(&h, "keyed", "t0", "a");
  want_total = 1;
  ck_assert(wait_for(total_reached));
  create(&h, "keyed", "t1", "a"); /* parked behind t0 */
  create(&h, "keyed", "t2", "a"); /* and behind t1 */
  /* parked, or still starting: either way it ends now, without waiting
   * for its key's turn (t0 still holds it) */
  ck_assert_int_eq(duro_instance_terminate(h.e, "keyed", "t1"), 0);
  ck_assert(ends_as(&h, "keyed", "t1", "terminated"));
  open_gate();
  want_finished = 2; /* t0, then t2: t1 never ran */
  ck_assert(wait_for(all_finished));
  ck_assert(ends_as(&h, "keyed", "t0", "complete"));
  ck_assert(ends_as(&h, "keyed", "t2", "complete"));
  ck_assert_int_eq(most[key_index("a")], 1);
  ck_assert_str_eq(status_of(&h, "keyed", "t1"), "terminated");
  harness_close(&h);
}
END_TEST

START_TEST(parked_instances_run_after_a_reopen) {
  reset();
  harness h;
  harness_open_workers(&h, 8);
  const duro_flow_concurrency rules[] = {{.key = "/c", .limit = 1}};
  start_keyed(&h, rules, 1);
  char id[16];
  for (int i = 0; i < 20; i++) {
    snprintf(id, sizeof id, "r%d", i);
    create(&h, "keyed", id, "a");
  }
  want_total = 1;
  ck_assert(wait_for(total_reached));
  /* the one running finishes as the engine closes; those parked then are
   * queued rows, run by the next engine */
  open_gate();
  duro_engine_close(h.e);
  duro_engine_options opt = {
      .db_path = h.db, .backend = harness_backend(), .workers = 8};
  char err[256];
  ck_assert_int_eq(duro_engine_open(&opt, &h.e, err, sizeof err), 0);
  start_keyed(&h, rules, 1);
  want_finished = 20;
  ck_assert(wait_for(all_finished));
  ck_assert_int_eq(most[key_index("a")], 1);
  for (int i = 0; i < 20; i++) {
    snprintf(id, sizeof id, "r%d", i);
    ck_assert_msg(ends_as(&h, "keyed", id, "complete"), "%s: %s", id,
                  status_of(&h, "keyed", id));
  }
  harness_close(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("flow");
  TCase *tc = tcase_create("concurrency");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, a_key_runs_at_most_its_limit);
  tcase_add_test(tc, rules_combine_with_a_whole_workflow_cap);
  tcase_add_test(tc, a_parked_instance_terminated_gives_up_its_turn);
  tcase_add_test(tc, parked_instances_run_after_a_reopen);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
