/* test_keys.c — key rotation (keys/keys.h, store/journal_rekey.h) on the
 * engine, and on PostgreSQL in `make test`:
 *
 *  - a count tells how many values each key sealed and how many are in
 *    the clear; a rotation rewrites every one not under the active key
 *    (an older key's, and those stored before encryption was turned on):
 *    params, outputs, errors, step results, attempt errors, events, log
 *    lines, queue bodies; then the old key can go: with the new key alone
 *    every value reads in the clear;
 *  - a rotation beside running instances (creates, events, steps and
 *    queue sends between its pages) loses nothing and runs no completed
 *    step again, and leaves nothing under the old key;
 *  - a rewrite is written only if its value is still what was read;
 *  - no rotation without an active key, one run at a time. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "journal.h"
#include "journal_crypt.h"
#include "keys.h"
#include "queue.h"
#include "suite_run.h"

#define MARKER "Kx4-rotate-9Qm"

static harness h;
static journal_crypt *old_keys, *both_keys, *new_keys;
static char err[256];
static int reveals; /* attempts of "reveal" run */

/* Keys ids[0..n), key "kN" filled with byte N, `active` active. */
static journal_crypt *keys_new(const char *const *ids, size_t n,
                               const char *active) {
  journal_crypt *c = journal_crypt_new();
  unsigned char k[32];
  for (size_t i = 0; i < n; i++) {
    memset(k, ids[i][1] - '0', sizeof k);
    ck_assert_int_eq(journal_crypt_add(c, ids[i], k), 0);
  }
  ck_assert_int_eq(journal_crypt_activate(c, active), 0);
  return c;
}

static int reveal(duro_attempt *a, void *arg) {
  (void)arg;
  reveals++;
  if (duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "declined " MARKER);
  return duro_attempt_result(a, "{\"card\":\"" MARKER "\"}");
}

/* A value of every kind: a log line, a failed attempt, a step result, an
 * event, the output. */
static duro_rc secret(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  duro_log(DURO_LOG_INFO, "seen " MARKER);
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 2, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT}};
  DURO_TRY(duro_do(step, "reveal", &cfg, reveal, NULL, NULL));
  const char *e = NULL;
  DURO_TRY(duro_wait_for_event(step, "w", "go", NULL, &e));
  return duro_set_output(step, "\"done " MARKER "\"");
}

static void setup(void) {
  harness_open(&h);
  harness_register(&h, "secret", secret);
  harness_start(&h);
  harness_register_queue(&h, "jobs", NULL);
  old_keys = keys_new((const char *[]){"k1"}, 1, "k1");
  both_keys = keys_new((const char *[]){"k1", "k2"}, 2, "k2");
  new_keys = keys_new((const char *[]){"k2"}, 1, "k2");
  reveals = 0;
}

static void teardown(void) {
  harness_close(&h);
  journal_crypt_free(old_keys);
  journal_crypt_free(both_keys);
  journal_crypt_free(new_keys);
}

/* Instance `id` up to its wait for "go": its log line, failed attempt
 * and step result written. */
static void start_secret(const char *id) {
  harness_create(&h, "secret", id, "{\"ssn\":\"" MARKER "\"}", 0);
  harness_run(&h);
  harness_advance(&h, 1000); /* the second attempt */
}

static void finish_secret(const char *id) {
  ck_assert_int_eq(duro_instance_send_event(h.e, "secret", id, "go",
                                            "{\"pin\":\"" MARKER "\"}"),
                   0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "secret", id), "complete");
}

static void send_job(void) {
  ck_assert_int_eq(duro_queue_enqueue(h.e, "jobs", "{\"to\":\"" MARKER "\"}", 0,
                                      NULL, err, sizeof err),
                   0);
}

/* A run of the engine's keys driver, driven page by page to its end. */
static duro_keys_run run_keys(int count_only) {
  ck_assert_int_eq(duro_keys_start(h.e, count_only, NULL, err, sizeof err), 0);
  int pages = 0;
  while (duro_keys_pass(h.e))
    ck_assert_int_lt(++pages, 100000);
  duro_keys_run r;
  duro_keys_status(h.e, &r);
  ck_assert_str_eq(duro_keys_state_name(r.state), "done");
  return r;
}

static uint64_t under(const duro_keys_run *r, const char *id) {
  for (size_t i = 0; i < r->progress.n_keys; i++)
    if (!strcmp(r->progress.keys[i].id, id))
      return r->progress.keys[i].n;
  return 0;
}

/* Every value of instance `id` in the clear: params, the attempt's error,
 * the result, the event, the output, and its log line. */
static void reads_clear(const char *id) {
  json_t *d = harness_describe(&h, "secret", id);
  ck_assert_ptr_nonnull(d);
  char *text = json_dumps(d, 0);
  int n = 0;
  for (const char *p = text; (p = strstr(p, MARKER)); p++)
    n++;
  ck_assert_msg(n >= 5, "%s", text);
  free(text);
  json_decref(d);
  duro_log_list l = {0};
  ck_assert_int_eq(duro_instance_logs(h.e, "secret", id, 0, 10, &l), 0);
  ck_assert_uint_ge(l.n, 1);
  ck_assert_str_eq(l.v[0].message, "seen " MARKER);
  duro_log_list_free(&l);
}

/* n queue messages pulled, each in the clear. */
static void pull_clear(size_t n) {
  duro_queue_message_list l = {0};
  ck_assert_int_eq(
      duro_queue_pull_messages(h.e, "jobs", 100, 0, &l, err, sizeof err), 0);
  ck_assert_uint_eq(l.n, n);
  for (size_t i = 0; i < l.n; i++)
    ck_assert_str_eq(l.v[i].body, "{\"to\":\"" MARKER "\"}");
  duro_queue_message_list_free(&l);
}

START_TEST(rotation_rewrites_every_value) {
  /* before encryption, then under k1 */
  start_secret("clear");
  finish_secret("clear");
  send_job();
  harness_set_crypt(&h, old_keys);
  start_secret("sealed");
  finish_secret("sealed");
  send_job();
  /* k2 made active, k1 kept for reading */
  harness_set_crypt(&h, both_keys);
  duro_keys_run c = run_keys(1);
  ck_assert_uint_ge(c.progress.plaintext, 7); /* one of each kind, and more */
  ck_assert_uint_ge(under(&c, "k1"), 7);
  ck_assert_uint_eq(under(&c, "k2"), 0);
  duro_keys_run r = run_keys(0);
  ck_assert_str_eq(r.active, "k2");
  ck_assert_uint_eq(r.progress.rewritten,
                    c.progress.plaintext + under(&c, "k1"));
  ck_assert_uint_eq(r.progress.changed, 0);
  ck_assert_uint_eq(r.progress.unopened, 0);
  /* everything is under k2 now */
  duro_keys_run after = run_keys(1);
  ck_assert_uint_eq(after.progress.plaintext, 0);
  ck_assert_uint_eq(under(&after, "k1"), 0);
  ck_assert_uint_eq(under(&after, "k2"), r.progress.rewritten);
  /* a second rotation finds nothing to do */
  ck_assert_uint_eq(run_keys(0).progress.rewritten, 0);
  /* k1 taken off the list: every value still reads */
  harness_set_crypt(&h, new_keys);
  reads_clear("clear");
  reads_clear("sealed");
  pull_clear(2);
}
END_TEST

/* Pages of the rotation interleaved with the engine's work: instances
 * made under k1 finish under k2, new ones start, messages are sent. */
START_TEST(rotation_beside_running_instances) {
  enum { N = 240 }; /* a page is 100 instances: several pages */
  char id[32];
  harness_set_crypt(&h, old_keys);
  for (int i = 0; i < N; i++) {
    snprintf(id, sizeof id, "o%d", i);
    start_secret(id);
    send_job();
  }
  int reveals_before = reveals;
  ck_assert_int_eq(reveals_before, 2 * N);
  harness_set_crypt(&h, both_keys);
  ck_assert_int_eq(duro_keys_start(h.e, 0, NULL, err, sizeof err), 0);
  int i = 0, more = 1, pages = 0;
  while (more) {
    more = duro_keys_pass(h.e);
    pages++;
    /* between pages: events to those made before, new instances */
    for (int k = 0; k < N / 3 && i < N; k++, i++) {
      snprintf(id, sizeof id, "o%d", i);
      finish_secret(id);
      snprintf(id, sizeof id, "n%d", i);
      start_secret(id);
      send_job();
    }
  }
  for (; i < N; i++) { /* the run was shorter than the work */
    snprintf(id, sizeof id, "o%d", i);
    finish_secret(id);
    snprintf(id, sizeof id, "n%d", i);
    start_secret(id);
    send_job();
  }
  duro_keys_run r;
  duro_keys_status(h.e, &r);
  ck_assert_str_eq(duro_keys_state_name(r.state), "done");
  ck_assert_int_ge(pages, 3); /* the work went on between its pages */
  ck_assert_uint_gt(r.progress.rewritten, 0);
  ck_assert_uint_eq(r.progress.unopened, 0);
  /* no completed step ran again: two attempts of each instance's step */
  ck_assert_int_eq(reveals, 2 * N + 2 * N);
  /* what changed behind the run's pages was written under k2 by its
   * writer: the one run left nothing under k1, nothing for a second */
  duro_keys_run c = run_keys(1);
  ck_assert_uint_eq(under(&c, "k1"), 0);
  ck_assert_uint_eq(c.progress.plaintext, 0);
  ck_assert_uint_eq(run_keys(0).progress.rewritten, 0);
  harness_set_crypt(&h, new_keys);
  for (int k = 0; k < N; k++) {
    snprintf(id, sizeof id, "o%d", k);
    reads_clear(id);
    snprintf(id, sizeof id, "n%d", k);
    ck_assert_str_eq(harness_status(&h, "secret", id), "waiting");
    finish_secret(id);
    reads_clear(id);
  }
  pull_clear(2 * N < 100 ? 2 * N : 100);
}
END_TEST

/* The value a page read: each of the instance's output's. */
typedef struct found {
  journal_value v;
  char *stored;
} found;

static int take_output(void *ctx, const journal_value *v) {
  found *f = ctx;
  if (v->field == JOURNAL_FIELD_OUTPUT) {
    f->v = *v;
    f->v.name = NULL;
    f->stored = strdup(v->stored);
    f->v.stored = f->stored;
  }
  return 0;
}

/* JOP_VALUE_RESEAL writes only over the text it was given. */
START_TEST(rewrite_only_over_what_was_read) {
  harness_set_crypt(&h, old_keys);
  start_secret("s1");
  finish_secret("s1");
  journal *j = harness_journal_open(&h);
  found f = {0};
  int64_t last;
  ck_assert_int_eq(journal_values_each(j, JOURNAL_VALUES_INSTANCES, 0, 10, NULL,
                                       take_output, &f, &last),
                   0);
  ck_assert_ptr_nonnull(f.stored);
  ck_assert(journal_crypt_sealed(f.stored));
  /* as if another writer had changed it since */
  journal_value stale = f.v;
  stale.stored = "\"something else\"";
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_VALUE_RESEAL);
  op->value = &stale;
  op->body = "\"overwritten\"";
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 0);
  journal_batch_reset(&b);
  /* the value as read: written */
  op = journal_batch_add(&b, JOP_VALUE_RESEAL);
  op->value = &f.v;
  op->body = "\"in the clear now\"";
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  journal_batch_free(&b);
  journal_close(j);
  free(f.stored);
  json_t *d = harness_describe(&h, "secret", "s1");
  ck_assert_str_eq(json_string_value(json_object_get(d, "output")),
                   "in the clear now");
  json_decref(d);
}
END_TEST

START_TEST(no_active_key_one_run_at_a_time) {
  start_secret("s1");
  /* no keys: nothing to rotate to; a count still tells */
  ck_assert_int_eq(duro_keys_start(h.e, 0, NULL, err, sizeof err),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err, "no key"));
  duro_keys_run c = run_keys(1);
  ck_assert_uint_ge(c.progress.plaintext, 3);
  ck_assert_uint_eq(c.progress.n_keys, 0);
  harness_set_crypt(&h, both_keys);
  ck_assert_int_eq(duro_keys_start(h.e, 0, NULL, err, sizeof err), 0);
  duro_keys_run running;
  ck_assert_int_eq(duro_keys_start(h.e, 1, &running, err, sizeof err),
                   DURO_E_ALREADY_EXISTS);
  ck_assert_str_eq(duro_keys_state_name(running.state), "running");
  ck_assert(!running.count_only);
  while (duro_keys_pass(h.e))
    ;
  ck_assert_int_eq(duro_keys_start(h.e, 1, NULL, err, sizeof err), 0);
}
END_TEST

static Suite *keys_suite(void) {
  Suite *s = suite_create("keys");
  TCase *tc = tcase_create("keys");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, rotation_rewrites_every_value);
  tcase_add_test(tc, rotation_beside_running_instances);
  tcase_add_test(tc, rewrite_only_over_what_was_read);
  tcase_add_test(tc, no_active_key_one_run_at_a_time);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(keys_suite()); }
