/* test_attributes.c — instances' search attributes (a workflow's
 * `index:`) against the real engine on a virtual clock (and on
 * PostgreSQL in `make test`):
 *
 *  - a create stores the values its params hold at the declared
 *    pointers, a string and a number; a value missing or of another type
 *    gives no attribute, and the create goes on; describe shows them;
 *  - a list's `where` finds the instances of a value, newest first, with
 *    the other filters (status, prefix, creation time) and through its
 *    cursor; a number compares by =, <, <=, >, >=; several terms are
 *    ANDed; a running instance (found in memory) is matched too;
 *  - a `where` naming an unknown attribute, a number that is not one, a
 *    comparison on a string, or no operator is refused, saying which;
 *  - deleting an instance and the retention sweep take its attributes
 *    with it (a new instance of the same id and value is not matched
 *    twice);
 *  - a workflow without an index lists as before;
 *  - duro_set_attribute from run(): found by a list at once, set again
 *    by the replay after a restart (one value), replaced by a later
 *    call; an undeclared name DURO_E_ATTRIBUTE_UNKNOWN, a value of
 *    another type or not JSON DURO_E_INVALID_ARGUMENT;
 *  - a number range of more matches than the store sorts (over 2000)
 *    lists the same instances, newest first, through its cursor;
 *  - each listed instance's last step: a do step waiting for its third
 *    attempt (2 failed), a sleep until its end, a wait for an event, the
 *    last step of a completed one, none before the first. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "error.h"
#include "harness.h"
#include "journal.h"
#include "suite_run.h"

#define SEC 1000LL
#define DAY (24 * 3600 * SEC)
#define WF "orders"
#define PLAIN "plain"

static harness H;

static const duro_attr_decl index_decls[] = {
    {"customer", "/customerId", DURO_ATTR_STRING},
    {"amount", "/amount", DURO_ATTR_NUMBER},
    {"region", "/address/region", DURO_ATTR_STRING},
    {"stage", NULL, DURO_ATTR_STRING}};
static const duro_workflow_limits limits = {
    .retention_ms = DAY, .index = index_decls, .n_index = 4};

/* Waits for "go", then completes; params {"fail": true} error at once. */
static duro_rc order(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  if (ev->params && strstr(ev->params, "\"fail\""))
    return duro_fail(step, "declined");
  const char *event;
  DURO_TRY(duro_wait_for_event(step, "go", "go", "1 hour", &event));
  return duro_set_output(step, "1");
}

static int one(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

/* What duro_set_attribute answered, each call of the last activation. */
static int set_rc[4];

/* A step, stage "packed", the event "go", stage "shipped"; and what an
 * undeclared name and a number for a string are answered. */
static duro_rc tagger(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "pack", NULL, one, NULL, NULL));
  set_rc[0] = duro_set_attribute(step, "stage", "\"packed\"");
  set_rc[1] = duro_set_attribute(step, "colour", "\"red\"");
  set_rc[2] = duro_set_attribute(step, "stage", "12");
  set_rc[3] = duro_set_attribute(step, "amount", "not json");
  const char *event;
  DURO_TRY(duro_wait_for_event(step, "go", "go", "1 hour", &event));
  duro_set_attribute(step, "stage", "\"shipped\"");
  duro_set_attribute(step, "amount", "12.5");
  return duro_set_output(step, "1");
}

static int not_yet(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_fail(a, "not yet");
}

static const duro_retries minute_retries = {
    .limit = 5, .delay = "1 minute", .backoff = DURO_BACKOFF_CONSTANT};
static const duro_step_config minute_config = {.retries = &minute_retries};

/* A step "prepare", then as its params say: a step that always fails
 * ("flaky", retried each minute), a sleep ("nap", an hour), a wait for
 * the event "go" ("event"); then completes. */
static duro_rc stepper(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *p = ev->params ? ev->params : "";
  DURO_TRY(duro_do(step, "prepare", NULL, one, NULL, NULL));
  if (strstr(p, "flaky"))
    DURO_TRY(duro_do(step, "flaky", &minute_config, not_yet, NULL, NULL));
  if (strstr(p, "nap"))
    DURO_TRY(duro_sleep(step, "nap", "1 hour"));
  if (strstr(p, "event")) {
    const char *event;
    DURO_TRY(duro_wait_for_event(step, "await", "go", "1 day", &event));
  }
  return duro_set_output(step, "1");
}

static void setup(void) {
  harness_open(&H);
  harness_register_limits(&H, WF, order, &limits);
  harness_register_limits(&H, "tagger", tagger, &limits);
  harness_register(&H, "stepper", stepper);
  harness_register(&H, PLAIN, order);
  harness_start(&H);
}

static void teardown(void) { harness_close(&H); }

static void create(const char *wf, const char *id, const char *params) {
  ck_assert_int_eq(duro_instance_create(H.e, wf, id, params, -1, NULL), 0);
}

/* The ids a list gives for the `where` terms (NULL-ended) and filter f,
 * by pages of `limit`, as "|a|b|"; *pages how many pages it took. */
static char *listed(const char *wf, const char *const *terms,
                    duro_list_filter f, size_t limit, int *pages) {
  static char out[16384];
  duro_attr_filter where[DURO_ATTR_MAX];
  size_t n = 0;
  for (; terms && terms[n]; n++) {
    char err[256];
    ck_assert_msg(duro_list_where_parse(H.e, wf, terms[n], &where[n], err,
                                        sizeof err) == 0,
                  "%s: %s", terms[n], err);
  }
  f.where = where;
  f.n_where = n;
  snprintf(out, sizeof out, "|");
  char cursor[24] = "";
  *pages = 0;
  for (int guard = 0; guard < 100; guard++) {
    duro_instance_page p;
    ck_assert_int_eq(duro_instance_list_page(H.e, wf, &f, limit, cursor, &p),
                     0);
    (*pages)++;
    for (size_t i = 0; i < p.n; i++)
      snprintf(out + strlen(out), sizeof out - strlen(out), "%s|", p.v[i].id);
    snprintf(cursor, sizeof cursor, "%s", p.cursor);
    duro_instance_page_free(&p);
    if (!cursor[0])
      break;
  }
  for (size_t i = 0; i < n; i++)
    duro_attr_filter_clear(&where[i]);
  return out;
}

static const duro_list_filter ANY = {.status = -1};

static char *where1(const char *term) {
  const char *terms[] = {term, NULL};
  int pages;
  return listed(WF, terms, ANY, 1000, &pages);
}

/* The describe's "attributes" object as compact JSON. */
static char *attrs_of(const char *id) {
  json_t *d = harness_describe(&H, WF, id);
  char *s = json_dumps(json_object_get(d, "attributes"),
                       JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(d);
  return s;
}

/* Six orders of three customers, some with other shapes of params. */
static void create_orders(void) {
  create(WF, "o1", "{\"customerId\":\"c42\",\"amount\":100}");
  create(WF, "o2",
         "{\"customerId\":\"c7\",\"amount\":250.5,"
         "\"address\":{\"region\":\"eu\"}}");
  create(WF, "o3",
         "{\"customerId\":\"c42\",\"amount\":5,"
         "\"address\":{\"region\":\"us\"}}");
  create(WF, "o4", "{\"customerId\":42,\"amount\":\"lots\"}"); /* wrong types */
  create(WF, "o5", "{\"amount\":7}");                          /* no customer */
  create(WF, "o6", "{\"customerId\":\"c42\",\"amount\":300,\"fail\":true}");
  harness_run(&H);
}

START_TEST(create_stores_what_the_params_hold) {
  create_orders();
  char *s = attrs_of("o1");
  ck_assert_str_eq(s, "{\"amount\":100,\"customer\":\"c42\"}");
  free(s);
  s = attrs_of("o2");
  ck_assert_str_eq(s,
                   "{\"amount\":250.5,\"customer\":\"c7\",\"region\":\"eu\"}");
  free(s);
  s = attrs_of("o4"); /* a number for a string, a string for a number */
  ck_assert_str_eq(s, "{}");
  free(s);
  s = attrs_of("o5");
  ck_assert_str_eq(s, "{\"amount\":7}");
  free(s);
  ck_assert_str_eq(harness_status(&H, WF, "o4"), "waiting");
}
END_TEST

START_TEST(where_finds_newest_first) {
  create_orders();
  ck_assert_str_eq(where1("customer:c42"), "|o6|o3|o1|");
  ck_assert_str_eq(where1("customer:c7"), "|o2|");
  ck_assert_str_eq(where1("customer:c4"), "|"); /* whole values only */
  ck_assert_str_eq(where1("region:eu"), "|o2|");
  ck_assert_str_eq(where1("amount:100"), "|o1|");
  ck_assert_str_eq(where1("amount:100.0"), "|o1|");
  ck_assert_str_eq(where1("amount>100"), "|o6|o2|");
  ck_assert_str_eq(where1("amount>=100"), "|o6|o2|o1|");
  ck_assert_str_eq(where1("amount<100"), "|o5|o3|");
  ck_assert_str_eq(where1("amount<=5"), "|o3|");
  ck_assert_str_eq(where1("stage:packed"), "|"); /* never set */

  /* ANDed, and with the other filters */
  const char *both[] = {"customer:c42", "amount<200", NULL};
  int pages;
  ck_assert_str_eq(listed(WF, both, ANY, 1000, &pages), "|o3|o1|");
  const char *range[] = {"amount>1", "amount<260", NULL};
  ck_assert_str_eq(listed(WF, range, ANY, 1000, &pages), "|o5|o3|o2|o1|");
  const char *c42[] = {"customer:c42", NULL};
  duro_list_filter errored = {.status = DURO_STATUS_ERRORED};
  ck_assert_str_eq(listed(WF, c42, errored, 1000, &pages), "|o6|");
  duro_list_filter waiting = {.status = DURO_STATUS_WAITING};
  ck_assert_str_eq(listed(WF, c42, waiting, 1000, &pages), "|o3|o1|");
  duro_list_filter prefix = {.status = -1, .prefix = "o1"};
  ck_assert_str_eq(listed(WF, c42, prefix, 1000, &pages), "|o1|");
  duro_list_filter later = {.status = -1, .created_after = T0_MS + 1};
  ck_assert_str_eq(listed(WF, c42, later, 1000, &pages), "|");

  /* by pages of one: each once, newest first */
  ck_assert_str_eq(listed(WF, c42, ANY, 1, &pages), "|o6|o3|o1|");
  ck_assert_int_ge(pages, 3);
  ck_assert_str_eq(listed(WF, range, ANY, 2, &pages), "|o5|o3|o2|o1|");

  /* a workflow without an index lists as before */
  create(PLAIN, "p1", "{\"customerId\":\"c42\"}");
  ck_assert_str_eq(listed(PLAIN, NULL, ANY, 10, &pages), "|p1|");
}
END_TEST

START_TEST(where_refused_saying_why) {
  static const struct {
    const char *term, *says;
  } bad[] = {
      {"colour:red", "\"colour\" is not an attribute"},
      {"amount>lots", "\"lots\" is not a number"},
      {"amount:", "is not a number"},
      {"amount>1e999", "is not a number"},
      {"customer>c1", "string attribute"},
      {"customer", "is not name:value"},
      {"", "is not name:value"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    duro_attr_filter f;
    char err[256] = "";
    ck_assert_int_eq(
        duro_list_where_parse(H.e, WF, bad[i].term, &f, err, sizeof err),
        DURO_E_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err, bad[i].says), "%s: \"%s\" lacks \"%s\"",
                  bad[i].term, err, bad[i].says);
  }
  duro_attr_filter f;
  char err[256];
  ck_assert_int_eq(
      duro_list_where_parse(H.e, PLAIN, "customer:c42", &f, err, sizeof err),
      DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(
      duro_list_where_parse(H.e, "nope", "customer:c42", &f, err, sizeof err),
      DURO_E_WORKFLOW_NOT_FOUND);
}
END_TEST

static void count_attr(void *ctx, const duro_attr *a) {
  (void)a;
  (*(size_t *)ctx)++;
}

/* The attributes rows the journal holds for instance `rowid`. */
static size_t attr_rows(int64_t rowid) {
  size_t n = 0;
  ck_assert_int_eq(
      journal_attributes(engine_journal(H.e), rowid, count_attr, &n), 0);
  return n;
}

static int64_t rowid_of(const char *id) {
  journal_instance in = {0};
  ck_assert_int_eq(journal_instance_get(engine_journal(H.e), WF, id, &in), 0);
  int64_t rowid = in.rowid;
  journal_instance_clear(&in);
  return rowid;
}

START_TEST(delete_and_sweep_take_them) {
  create_orders();
  int64_t o6 = rowid_of("o6"), o1 = rowid_of("o1");
  ck_assert_uint_eq(attr_rows(o6), 2);
  ck_assert_int_eq(duro_instance_delete(H.e, WF, "o6", 0, NULL, NULL), 0);
  ck_assert_uint_eq(attr_rows(o6), 0);
  ck_assert_str_eq(where1("customer:c42"), "|o3|o1|");

  /* o1 ends, and its retention (a day) runs out */
  ck_assert_int_eq(duro_instance_send_event(H.e, WF, "o1", "go", "{}"), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, WF, "o1"), "complete");
  harness_advance(&H, DAY + SEC);
  ck_assert_int_eq(duro_engine_sweep(H.e, NULL), 0);
  duro_status st;
  ck_assert_int_eq(duro_instance_status(H.e, WF, "o1", &st), DURO_E_NOT_FOUND);
  ck_assert_uint_eq(attr_rows(o1), 0);
  ck_assert_str_eq(where1("customer:c42"), "|o3|");

  /* the same id again: one instance, listed once */
  create(WF, "o1", "{\"customerId\":\"c42\"}");
  ck_assert_str_eq(where1("customer:c42"), "|o1|o3|");
}
END_TEST

START_TEST(set_from_run_once_and_replaced) {
  create("tagger", "t1", "{\"customerId\":\"c1\"}");
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, "tagger", "t1"), "waiting");
  ck_assert_int_eq(set_rc[0], 0);
  ck_assert_int_eq(set_rc[1], DURO_E_ATTRIBUTE_UNKNOWN);
  ck_assert_int_eq(set_rc[2], DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(set_rc[3], DURO_E_INVALID_ARGUMENT);
  const char *packed[] = {"stage:packed", NULL};
  int pages;
  ck_assert_str_eq(listed("tagger", packed, ANY, 10, &pages), "|t1|");
  /* a clean restart: the next activation replays run(), setting it again */
  harness_reopen(&H);
  ck_assert_str_eq(listed("tagger", packed, ANY, 10, &pages), "|t1|");
  ck_assert_int_eq(duro_instance_send_event(H.e, "tagger", "t1", "go", "{}"),
                   0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, "tagger", "t1"), "complete");
  json_t *d = harness_describe(&H, "tagger", "t1");
  char *s = json_dumps(json_object_get(d, "attributes"),
                       JSON_COMPACT | JSON_SORT_KEYS);
  ck_assert_str_eq(s, "{\"amount\":12.5,\"customer\":\"c1\",\"stage\":"
                      "\"shipped\"}");
  free(s);
  json_decref(d);
  ck_assert_str_eq(listed("tagger", packed, ANY, 10, &pages), "|");
  const char *shipped[] = {"stage:shipped", "amount>12", NULL};
  ck_assert_str_eq(listed("tagger", shipped, ANY, 10, &pages), "|t1|");
}
END_TEST

/* More matches of a range than the store sorts (sqlite_read_sched.c's
 * WHERE_SORTED_MAX): the instances are walked instead, the same ones
 * found in the same order, page after page. */
START_TEST(wide_range_lists_the_same) {
  enum { N = 2100 };
  for (int i = 0; i < N; i++) {
    char id[16], params[64];
    snprintf(id, sizeof id, "w%04d", i);
    snprintf(params, sizeof params, "{\"amount\":%d,\"fail\":true}", i % 10);
    create(WF, id, params);
  }
  harness_run(&H);
  /* amount>0: 9 in 10 of them (wide); amount>8: 1 in 10 (sorted) */
  static char want_wide[16384], want_narrow[4096], got[16384];
  snprintf(want_wide, sizeof want_wide, "|");
  snprintf(want_narrow, sizeof want_narrow, "|");
  for (int i = N - 1; i >= 0; i--) {
    if (i % 10 > 0)
      snprintf(want_wide + strlen(want_wide),
               sizeof want_wide - strlen(want_wide), "w%04d|", i);
    if (i % 10 == 9)
      snprintf(want_narrow + strlen(want_narrow),
               sizeof want_narrow - strlen(want_narrow), "w%04d|", i);
  }
  const char *wide[] = {"amount>0", NULL}, *narrow[] = {"amount>8", NULL};
  int pages;
  snprintf(got, sizeof got, "%s", listed(WF, wide, ANY, 500, &pages));
  ck_assert_str_eq(got, want_wide);
  ck_assert_int_ge(pages, 4);
  duro_list_filter errored = {.status = DURO_STATUS_ERRORED};
  snprintf(got, sizeof got, "%s", listed(WF, wide, errored, 1000, &pages));
  ck_assert_str_eq(got, want_wide);
  snprintf(got, sizeof got, "%s", listed(WF, narrow, ANY, 50, &pages));
  ck_assert_str_eq(got, want_narrow);
}
END_TEST

/* The first listed instance of wf with id `id` (the filter its prefix). */
static void brief_of(const char *wf, const char *id, duro_instance_page *p) {
  duro_list_filter f = {.status = -1, .prefix = id};
  ck_assert_int_eq(duro_instance_list_page(H.e, wf, &f, 10, NULL, p), 0);
  ck_assert_int_eq(p->n, 1);
  ck_assert_str_eq(p->v[0].id, id);
}

/* Each listed instance's last step and its attempts (duro_instance_brief),
 * on both stores: computed at list time from the steps' primary key. */
START_TEST(list_shows_each_instance_step) {
  harness_create(&H, "stepper", "fresh", NULL, 0);
  duro_instance_page p;
  brief_of("stepper", "fresh", &p); /* created, not yet run */
  ck_assert_ptr_null(p.v[0].step_key);
  ck_assert_int_eq(p.v[0].step_wake_ms, DURO_NO_TIME);
  duro_instance_page_free(&p);
  harness_create(&H, "stepper", "flaky", "{\"flaky\":1}", 0);
  harness_create(&H, "stepper", "nap", "{\"nap\":1}", 0);
  harness_create(&H, "stepper", "event", "{\"event\":1}", 0);
  harness_run(&H);
  harness_advance(&H, 60 * SEC); /* flaky's second attempt */

  brief_of("stepper", "flaky", &p);
  ck_assert_int_eq(p.v[0].status, DURO_STATUS_WAITING);
  ck_assert_str_eq(p.v[0].step_key, "flaky#1");
  ck_assert_str_eq(p.v[0].step_name, "flaky");
  ck_assert_int_eq(p.v[0].step_type, DURO_STEP_DO);
  ck_assert_int_eq(p.v[0].step_status, DURO_STEP_WAITING);
  ck_assert_int_eq(p.v[0].step_attempts, 2);
  ck_assert_int_eq(p.v[0].step_wake_ms, T0_MS + 120 * SEC); /* the third */
  duro_instance_page_free(&p);

  brief_of("stepper", "nap", &p);
  ck_assert_str_eq(p.v[0].step_key, "nap#1");
  ck_assert_int_eq(p.v[0].step_type, DURO_STEP_SLEEP);
  ck_assert_int_eq(p.v[0].step_status, DURO_STEP_WAITING);
  ck_assert_int_eq(p.v[0].step_wake_ms, T0_MS + 3600 * SEC);
  ck_assert_ptr_null(p.v[0].wait_type);
  duro_instance_page_free(&p);

  brief_of("stepper", "event", &p);
  ck_assert_str_eq(p.v[0].step_key, "await#1");
  ck_assert_int_eq(p.v[0].step_type, DURO_STEP_WAIT_FOR_EVENT);
  ck_assert_int_eq(p.v[0].step_status, DURO_STEP_WAITING);
  ck_assert_str_eq(p.v[0].wait_type, "go");
  ck_assert_int_eq(p.v[0].step_wake_ms, T0_MS + DAY); /* its timeout */
  duro_instance_page_free(&p);

  brief_of("stepper", "fresh", &p); /* complete: its last step */
  ck_assert_int_eq(p.v[0].status, DURO_STATUS_COMPLETE);
  ck_assert_str_eq(p.v[0].step_key, "prepare#1");
  ck_assert_int_eq(p.v[0].step_status, DURO_STEP_COMPLETE);
  ck_assert_int_eq(p.v[0].step_attempts, 1);
  ck_assert_int_eq(p.v[0].step_wake_ms, DURO_NO_TIME);
  duro_instance_page_free(&p);

  /* the whole page, newest first, each with its own */
  duro_list_filter all = {.status = -1};
  ck_assert_int_eq(duro_instance_list_page(H.e, "stepper", &all, 10, NULL, &p),
                   0);
  ck_assert_int_eq(p.n, 4);
  static const char *const keys[] = {"await#1", "nap#1", "flaky#1",
                                     "prepare#1"};
  for (size_t i = 0; i < 4; i++)
    ck_assert_str_eq(p.v[i].step_key, keys[i]);
  duro_instance_page_free(&p);
}
END_TEST

static Suite *attributes_suite(void) {
  Suite *s = suite_create("attributes");
  TCase *tc = tcase_create("attributes");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, create_stores_what_the_params_hold);
  tcase_add_test(tc, where_finds_newest_first);
  tcase_add_test(tc, where_refused_saying_why);
  tcase_add_test(tc, delete_and_sweep_take_them);
  tcase_add_test(tc, set_from_run_once_and_replaced);
  tcase_add_test(tc, wide_range_lists_the_same);
  tcase_add_test(tc, list_shows_each_instance_step);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(attributes_suite()); }
