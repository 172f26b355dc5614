/* test_resources_hosts.c — a shared resource's concurrency and rate exact
 * across the hosts of one PostgreSQL database (host/resources/resources.c:
 * the store's slots of journal_slots_pass, and its rates of
 * journal_rates_take, under a key of the resource's own), on a throwaway
 * cluster (pg_fixture.h), each case a database of its own:
 *
 *   two_hosts_share_a_resource  two engines of this process joined as
 *                           hosts, "payments" of concurrency 2 on both:
 *                           24 instances created on both, each step held
 *                           until the test lets it through: never more
 *                           than 2 inside on the two together (read in the
 *                           step, which both share), both hosts ran some,
 *                           all complete;
 *   a_closed_host_gives_back  one host holds the one slot with a running
 *                           step; the other's instance waits (wait_type
 *                           resource); the first host closes (its session
 *                           with it): the second's instance runs;
 *   two_hosts_share_a_rate  "payments" of rate 10 a second (burst 1) on
 *                           both: 40 instances created on both start no
 *                           sooner than 3.9 s after the creates on the
 *                           engine's clock (counted per host they would
 *                           take half that), both hosts ran their 20, all
 *                           complete;
 *   a_rate_with_slots_across_hosts  "payments" of concurrency 1 and rate
 *                           10 a second on both: 20 instances created on
 *                           both never run two at once and start no sooner
 *                           than 1.9 s after the creates, all complete.
 *
 * Real engine threads run the activations; time is the real clock (the
 * hosts' leases, the slots' retries and the rate's spacing are wall time,
 * in milliseconds). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "core.h"
#include "engine.h"
#include "error.h"
#include "harness.h"
#include "pg_fixture.h"
#include "resources.h"

static pg_fixture pg = {.suite = "test_resources_hosts"};
static void cluster_start(void) {
  duro_api_ptr_ = duro_host_api();
  pg_fixture_up(&pg);
}
static void cluster_stop(void) { pg_fixture_down(&pg); }

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
/* inside now and the most at once; which host ran how many; how many the
 * test lets finish; the engine whose clock times the starts (none: not
 * timed), the last start's time on it, and how long a step stays inside
 * once let through */
static int inside, most, ran[2], finished, let_through;
static duro_engine *clock_of;
static int64_t last_start;
static useconds_t dwell_us;

static int hold(duro_attempt *a, void *arg) {
  int host = *(const int *)arg;
  pthread_mutex_lock(&mu);
  ran[host]++;
  if (++inside > most)
    most = inside;
  if (clock_of && engine_now(clock_of) > last_start)
    last_start = engine_now(clock_of);
  pthread_cond_broadcast(&cv);
  while (finished >= let_through)
    pthread_cond_wait(&cv, &mu);
  if (dwell_us) {
    pthread_mutex_unlock(&mu);
    usleep(dwell_us);
    pthread_mutex_lock(&mu);
  }
  finished++;
  inside--;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static const int host_one = 0, host_two = 1;
static const duro_step_config payments = {.resource = "payments"};

static duro_rc pay_on_one(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev, (void)env;
  return duro_do(step, "pay", &payments, hold, (void *)&host_one, NULL);
}

static duro_rc pay_on_two(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev, (void)env;
  return duro_do(step, "pay", &payments, hold, (void *)&host_two, NULL);
}

static void reset(void) {
  inside = most = finished = let_through = 0;
  memset(ran, 0, sizeof ran);
  clock_of = NULL;
  last_start = 0;
  dwell_us = 0;
}

/* An engine joined as a host of `conninfo`, "payments" of `o` declared
 * and "pay" registered (its run() saying which host), started. */
static duro_engine *host_open(const char *conninfo,
                              const duro_resource_options *o, duro_run_fn run) {
  duro_engine_options opt = {.db_path = conninfo,
                             .backend = &store_pg,
                             .workers = 8,
                             .join_store = 1,
                             .lease_ms = 2000};
  duro_engine *e;
  char err[512];
  ck_assert_msg(duro_engine_open(&opt, &e, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(duro_resource_register(e, "payments", o), 0);
  ck_assert_int_eq(duro_engine_register(e, "pay", NULL, run, NULL, NULL), 0);
  ck_assert_int_eq(duro_engine_start(e), 0);
  return e;
}

static void create(duro_engine *e, const char *id) {
  ck_assert_int_eq(duro_instance_create(e, "pay", id, "{}", -1, NULL), 0);
}

static int wait_for(int (*pred)(void)) {
  return harness_wait_for(&mu, &cv, pred);
}

static void let(int n) {
  pthread_mutex_lock(&mu);
  let_through = n;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static int want_inside;
static int inside_reached(void) { return inside == want_inside; }
static int want_finished;
static int finished_reached(void) { return finished == want_finished; }

static const char *status_of(duro_engine *e, const char *id) {
  duro_status s;
  if (duro_instance_status(e, "pay", id, &s) != 0)
    return "?";
  return duro_status_name(s);
}

static int ends_as(duro_engine *e, const char *id, const char *want) {
  for (int i = 0; i < 6000; i++) {
    if (!strcmp(status_of(e, id), want))
      return 1;
    usleep(10000);
  }
  return 0;
}

START_TEST(two_hosts_share_a_resource) {
  reset();
  char conninfo[512];
  pg_fixture_database(&pg, "share", conninfo, sizeof conninfo);
  const duro_resource_options two = {.concurrency = 2};
  duro_engine *h1 = host_open(conninfo, &two, pay_on_one),
              *h2 = host_open(conninfo, &two, pay_on_two);
  char id[16];
  for (int i = 0; i < 12; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    create(h1, id);
    snprintf(id, sizeof id, "two-%d", i);
    create(h2, id);
  }
  want_inside = 2;
  ck_assert(wait_for(inside_reached));
  /* a while for any third to start, were the bound per host */
  usleep(300 * 1000);
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(inside, 2);
  pthread_mutex_unlock(&mu);
  /* one at a time through: each end lets the next of either host in */
  for (int n = 1; n <= 24; n++) {
    let(n);
    want_finished = n;
    ck_assert_msg(wait_for(finished_reached), "%d of 24 finished", finished);
  }
  for (int i = 0; i < 12; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    ck_assert_msg(ends_as(h1, id, "complete"), "%s: %s", id, status_of(h1, id));
    snprintf(id, sizeof id, "two-%d", i);
    ck_assert_msg(ends_as(h2, id, "complete"), "%s: %s", id, status_of(h2, id));
  }
  duro_engine_close(h1);
  duro_engine_close(h2);
  ck_assert_int_eq(most, 2);
  ck_assert_int_eq(ran[0], 12);
  ck_assert_int_eq(ran[1], 12);
}
END_TEST

START_TEST(a_closed_host_gives_back) {
  reset();
  char conninfo[512];
  pg_fixture_database(&pg, "closed", conninfo, sizeof conninfo);
  const duro_resource_options one = {.concurrency = 1};
  duro_engine *h1 = host_open(conninfo, &one, pay_on_one),
              *h2 = host_open(conninfo, &one, pay_on_two);
  create(h1, "first");
  want_inside = 1;
  ck_assert(wait_for(inside_reached));
  create(h2, "second");
  ck_assert(ends_as(h2, "second", "waiting"));
  usleep(300 * 1000);
  ck_assert_str_eq(status_of(h2, "second"), "waiting");
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(ran[1], 0);
  pthread_mutex_unlock(&mu);
  /* the first host goes (its step let through so that it can close) */
  let(1);
  duro_engine_close(h1);
  let(2);
  ck_assert(ends_as(h2, "second", "complete"));
  ck_assert_int_eq(most, 1);
  duro_engine_close(h2);
}
END_TEST

static int want_ran;
static int ran_reached(void) { return ran[0] + ran[1] >= want_ran; }

/* `n` instances created on each of two hosts of database `name`, both
 * declaring "payments" as `o`, their steps let through at once: once all
 * started and completed, the ms from before the creates to the last start
 * on the engine's clock. */
static int64_t run_paced(const char *name, const duro_resource_options *o,
                         int n) {
  char conninfo[512];
  pg_fixture_database(&pg, name, conninfo, sizeof conninfo);
  duro_engine *h1 = host_open(conninfo, o, pay_on_one),
              *h2 = host_open(conninfo, o, pay_on_two);
  let(1 << 20);
  pthread_mutex_lock(&mu);
  clock_of = h1;
  pthread_mutex_unlock(&mu);
  int64_t created = engine_now(h1);
  char id[16];
  for (int i = 0; i < n; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    create(h1, id);
    snprintf(id, sizeof id, "two-%d", i);
    create(h2, id);
  }
  want_ran = 2 * n;
  ck_assert_msg(wait_for(ran_reached), "%d of %d started", ran[0] + ran[1],
                2 * n);
  for (int i = 0; i < n; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    ck_assert_msg(ends_as(h1, id, "complete"), "%s: %s", id, status_of(h1, id));
    snprintf(id, sizeof id, "two-%d", i);
    ck_assert_msg(ends_as(h2, id, "complete"), "%s: %s", id, status_of(h2, id));
  }
  pthread_mutex_lock(&mu);
  clock_of = NULL;
  int64_t took = last_start - created;
  pthread_mutex_unlock(&mu);
  duro_engine_close(h1);
  duro_engine_close(h2);
  /* each host ran its own (none was adopted by the other) */
  ck_assert_int_eq(ran[0], n);
  ck_assert_int_eq(ran[1], n);
  return took;
}

START_TEST(two_hosts_share_a_rate) {
  reset();
  const duro_resource_options ten = {.rate_limit = 10, .rate_period_ms = 1000};
  int64_t took = run_paced("rate", &ten, 20);
  /* 10 a second across both hosts: the 40th start comes 39 intervals of
   * 100 ms after the first at the soonest (a busy machine only delays) */
  ck_assert_msg(took >= 39 * 100, "40 starts in %lld ms", (long long)took);
}
END_TEST

START_TEST(a_rate_with_slots_across_hosts) {
  reset();
  dwell_us = 150 * 1000; /* two inside at times, at 100 ms apart */
  const duro_resource_options both = {
      .concurrency = 2, .rate_limit = 10, .rate_period_ms = 1000};
  int64_t took = run_paced("rate_slots", &both, 10);
  ck_assert_msg(took >= 19 * 100, "20 starts in %lld ms", (long long)took);
  ck_assert_int_le(most, 2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("resources_hosts");
  TCase *tc = tcase_create("hosts");
  tcase_add_unchecked_fixture(tc, cluster_start, cluster_stop);
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, two_hosts_share_a_resource);
  tcase_add_test(tc, a_closed_host_gives_back);
  tcase_add_test(tc, two_hosts_share_a_rate);
  tcase_add_test(tc, a_rate_with_slots_across_hosts);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
