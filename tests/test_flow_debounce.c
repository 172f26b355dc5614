/* test_flow_debounce.c — flow.debounce (host/flow/debounce.c) on a
 * virtual clock: the creates of a key within the period of the last are
 * one instance, answered with its id and `debounced`, which starts once
 * the key has been quiet for the period, with the last create's params;
 * max_wait bounds how long quiet spells may put it off; keys are apart,
 * params without the key are not debounced, a debounce without a key
 * makes the workflow one key; a batch merges its own items; creates that
 * race make one instance; a terminated pending instance is not merged
 * into; an engine closed and opened again on the journal keeps the
 * pending instance, its params and its start time; describe, GET
 * /workflows/{wf} and /metrics say what waits; on engine threads the
 * scheduler's pass starts it when due; a merge's params give the
 * instance its search attributes (the workflow's index) in place of
 * those of the params it replaced, listed by them at once.
 *
 * Each instance runs one step, "start", which notes its id and the
 * params it started with, and ends. */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "harness.h"
#include "suite_run.h"
#include "util.h"
#include "view_instance.h"

static harness h;
static duro_workflow_limits lim;

enum { STARTS = 64 };
static char start_ids[STARTS][48];
static char start_params[STARTS][64];
static int n_starts;
static pthread_mutex_t starts_mu = PTHREAD_MUTEX_INITIALIZER;

static int note_start(duro_attempt *a, void *arg) {
  const duro_event *ev = arg;
  pthread_mutex_lock(&starts_mu);
  if (n_starts < STARTS) {
    snprintf(start_ids[n_starts], sizeof start_ids[0], "%s", ev->instance_id);
    snprintf(start_params[n_starts], sizeof start_params[0], "%s", ev->params);
  }
  n_starts++;
  pthread_mutex_unlock(&starts_mu);
  return duro_attempt_result(a, "1");
}

static duro_rc doc(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  DURO_TRY(duro_do(step, "start", NULL, note_start, (void *)ev, NULL));
  return duro_set_output(step, "1");
}

static void register_doc(void) {
  ck_assert_int_eq(duro_engine_register(h.e, "doc", NULL, doc, &lim, "test"),
                   0);
}

/* period and max_wait in seconds; key NULL: the whole workflow. */
static void open_debounce(const char *key, int64_t period_s,
                          int64_t max_wait_s) {
  n_starts = 0;
  harness_open(&h);
  lim = (duro_workflow_limits){.flow_debounce_key = key,
                               .flow_debounce_ms = period_s * 1000,
                               .flow_debounce_max_wait_ms = max_wait_s * 1000};
  register_doc();
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
  register_doc();
  harness_start(&h);
}

static void teardown(void) { harness_close(&h); }

static char *params_of(const char *d, int v) {
  return d ? xasprintf("{\"d\":\"%s\",\"v\":%d}", d, v)
           : xasprintf("{\"v\":%d}", v);
}

/* Creates `id` with /d = d (NULL: none) and /v = v: the id that answered
 * (malloc'ed); *how the result's DURO_CREATE_* (0: created). */
static char *create(const char *id, const char *d, int v, int *how) {
  char *params = params_of(d, v);
  duro_create_req req = {.id = id, .params = params, .retention_ms = -1};
  duro_create_result r;
  ck_assert_int_eq(duro_instance_create_many(h.e, "doc", &req, 1, &r), 0);
  free(params);
  ck_assert_msg(r.n_created == 1, "create %s: %s", id,
                r.n_errors ? duro_err_name(r.errors[0].code) : "?");
  *how = r.skipped ? r.skipped[0] : 0;
  char *answer = r.created[0];
  r.created[0] = NULL;
  duro_create_result_free(&r);
  return answer;
}

static void created(const char *id, const char *d, int v) {
  int how;
  char *got = create(id, d, v, &how);
  ck_assert_msg(how == 0, "%s was answered by %s", id, got);
  ck_assert_str_eq(got, id);
  free(got);
}

static void debounced_into(const char *id, const char *d, int v,
                           const char *pending) {
  int how;
  char *got = create(id, d, v, &how);
  ck_assert_msg(how == DURO_CREATE_DEBOUNCED, "%s was created", id);
  ck_assert_str_eq(got, pending);
  free(got);
  duro_status s;
  ck_assert_int_eq(duro_instance_status(h.e, "doc", id, &s), DURO_E_NOT_FOUND);
}

static const char *status(const char *id) {
  return harness_status(&h, "doc", id);
}

/* The params instance `id` started with; fails when it did not start,
 * or started more than once. */
static const char *started_with(const char *id) {
  const char *found = NULL;
  for (int i = 0; i < n_starts && i < STARTS; i++)
    if (!strcmp(start_ids[i], id)) {
      ck_assert_msg(!found, "%s started twice", id);
      found = start_params[i];
    }
  ck_assert_msg(found, "%s did not start", id);
  return found;
}

static char *waiting_for(const char *id) {
  json_t *d = harness_describe(&h, "doc", id);
  const char *w = json_string_value(json_object_get(d, "waiting_for"));
  char *out = xstrdup(w ? w : "");
  json_decref(d);
  return out;
}

START_TEST(creates_within_the_period_are_one_instance_with_the_last_params) {
  open_debounce("/d", 30, 0);
  created("a", "d1", 1);
  harness_run(&h);
  ck_assert_str_eq(status("a"), "queued");
  harness_advance(&h, 10000);
  debounced_into("b", "d1", 2, "a");
  harness_advance(&h, 29000); /* 39 s from the first, 29 from the last */
  debounced_into("c", "d1", 3, "a");
  harness_advance(&h, 29999);
  ck_assert_int_eq(n_starts, 0);
  ck_assert_str_eq(status("a"), "queued");
  char *why = waiting_for("a");
  ck_assert_str_eq(why, "flow: debounce /d=\"d1\" (3 creates; starts in 1 ms "
                        "unless another comes)");
  free(why);
  harness_advance(&h, 1);
  ck_assert_int_eq(n_starts, 1);
  ck_assert_str_eq(started_with("a"), "{\"d\":\"d1\",\"v\":3}");
  ck_assert_str_eq(status("a"), "complete");
  /* the key is quiet again: the next create makes another instance */
  created("d", "d1", 4);
  debounced_into("e", "d1", 5, "d");
  harness_advance(&h, 30000);
  ck_assert_int_eq(n_starts, 2);
  ck_assert_str_eq(started_with("d"), "{\"d\":\"d1\",\"v\":5}");
}
END_TEST

START_TEST(keys_are_apart_and_params_without_the_key_are_not_debounced) {
  open_debounce("/d", 10, 0);
  created("a", "d1", 1);
  harness_advance(&h, 5000);
  created("b", "d2", 1);
  debounced_into("a2", "d1", 2, "a");
  created("z0", NULL, 1); /* no /d: not debounced, starts at once */
  created("z1", NULL, 2);
  harness_run(&h);
  ck_assert_int_eq(n_starts, 2);
  ck_assert_str_eq(status("z0"), "complete");
  ck_assert_str_eq(status("z1"), "complete");
  harness_advance(&h, 5000); /* b's 10 s are not up: a's moved too */
  ck_assert_int_eq(n_starts, 2);
  debounced_into("b2", "d2", 2, "b");
  harness_advance(&h, 5000);
  ck_assert_str_eq(started_with("a"), "{\"d\":\"d1\",\"v\":2}");
  ck_assert_str_eq(status("b"), "queued");
  harness_advance(&h, 5000);
  ck_assert_str_eq(started_with("b"), "{\"d\":\"d2\",\"v\":2}");
  ck_assert_int_eq(n_starts, 4);
}
END_TEST

START_TEST(max_wait_bounds_the_quiet_spells) {
  open_debounce("/d", 10, 25);
  created("a", "d1", 0);
  /* a create every 5 s: never 10 s of quiet */
  char id[16];
  int v = 1;
  for (; v <= 4; v++) {
    harness_advance(&h, 5000);
    snprintf(id, sizeof id, "m%d", v);
    debounced_into(id, "d1", v, "a");
  }
  ck_assert_int_eq(n_starts, 0);
  harness_advance(&h, 5000); /* 25 s from the first: it starts */
  ck_assert_int_eq(n_starts, 1);
  ck_assert_str_eq(started_with("a"), "{\"d\":\"d1\",\"v\":4}");
  created("b", "d1", 5); /* the next spell is a new instance */
  harness_advance(&h, 10000);
  ck_assert_str_eq(started_with("b"), "{\"d\":\"d1\",\"v\":5}");
}
END_TEST

START_TEST(without_a_key_the_workflow_is_one_key) {
  open_debounce(NULL, 10, 0);
  created("a", "d1", 1);
  debounced_into("b", "d2", 2, "a");
  debounced_into("c", NULL, 3, "a");
  char *metrics = duro_engine_metrics(h.e);
  ck_assert_ptr_nonnull(
      strstr(metrics, "duro_debounce_pending{workflow=\"doc\"} 1\n"));
  ck_assert_ptr_nonnull(
      strstr(metrics, "duro_debounce_merged_total{workflow=\"doc\"} 2\n"));
  free(metrics);
  harness_advance(&h, 10000);
  ck_assert_int_eq(n_starts, 1);
  ck_assert_str_eq(started_with("a"), "{\"v\":3}");
  json_t *stats = NULL;
  ck_assert_int_eq(duro_workflow_stats(h.e, "doc", &stats), 0);
  json_t *d = json_object_get(stats, "debounce");
  ck_assert_ptr_nonnull(d);
  ck_assert_str_eq(json_string_value(json_object_get(d, "key")), "");
  ck_assert_int_eq(json_integer_value(json_object_get(d, "period_ms")), 10000);
  ck_assert_int_eq(json_integer_value(json_object_get(d, "pending")), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(d, "merged")), 2);
  json_decref(stats);
}
END_TEST

START_TEST(a_batch_merges_its_own_items) {
  open_debounce("/d", 10, 0);
  duro_create_req reqs[4];
  const char *ids[] = {"a", "b", "c", "x"};
  const char *keys[] = {"d1", "d1", "d2", "d1"};
  char *params[4];
  for (int i = 0; i < 4; i++) {
    params[i] = params_of(keys[i], i);
    reqs[i] = (duro_create_req){
        .id = ids[i], .params = params[i], .retention_ms = -1};
  }
  duro_create_result r;
  ck_assert_int_eq(duro_instance_create_many(h.e, "doc", reqs, 4, &r), 0);
  ck_assert_int_eq(r.n_created, 4);
  ck_assert_int_eq(r.n_errors, 0);
  ck_assert_ptr_nonnull(r.skipped);
  const char *answers[] = {"a", "a", "c", "a"};
  const int how[] = {0, DURO_CREATE_DEBOUNCED, 0, DURO_CREATE_DEBOUNCED};
  for (int i = 0; i < 4; i++) {
    ck_assert_str_eq(r.created[i], answers[i]);
    ck_assert_int_eq(r.skipped[i], how[i]);
  }
  json_t *view = view_create_result(&r);
  json_t *second = json_array_get(json_object_get(view, "created"), 1);
  ck_assert(json_is_true(json_object_get(second, "debounced")));
  ck_assert_int_eq(json_integer_value(json_object_get(second, "index")), 1);
  json_decref(view);
  duro_create_result_free(&r);
  for (int i = 0; i < 4; i++)
    free(params[i]);
  harness_advance(&h, 10000);
  ck_assert_int_eq(n_starts, 2);
  ck_assert_str_eq(started_with("a"), "{\"d\":\"d1\",\"v\":3}");
  ck_assert_str_eq(started_with("c"), "{\"d\":\"d2\",\"v\":2}");
}
END_TEST

enum { RACERS = 4, EACH = 50 };
static char *answers[RACERS][EACH];
static int hows[RACERS][EACH];

static void *racer(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int i = 0; i < EACH; i++) {
    char id[32];
    snprintf(id, sizeof id, "r%d-%d", t, i);
    answers[t][i] = create(id, "d1", t * EACH + i, &hows[t][i]);
  }
  return NULL;
}

START_TEST(creates_that_race_make_one_instance) {
  open_debounce("/d", 10, 0);
  pthread_t th[RACERS];
  for (int t = 0; t < RACERS; t++)
    pthread_create(&th[t], NULL, racer, (void *)(intptr_t)t);
  for (int t = 0; t < RACERS; t++)
    pthread_join(th[t], NULL);
  const char *pending = NULL;
  int n_created = 0;
  for (int t = 0; t < RACERS; t++)
    for (int i = 0; i < EACH; i++)
      if (hows[t][i] == 0) {
        n_created++;
        pending = answers[t][i];
      }
  ck_assert_int_eq(n_created, 1);
  for (int t = 0; t < RACERS; t++)
    for (int i = 0; i < EACH; i++)
      ck_assert_str_eq(answers[t][i], pending);
  harness_advance(&h, 10000);
  ck_assert_int_eq(n_starts, 1);
  /* it started with one racer's last params */
  const char *p = started_with(pending);
  int v = -1;
  ck_assert_int_eq(sscanf(p, "{\"d\":\"d1\",\"v\":%d}", &v), 1);
  ck_assert_int_eq((v % EACH), EACH - 1);
  for (int t = 0; t < RACERS; t++)
    for (int i = 0; i < EACH; i++)
      free(answers[t][i]);
}
END_TEST

START_TEST(a_terminated_pending_instance_takes_no_more_creates) {
  open_debounce("/d", 10, 0);
  created("a", "d1", 1);
  harness_run(&h);
  ck_assert_int_eq(duro_instance_terminate(h.e, "doc", "a"), 0);
  harness_run(&h);
  ck_assert_str_eq(status("a"), "terminated");
  created("b", "d1", 2);
  harness_advance(&h, 10000);
  ck_assert_int_eq(n_starts, 1);
  ck_assert_str_eq(started_with("b"), "{\"d\":\"d1\",\"v\":2}");
}
END_TEST

START_TEST(a_paused_pending_instance_takes_creates_and_starts_when_resumed) {
  open_debounce("/d", 10, 0);
  created("a", "d1", 1);
  harness_run(&h);
  ck_assert_int_eq(duro_instance_pause(h.e, "doc", "a"), 0);
  harness_run(&h);
  ck_assert_str_eq(status("a"), "paused");
  debounced_into("b", "d1", 2, "a");
  harness_advance(&h, 20000);
  ck_assert_int_eq(n_starts, 0);
  ck_assert_int_eq(duro_instance_resume(h.e, "doc", "a"), 0);
  harness_run(&h);
  ck_assert_str_eq(started_with("a"), "{\"d\":\"d1\",\"v\":2}");
}
END_TEST

START_TEST(a_reopened_engine_keeps_the_pending_instance) {
  open_debounce("/d", 30, 0);
  created("a", "d1", 1);
  harness_advance(&h, 10000);
  debounced_into("b", "d1", 2, "a"); /* starts at 40 s */
  reopen();
  harness_advance(&h, 10000); /* 20 s */
  ck_assert_int_eq(n_starts, 0);
  ck_assert_str_eq(status("a"), "queued");
  debounced_into("c", "d1", 3, "a"); /* the new engine merges: 50 s */
  reopen();
  harness_advance(&h, 29000);
  ck_assert_int_eq(n_starts, 0);
  harness_advance(&h, 1000);
  ck_assert_int_eq(n_starts, 1);
  ck_assert_str_eq(started_with("a"), "{\"d\":\"d1\",\"v\":3}");
  ck_assert_str_eq(status("a"), "complete");
}
END_TEST

/* Worker threads run the activations, as in the host: the start comes
 * from the scheduler's pass when its time comes. */
START_TEST(engine_threads_start_it_when_due) {
  n_starts = 0;
  harness_open_workers_virtual(&h, 2);
  lim = (duro_workflow_limits){.flow_debounce_key = "/d",
                               .flow_debounce_ms = 5000};
  register_doc();
  harness_start(&h);
  created("a", "d1", 1);
  debounced_into("b", "d1", 2, "a");
  ck_assert_str_eq(status("a"), "queued");
  duro_clock_advance(&h.clock, 5000);
  duro_engine_scheduler_pass(h.e);
  for (int i = 0; i < 30000 && strcmp(status("a"), "complete"); i++) {
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  ck_assert_str_eq(status("a"), "complete");
  pthread_mutex_lock(&starts_mu);
  ck_assert_str_eq(started_with("a"), "{\"d\":\"d1\",\"v\":2}");
  pthread_mutex_unlock(&starts_mu);
}
END_TEST

/* The ids of doc's instances whose attributes pass `term`, "|a|b|". */
static char *listed_by(const char *term) {
  duro_attr_filter w;
  char err[200];
  ck_assert_msg(duro_list_where_parse(h.e, "doc", term, &w, err, sizeof err) ==
                    0,
                "%s: %s", term, err);
  duro_list_filter f = {.status = -1, .where = &w, .n_where = 1};
  duro_instance_page p;
  ck_assert_int_eq(duro_instance_list_page(h.e, "doc", &f, 100, NULL, &p), 0);
  duro_attr_filter_clear(&w);
  char *out = xstrdup("|");
  for (size_t i = 0; i < p.n; i++) {
    char *more = xasprintf("%s%s|", out, p.v[i].id);
    free(out);
    out = more;
  }
  duro_instance_page_free(&p);
  return out;
}

static void assert_listed_by(const char *term, const char *want) {
  char *got = listed_by(term);
  ck_assert_msg(!strcmp(got, want), "%s: %s, not %s", term, got, want);
  free(got);
}

static char *attributes_of(const char *id) {
  json_t *d = harness_describe(&h, "doc", id);
  char *s = json_dumps(json_object_get(d, "attributes"),
                       JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(d);
  return s;
}

/* A merge replaces the pending instance's params, and with them its
 * search attributes: the values the new params give, none of the old
 * ones (a tag the merged params lack is gone), in the merge's commit. */
START_TEST(a_merge_gives_the_attributes_of_its_params) {
  static const duro_attr_decl index[] = {{"doc", "/d", DURO_ATTR_STRING},
                                         {"version", "/v", DURO_ATTR_NUMBER},
                                         {"tag", "/t", DURO_ATTR_STRING}};
  n_starts = 0;
  harness_open(&h);
  lim = (duro_workflow_limits){.flow_debounce_key = "/d",
                               .flow_debounce_ms = 30000,
                               .index = index,
                               .n_index = 3};
  register_doc();
  harness_start(&h);
  duro_create_req first = {.id = "a",
                           .params = "{\"d\":\"d1\",\"v\":1,\"t\":\"draft\"}",
                           .retention_ms = -1};
  duro_create_result r;
  ck_assert_int_eq(duro_instance_create_many(h.e, "doc", &first, 1, &r), 0);
  duro_create_result_free(&r);
  harness_run(&h);
  char *a = attributes_of("a");
  ck_assert_str_eq(a, "{\"doc\":\"d1\",\"tag\":\"draft\",\"version\":1}");
  free(a);
  harness_advance(&h, 1000);
  debounced_into("b", "d1", 2, "a");
  a = attributes_of("a");
  ck_assert_str_eq(a, "{\"doc\":\"d1\",\"version\":2}");
  free(a);
  assert_listed_by("version:2", "|a|");
  assert_listed_by("version:1", "|");
  assert_listed_by("tag:draft", "|");
  assert_listed_by("doc:d1", "|a|");
  harness_advance(&h, 30000);
  ck_assert_str_eq(started_with("a"), "{\"d\":\"d1\",\"v\":2}");
  assert_listed_by("version:2", "|a|");
}
END_TEST

static Suite *debounce_suite(void) {
  Suite *s = suite_create("flow_debounce");
  TCase *tc = tcase_create("debounce");
  tcase_add_checked_fixture(tc, NULL, teardown);
  tcase_set_timeout(tc, 240);
  tcase_add_test(
      tc, creates_within_the_period_are_one_instance_with_the_last_params);
  tcase_add_test(tc,
                 keys_are_apart_and_params_without_the_key_are_not_debounced);
  tcase_add_test(tc, max_wait_bounds_the_quiet_spells);
  tcase_add_test(tc, without_a_key_the_workflow_is_one_key);
  tcase_add_test(tc, a_batch_merges_its_own_items);
  tcase_add_test(tc, creates_that_race_make_one_instance);
  tcase_add_test(tc, a_terminated_pending_instance_takes_no_more_creates);
  tcase_add_test(
      tc, a_paused_pending_instance_takes_creates_and_starts_when_resumed);
  tcase_add_test(tc, a_reopened_engine_keeps_the_pending_instance);
  tcase_add_test(tc, engine_threads_start_it_when_due);
  tcase_add_test(tc, a_merge_gives_the_attributes_of_its_params);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(debounce_suite()); }
