/* test_flow_singleton.c — flow.singleton (host/flow/singleton.c) on a
 * virtual clock: skip answers a create with its key's live instance and
 * creates nothing, until that one ends; creates of one key that race
 * create one; a batch says per item what was skipped; queue starts a
 * key's instances one at a time in creation order (a burst of 200), keys
 * apart; a paused holder keeps its key, a terminated one passes it on;
 * an engine closed and opened again on the journal keeps it exact;
 * on_excess: reject refuses a queue's create whose key is live.
 *
 * Each instance runs a step "start", sleeps a second (live, not
 * running), then a step "finish" and ends: between the two steps it
 * holds its key, so no other instance of the key may start meanwhile. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "harness.h"
#include "suite_run.h"
#include "util.h"

static harness h;
static duro_workflow_limits lim;

/* Per key (an id's first letter): started and not finished now, the
 * most at once, and the starts in order. */
enum { KEYS = 26, STARTS = 512 };
static int holding[KEYS], most[KEYS];
static char starts[KEYS][STARTS][16];
static int n_starts[KEYS];

static void reset(void) {
  memset(holding, 0, sizeof holding);
  memset(most, 0, sizeof most);
  memset(n_starts, 0, sizeof n_starts);
}

static int key_of(const char *id) { return (id[0] - 'a') % KEYS; }

static pthread_mutex_t counts_mu = PTHREAD_MUTEX_INITIALIZER;

static int note_start(duro_attempt *a, void *arg) {
  const char *id = arg;
  int k = key_of(id);
  pthread_mutex_lock(&counts_mu);
  if (++holding[k] > most[k])
    most[k] = holding[k];
  if (n_starts[k] < STARTS)
    snprintf(starts[k][n_starts[k]], sizeof starts[k][0], "%s", id);
  n_starts[k]++;
  pthread_mutex_unlock(&counts_mu);
  return duro_attempt_result(a, "1");
}

static int note_finish(duro_attempt *a, void *arg) {
  pthread_mutex_lock(&counts_mu);
  holding[key_of(arg)]--;
  pthread_mutex_unlock(&counts_mu);
  return duro_attempt_result(a, "1");
}

static duro_rc single(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  void *id = (void *)ev->instance_id;
  DURO_TRY(duro_do(step, "start", NULL, note_start, id, NULL));
  DURO_TRY(duro_sleep(step, "hold", "1 second"));
  DURO_TRY(duro_do(step, "finish", NULL, note_finish, id, NULL));
  return duro_set_output(step, "1");
}

/* The same holding its key until an event "go" comes. */
static duro_rc waiter(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  void *id = (void *)ev->instance_id;
  const char *go;
  DURO_TRY(duro_do(step, "start", NULL, note_start, id, NULL));
  DURO_TRY(duro_wait_for_event(step, "go", "go", NULL, &go));
  DURO_TRY(duro_do(step, "finish", NULL, note_finish, id, NULL));
  return duro_set_output(step, "1");
}

static void register_single(void) {
  ck_assert_int_eq(
      duro_engine_register(h.e, "single", NULL, single, &lim, "test"), 0);
}

static void open_mode(int mode, int reject) {
  reset();
  harness_open(&h);
  lim = (duro_workflow_limits){.flow_singleton_key = "/u",
                               .flow_singleton_mode = mode,
                               .flow_reject = reject};
  register_single();
  harness_start(&h);
}

/* Closes the engine and opens another on the same journal, as a restart
 * of the host does: nothing of the first's memory is kept. */
static void reopen(void) {
  duro_engine_close(h.e);
  duro_engine_options opt = {
      .db_path = h.db, .backend = harness_backend(), .clock = &h.clock};
  char err[256];
  ck_assert_msg(duro_engine_open(&opt, &h.e, err, sizeof err) == 0, "%s", err);
  register_single();
  harness_start(&h);
}

static void teardown(void) { harness_close(&h); }

static char *params_of(const char *u) {
  return u ? xasprintf("{\"u\":\"%s\"}", u) : xasprintf("{}");
}

/* Creates `id` with /u = u (NULL: none): the id that answered
 * (malloc'ed), *skipped whether it was its key's live one. */
static char *create(const char *id, const char *u, int *skipped) {
  char *params = params_of(u);
  duro_create_req req = {.id = id, .params = params, .retention_ms = -1};
  duro_create_result r;
  ck_assert_int_eq(duro_instance_create_many(h.e, "single", &req, 1, &r), 0);
  free(params);
  ck_assert_msg(r.n_created == 1, "create %s: %s", id,
                r.n_errors ? duro_err_name(r.errors[0].code) : "?");
  *skipped = r.skipped && r.skipped[0];
  ck_assert_int_eq(r.n_skipped, (size_t)*skipped);
  char *answer = r.created[0];
  r.created[0] = NULL;
  duro_create_result_free(&r);
  return answer;
}

static void created(const char *id, const char *u) {
  int skipped;
  char *got = create(id, u, &skipped);
  ck_assert_msg(!skipped, "%s was skipped for %s", id, got);
  ck_assert_str_eq(got, id);
  free(got);
}

static void skipped_for(const char *id, const char *u, const char *live) {
  int skipped;
  char *got = create(id, u, &skipped);
  ck_assert_msg(skipped, "%s was created", id);
  ck_assert_str_eq(got, live);
  free(got);
  duro_status s;
  ck_assert_int_eq(duro_instance_status(h.e, "single", id, &s),
                   DURO_E_NOT_FOUND);
}

static const char *status(const char *id) {
  return harness_status(&h, "single", id);
}

/* describe's waiting_for ("" when it says none). */
static char *waiting_for(const char *id) {
  json_t *d = harness_describe(&h, "single", id);
  const char *w = json_string_value(json_object_get(d, "waiting_for"));
  char *out = xstrdup(w ? w : "");
  json_decref(d);
  return out;
}

START_TEST(skip_answers_with_the_live_instance) {
  open_mode(DURO_SINGLETON_SKIP, 0);
  created("a0", "a");
  skipped_for("a1", "a", "a0"); /* queued counts as live */
  char *id = NULL;
  ck_assert_int_eq(
      duro_instance_create(h.e, "single", "a2", "{\"u\":\"a\"}", -1, &id), 0);
  ck_assert_str_eq(id, "a0"); /* the single create says the live one too */
  free(id);
  harness_run(&h);
  ck_assert_str_eq(status("a0"), "waiting");
  skipped_for("a3", "a", "a0"); /* sleeping counts as live */
  created("b0", "b");           /* another key */
  created("z0", NULL);          /* params without the key: not limited */
  created("z1", NULL);
  harness_advance(&h, 1000);
  ck_assert_str_eq(status("a0"), "complete");
  created("a4", "a"); /* the live one ended: a new one is created */
  skipped_for("a5", "a", "a4");
  harness_advance(&h, 1000);
  ck_assert_int_eq(n_starts[key_of("a")], 2);
  ck_assert_int_eq(most[key_of("a")], 1);
}
END_TEST

START_TEST(a_batch_says_which_it_skipped) {
  open_mode(DURO_SINGLETON_SKIP, 0);
  created("a0", "a");
  duro_create_req reqs[5];
  const char *ids[] = {"a1", "c0", "c1", "a0", "d0"};
  const char *keys[] = {"a", "c", "c", "x", "d"};
  char *params[5];
  for (int i = 0; i < 5; i++) {
    params[i] = params_of(keys[i]);
    reqs[i] = (duro_create_req){
        .id = ids[i], .params = params[i], .retention_ms = -1};
  }
  json_t *out = NULL;
  ck_assert_int_eq(duro_instance_create_batch(h.e, "single", reqs, 5, &out), 0);
  for (int i = 0; i < 5; i++)
    free(params[i]);
  /* a1 skipped for a0, c0 created, c1 skipped for c0 (in the same
   * batch), a0 again a duplicate (an error), d0 created */
  char *text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(out);
  ck_assert_msg(strstr(text, "\"created\":[{\"id\":\"a0\",\"index\":0,"
                             "\"skipped\":true},{\"id\":\"c0\"},{\"id\":"
                             "\"c0\",\"index\":2,\"skipped\":true},{\"id\":"
                             "\"d0\"}]") != NULL,
                "%s", text);
  ck_assert_msg(strstr(text, "\"index\":3") != NULL, "%s", text);
  free(text);
  duro_status s;
  ck_assert_int_eq(duro_instance_status(h.e, "single", "c1", &s),
                   DURO_E_NOT_FOUND);
}
END_TEST

/* Creates of one key from several threads at once. */
enum { RACERS = 8, EACH = 25 };
static char *answers[RACERS][EACH];
static int was_skipped[RACERS][EACH];

static void *racer(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int i = 0; i < EACH; i++) {
    char id[32];
    snprintf(id, sizeof id, "r%d-%d", t, i);
    duro_create_req req = {
        .id = id, .params = "{\"u\":\"r\"}", .retention_ms = -1};
    duro_create_result r;
    if (duro_instance_create_many(h.e, "single", &req, 1, &r) == 0 &&
        r.n_created == 1) {
      answers[t][i] = r.created[0];
      was_skipped[t][i] = r.skipped && r.skipped[0];
      r.created[0] = NULL;
    }
    duro_create_result_free(&r);
  }
  return NULL;
}

START_TEST(creates_of_a_key_that_race_create_one) {
  open_mode(DURO_SINGLETON_SKIP, 0);
  pthread_t th[RACERS];
  for (int t = 0; t < RACERS; t++)
    pthread_create(&th[t], NULL, racer, (void *)(intptr_t)t);
  for (int t = 0; t < RACERS; t++)
    pthread_join(th[t], NULL);
  int n_created = 0;
  const char *live = NULL;
  for (int t = 0; t < RACERS; t++)
    for (int i = 0; i < EACH; i++) {
      ck_assert_ptr_nonnull(answers[t][i]);
      if (!was_skipped[t][i]) {
        n_created++;
        live = answers[t][i];
      }
    }
  ck_assert_int_eq(n_created, 1);
  int existing = 0;
  for (int t = 0; t < RACERS; t++)
    for (int i = 0; i < EACH; i++) {
      ck_assert_str_eq(answers[t][i], live);
      char id[32];
      snprintf(id, sizeof id, "r%d-%d", t, i);
      duro_status s;
      existing += duro_instance_status(h.e, "single", id, &s) == 0;
    }
  ck_assert_int_eq(existing, 1);
  for (int t = 0; t < RACERS; t++)
    for (int i = 0; i < EACH; i++)
      free(answers[t][i]);
}
END_TEST

/* One create of id `id` with key u, from a thread of its own. */
typedef struct one_create {
  const char *id;
  char u[16];
  int rc; /* the request's: 0 created, else its error */
  pthread_t th;
} one_create;

static void *create_once(void *arg) {
  one_create *c = arg;
  char *params = params_of(c->u);
  duro_create_req req = {.id = c->id, .params = params, .retention_ms = -1};
  duro_create_result r;
  c->rc = -1;
  if (duro_instance_create_many(h.e, "single", &req, 1, &r) == 0)
    c->rc = r.n_created == 1 && !r.n_skipped ? 0
            : r.n_errors                     ? r.errors[0].code
                                             : -1;
  duro_create_result_free(&r);
  free(params);
  return NULL;
}

/* Two creates of one id and two keys race: the one created holds its
 * key, the other's key stays free. */
START_TEST(one_id_racing_for_two_keys_holds_the_created_ones) {
  open_mode(DURO_SINGLETON_SKIP, 0);
  for (int i = 0; i < 40; i++) {
    char id[16];
    snprintf(id, sizeof id, "x%d", i);
    one_create c[2] = {{.id = id}, {.id = id}};
    snprintf(c[0].u, sizeof c[0].u, "a%d", i);
    snprintf(c[1].u, sizeof c[1].u, "b%d", i);
    for (int k = 0; k < 2; k++)
      pthread_create(&c[k].th, NULL, create_once, &c[k]);
    for (int k = 0; k < 2; k++)
      pthread_join(c[k].th, NULL);
    ck_assert_msg((c[0].rc == 0) + (c[1].rc == 0) == 1, "%s: %d %d", id,
                  c[0].rc, c[1].rc);
    const one_create *won = c[0].rc == 0 ? &c[0] : &c[1];
    const one_create *lost = c[0].rc == 0 ? &c[1] : &c[0];
    ck_assert_int_eq(lost->rc, DURO_E_ALREADY_EXISTS);
    char other[16];
    snprintf(other, sizeof other, "y%d", i);
    skipped_for(other, won->u, id);
    created(other, lost->u);
  }
}
END_TEST

START_TEST(queue_starts_a_key_one_at_a_time_in_order) {
  open_mode(DURO_SINGLETON_QUEUE, 0);
  enum { BURST = 200 };
  char id[16];
  for (int i = 0; i < BURST; i++) {
    snprintf(id, sizeof id, "a%d", i);
    created(id, "a");
  }
  for (int i = 0; i < 3; i++) {
    snprintf(id, sizeof id, "b%d", i);
    created(id, "b");
  }
  harness_run(&h);
  /* one of each key started: b0 did not wait for a's */
  ck_assert_int_eq(n_starts[key_of("a")], 1);
  ck_assert_int_eq(n_starts[key_of("b")], 1);
  ck_assert_str_eq(status("a0"), "waiting");
  ck_assert_str_eq(status("a1"), "queued");
  char *why = waiting_for("a1");
  ck_assert_str_eq(why, "flow: singleton /u=\"a\" (held by a0)");
  free(why);
  why = waiting_for("a0");
  ck_assert_str_eq(why, "");
  free(why);
  char *metrics = duro_engine_metrics(h.e);
  ck_assert_ptr_nonnull(
      strstr(metrics, "duro_singleton_keys{workflow=\"single\"} 2\n"));
  ck_assert_ptr_nonnull(
      strstr(metrics, "duro_singleton_waiting{workflow=\"single\"} 201\n"));
  free(metrics);
  json_t *stats = NULL;
  ck_assert_int_eq(duro_workflow_stats(h.e, "single", &stats), 0);
  char *text = json_dumps(json_object_get(stats, "singleton"), JSON_COMPACT);
  ck_assert_str_eq(text, "{\"key\":\"/u\",\"mode\":\"queue\",\"keys\":2,"
                         "\"live\":203,\"waiting\":201}");
  free(text);
  json_decref(stats);
  for (int i = 0; i < BURST + 5 && n_starts[key_of("a")] < BURST; i++)
    harness_advance(&h, 1000);
  harness_advance(&h, 1000);
  ck_assert_int_eq(n_starts[key_of("a")], BURST);
  ck_assert_int_eq(most[key_of("a")], 1);
  ck_assert_int_eq(most[key_of("b")], 1);
  for (int i = 0; i < BURST; i++) {
    snprintf(id, sizeof id, "a%d", i);
    ck_assert_str_eq(starts[key_of("a")][i], id);
    ck_assert_str_eq(status(id), "complete");
  }
  ck_assert_int_eq(n_starts[key_of("b")], 3);
}
END_TEST

START_TEST(a_paused_holder_keeps_its_key_a_terminated_one_passes_it) {
  open_mode(DURO_SINGLETON_QUEUE, 0);
  created("a0", "a");
  created("a1", "a");
  created("a2", "a");
  harness_run(&h);
  ck_assert_str_eq(status("a0"), "waiting");
  ck_assert_int_eq(duro_instance_pause(h.e, "single", "a0"), 0);
  harness_advance(&h, 5000);
  ck_assert_str_eq(status("a0"), "paused");
  ck_assert_str_eq(status("a1"), "queued"); /* paused is live */
  ck_assert_int_eq(n_starts[key_of("a")], 1);
  /* a parked one terminated gives up its place, and holds nothing */
  ck_assert_int_eq(duro_instance_terminate(h.e, "single", "a1"), 0);
  harness_run(&h);
  ck_assert_str_eq(status("a1"), "terminated");
  ck_assert_str_eq(status("a2"), "queued");
  char *why = waiting_for("a2");
  ck_assert_str_eq(why, "flow: singleton /u=\"a\" (held by a0)");
  free(why);
  /* the holder terminated while paused: the next one starts */
  ck_assert_int_eq(duro_instance_terminate(h.e, "single", "a0"), 0);
  harness_run(&h);
  ck_assert_str_eq(status("a0"), "terminated");
  ck_assert_str_eq(status("a2"), "waiting");
  ck_assert_int_eq(n_starts[key_of("a")], 2);
  ck_assert_str_eq(starts[key_of("a")][1], "a2");
  harness_advance(&h, 1000);
  ck_assert_str_eq(status("a2"), "complete");
}
END_TEST

START_TEST(a_restarted_instance_waits_for_its_key_again) {
  open_mode(DURO_SINGLETON_QUEUE, 0);
  created("a0", "a");
  harness_run(&h);
  harness_advance(&h, 1000);
  ck_assert_str_eq(status("a0"), "complete");
  created("a1", "a");
  harness_run(&h);
  ck_assert_str_eq(status("a1"), "waiting");
  /* live again: behind a1, which holds the key now */
  ck_assert_int_eq(duro_instance_restart(h.e, "single", "a0", NULL, 0), 0);
  harness_run(&h);
  ck_assert_str_eq(status("a0"), "queued");
  ck_assert_int_eq(n_starts[key_of("a")], 2);
  char *why = waiting_for("a0");
  ck_assert_str_eq(why, "flow: singleton /u=\"a\" (held by a1)");
  free(why);
  harness_advance(&h, 1000);
  ck_assert_str_eq(status("a1"), "complete");
  ck_assert_str_eq(status("a0"), "waiting");
  ck_assert_int_eq(most[key_of("a")], 1);
}
END_TEST

START_TEST(a_reopened_engine_keeps_the_queue_exact) {
  open_mode(DURO_SINGLETON_QUEUE, 0);
  char id[16];
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "a%d", i);
    created(id, "a");
  }
  harness_run(&h);
  ck_assert_str_eq(status("a0"), "waiting");
  reopen();
  harness_run(&h);
  /* a0 still holds the key: nobody else started on the new engine */
  ck_assert_int_eq(n_starts[key_of("a")], 1);
  ck_assert_str_eq(status("a1"), "queued");
  char *why = waiting_for("a1");
  ck_assert_str_eq(why, "flow: singleton /u=\"a\" (held by a0)");
  free(why);
  harness_advance(&h, 1000);
  ck_assert_str_eq(status("a0"), "complete");
  ck_assert_str_eq(status("a1"), "waiting");
  reopen();
  for (int i = 0; i < 8; i++)
    harness_advance(&h, 1000);
  ck_assert_int_eq(n_starts[key_of("a")], 5);
  ck_assert_int_eq(most[key_of("a")], 1);
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "a%d", i);
    ck_assert_str_eq(starts[key_of("a")][i], id);
    ck_assert_str_eq(status(id), "complete");
  }
}
END_TEST

START_TEST(a_reopened_engine_keeps_the_skip_exact) {
  open_mode(DURO_SINGLETON_SKIP, 0);
  created("a0", "a");
  created("b0", "b");
  harness_run(&h);    /* a0 and b0 sleep */
  created("c0", "c"); /* queued, never started */
  reopen();
  skipped_for("a1", "a", "a0");
  skipped_for("c1", "c", "c0");
  harness_advance(&h, 1000);
  ck_assert_str_eq(status("a0"), "complete");
  created("a2", "a");
  skipped_for("a3", "a", "a2");
}
END_TEST

START_TEST(reject_refuses_a_create_whose_key_is_live) {
  open_mode(DURO_SINGLETON_QUEUE, 1);
  created("a0", "a");
  const char *params = "{\"u\":\"a\"}";
  duro_create_req req = {.id = "a1", .params = params, .retention_ms = -1};
  duro_create_result r;
  ck_assert_int_eq(duro_instance_create_many(h.e, "single", &req, 1, &r), 0);
  ck_assert_int_eq(r.n_created, 0);
  ck_assert_int_eq(r.n_errors, 1);
  ck_assert_int_eq(r.errors[0].code, DURO_E_FLOW_REJECTED);
  ck_assert_int_gt(r.errors[0].retry_after_ms, 0);
  duro_create_result_free(&r);
  created("b0", "b");
  harness_run(&h);
  harness_advance(&h, 1000);
  ck_assert_str_eq(status("a0"), "complete");
  created("a2", "a");
}
END_TEST

/* Polls (at most 60 s) until instance id of wf is `want`. */
static int becomes(const char *wf, const char *id, const char *want) {
  for (int i = 0; i < 30000; i++) {
    duro_status st;
    if (duro_instance_status(h.e, wf, id, &st) == 0 &&
        !strcmp(duro_status_name(st), want))
      return 1;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* Worker threads run the activations, as in the host: the next of a key
 * starts when its holder completes (the holder's release hands it over)
 * and when an idle holder is terminated (no activation ends: the
 * driver's own waker hands it over). */
START_TEST(engine_threads_pass_the_key_on) {
  reset();
  harness_open_workers_virtual(&h, 4);
  lim = (duro_workflow_limits){.flow_singleton_key = "/u",
                               .flow_singleton_mode = DURO_SINGLETON_QUEUE};
  ck_assert_int_eq(
      duro_engine_register(h.e, "waiter", NULL, waiter, &lim, "test"), 0);
  harness_start(&h);
  enum { N = 10 };
  char id[16];
  for (int i = 0; i < N; i++) {
    snprintf(id, sizeof id, "a%d", i);
    char *params = params_of("a");
    ck_assert_int_eq(duro_instance_create(h.e, "waiter", id, params, -1, NULL),
                     0);
    free(params);
  }
  char *params = params_of("b");
  ck_assert_int_eq(duro_instance_create(h.e, "waiter", "b0", params, -1, NULL),
                   0);
  free(params);
  ck_assert(becomes("waiter", "b0", "waiting")); /* keys apart */
  for (int i = 0; i < N; i++) {
    snprintf(id, sizeof id, "a%d", i);
    ck_assert_msg(becomes("waiter", id, "waiting"), "%s", id);
    /* it holds the key: none after it started */
    pthread_mutex_lock(&counts_mu);
    int started = n_starts[key_of("a")];
    pthread_mutex_unlock(&counts_mu);
    ck_assert_int_eq(started, i + 1);
    if (i % 2) {
      ck_assert_int_eq(duro_instance_terminate(h.e, "waiter", id), 0);
      ck_assert(becomes("waiter", id, "terminated"));
    } else {
      ck_assert_int_eq(
          duro_instance_send_event(h.e, "waiter", id, "go", "null"), 0);
      ck_assert(becomes("waiter", id, "complete"));
    }
  }
  for (int i = 0; i < N; i++) {
    snprintf(id, sizeof id, "a%d", i);
    ck_assert_str_eq(starts[key_of("a")][i], id);
  }
}
END_TEST

static Suite *singleton_suite(void) {
  Suite *s = suite_create("flow_singleton");
  TCase *tc = tcase_create("singleton");
  tcase_add_checked_fixture(tc, NULL, teardown);
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, skip_answers_with_the_live_instance);
  tcase_add_test(tc, a_batch_says_which_it_skipped);
  tcase_add_test(tc, creates_of_a_key_that_race_create_one);
  tcase_add_test(tc, one_id_racing_for_two_keys_holds_the_created_ones);
  tcase_add_test(tc, queue_starts_a_key_one_at_a_time_in_order);
  tcase_add_test(tc, a_paused_holder_keeps_its_key_a_terminated_one_passes_it);
  tcase_add_test(tc, a_restarted_instance_waits_for_its_key_again);
  tcase_add_test(tc, a_reopened_engine_keeps_the_queue_exact);
  tcase_add_test(tc, a_reopened_engine_keeps_the_skip_exact);
  tcase_add_test(tc, reject_refuses_a_create_whose_key_is_live);
  tcase_add_test(tc, engine_threads_pass_the_key_on);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(singleton_suite()); }
