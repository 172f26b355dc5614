/* test_flow_hosts.c — flow control's concurrency rules exact across the
 * hosts of one PostgreSQL database (host/flow/flow_slots.c), on a
 * throwaway cluster (pg_fixture.h), each case a database of its own:
 *
 *   two_hosts_share_a_key   two engines of this process joined as hosts,
 *                           a key's limit 2: 24 instances of it created on
 *                           both, each step held until the test lets it
 *                           through: never more than 2 running on the two
 *                           together (read in the step, which both share),
 *                           both hosts ran some, all complete, another key
 *                           not held back;
 *   a_closed_host_gives_back  one host holds the key's one slot with a
 *                           running step; the other's instance of that key
 *                           waits; the first host closes (its session with
 *                           it): the second's instance runs;
 *   slots_are_exclusive     the store alone: a slot one host took the
 *                           other cannot take, and can once given back; a
 *                           closed store's slots free at once; a pass of
 *                           two keys gives one back and takes two;
 *   rates_are_shared        the store alone, at given times: a start one
 *                           host took moves the key's time for the other;
 *                           a burst; several keys in one call, answered in
 *                           their order whatever it is;
 *   two_hosts_share_a_rate  two engines, a key's rate 10 a second: 40
 *                           instances created on both start no sooner
 *                           than 3.9 s after the creates (per host they
 *                           would take half that), all complete;
 *   a_singleton_skips_across_hosts  two engines, flow.singleton skip by
 *                           /c: a key live on one host answers the other
 *                           host's create of it (nothing created there),
 *                           until it ends; creates of one key racing on
 *                           both hosts create one instance in all;
 *   a_singleton_queues_across_hosts  two engines, flow.singleton queue by
 *                           /c: an instance of a key live on one host
 *                           keeps the other host's instance of it queued
 *                           (describe says which holds it) until it ends,
 *                           then that one starts; another key is not held
 *                           back; six instances of one key created on both
 *                           hosts start one at a time, never two started
 *                           together (counted in their first step), all
 *                           complete;
 *   a_singleton_key_outlives_its_host  the host whose started instance
 *                           holds a key closes: the instance, taken over by
 *                           the other host, still holds it (that host's
 *                           instance of the key stays queued) until it
 *                           ends there;
 *   a_debounce_merges_across_hosts  two engines, flow.debounce by /c: a
 *                           create on the other host merges into the
 *                           first host's pending instance (answered with
 *                           its id, nothing created), as do creates on its
 *                           own host, each giving it the search attributes
 *                           of its params; it runs once, with the last
 *                           params;
 *                           the next create makes another; creates of one
 *                           key racing on both hosts make one instance in
 *                           all, which runs once.
 *
 * Real engine threads run the activations; time is the real clock (the
 * hosts' leases and the slots' retries are wall time, in milliseconds). */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "error.h"
#include "harness.h"
#include "journal.h"
#include "pg_fixture.h"
#include "singleton.h"

static pg_fixture pg = {.suite = "test_flow_hosts"};
static void cluster_start(void) {
  duro_api_ptr_ = duro_host_api();
  pg_fixture_up(&pg);
}
static void cluster_stop(void) { pg_fixture_down(&pg); }

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
/* running now and the most at once, per key ("a", "b"); which engine's
 * threads ran how many; how many the test lets finish */
static int running[2], most[2], finished, let_through;

static int key_of(const char *c) { return c && !strcmp(c, "b"); }

static int hold(duro_attempt *a, void *arg) {
  int k = key_of(arg);
  pthread_mutex_lock(&mu);
  running[k]++;
  if (running[k] > most[k])
    most[k] = running[k];
  pthread_cond_broadcast(&cv);
  while (finished >= let_through)
    pthread_cond_wait(&cv, &mu);
  finished++;
  running[k]--;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc keyed(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *c = duro_json_string(ev->params, "/c");
  return duro_do(step, "hold", NULL, hold, (void *)c, NULL);
}

static void reset(void) {
  memset(running, 0, sizeof running);
  memset(most, 0, sizeof most);
  finished = let_through = 0;
}

/* An engine joined as a host of `conninfo` with `workers` threads,
 * workflow `wf` (run) registered with `lim`, started. */
static duro_engine *joined_open(const char *conninfo, uint32_t workers,
                                const char *wf, duro_run_fn run,
                                const duro_workflow_limits *lim) {
  duro_engine_options opt = {.db_path = conninfo,
                             .backend = &store_pg,
                             .workers = workers,
                             .join_store = 1,
                             .lease_ms = 2000};
  duro_engine *e;
  char err[512];
  ck_assert_msg(duro_engine_open(&opt, &e, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(duro_engine_register(e, wf, NULL, run, lim, NULL), 0);
  ck_assert_int_eq(duro_engine_start(e), 0);
  return e;
}

/* "keyed" with a limit of `limit` per /c. */
static duro_engine *host_open(const char *conninfo, uint32_t limit) {
  const duro_flow_concurrency rule[] = {{.key = "/c", .limit = limit}};
  duro_workflow_limits lim = {.flow_concurrency = rule,
                              .n_flow_concurrency = 1};
  return joined_open(conninfo, 8, "keyed", keyed, &lim);
}

/* Instances of "paced" (a rate of 10 a second per /c): the wall time of
 * each start. */
enum { PACED = 40 };
static int64_t paced_at[PACED];
static int n_paced;

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int note_paced(duro_attempt *a, void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  if (n_paced < PACED)
    paced_at[n_paced] = wall_ms();
  n_paced++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc paced(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env, (void)ev;
  return duro_do(step, "start", NULL, note_paced, NULL, NULL);
}

static duro_engine *rate_host_open(const char *conninfo) {
  const duro_flow_rate rule[] = {{.key = "/c", .limit = 10, .period_ms = 1000}};
  duro_workflow_limits lim = {.flow_rate = rule, .n_flow_rate = 1};
  return joined_open(conninfo, 4, "paced", paced, &lim);
}

static int all_paced(void) { return n_paced >= PACED; }

/* "single": flow.singleton skip by /c, each instance holding its key
 * until an event "go" comes. */
static duro_rc single(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env, (void)ev;
  const char *go;
  return duro_wait_for_event(step, "go", "go", NULL, &go);
}

static duro_engine *single_host_open(const char *conninfo) {
  duro_workflow_limits lim = {.flow_singleton_key = "/c",
                              .flow_singleton_mode = DURO_SINGLETON_SKIP};
  return joined_open(conninfo, 4, "single", single, &lim);
}

/* "lined": flow.singleton queue by /c; its first step counts it in (the
 * most of key "r" started at once), then it waits for "go", then its
 * last step counts it out. */
static int lined_in, lined_most;

static int lined_enter(duro_attempt *a, void *arg) {
  pthread_mutex_lock(&mu);
  if (arg && !strcmp(arg, "r") && ++lined_in > lined_most)
    lined_most = lined_in;
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static int lined_leave(duro_attempt *a, void *arg) {
  pthread_mutex_lock(&mu);
  if (arg && !strcmp(arg, "r"))
    lined_in--;
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc lined(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *c = duro_json_string(ev->params, "/c");
  duro_rc rc = duro_do(step, "enter", NULL, lined_enter, (void *)c, NULL);
  const char *go;
  if (rc == DURO_OK)
    rc = duro_wait_for_event(step, "go", "go", NULL, &go);
  if (rc == DURO_OK)
    rc = duro_do(step, "leave", NULL, lined_leave, (void *)c, NULL);
  return rc;
}

static duro_engine *lined_host_open(const char *conninfo) {
  duro_workflow_limits lim = {.flow_singleton_key = "/c",
                              .flow_singleton_mode = DURO_SINGLETON_QUEUE};
  return joined_open(conninfo, 4, "lined", lined, &lim);
}

static void lined_create(duro_engine *e, const char *id, const char *key) {
  char params[64];
  snprintf(params, sizeof params, "{\"c\":\"%s\"}", key);
  ck_assert_int_eq(duro_instance_create(e, "lined", id, params, -1, NULL), 0);
}

/* Creates `id` of `wf` with `params` on e: the id that answered
 * (malloc'ed), *how DURO_CREATE_SKIPPED or _DEBOUNCED when another
 * instance answered it, else 0. */
static char *create_one(duro_engine *e, const char *wf, const char *id,
                        const char *params, int *how) {
  duro_create_req req = {.id = id, .params = params, .retention_ms = -1};
  duro_create_result r;
  ck_assert_int_eq(duro_instance_create_many(e, wf, &req, 1, &r), 0);
  ck_assert_msg(r.n_created == 1, "create %s: %s", id,
                r.n_errors ? duro_err_name(r.errors[0].code) : "?");
  *how = r.skipped ? r.skipped[0] : 0;
  char *answer = r.created[0];
  r.created[0] = NULL;
  duro_create_result_free(&r);
  return answer;
}

/* Creates `id` of "single" with /c = key on e: the id that answered
 * (malloc'ed), *skipped whether it was another live one. */
static char *single_create(duro_engine *e, const char *id, const char *key,
                           int *skipped) {
  char params[64];
  snprintf(params, sizeof params, "{\"c\":\"%s\"}", key);
  int how;
  char *answer = create_one(e, "single", id, params, &how);
  *skipped = how == DURO_CREATE_SKIPPED;
  return answer;
}

typedef struct racer {
  duro_engine *e;
  char id[16];
  char *answer;
  int skipped;
  pthread_t th;
} racer;

static void *race_create(void *arg) {
  racer *r = arg;
  r->answer = single_create(r->e, r->id, "r", &r->skipped);
  return NULL;
}

static void create(duro_engine *e, const char *id, const char *key) {
  char params[64];
  snprintf(params, sizeof params, "{\"c\":\"%s\"}", key);
  ck_assert_int_eq(duro_instance_create(e, "keyed", id, params, -1, NULL), 0);
}

/* Waits (at most 60 s) until pred() holds, under mu. */
static int wait_for(int (*pred)(void)) {
  return harness_wait_for(&mu, &cv, pred);
}

static void let(int n) {
  pthread_mutex_lock(&mu);
  let_through = n;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static int want_running_a;
static int running_a_reached(void) { return running[0] == want_running_a; }
static int b_running(void) { return running[1] == 1; }
static int want_finished;
static int finished_reached(void) { return finished == want_finished; }

static const char *status_of(duro_engine *e, const char *wf, const char *id) {
  duro_status s;
  if (duro_instance_status(e, wf, id, &s) != 0)
    return "?";
  return duro_status_name(s);
}

static int ends_complete(duro_engine *e, const char *wf, const char *id) {
  for (int i = 0; i < 6000; i++) {
    if (!strcmp(status_of(e, wf, id), "complete"))
      return 1;
    usleep(10000);
  }
  return 0;
}

START_TEST(two_hosts_share_a_key) {
  reset();
  char conninfo[512];
  pg_fixture_database(&pg, "share", conninfo, sizeof conninfo);
  duro_engine *h1 = host_open(conninfo, 2), *h2 = host_open(conninfo, 2);
  char id[16];
  for (int i = 0; i < 12; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    create(h1, id, "a");
    snprintf(id, sizeof id, "two-%d", i);
    create(h2, id, "a");
  }
  create(h2, "b-0", "b"); /* another key: not held back by a */
  want_running_a = 2;
  ck_assert(wait_for(running_a_reached));
  ck_assert(wait_for(b_running)); /* however busy the machine */
  /* a while for any third to start, were the limit per host */
  usleep(300 * 1000);
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(running[0], 2);
  ck_assert_int_eq(running[1], 1);
  pthread_mutex_unlock(&mu);
  /* one at a time through: each end lets the next of either host in */
  for (int n = 1; n <= 25; n++) {
    let(n);
    want_finished = n;
    ck_assert_msg(wait_for(finished_reached), "%d of 25 finished", finished);
  }
  ck_assert_int_le(most[0], 2);
  for (int i = 0; i < 12; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    ck_assert_msg(ends_complete(h1, "keyed", id), "%s: %s", id,
                  status_of(h1, "keyed", id));
    snprintf(id, sizeof id, "two-%d", i);
    ck_assert_msg(ends_complete(h2, "keyed", id), "%s: %s", id,
                  status_of(h2, "keyed", id));
  }
  duro_engine_close(h1);
  duro_engine_close(h2);
  ck_assert_int_eq(most[0], 2);
}
END_TEST

/* The hosts the instances of "turns" ran on, in the order they began. */
static int turn_host[32], n_turns;

static int turn_hold(duro_attempt *a, void *arg) {
  pthread_mutex_lock(&mu);
  if (n_turns < 32)
    turn_host[n_turns++] = (int)(intptr_t)arg;
  pthread_mutex_unlock(&mu);
  return hold(a, "a");
}

static duro_rc turns(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int64_t host = 1;
  duro_json_integer(ev->params, "/h", &host);
  return duro_do(step, "hold", NULL, turn_hold, (void *)(intptr_t)host, NULL);
}

static void turns_create(duro_engine *e, const char *id, int host) {
  char params[64];
  snprintf(params, sizeof params, "{\"c\":\"a\",\"h\":%d}", host);
  ck_assert_int_eq(duro_instance_create(e, "turns", id, params, -1, NULL), 0);
}

/* A host holding every slot of a key, with a backlog of it, gives one
 * back to another host's waiter of the key: it does not serve its whole
 * backlog first. */
START_TEST(hosts_take_turns_at_a_key) {
  reset();
  n_turns = 0;
  char conninfo[512];
  pg_fixture_database(&pg, "turns", conninfo, sizeof conninfo);
  const duro_flow_concurrency rule[] = {{.key = "/c", .limit = 1}};
  duro_workflow_limits lim = {.flow_concurrency = rule,
                              .n_flow_concurrency = 1};
  duro_engine *h1 = joined_open(conninfo, 8, "turns", turns, &lim),
              *h2 = joined_open(conninfo, 8, "turns", turns, &lim);
  enum { MINE = 10 };
  char id[16];
  for (int i = 0; i < MINE; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    turns_create(h1, id, 1);
  }
  want_running_a = 1;
  ck_assert(wait_for(running_a_reached));
  turns_create(h2, "two-0", 2);
  /* the second host marks the key short (a shared advisory lock), seen
   * in the server however busy the machine; then a few of the first
   * host's asks (every 100 ms) */
  int marked = 0;
  for (int i = 0; i < 6000 && !marked; i++) {
    marked = pg_query_int(conninfo, "SELECT count(*) FROM pg_locks WHERE "
                                    "locktype='advisory' AND "
                                    "mode='ShareLock'") > 0;
    if (!marked)
      usleep(10000);
  }
  ck_assert_msg(marked, "the second host never marked the key short");
  usleep(300 * 1000);
  for (int n = 1; n <= MINE + 1; n++) {
    let(n);
    want_finished = n;
    ck_assert_msg(wait_for(finished_reached), "%d of %d finished", finished,
                  MINE + 1);
  }
  pthread_mutex_lock(&mu);
  int at = -1;
  for (int i = 0; i < n_turns; i++)
    if (turn_host[i] == 2)
      at = i;
  ck_assert_int_eq(n_turns, MINE + 1);
  ck_assert_int_le(most[0], 1);
  pthread_mutex_unlock(&mu);
  /* the first host's running one ends, and the slot is the second's
   * (without turns it ran last, after the first host's ten) */
  ck_assert_msg(at >= 1 && at <= 5, "the second host's ran %d of %d", at + 1,
                MINE + 1);
  ck_assert(ends_complete(h2, "turns", "two-0"));
  for (int i = 0; i < MINE; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    ck_assert_msg(ends_complete(h1, "turns", id), "%s: %s", id,
                  status_of(h1, "turns", id));
  }
  duro_engine_close(h1);
  duro_engine_close(h2);
}
END_TEST

START_TEST(a_closed_host_gives_back) {
  reset();
  char conninfo[512];
  pg_fixture_database(&pg, "closed", conninfo, sizeof conninfo);
  duro_engine *h1 = host_open(conninfo, 1), *h2 = host_open(conninfo, 1);
  create(h1, "first", "a");
  want_running_a = 1;
  ck_assert(wait_for(running_a_reached));
  create(h2, "second", "a");
  usleep(300 * 1000);
  ck_assert_str_eq(status_of(h2, "keyed", "second"), "queued");
  /* the first host goes (its step let through so that it can close) */
  let(1);
  duro_engine_close(h1);
  let(2);
  ck_assert(ends_complete(h2, "keyed", "second"));
  ck_assert_int_eq(most[0], 1);
  duro_engine_close(h2);
}
END_TEST

START_TEST(slots_are_exclusive) {
  char conninfo[512];
  pg_fixture_database(&pg, "slots", conninfo, sizeof conninfo);
  journal *j1, *j2;
  char err[512];
  ck_assert_msg(
      journal_open_backend(&store_pg, conninfo, 1, &j1, err, sizeof err) == 0,
      "%s", err);
  ck_assert_msg(
      journal_open_backend(&store_pg, conninfo, 1, &j2, err, sizeof err) == 0,
      "%s", err);
  store_host_hooks hooks = {0};
  ck_assert_int_eq(journal_join(j1, 2000, &hooks, err, sizeof err), 0);
  ck_assert_int_eq(journal_join(j2, 2000, &hooks, err, sizeof err), 0);
  ck_assert(journal_slots_shared(j1));
  const int64_t base = (int64_t)0x12345600000;
  uint32_t got[4];
  size_t n = 0;
  uint64_t epoch1, epoch2;
  ck_assert_int_eq(
      journal_slots_take(j1, base, 3, NULL, 0, 2, got, &n, &epoch1), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_uint_eq(got[0], 0);
  ck_assert_uint_eq(got[1], 1);
  /* the other host gets the one left, and then none */
  ck_assert_int_eq(
      journal_slots_take(j2, base, 3, NULL, 0, 3, got, &n, &epoch2), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(got[0], 2);
  uint32_t mine2[] = {2};
  ck_assert_int_eq(
      journal_slots_take(j2, base, 3, mine2, 1, 1, got, &n, &epoch2), 0);
  ck_assert_uint_eq(n, 0);
  /* given back, it can be taken */
  ck_assert_int_eq(journal_slots_give(j1, base, 1, epoch1), 0);
  ck_assert_int_eq(
      journal_slots_take(j2, base, 3, mine2, 1, 1, got, &n, &epoch2), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(got[0], 1);
  /* a store closed gives back what it held, with its session (as soon as
   * the server's backend for it has gone) */
  journal_close(j2);
  uint32_t mine1[] = {0, 0, 0};
  size_t held = 1;
  for (int i = 0; i < 500 && held < 3; i++) {
    ck_assert_int_eq(journal_slots_take(j1, base, 3, mine1, held, 3 - held, got,
                                        &n, &epoch1),
                     0);
    for (size_t k = 0; k < n; k++)
      mine1[held++] = got[k];
    if (held < 3)
      usleep(10000);
  }
  ck_assert_uint_eq(held, 3);
  /* a pass: two keys at once, one giving a slot back, one taking two */
  const int64_t other = base + ((int64_t)1 << 20);
  uint32_t give[] = {2}, got_a[2], got_b[2];
  journal_slots_job jobs[] = {
      {.base = base,
       .limit = 3,
       .give = give,
       .n_give = 1,
       .give_epoch = epoch1,
       .got = got_a},
      {.base = other, .limit = 2, .want = 2, .got = got_b}};
  uint64_t epoch;
  ck_assert_int_eq(journal_slots_pass(j1, jobs, 2, &epoch), 0);
  ck_assert_uint_eq(epoch, epoch1);
  ck_assert_uint_eq(jobs[0].n_got, 0);
  ck_assert_uint_eq(jobs[1].n_got, 2);
  ck_assert_uint_eq(got_b[0], 0);
  ck_assert_uint_eq(got_b[1], 1);
  /* the slot given back is free: another store takes it */
  ck_assert_msg(
      journal_open_backend(&store_pg, conninfo, 1, &j2, err, sizeof err) == 0,
      "%s", err);
  ck_assert_int_eq(journal_join(j2, 2000, &hooks, err, sizeof err), 0);
  ck_assert_int_eq(
      journal_slots_take(j2, base, 3, NULL, 0, 3, got, &n, &epoch2), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(got[0], 2);
  journal_close(j2);
  journal_close(j1);
}
END_TEST

START_TEST(rates_are_shared) {
  char conninfo[512];
  pg_fixture_database(&pg, "rates", conninfo, sizeof conninfo);
  journal *j1, *j2;
  char err[512];
  ck_assert_msg(
      journal_open_backend(&store_pg, conninfo, 1, &j1, err, sizeof err) == 0,
      "%s", err);
  ck_assert_msg(
      journal_open_backend(&store_pg, conninfo, 1, &j2, err, sizeof err) == 0,
      "%s", err);
  store_host_hooks hooks = {0};
  ck_assert_int_eq(journal_join(j1, 2000, &hooks, err, sizeof err), 0);
  ck_assert_int_eq(journal_join(j2, 2000, &hooks, err, sizeof err), 0);
  /* one start at a time, 100 ms apart */
  journal_rates_job a = {
      .key = 42, .interval_ms = 100, .at_ms = 1000, .want = 5};
  ck_assert_int_eq(journal_rates_take(j1, 1000, &a, 1), 0);
  ck_assert_uint_eq(a.got, 1);
  ck_assert(a.tat == 1100);
  journal_rates_job b = {
      .key = 42, .interval_ms = 100, .at_ms = 1050, .want = 3};
  ck_assert_int_eq(journal_rates_take(j2, 1050, &b, 1), 0);
  ck_assert_uint_eq(b.got, 0); /* the first host's start counts here */
  ck_assert(b.tat == 1100);
  b.at_ms = 1100;
  ck_assert_int_eq(journal_rates_take(j2, 1100, &b, 1), 0);
  ck_assert_uint_eq(b.got, 1);
  ck_assert(b.tat == 1200);
  /* a burst of 3 after a quiet spell, then the steady rate; keys asked
   * out of order are answered in their order */
  journal_rates_job jobs[] = {
      {.key = 900,
       .interval_ms = 100,
       .tolerance_ms = 200,
       .at_ms = 5000,
       .want = 10},
      {.key = 42, .interval_ms = 100, .at_ms = 5000, .want = 2},
      {.key = -7, .interval_ms = 1000, .at_ms = 5000, .want = 1}};
  ck_assert_int_eq(journal_rates_take(j1, 5000, jobs, 3), 0);
  ck_assert_uint_eq(jobs[0].got, 3);
  ck_assert(jobs[0].tat == 5300);
  ck_assert_uint_eq(jobs[1].got, 1);
  ck_assert(jobs[1].tat == 5100);
  ck_assert_uint_eq(jobs[2].got, 1);
  ck_assert(jobs[2].tat == 6000);
  ck_assert_int_eq(journal_rates_take(j2, 5000, jobs, 1), 0);
  ck_assert_uint_eq(jobs[0].got, 0);
  journal_close(j2);
  journal_close(j1);
}
END_TEST

START_TEST(two_hosts_share_a_rate) {
  char conninfo[512];
  pg_fixture_database(&pg, "rate", conninfo, sizeof conninfo);
  n_paced = 0;
  duro_engine *h1 = rate_host_open(conninfo), *h2 = rate_host_open(conninfo);
  int64_t created = wall_ms();
  char id[16];
  for (int i = 0; i < PACED / 2; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    ck_assert_int_eq(
        duro_instance_create(h1, "paced", id, "{\"c\":\"a\"}", -1, NULL), 0);
    snprintf(id, sizeof id, "two-%d", i);
    ck_assert_int_eq(
        duro_instance_create(h2, "paced", id, "{\"c\":\"a\"}", -1, NULL), 0);
  }
  ck_assert_msg(wait_for(all_paced), "%d of %d started", n_paced, PACED);
  int64_t last = 0;
  for (int i = 0; i < PACED; i++)
    if (paced_at[i] > last)
      last = paced_at[i];
  /* 10 a second across both hosts: the 40th start comes 39 intervals of
   * 100 ms after the first at the soonest (a busy machine only delays) */
  ck_assert_msg(last - created >= (PACED - 1) * 100 - 5, "%d starts in %lld ms",
                PACED, (long long)(last - created));
  /* each host ran its own (none was adopted by the other) */
  for (int i = 0; i < PACED / 2; i++) {
    snprintf(id, sizeof id, "one-%d", i);
    ck_assert_msg(ends_complete(h1, "paced", id), "%s", id);
    snprintf(id, sizeof id, "two-%d", i);
    ck_assert_msg(ends_complete(h2, "paced", id), "%s", id);
  }
  duro_engine_close(h1);
  duro_engine_close(h2);
}
END_TEST

START_TEST(a_singleton_skips_across_hosts) {
  char conninfo[512];
  pg_fixture_database(&pg, "single", conninfo, sizeof conninfo);
  duro_engine *h1 = single_host_open(conninfo),
              *h2 = single_host_open(conninfo);
  int skipped;
  char *got = single_create(h1, "a1", "a", &skipped);
  ck_assert(!skipped);
  ck_assert_str_eq(got, "a1");
  free(got);
  /* the other host: a1 is live there too */
  got = single_create(h2, "a2", "a", &skipped);
  ck_assert(skipped);
  ck_assert_str_eq(got, "a1");
  free(got);
  duro_status s;
  ck_assert_int_eq(duro_instance_status(h2, "single", "a2", &s),
                   DURO_E_NOT_FOUND);
  got = single_create(h2, "b1", "b", &skipped); /* another key */
  ck_assert(!skipped);
  free(got);
  /* a1 ends: the key is free on both hosts */
  ck_assert_int_eq(duro_instance_send_event(h1, "single", "a1", "go", "null"),
                   0);
  ck_assert(ends_complete(h1, "single", "a1"));
  got = single_create(h2, "a3", "a", &skipped);
  ck_assert(!skipped);
  ck_assert_str_eq(got, "a3");
  free(got);
  got = single_create(h1, "a4", "a", &skipped);
  ck_assert(skipped);
  ck_assert_str_eq(got, "a3");
  free(got);
  /* creates of one key racing on both hosts create one in all */
  enum { RACERS = 8 };
  racer r[RACERS];
  for (int i = 0; i < RACERS; i++) {
    r[i] = (racer){.e = i % 2 ? h2 : h1};
    snprintf(r[i].id, sizeof r[i].id, "r%d", i);
    pthread_create(&r[i].th, NULL, race_create, &r[i]);
  }
  int created = 0;
  const char *live = NULL;
  for (int i = 0; i < RACERS; i++) {
    pthread_join(r[i].th, NULL);
    if (!r[i].skipped) {
      created++;
      live = r[i].answer;
    }
  }
  ck_assert_int_eq(created, 1);
  for (int i = 0; i < RACERS; i++)
    ck_assert_str_eq(r[i].answer, live);
  for (int i = 0; i < RACERS; i++)
    free(r[i].answer);
  duro_engine_close(h1);
  duro_engine_close(h2);
}
END_TEST

/* Waits (at most 60 s) until `id` has status `want`. */
static int reaches(duro_engine *e, const char *wf, const char *id,
                   const char *want) {
  for (int i = 0; i < 6000; i++) {
    if (!strcmp(status_of(e, wf, id), want))
      return 1;
    usleep(10000);
  }
  return 0;
}

START_TEST(a_singleton_queues_across_hosts) {
  char conninfo[512];
  pg_fixture_database(&pg, "lined", conninfo, sizeof conninfo);
  duro_engine *h1 = lined_host_open(conninfo), *h2 = lined_host_open(conninfo);
  lined_create(h1, "a1", "a");
  ck_assert(reaches(h1, "lined", "a1", "waiting"));
  lined_create(h2, "a2", "a");
  lined_create(h2, "b1", "b"); /* another key: not held back */
  ck_assert(reaches(h2, "lined", "b1", "waiting"));
  usleep(500000); /* h2 asks for a's key several times meanwhile */
  ck_assert_str_eq(status_of(h2, "lined", "a2"), "queued");
  char *why = duro_singleton_why(h2, "lined", "a2");
  ck_assert_msg(why && strstr(why, "a1") && strstr(why, "another host"), "%s",
                why ? why : "(none)");
  free(why);
  /* a1 ends: a2 starts on the other host, and holds the key for both */
  ck_assert_int_eq(duro_instance_send_event(h1, "lined", "a1", "go", "null"),
                   0);
  ck_assert(ends_complete(h1, "lined", "a1"));
  ck_assert(reaches(h2, "lined", "a2", "waiting"));
  lined_create(h1, "a3", "a");
  usleep(500000);
  ck_assert_str_eq(status_of(h1, "lined", "a3"), "queued");
  ck_assert_int_eq(duro_instance_send_event(h2, "lined", "a2", "go", "null"),
                   0);
  ck_assert(reaches(h1, "lined", "a3", "waiting"));
  ck_assert_int_eq(duro_instance_send_event(h1, "lined", "a3", "go", "null"),
                   0);
  ck_assert(ends_complete(h1, "lined", "a3"));
  /* six of one key over both hosts: one started at a time, in all */
  enum { LINED = 6 };
  duro_engine *on[LINED];
  char ids[LINED][8];
  for (int i = 0; i < LINED; i++) {
    on[i] = i % 2 ? h2 : h1;
    snprintf(ids[i], sizeof ids[i], "r%d", i);
    lined_create(on[i], ids[i], "r");
  }
  for (int done = 0; done < LINED;) {
    int started = -1, n_started = 0;
    for (int t = 0; t < 6000 && n_started == 0; t++) {
      for (int i = 0; i < LINED; i++)
        if (!strcmp(status_of(on[i], "lined", ids[i]), "waiting")) {
          started = i;
          n_started++;
        }
      if (!n_started)
        usleep(10000);
    }
    ck_assert_int_eq(n_started, 1);
    ck_assert_int_eq(duro_instance_send_event(on[started], "lined",
                                              ids[started], "go", "null"),
                     0);
    ck_assert(ends_complete(on[started], "lined", ids[started]));
    done++;
  }
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(lined_most, 1);
  ck_assert_int_eq(lined_in, 0);
  pthread_mutex_unlock(&mu);
  ck_assert_int_eq(duro_instance_send_event(h2, "lined", "b1", "go", "null"),
                   0);
  ck_assert(ends_complete(h2, "lined", "b1"));
  duro_engine_close(h1);
  duro_engine_close(h2);
}
END_TEST

START_TEST(a_singleton_key_outlives_its_host) {
  char conninfo[512];
  pg_fixture_database(&pg, "outlives", conninfo, sizeof conninfo);
  duro_engine *h1 = lined_host_open(conninfo), *h2 = lined_host_open(conninfo);
  lined_create(h1, "a1", "a");
  ck_assert(reaches(h1, "lined", "a1", "waiting"));
  lined_create(h2, "a2", "a");
  duro_engine_close(h1);
  /* a1 is live still: a2 stays queued until a1, taken over by h2 once
   * h1's lease lapsed, ends there */
  ck_assert_int_eq(duro_instance_send_event(h2, "lined", "a1", "go", "null"),
                   0);
  /* a2 read first: once it is not queued, a1 must have ended before */
  int looks = 0, a1_done = 0;
  for (; looks < 6000 && !a1_done; looks++) {
    int a2_queued = !strcmp(status_of(h2, "lined", "a2"), "queued");
    a1_done = !strcmp(status_of(h2, "lined", "a1"), "complete");
    ck_assert_msg(a2_queued || a1_done, "a2 started while a1 was live");
    if (!a1_done)
      usleep(10000);
  }
  ck_assert(a1_done);
  ck_assert_int_gt(looks, 1); /* a1 was seen live: the check looked */
  ck_assert(reaches(h2, "lined", "a2", "waiting"));
  ck_assert_int_eq(duro_instance_send_event(h2, "lined", "a2", "go", "null"),
                   0);
  ck_assert(ends_complete(h2, "lined", "a2"));
  duro_engine_close(h2);
}
END_TEST

/* "bounced": flow.debounce by /c over a second; each run counted, with
 * the /n it started with. */
static int bounced_runs, bounced_last_n;
static int64_t bounced_at; /* wall ms of the last run */

static int bounced_note(duro_attempt *a, void *arg) {
  pthread_mutex_lock(&mu);
  bounced_runs++;
  bounced_last_n = (int)(intptr_t)arg;
  bounced_at = wall_ms();
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return duro_attempt_result(a, "null");
}

static duro_rc bounced(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  double n = 0;
  duro_json_number(ev->params, "/n", &n);
  return duro_do(step, "note", NULL, bounced_note, (void *)(intptr_t)n, NULL);
}

static duro_engine *bounced_host_open_for(const char *conninfo,
                                          int64_t period_ms) {
  static const duro_attr_decl index[] = {{"n", "/n", DURO_ATTR_NUMBER}};
  duro_workflow_limits lim = {.flow_debounce_key = "/c",
                              .flow_debounce_ms = period_ms,
                              .flow_debounce_max_wait_ms = 60000,
                              .index = index,
                              .n_index = 1};
  return joined_open(conninfo, 4, "bounced", bounced, &lim);
}

static duro_engine *bounced_host_open(const char *conninfo) {
  return bounced_host_open_for(conninfo, 1000);
}

/* Creates `id` of "bounced" with /c = key and /n = n on e: the id that
 * answered (malloc'ed), *merged whether it was debounced into another. */
static char *bounced_create(duro_engine *e, const char *id, const char *key,
                            int n, int *merged) {
  char params[64];
  snprintf(params, sizeof params, "{\"c\":\"%s\",\"n\":%d}", key, n);
  int how;
  char *answer = create_one(e, "bounced", id, params, &how);
  *merged = how == DURO_CREATE_DEBOUNCED;
  return answer;
}

/* The ids of bounced's instances whose /n is n, listed on e: "|a|b|". */
static char *bounced_with_n(duro_engine *e, int n) {
  char term[32], err[200];
  snprintf(term, sizeof term, "n:%d", n);
  duro_attr_filter w;
  ck_assert_int_eq(
      duro_list_where_parse(e, "bounced", term, &w, err, sizeof err), 0);
  duro_list_filter f = {.status = -1, .where = &w, .n_where = 1};
  duro_instance_page p;
  ck_assert_int_eq(duro_instance_list_page(e, "bounced", &f, 100, NULL, &p), 0);
  duro_attr_filter_clear(&w);
  char out[256] = "|";
  for (size_t i = 0; i < p.n; i++)
    snprintf(out + strlen(out), sizeof out - strlen(out), "%s|", p.v[i].id);
  duro_instance_page_free(&p);
  return strdup(out);
}

static void assert_bounced_with_n(duro_engine *e, int n, const char *want) {
  char *got = bounced_with_n(e, n);
  ck_assert_msg(!strcmp(got, want), "n:%d lists %s, not %s", n, got, want);
  free(got);
}

static int want_runs;
static int runs_reached(void) { return bounced_runs >= want_runs; }

typedef struct bouncer {
  duro_engine *e;
  int index;
  char *first; /* the id of its first create's answer */
  int created; /* its creates that made an instance */
  pthread_t th;
} bouncer;

static void *bounce(void *arg) {
  bouncer *b = arg;
  for (int i = 0; i < 10; i++) {
    char id[32];
    snprintf(id, sizeof id, "r%d-%d", b->index, i);
    int merged;
    char *got = bounced_create(b->e, id, "r", 100 + i, &merged);
    b->created += !merged;
    if (!b->first)
      b->first = got;
    else
      free(got);
  }
  return NULL;
}

START_TEST(a_debounce_merges_across_hosts) {
  char conninfo[512];
  pg_fixture_database(&pg, "bounced", conninfo, sizeof conninfo);
  duro_engine *h1 = bounced_host_open(conninfo),
              *h2 = bounced_host_open(conninfo);
  bounced_runs = bounced_last_n = 0;
  int merged;
  char *got = bounced_create(h1, "d1", "a", 1, &merged);
  ck_assert(!merged);
  free(got);
  got = bounced_create(h2, "d2", "a", 2, &merged); /* the other host */
  ck_assert(merged);
  ck_assert_str_eq(got, "d1");
  free(got);
  /* its search attributes are those of the params merged into it */
  assert_bounced_with_n(h1, 2, "|d1|");
  assert_bounced_with_n(h1, 1, "|");
  duro_status s;
  ck_assert_int_eq(duro_instance_status(h2, "bounced", "d2", &s),
                   DURO_E_NOT_FOUND);
  got = bounced_create(h1, "d3", "a", 3, &merged); /* its own host */
  ck_assert(merged);
  ck_assert_str_eq(got, "d1");
  free(got);
  got = bounced_create(h2, "d4", "a", 4, &merged);
  ck_assert(merged);
  ck_assert_str_eq(got, "d1");
  free(got);
  assert_bounced_with_n(h2, 4, "|d1|");
  assert_bounced_with_n(h2, 3, "|");
  ck_assert(ends_complete(h1, "bounced", "d1"));
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(bounced_runs, 1);
  ck_assert_int_eq(bounced_last_n, 4);
  pthread_mutex_unlock(&mu);
  /* it started: the next create of the key makes another */
  got = bounced_create(h2, "d5", "a", 5, &merged);
  ck_assert(!merged);
  ck_assert_str_eq(got, "d5");
  free(got);
  ck_assert(ends_complete(h2, "bounced", "d5"));
  /* creates of one key racing on both hosts: one instance in all */
  enum { BOUNCERS = 4 };
  bouncer b[BOUNCERS];
  for (int i = 0; i < BOUNCERS; i++) {
    b[i] = (bouncer){.e = i % 2 ? h2 : h1, .index = i};
    pthread_create(&b[i].th, NULL, bounce, &b[i]);
  }
  int created = 0;
  for (int i = 0; i < BOUNCERS; i++) {
    pthread_join(b[i].th, NULL);
    created += b[i].created;
  }
  ck_assert_int_eq(created, 1);
  for (int i = 1; i < BOUNCERS; i++)
    ck_assert_str_eq(b[i].first, b[0].first);
  ck_assert(ends_complete(h1, "bounced", b[0].first));
  pthread_mutex_lock(&mu);
  want_runs = 3;
  pthread_mutex_unlock(&mu);
  ck_assert(harness_wait_for(&mu, &cv, runs_reached));
  usleep(300000); /* no other run comes */
  pthread_mutex_lock(&mu);
  ck_assert_int_eq(bounced_runs, 3);
  ck_assert_int_ge(bounced_last_n, 100);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < BOUNCERS; i++)
    free(b[i].first);
  duro_engine_close(h1);
  duro_engine_close(h2);
}
END_TEST

/* A pending instance whose host stops is taken over still pending: it
 * starts when its key has been quiet for the period, with the last
 * params merged into it, and lets go of its key (not at once when it is
 * taken over, holding the key while it runs). */
START_TEST(a_pending_debounce_outlives_its_host) {
  char conninfo[512];
  pg_fixture_database(&pg, "pending", conninfo, sizeof conninfo);
  pthread_mutex_lock(&mu);
  bounced_runs = 0;
  pthread_mutex_unlock(&mu);
  enum { PERIOD_MS = 6000 };
  duro_engine *h1 = bounced_host_open_for(conninfo, PERIOD_MS),
              *h2 = bounced_host_open_for(conninfo, PERIOD_MS);
  int merged;
  char *got = bounced_create(h1, "p1", "p", 1, &merged);
  ck_assert(!merged);
  free(got);
  /* the merge's own time is between these two: its start is due a
   * period after it */
  int64_t last_create = wall_ms();
  got = bounced_create(h2, "p2", "p", 2, &merged);
  ck_assert(merged);
  ck_assert_str_eq(got, "p1");
  free(got);
  duro_engine_close(h1); /* h2 takes p1 over once h1's lease lapses */
  want_runs = 1;
  ck_assert(wait_for(runs_reached));
  pthread_mutex_lock(&mu);
  int64_t ran_at = bounced_at;
  ck_assert_int_eq(bounced_runs, 1);
  ck_assert_int_eq(bounced_last_n, 2);
  pthread_mutex_unlock(&mu);
  ck_assert_msg(ran_at - last_create >= PERIOD_MS - 20,
                "p1 ran %" PRId64 " ms after the last create, period %d",
                ran_at - last_create, PERIOD_MS);
  ck_assert(ends_complete(h2, "bounced", "p1"));
  /* its key was let go of: the next create makes another */
  got = bounced_create(h2, "p3", "p", 3, &merged);
  ck_assert(!merged);
  ck_assert_str_eq(got, "p3");
  free(got);
  duro_engine_close(h2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("flow_hosts");
  TCase *tc = tcase_create("hosts");
  tcase_add_unchecked_fixture(tc, cluster_start, cluster_stop);
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, slots_are_exclusive);
  tcase_add_test(tc, two_hosts_share_a_key);
  tcase_add_test(tc, a_closed_host_gives_back);
  tcase_add_test(tc, hosts_take_turns_at_a_key);
  tcase_add_test(tc, rates_are_shared);
  tcase_add_test(tc, two_hosts_share_a_rate);
  tcase_add_test(tc, a_singleton_skips_across_hosts);
  tcase_add_test(tc, a_singleton_queues_across_hosts);
  tcase_add_test(tc, a_singleton_key_outlives_its_host);
  tcase_add_test(tc, a_debounce_merges_across_hosts);
  tcase_add_test(tc, a_pending_debounce_outlives_its_host);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
