/* test_flow_order.c — the order a flow key's backlog is served in
 * (host/flow/backlog.c) and an engine that follows it (flow.priority,
 * flow.fairness):
 *
 *   backlog        highest priority first, first come first served among
 *                  equals; one lane per fairness value served in turn, a
 *                  newcomer's lane after those waiting this round; weights
 *                  as turns a round; a waiter removed from the middle, the
 *                  last of the lane whose turn it is; a key with 100,000
 *                  waiting delays a newcomer's lane by one turn;
 *   engine         a workflow capped at one running instance, its
 *                  instances parked one by one in a known order, then let
 *                  through one at a time: they start in priority order
 *                  within a tenant and round the tenants (weights as
 *                  turns); a parked instance terminated is skipped; what
 *                  holds a waiter names its priority and its lane.
 *
 * The engine cases run real engine threads; each step blocks until the
 * test lets the next one through, so the start order is exact. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backlog.h"
#include "flow.h"
#include "harness.h"

/* ---- the backlog alone ---- */

typedef struct item {
  backlog_waiter link;
  const char *name;
} item;

/* Takes every waiter, their names joined by spaces into out. */
static void drain(backlog *b, char *out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  backlog_waiter *w;
  while ((w = backlog_take(b)))
    used += (size_t)snprintf(out + used, len - used, "%s%s", used ? " " : "",
                             ((item *)w)->name);
}

START_TEST(priority_then_first_come) {
  backlog b = {0};
  item v[] = {{.name = "p0a"}, {.name = "p5a"}, {.name = "p0b"},
              {.name = "p5b"}, {.name = "n3"},  {.name = "p9"}};
  int64_t prio[] = {0, 5, 0, 5, -3, 9};
  for (int i = 0; i < 6; i++)
    backlog_push(&b, &v[i].link, "", 1, prio[i]);
  ck_assert_uint_eq(b.n, 6);
  ck_assert_str_eq(((item *)backlog_next(&b))->name, "p9");
  char order[200];
  drain(&b, order, sizeof order);
  ck_assert_str_eq(order, "p9 p5a p5b p0a p0b n3");
  ck_assert_uint_eq(b.n, 0);
  ck_assert_ptr_null(backlog_next(&b));
  backlog_clear(&b, NULL, NULL);
}
END_TEST

START_TEST(lanes_take_turns) {
  backlog b = {0};
  item a[5], c[2];
  char names[7][8];
  for (int i = 0; i < 5; i++) {
    snprintf(names[i], 8, "a%d", i + 1);
    a[i] = (item){.name = names[i]};
    backlog_push(&b, &a[i].link, "\"A\"", 1, 0);
  }
  for (int i = 0; i < 2; i++) {
    snprintf(names[5 + i], 8, "b%d", i + 1);
    c[i] = (item){.name = names[5 + i]};
    backlog_push(&b, &c[i].link, "\"B\"", 1, 0);
  }
  char order[200];
  drain(&b, order, sizeof order);
  ck_assert_str_eq(order, "a1 b1 a2 b2 a3 a4 a5");
  backlog_clear(&b, NULL, NULL);
}
END_TEST

START_TEST(weights_are_turns_a_round) {
  backlog b = {0};
  item v[8];
  const char *names[8] = {"a1", "a2", "a3", "a4", "a5", "b1", "b2", "b3"};
  for (int i = 0; i < 8; i++) {
    v[i] = (item){.name = names[i]};
    backlog_push(&b, &v[i].link, i < 5 ? "A" : "B", i < 5 ? 3 : 1, 0);
  }
  char order[200];
  drain(&b, order, sizeof order);
  ck_assert_str_eq(order, "a1 a2 a3 b1 a4 a5 b2 b3");
  backlog_clear(&b, NULL, NULL);
}
END_TEST

START_TEST(priority_within_a_lane) {
  backlog b = {0};
  item v[] = {{.name = "a-low"},
              {.name = "b-low"},
              {.name = "a-high"},
              {.name = "b-high"}};
  backlog_push(&b, &v[0].link, "A", 1, 0);
  backlog_push(&b, &v[1].link, "B", 1, 0);
  backlog_push(&b, &v[2].link, "A", 1, 7);
  backlog_push(&b, &v[3].link, "B", 1, 7);
  char order[200];
  drain(&b, order, sizeof order);
  ck_assert_str_eq(order, "a-high b-high a-low b-low");
  backlog_clear(&b, NULL, NULL);
}
END_TEST

START_TEST(removed_waiters_give_up_their_place) {
  backlog b = {0};
  item v[] = {{.name = "a1"},
              {.name = "a2"},
              {.name = "b1"},
              {.name = "c1"},
              {.name = "a3"}};
  const char *lane[] = {"A", "A", "B", "C", "A"};
  for (int i = 0; i < 5; i++)
    backlog_push(&b, &v[i].link, lane[i], 1, 0);
  backlog_remove(&b, &v[1].link); /* the middle of A */
  ck_assert_uint_eq(b.n, 4);
  ck_assert_str_eq(((item *)backlog_take(&b))->name, "a1");
  /* B's turn now: its only waiter leaves, so the turn is C's */
  ck_assert_str_eq(((item *)backlog_next(&b))->name, "b1");
  backlog_remove(&b, &v[2].link);
  ck_assert_str_eq(((item *)backlog_next(&b))->name, "c1");
  backlog_remove(&b, &v[2].link); /* twice: nothing */
  char order[200];
  drain(&b, order, sizeof order);
  ck_assert_str_eq(order, "c1 a3");
  backlog_clear(&b, NULL, NULL);
}
END_TEST

START_TEST(a_long_backlog_delays_a_newcomer_one_turn) {
  enum { MANY = 100000 };
  backlog b = {0};
  item *v = calloc(MANY, sizeof *v);
  for (int i = 0; i < MANY; i++) {
    v[i].name = "a";
    backlog_push(&b, &v[i].link, "\"A\"", 1, 0);
  }
  for (int i = 0; i < 10; i++) /* A keeps being served meanwhile */
    backlog_take(&b);
  item newcomer = {.name = "b"};
  backlog_push(&b, &newcomer.link, "\"B\"", 1, 0);
  ck_assert_str_eq(((item *)backlog_take(&b))->name, "a");
  ck_assert_str_eq(((item *)backlog_take(&b))->name, "b");
  ck_assert_uint_eq(b.n, MANY - 11);
  backlog_clear(&b, NULL, NULL);
  ck_assert_uint_eq(b.n, 0);
  ck_assert_ptr_null(backlog_next(&b));
  free(v);
}
END_TEST

/* ---- an engine following it ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char started[64][16]; /* the instances' names, in start order */
static int n_started, let_through;

/* Records its instance's name, then waits for its turn to finish. */
static int hold(duro_attempt *a, void *arg) {
  pthread_mutex_lock(&mu);
  int me = n_started++;
  snprintf(started[me], sizeof started[me], "%s", (const char *)arg);
  pthread_cond_broadcast(&cv);
  while (let_through <= me)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc ordered(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *name = duro_json_string(ev->params, "/name");
  return duro_do(step, "hold", NULL, hold, (void *)name, NULL);
}

static int want_started;
static int started_reached(void) { return n_started >= want_started; }

/* Waits (at most 60 s) until pred() holds, under mu. */
static int wait_for(int (*pred)(void)) {
  return harness_wait_for(&mu, &cv, pred);
}

static uint64_t waiting_now(harness *h) {
  duro_flow_stats st;
  ck_assert_int_eq(duro_flow_stats_read(h->e, "ordered", 0, &st), 0);
  uint64_t n = st.n ? st.v[0].waiting : 0;
  duro_flow_stats_free(&st);
  return n;
}

/* Creates instance `name` of tenant `tenant` and priority `prio`, and
 * waits until it is parked (the n-th waiting), so that the backlog's
 * arrival order is the creation order. */
static void create_parked(harness *h, const char *name, const char *tenant,
                          int prio, uint64_t n) {
  char params[160];
  snprintf(params, sizeof params,
           "{\"name\":\"%s\",\"tenant\":\"%s\",\"p\":%d}", name, tenant, prio);
  ck_assert_int_eq(
      duro_instance_create(h->e, "ordered", name, params, -1, NULL), 0);
  for (int i = 0; i < 12000 && waiting_now(h) < n; i++) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  ck_assert_uint_eq(waiting_now(h), n);
}

static void start_ordered(harness *h, const duro_flow_weight *weights,
                          size_t n_weights) {
  static const duro_flow_concurrency one[] = {{.key = NULL, .limit = 1}};
  duro_workflow_limits lim = {.flow_concurrency = one,
                              .n_flow_concurrency = 1,
                              .flow_order = {.priority_key = "/p",
                                             .priority_default = 0,
                                             .fairness_key = "/tenant",
                                             .weights = weights,
                                             .n_weights = n_weights}};
  ck_assert_int_eq(
      duro_engine_register(h->e, "ordered", NULL, ordered, &lim, NULL), 0);
  ck_assert_int_eq(duro_engine_start(h->e), 0);
}

/* Lets the instances through one at a time, each start awaited, and
 * returns their names joined in start order (static). */
static const char *let_all_through(int n) {
  static char order[64 * 17];
  for (int i = 1; i < n; i++) {
    pthread_mutex_lock(&mu);
    let_through = i;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    want_started = i + 1;
    ck_assert_msg(wait_for(started_reached), "%d of %d started", n_started, n);
  }
  pthread_mutex_lock(&mu);
  let_through = n;
  pthread_cond_broadcast(&cv);
  size_t used = 0;
  order[0] = '\0';
  for (int i = 0; i < n_started; i++)
    used += (size_t)snprintf(order + used, sizeof order - used, "%s%s",
                             i ? " " : "", started[i]);
  pthread_mutex_unlock(&mu);
  return order;
}

static void reset(void) {
  n_started = let_through = want_started = 0;
  memset(started, 0, sizeof started);
}

START_TEST(engine_serves_priority_within_tenants_round_the_tenants) {
  reset();
  harness h;
  harness_open_workers(&h, 8);
  start_ordered(&h, NULL, 0);
  create_parked(&h, "first", "A", 0, 0); /* runs, holding the one slot */
  want_started = 1;
  ck_assert(wait_for(started_reached));
  create_parked(&h, "a1", "A", 0, 1);
  create_parked(&h, "a2", "A", 0, 2);
  create_parked(&h, "a3", "A", 0, 3);
  create_parked(&h, "a-urgent", "A", 9, 4);
  create_parked(&h, "b1", "B", 0, 5);
  create_parked(&h, "c1", "C", 0, 6);
  create_parked(&h, "b-urgent", "B", 5, 7);
  char *why = duro_flow_why(h.e, "ordered", "b-urgent");
  ck_assert_ptr_nonnull(why);
  ck_assert_str_eq(why, "flow: concurrency (the workflow) (1 of 1 running; 7 "
                        "waiting; priority 5; turns by /tenant=\"B\")");
  free(why);
  const char *order = let_all_through(8);
  ck_assert_str_eq(order, "first a-urgent b-urgent c1 a1 b1 a2 a3");
  harness_close(&h);
}
END_TEST

START_TEST(engine_weights_and_a_terminated_waiter) {
  reset();
  harness h;
  harness_open_workers(&h, 8);
  const duro_flow_weight weights[] = {{.value = "gold", .weight = 2}};
  start_ordered(&h, weights, 1);
  create_parked(&h, "first", "x", 0, 0);
  want_started = 1;
  ck_assert(wait_for(started_reached));
  create_parked(&h, "g1", "gold", 0, 1);
  create_parked(&h, "g2", "gold", 0, 2);
  create_parked(&h, "g3", "gold", 0, 3);
  create_parked(&h, "g4", "gold", 0, 4);
  create_parked(&h, "s1", "silver", 0, 5);
  create_parked(&h, "s2", "silver", 0, 6);
  ck_assert_int_eq(duro_instance_terminate(h.e, "ordered", "g2"), 0);
  for (int i = 0; i < 12000 && waiting_now(&h) != 5; i++) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  ck_assert_uint_eq(waiting_now(&h), 5);
  const char *order = let_all_through(6);
  ck_assert_str_eq(order, "first g1 g3 s1 g4 s2");
  harness_close(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("flow_order");
  TCase *tc = tcase_create("backlog");
  tcase_add_test(tc, priority_then_first_come);
  tcase_add_test(tc, lanes_take_turns);
  tcase_add_test(tc, weights_are_turns_a_round);
  tcase_add_test(tc, priority_within_a_lane);
  tcase_add_test(tc, removed_waiters_give_up_their_place);
  tcase_add_test(tc, a_long_backlog_delays_a_newcomer_one_turn);
  suite_add_tcase(s, tc);
  tc = tcase_create("engine");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, engine_serves_priority_within_tenants_round_the_tenants);
  tcase_add_test(tc, engine_weights_and_a_terminated_waiter);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
