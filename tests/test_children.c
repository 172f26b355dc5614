/* test_children.c — child workflows (duro_child_start, duro_child_wait,
 * and the children driver, host/children/) on the real engine with a
 * fresh SQLite journal, workers = 0 and a virtual clock:
 *
 *   fan_out_and_sum     a parent starts 20 children and sums their
 *                       outputs; each child's describe names its parent,
 *                       the parent's lists them;
 *   replay_starts_none  a parent that suspends after its starts replays
 *                       them: no second child, the same ids;
 *   child_error_is_step_error  a child that errors: the parent's wait
 *                       fails with the child's error, which run() may
 *                       handle; a terminated child's is
 *                       instance.terminated;
 *   parent_end_terminates  a parent that ends while its child (and that
 *                       child's own child) still run: both terminated;
 *                       with DURO_PARENT_CLOSE_ABANDON the child runs on
 *                       and completes;
 *   parent_end_rolls_back  with DURO_PARENT_CLOSE_ROLLBACK the child's
 *                       rollbacks run, once, before it is terminated;
 *   deadline_inherited  a child of a parent with a deadline, of a
 *                       workflow with no timeout, gets the parent's;
 *   existing_id_refused a child id that exists fails the step for good;
 *   reserved_events     no client sends an event of the host's own
 *                       ("duro.") types. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "harness.h"
#include "suite_run.h"

#define SEC 1000LL
#define MIN (60 * SEC)
#define HOUR (60 * MIN)

#define PARENT "parent"
#define PART "part"

static harness H;
static json_t *last_desc;

static struct {
  int starts[4];     /* child starts seen by run() (not replays), by slot */
  char ids[32][128]; /* the ids duro_child_start gave */
  int n_ids;
  int undone;           /* a child's rollbacks run */
  int caught;           /* the parent handled a child's error */
  char caught_name[64]; /* its name */
} C;

static void setup(void) {
  memset(&C, 0, sizeof C);
  harness_open(&H);
}

static void teardown(void) {
  json_decref(last_desc);
  last_desc = NULL;
  harness_close(&H);
}

static int64_t param(const duro_event *ev, const char *pointer, int64_t dflt) {
  int64_t v = dflt;
  duro_json_integer(ev->params, pointer, &v);
  return v;
}

/* ---- workflows ----------------------------------------------------------- */

static int work(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

static int undo_work(duro_attempt *a, const char *output, void *arg) {
  (void)output, (void)arg;
  C.undone++;
  return duro_attempt_result(a, "true");
}

/* A child: output i*i; {"fail":1} errors; {"sleep":1} first sleeps an
 * hour; {"grand":1} starts a sleeping child of its own, then sleeps;
 * {"undo":1} first runs a step with a rollback. */
static duro_rc wf_part(duro_step *step, const duro_event *ev, duro_env *env) {
  int64_t i = param(ev, "/i", 0);
  static const duro_rollback_cfg undo = {.fn = undo_work};
  if (param(ev, "/undo", 0))
    DURO_TRY(
        duro_do_with_rollback(step, "work", NULL, work, NULL, &undo, NULL));
  if (param(ev, "/grand", 0)) {
    const char *id;
    DURO_TRY(duro_child_start(
        step, "grandchild", duro_env_workflow(env, "PART"), NULL,
        "{\"sleep\":1}", DURO_PARENT_CLOSE_TERMINATE, &id));
    snprintf(C.ids[C.n_ids++], sizeof C.ids[0], "%s", id);
  }
  if (param(ev, "/sleep", 0))
    DURO_TRY(duro_sleep(step, "nap", "1 hour"));
  if (param(ev, "/fail", 0))
    return duro_fail(step, "part %lld failed", (long long)i);
  char out[32];
  snprintf(out, sizeof out, "%lld", (long long)(i * i));
  return duro_set_output(step, out);
}

/* Starts n parts ({"i": k}), then waits for each and sums their outputs;
 * {"catch":1}: a part's error is handled (recorded, the sum goes on). */
static duro_rc wf_parent(duro_step *step, const duro_event *ev, duro_env *env) {
  duro_workflow *part = duro_env_workflow(env, "PART");
  int64_t n = param(ev, "/n", 1), fail_at = param(ev, "/fail_at", -1);
  const char *ids[32];
  for (int64_t k = 0; k < n && k < 32; k++) {
    char name[32], params[64];
    snprintf(name, sizeof name, "part %lld", (long long)k);
    snprintf(params, sizeof params, "{\"i\":%lld,\"fail\":%d}", (long long)k,
             k == fail_at);
    duro_rc rc = duro_child_start(step, name, part, NULL, params,
                                  DURO_PARENT_CLOSE_TERMINATE, &ids[k]);
    if (rc != DURO_OK)
      return rc;
    snprintf(C.ids[k], sizeof C.ids[0], "%s", ids[k]);
    if (k + 1 > C.n_ids)
      C.n_ids = (int)k + 1;
  }
  /* a suspension between the starts and the waits: the waits replay them */
  if (param(ev, "/nap", 0))
    DURO_TRY(duro_sleep(step, "between", "1 minute"));
  int64_t sum = 0;
  for (int64_t k = 0; k < n && k < 32; k++) {
    const char *out;
    duro_rc rc = duro_child_wait(step, "part done", part, ids[k], &out);
    if (rc == DURO_ERROR && param(ev, "/catch", 0)) {
      C.caught++;
      const char *err = duro_step_error(step);
      const char *name = duro_json_string(err, "/name");
      snprintf(C.caught_name, sizeof C.caught_name, "%s", name ? name : "");
      continue;
    }
    if (rc != DURO_OK)
      return rc;
    int64_t v = 0;
    duro_json_integer(out, "", &v);
    sum += v;
  }
  char out[32];
  snprintf(out, sizeof out, "%lld", (long long)sum);
  return duro_set_output(step, out);
}

/* Starts one sleeping child ({"grand":1}: one that starts its own) with
 * the parent_close of its params, then ends after a minute. */
static duro_rc wf_short_parent(duro_step *step, const duro_event *ev,
                               duro_env *env) {
  const char *id;
  char params[64];
  snprintf(params, sizeof params, "{\"sleep\":1,\"grand\":%lld,\"undo\":1}",
           (long long)param(ev, "/grand", 0));
  DURO_TRY(duro_child_start(step, "child", duro_env_workflow(env, "PART"),
                            "kid", params, (int)param(ev, "/close", 0), &id));
  DURO_TRY(duro_sleep(step, "a while", "1 minute"));
  return duro_set_output(step, "\"done\"");
}

/* ---- helpers ------------------------------------------------------------- */

static void start(duro_run_fn parent) {
  harness_register(&H, PARENT, parent);
  harness_register_binding(&H, PART, "PART", wf_part);
  harness_start(&H);
}

static void create(const char *id, const char *params, int64_t timeout_ms) {
  harness_create(&H, PARENT, id, params, timeout_ms);
}

static json_t *desc(const char *wf, const char *id) {
  json_decref(last_desc);
  last_desc = harness_describe(&H, wf, id);
  return last_desc;
}

static const char *jstr(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  ck_assert_msg(json_is_string(v), "\"%s\" is not a string", key);
  return json_string_value(v);
}

static const char *status_of(const char *wf, const char *id) {
  return harness_status(&H, wf, id);
}

static size_t count_of(const char *wf) {
  duro_instance_page p;
  ck_assert_int_eq(duro_instance_list_page(H.e, wf, NULL, 1000, NULL, &p), 0);
  size_t n = p.n;
  duro_instance_page_free(&p);
  return n;
}

/* ---- the cases ----------------------------------------------------------- */

START_TEST(fan_out_and_sum) {
  start(wf_parent);
  create("p", "{\"n\":20}", 0);
  harness_run(&H);
  json_t *d = desc(PARENT, "p");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  /* 0² + 1² + ... + 19² */
  char *out = json_dumps(json_object_get(d, "output"), JSON_ENCODE_ANY);
  ck_assert_str_eq(out, "2470");
  free(out);
  ck_assert_uint_eq(count_of(PART), 20);
  json_t *kids = json_object_get(d, "children");
  ck_assert_uint_eq(json_array_size(kids), 20);
  ck_assert_str_eq(jstr(json_array_get(kids, 3), "id"), C.ids[3]);
  ck_assert_str_eq(jstr(json_array_get(kids, 3), "workflow"), PART);
  ck_assert_str_eq(jstr(json_array_get(kids, 3), "status"), "complete");
  d = desc(PART, C.ids[7]);
  json_t *parent = json_object_get(d, "parent");
  ck_assert_str_eq(jstr(parent, "workflow"), PARENT);
  ck_assert_str_eq(jstr(parent, "id"), "p");
}
END_TEST

START_TEST(replay_starts_none) {
  start(wf_parent);
  create("p", "{\"n\":3,\"nap\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(status_of(PARENT, "p"), "waiting");
  char first[3][128];
  for (int k = 0; k < 3; k++)
    snprintf(first[k], sizeof first[k], "%s", C.ids[k]);
  ck_assert_uint_eq(count_of(PART), 3);
  harness_advance(&H, MIN); /* the parent replays its three starts */
  ck_assert_str_eq(status_of(PARENT, "p"), "complete");
  ck_assert_uint_eq(count_of(PART), 3);
  for (int k = 0; k < 3; k++)
    ck_assert_str_eq(C.ids[k], first[k]);
}
END_TEST

START_TEST(child_error_is_step_error) {
  start(wf_parent);
  create("p", "{\"n\":3,\"fail_at\":1}", 0);
  harness_run(&H);
  json_t *d = desc(PARENT, "p");
  ck_assert_str_eq(jstr(d, "status"), "errored");
  json_t *err = json_object_get(d, "error");
  ck_assert_str_eq(jstr(err, "name"), "Error");
  ck_assert_ptr_nonnull(strstr(jstr(err, "message"), "part 1 failed"));
  ck_assert_ptr_nonnull(strstr(jstr(err, "message"), C.ids[1]));
  /* handled: run() goes on and sums the others */
  create("q", "{\"n\":3,\"fail_at\":2,\"catch\":1}", 0);
  harness_run(&H);
  d = desc(PARENT, "q");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  char *out = json_dumps(json_object_get(d, "output"), JSON_ENCODE_ANY);
  ck_assert_str_eq(out, "1"); /* 0 + 1, the third failed */
  free(out);
  ck_assert_int_eq(C.caught, 1);
  ck_assert_str_eq(C.caught_name, "Error");
}
END_TEST

/* The parent waits on a sleeping child, which is terminated. */
static duro_rc wf_waits_sleeper(duro_step *step, const duro_event *ev,
                                duro_env *env) {
  (void)ev;
  duro_workflow *part = duro_env_workflow(env, "PART");
  const char *id, *out;
  DURO_TRY(duro_child_start(step, "child", part, "sleeper", "{\"sleep\":1}",
                            DURO_PARENT_CLOSE_TERMINATE, &id));
  return duro_child_wait(step, "child done", part, id, &out);
}

START_TEST(terminated_child) {
  start(wf_waits_sleeper);
  create("p", NULL, 0);
  harness_run(&H);
  ck_assert_str_eq(status_of(PARENT, "p"), "waiting");
  ck_assert_str_eq(status_of(PART, "sleeper"), "waiting");
  ck_assert_int_eq(duro_instance_terminate(H.e, PART, "sleeper"), 0);
  harness_run(&H);
  json_t *d = desc(PARENT, "p");
  ck_assert_str_eq(jstr(d, "status"), "errored");
  ck_assert_str_eq(jstr(json_object_get(d, "error"), "name"),
                   DURO_ERR_TERMINATED);
}
END_TEST

START_TEST(parent_end_terminates) {
  start(wf_short_parent);
  create("p", "{\"grand\":1}", 0);
  harness_run(&H);
  ck_assert_str_eq(status_of(PART, "kid"), "waiting");
  ck_assert_int_eq(C.n_ids, 1);
  ck_assert_str_eq(status_of(PART, C.ids[0]), "waiting"); /* grandchild */
  harness_advance(&H, MIN);
  ck_assert_str_eq(status_of(PARENT, "p"), "complete");
  ck_assert_str_eq(status_of(PART, "kid"), "terminated");
  ck_assert_str_eq(status_of(PART, C.ids[0]), "terminated");
}
END_TEST

START_TEST(parent_end_abandons) {
  start(wf_short_parent);
  create("p", "{\"close\":1}", 0);
  harness_run(&H);
  harness_advance(&H, MIN);
  ck_assert_str_eq(status_of(PARENT, "p"), "complete");
  ck_assert_str_eq(status_of(PART, "kid"), "waiting");
  harness_advance(&H, HOUR);
  ck_assert_str_eq(status_of(PART, "kid"), "complete");
}
END_TEST

/* DURO_PARENT_CLOSE_ROLLBACK: the child still running when its parent
 * ends is terminated once its rollbacks ran. */
START_TEST(parent_end_rolls_back) {
  start(wf_short_parent);
  create("p", "{\"close\":2}", 0);
  harness_run(&H);
  ck_assert_str_eq(status_of(PART, "kid"), "waiting");
  harness_advance(&H, MIN);
  ck_assert_str_eq(status_of(PARENT, "p"), "complete");
  harness_advance(&H, 2 * SEC); /* the driver's next look */
  ck_assert_str_eq(status_of(PART, "kid"), "terminated");
  ck_assert_int_eq(C.undone, 1);
  json_t *s = harness_step(desc(PART, "kid"), "work#1/rollback");
  ck_assert_ptr_nonnull(s);
  ck_assert_str_eq(jstr(s, "status"), "complete");
  harness_advance(&H, 2 * SEC); /* asked once: no second rollback */
  ck_assert_int_eq(C.undone, 1);
}
END_TEST

START_TEST(deadline_inherited) {
  start(wf_short_parent);
  int64_t t0 = duro_clock_now(&H.clock);
  create("p", "{\"close\":1}", 10 * MIN);
  harness_run(&H);
  json_t *d = desc(PART, "kid");
  ck_assert_int_eq(json_integer_value(json_object_get(d, "deadline_ms")),
                   t0 + 10 * MIN);
  harness_advance(&H, 10 * MIN);
  d = desc(PART, "kid");
  ck_assert_str_eq(jstr(d, "status"), "errored");
  ck_assert_str_eq(jstr(json_object_get(d, "error"), "name"),
                   DURO_ERR_TIMED_OUT);
}
END_TEST

START_TEST(existing_id_refused) {
  start(wf_short_parent);
  ck_assert_int_eq(duro_instance_create(H.e, PART, "kid", "{}", -1, NULL), 0);
  harness_run(&H);
  create("p", NULL, 0);
  harness_run(&H);
  json_t *d = desc(PARENT, "p");
  ck_assert_str_eq(jstr(d, "status"), "errored");
  ck_assert_str_eq(jstr(json_object_get(d, "error"), "name"),
                   "instance.already_exists");
  ck_assert_uint_eq(count_of(PART), 1);
}
END_TEST

START_TEST(reserved_events) {
  start(wf_waits_sleeper);
  create("p", NULL, 0);
  harness_run(&H);
  ck_assert_int_eq(duro_instance_send_event(H.e, PARENT, "p",
                                            "duro.child:part/sleeper",
                                            "{\"status\":\"complete\"}"),
                   DURO_E_INVALID_ARGUMENT);
  harness_run(&H);
  ck_assert_str_eq(status_of(PARENT, "p"), "waiting");
}
END_TEST

static Suite *children_suite(void) {
  Suite *s = suite_create("children");
  TCase *tc = tcase_create("children");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, fan_out_and_sum);
  tcase_add_test(tc, replay_starts_none);
  tcase_add_test(tc, child_error_is_step_error);
  tcase_add_test(tc, terminated_child);
  tcase_add_test(tc, parent_end_terminates);
  tcase_add_test(tc, parent_end_abandons);
  tcase_add_test(tc, parent_end_rolls_back);
  tcase_add_test(tc, deadline_inherited);
  tcase_add_test(tc, existing_id_refused);
  tcase_add_test(tc, reserved_events);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(children_suite()); }
