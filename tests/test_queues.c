/* test_queues.c — durable queues on the in-process engine and a virtual
 * clock: the send / pull / ack cycle, delays, leases that expire, retries,
 * dead-letter queues, retention (and the scheduler thread running its
 * sweep, on the real clock), the limits on what is sent, and messages
 * surviving a restart of the engine. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "harness.h"
#include "queue.h"
#include "suite_run.h"

#define HOUR_MS (3600LL * 1000)

static char err[256];

static void open_with_queue(harness *h) {
  harness_open(h);
  harness_start(h);
  ck_assert_int_eq(duro_queue_register(h->e, "jobs", NULL), 0);
}

static int64_t send(harness *h, const char *q, const char *body,
                    int64_t delay_ms) {
  int64_t id = 0;
  ck_assert_int_eq(
      duro_queue_enqueue(h->e, q, body, delay_ms, &id, err, sizeof err), 0);
  ck_assert_int_gt(id, 0);
  return id;
}

/* Pulls and returns the messages (caller decrefs). */
static json_t *pull(harness *h, const char *q, uint32_t n, int64_t vis) {
  json_t *out = NULL;
  ck_assert_int_eq(duro_queue_pull(h->e, q, n, vis, &out, err, sizeof err), 0);
  ck_assert(json_is_array(out));
  return out;
}

static const char *lease_of(json_t *msgs, size_t i) {
  return json_string_value(
      json_object_get(json_array_get(msgs, i), "lease_id"));
}

static json_int_t int_of(json_t *o, const char *key) {
  return json_integer_value(json_object_get(o, key));
}

static json_t *ack(harness *h, const char *q, const char *lease) {
  json_t *res = NULL;
  ck_assert_int_eq(
      duro_queue_ack(h->e, q, &lease, 1, NULL, 0, &res, err, sizeof err), 0);
  return res;
}

static json_t *retry(harness *h, const char *q, const char *lease,
                     int64_t delay_ms, const char *why) {
  json_t *res = NULL;
  duro_queue_retry r = {lease, delay_ms, why};
  ck_assert_int_eq(
      duro_queue_ack(h->e, q, NULL, 0, &r, 1, &res, err, sizeof err), 0);
  return res;
}

static json_t *stats(harness *h, const char *q) {
  json_t *st = NULL;
  ck_assert_int_eq(duro_queue_stats(h->e, q, &st), 0);
  return st;
}

START_TEST(send_pull_ack_round_trip) {
  harness h;
  open_with_queue(&h);
  int64_t a = send(&h, "jobs", "{\"n\":1}", 0);
  int64_t b = send(&h, "jobs", "[2]", 0);
  ck_assert_int_lt(a, b);
  json_t *m = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 2);
  json_t *first = json_array_get(m, 0);
  ck_assert_int_eq(int_of(first, "id"), a);
  ck_assert_int_eq(int_of(first, "attempts"), 1);
  ck_assert_int_eq(int_of(first, "sent_ms"), T0_MS);
  ck_assert_int_eq(int_of(json_object_get(first, "body"), "n"), 1);
  ck_assert_uint_eq(strlen(lease_of(m, 0)), 32);
  ck_assert_str_ne(lease_of(m, 0), lease_of(m, 1));
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "in_flight"), 2);
  ck_assert_int_eq(int_of(st, "ready"), 0);
  json_decref(st);
  /* leased: nothing more to pull */
  json_t *none = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(none), 0);
  json_decref(none);
  const char *leases[] = {lease_of(m, 0), lease_of(m, 1)};
  json_t *res = NULL;
  ck_assert_int_eq(
      duro_queue_ack(h.e, "jobs", leases, 2, NULL, 0, &res, err, sizeof err),
      0);
  ck_assert_int_eq(int_of(res, "acked"), 2);
  ck_assert_uint_eq(json_array_size(json_object_get(res, "errors")), 0);
  json_decref(res);
  /* acked twice: reported unknown the second time */
  res = ack(&h, "jobs", leases[0]);
  ck_assert_int_eq(int_of(res, "acked"), 0);
  json_t *e0 = json_array_get(json_object_get(res, "errors"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(e0, "code")),
                   "queue.lease_not_held");
  ck_assert_str_eq(json_string_value(json_object_get(e0, "lease_id")),
                   leases[0]);
  json_decref(res);
  json_decref(m);
  st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "ready") + int_of(st, "in_flight"), 0);
  json_decref(st);
  harness_close(&h);
}
END_TEST

START_TEST(delayed_message_waits) {
  harness h;
  open_with_queue(&h);
  send(&h, "jobs", "1", 60000);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "delayed"), 1);
  json_decref(st);
  json_t *m = pull(&h, "jobs", 1, 0);
  ck_assert_uint_eq(json_array_size(m), 0);
  json_decref(m);
  harness_advance(&h, 59999);
  m = pull(&h, "jobs", 1, 0);
  ck_assert_uint_eq(json_array_size(m), 0);
  json_decref(m);
  harness_advance(&h, 1);
  m = pull(&h, "jobs", 1, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  json_decref(m);
  harness_close(&h);
}
END_TEST

START_TEST(expired_lease_delivers_again) {
  harness h;
  open_with_queue(&h);
  send(&h, "jobs", "\"x\"", 0);
  json_t *m1 = pull(&h, "jobs", 1, 5000);
  ck_assert_uint_eq(json_array_size(m1), 1);
  harness_advance(&h, 4999);
  json_t *none = pull(&h, "jobs", 1, 5000);
  ck_assert_uint_eq(json_array_size(none), 0);
  json_decref(none);
  harness_advance(&h, 1);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "ready"), 1);
  ck_assert_int_eq(int_of(st, "in_flight"), 0);
  ck_assert_int_eq(int_of(st, "oldest_age_ms"), 5000);
  json_decref(st);
  json_t *m2 = pull(&h, "jobs", 1, 5000);
  ck_assert_uint_eq(json_array_size(m2), 1);
  ck_assert_int_eq(int_of(json_array_get(m2, 0), "attempts"), 2);
  /* the first lease expired: acking it does nothing */
  json_t *res = ack(&h, "jobs", lease_of(m1, 0));
  ck_assert_int_eq(int_of(res, "acked"), 0);
  ck_assert_uint_eq(json_array_size(json_object_get(res, "errors")), 1);
  json_decref(res);
  res = ack(&h, "jobs", lease_of(m2, 0));
  ck_assert_int_eq(int_of(res, "acked"), 1);
  json_decref(res);
  json_decref(m1);
  json_decref(m2);
  harness_close(&h);
}
END_TEST

START_TEST(retry_with_delay) {
  harness h;
  open_with_queue(&h);
  send(&h, "jobs", "1", 0);
  json_t *m = pull(&h, "jobs", 1, 0);
  json_t *res = retry(&h, "jobs", lease_of(m, 0), 10000, "\"boom\"");
  ck_assert_int_eq(int_of(res, "retried"), 1);
  json_decref(res);
  json_decref(m);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "delayed"), 1);
  json_decref(st);
  m = pull(&h, "jobs", 1, 0);
  ck_assert_uint_eq(json_array_size(m), 0);
  json_decref(m);
  harness_advance(&h, 10000);
  m = pull(&h, "jobs", 1, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  json_t *msg = json_array_get(m, 0);
  ck_assert_int_eq(int_of(msg, "attempts"), 2);
  ck_assert_str_eq(json_string_value(json_object_get(msg, "last_error")),
                   "\"boom\"");
  json_decref(m);
  harness_close(&h);
}
END_TEST

/* Pulls the one message of q and retries it at once, n times. */
static void fail_times(harness *h, const char *q, int n, const char *last) {
  for (int i = 0; i < n; i++) {
    json_t *m = pull(h, q, 1, 0);
    ck_assert_uint_eq(json_array_size(m), 1);
    ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), i + 1);
    json_decref(retry(h, q, lease_of(m, 0), 0, last));
    json_decref(m);
  }
}

START_TEST(max_retries_dead_letters) {
  harness h;
  harness_open(&h);
  harness_start(&h);
  duro_queue_options o = {.max_retries = 2, .dead_letter = "dlq"};
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", &o), 0);
  ck_assert_int_eq(duro_queue_register(h.e, "dlq", NULL), 0);
  send(&h, "jobs", "{\"k\":7}", 0);
  fail_times(&h, "jobs", 2, "\"try\"");
  json_t *m = pull(&h, "jobs", 1, 0);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), 3);
  json_t *res = retry(&h, "jobs", lease_of(m, 0), 0, "\"last\"");
  ck_assert_int_eq(int_of(res, "dead_lettered"), 1);
  ck_assert_int_eq(int_of(res, "retried"), 0);
  json_decref(res);
  json_decref(m);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "ready") + int_of(st, "delayed"), 0);
  json_decref(st);
  m = pull(&h, "dlq", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  json_t *msg = json_array_get(m, 0);
  /* kept: attempts (3, +1 for this delivery), the last error, the body */
  ck_assert_int_eq(int_of(msg, "attempts"), 4);
  ck_assert_str_eq(json_string_value(json_object_get(msg, "last_error")),
                   "\"last\"");
  ck_assert_int_eq(int_of(json_object_get(msg, "body"), "k"), 7);
  json_decref(m);
  harness_close(&h);
}
END_TEST

START_TEST(max_retries_without_dead_letter_drops) {
  harness h;
  open_with_queue(&h); /* max_retries 3 by default */
  send(&h, "jobs", "1", 0);
  fail_times(&h, "jobs", 3, NULL);
  json_t *m = pull(&h, "jobs", 1, 0);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), 4);
  json_t *res = retry(&h, "jobs", lease_of(m, 0), 0, NULL);
  ck_assert_int_eq(int_of(res, "dropped"), 1);
  json_decref(res);
  json_decref(m);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "dropped"), 1);
  ck_assert_int_eq(int_of(st, "ready") + int_of(st, "delayed"), 0);
  json_decref(st);
  harness_close(&h);
}
END_TEST

START_TEST(retention_sweep_deletes_old_messages) {
  harness h;
  harness_open(&h);
  harness_start(&h);
  duro_queue_options o = {.max_retries = -1, .retention_ms = HOUR_MS};
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", &o), 0);
  ck_assert_int_eq(duro_queue_register(h.e, "slow", NULL), 0); /* 4 days */
  send(&h, "jobs", "1", 0);
  send(&h, "slow", "1", 0);
  harness_advance(&h, 30 * 60000);
  send(&h, "jobs", "2", 0);
  size_t n = 0;
  harness_advance(&h, 30 * 60000 + 1);
  ck_assert_int_eq(duro_queues_sweep(h.e, &n), 0);
  ck_assert_uint_eq(n, 1);
  json_t *m = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "body"), 2);
  json_decref(m);
  harness_advance(&h, 4 * 24 * HOUR_MS);
  ck_assert_int_eq(duro_queues_sweep(h.e, &n), 0);
  ck_assert_uint_eq(n, 2);
  json_t *all = NULL;
  ck_assert_int_eq(duro_queue_stats(h.e, NULL, &all), 0);
  ck_assert_uint_eq(json_array_size(all), 2);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(all, 0), "name")),
      "jobs");
  json_decref(all);
  harness_close(&h);
}
END_TEST

/* The engine's scheduler thread runs the queue sweep with its own, first
 * 5 s after start (real clock). */
START_TEST(scheduler_runs_the_queue_sweep) {
  harness h;
  harness_open_workers(&h, 1);
  harness_start(&h);
  duro_queue_options o = {.max_retries = -1, .retention_ms = 1};
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", &o), 0);
  send(&h, "jobs", "1", 0);
  for (int i = 0; i < 200; i++) {
    json_t *st = stats(&h, "jobs");
    json_int_t left = int_of(st, "ready") + int_of(st, "in_flight");
    json_decref(st);
    if (left == 0)
      break;
    ck_assert_msg(i < 199, "the message outlived its retention by 20 s");
    usleep(100 * 1000);
  }
  harness_close(&h);
}
END_TEST

static char *repeat_body(size_t len) {
  char *s = malloc(len + 1);
  ck_assert_ptr_nonnull(s);
  s[0] = '"';
  memset(s + 1, 'a', len - 2);
  s[len - 1] = '"';
  s[len] = 0;
  return s;
}

START_TEST(bad_input_is_refused) {
  harness h;
  open_with_queue(&h);
  int64_t id;
  ck_assert_int_eq(
      duro_queue_enqueue(h.e, "nope", "1", 0, &id, err, sizeof err),
      DURO_E_QUEUE_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(err, "nope"));
  char *big = repeat_body(DURO_QUEUE_MAX_BODY + 1);
  ck_assert_int_eq(
      duro_queue_enqueue(h.e, "jobs", big, 0, &id, err, sizeof err),
      DURO_E_MESSAGE_TOO_LARGE);
  ck_assert_ptr_nonnull(strstr(err, "128 KB"));
  free(big);
  char *max = repeat_body(DURO_QUEUE_MAX_BODY);
  ck_assert_int_eq(
      duro_queue_enqueue(h.e, "jobs", max, 0, &id, err, sizeof err), 0);
  free(max);
  ck_assert_int_eq(
      duro_queue_enqueue(h.e, "jobs", "{\"a\":", 0, &id, err, sizeof err),
      DURO_E_INVALID_MESSAGE);
  ck_assert_int_eq(
      duro_queue_enqueue(h.e, "jobs", "1", -1, &id, err, sizeof err),
      DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(duro_queue_enqueue(h.e, "jobs", "1", 12 * HOUR_MS + 1, &id,
                                      err, sizeof err),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err, "12 hours"));
  ck_assert_int_eq(
      duro_queue_enqueue(h.e, "jobs", "1", 12 * HOUR_MS, &id, err, sizeof err),
      0);
  duro_queue_send_req reqs[101];
  for (size_t i = 0; i < 101; i++)
    reqs[i] = (duro_queue_send_req){"1", 0};
  ck_assert_int_eq(
      duro_queue_enqueue_batch(h.e, "jobs", reqs, 101, NULL, err, sizeof err),
      DURO_E_BATCH_TOO_LARGE);
  ck_assert_ptr_nonnull(strstr(err, "100"));
  /* 256 KB + 1 over three bodies, each within its own limit */
  char *b1 = repeat_body(DURO_QUEUE_MAX_BODY);
  char *b2 = repeat_body(DURO_QUEUE_MAX_BODY - 10);
  char *b3 = repeat_body(11);
  duro_queue_send_req three[] = {{b1, 0}, {b2, 0}, {b3, 0}};
  ck_assert_int_eq(
      duro_queue_enqueue_batch(h.e, "jobs", three, 3, NULL, err, sizeof err),
      DURO_E_BATCH_TOO_LARGE);
  ck_assert_ptr_nonnull(strstr(err, "256 KB"));
  three[2].body = "1"; /* 256 KB - 9: accepted */
  int64_t ids[3];
  ck_assert_int_eq(
      duro_queue_enqueue_batch(h.e, "jobs", three, 3, ids, err, sizeof err), 0);
  ck_assert_int_eq(ids[1], ids[0] + 1);
  free(b1), free(b2), free(b3);
  /* a bad message anywhere refuses the whole batch */
  duro_queue_send_req mixed[] = {{"1", 0}, {"nope", 0}};
  ck_assert_int_eq(
      duro_queue_enqueue_batch(h.e, "jobs", mixed, 2, NULL, err, sizeof err),
      DURO_E_INVALID_MESSAGE);
  ck_assert_ptr_nonnull(strstr(err, "message 1"));
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "ready") + int_of(st, "delayed"), 5);
  json_decref(st);
  json_t *out = NULL;
  ck_assert_int_eq(duro_queue_pull(h.e, "jobs", 0, 0, &out, err, sizeof err),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(duro_queue_pull(h.e, "jobs", 101, 0, &out, err, sizeof err),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(duro_queue_pull(h.e, "nope", 1, 0, &out, err, sizeof err),
                   DURO_E_QUEUE_NOT_FOUND);
  ck_assert_int_eq(duro_queue_stats(h.e, "nope", &out), DURO_E_QUEUE_NOT_FOUND);
  duro_queue_retry r = {"x", 12 * HOUR_MS + 1, NULL};
  ck_assert_int_eq(
      duro_queue_ack(h.e, "jobs", NULL, 0, &r, 1, &out, err, sizeof err),
      DURO_E_INVALID_ARGUMENT);
  harness_close(&h);
}
END_TEST

/* ---- transactional sends from a workflow ----------------------------------
 */

static int send_rc_outside;

/* Sends "attempt N", then fails its first attempt: only the attempt that
 * completes may have sent. */
static int send_then_maybe_fail(duro_attempt *a, void *arg) {
  duro_queue *q = arg;
  char body[32];
  snprintf(body, sizeof body, "\"attempt %u\"", duro_attempt_number(a));
  ck_assert_int_eq(duro_queue_send(q, body, 0), 0);
  if (duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "the card service is down");
  return duro_attempt_result(a, "1");
}

static duro_rc sender(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  duro_queue *q = duro_env_queue(env, "JOBS");
  ck_assert_ptr_nonnull(q);
  ck_assert_ptr_null(duro_env_queue(env, "NOPE"));
  /* outside a callback a send would repeat on every replay */
  send_rc_outside = duro_queue_send(q, "\"outside\"", 0);
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 3, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT}};
  DURO_TRY(duro_do(step, "send", &cfg, send_then_maybe_fail, q, NULL));
  DURO_TRY(duro_sleep(step, "nap", "1 minute"));
  return duro_set_output(step, "1");
}

/* The send commits with the step's result: the failed attempt sent
 * nothing, the completing one exactly once, and replays send nothing. */
START_TEST(send_in_a_step_is_transactional) {
  harness h;
  open_with_queue(&h);
  ck_assert_int_eq(duro_queue_bind(h.e, "JOBS", "jobs"), 0);
  ck_assert_int_eq(duro_queue_bind(h.e, "OTHER", "missing"),
                   DURO_E_QUEUE_NOT_FOUND);
  harness_register(&h, "sender", sender);
  ck_assert_int_eq(duro_instance_create(h.e, "sender", "s1", NULL, -1, NULL),
                   0);
  harness_run(&h); /* attempt 1 sends, then fails: nothing enqueued */
  ck_assert_int_eq(send_rc_outside, DURO_E_INVALID_ARGUMENT);
  json_t *m = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 0);
  json_decref(m);
  harness_advance(&h, 1000);  /* attempt 2 sends and completes */
  harness_advance(&h, 60000); /* the nap ends: a replay of the step */
  ck_assert_str_eq(harness_status(&h, "sender", "s1"), "complete");
  m = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(m, 0), "body")),
      "attempt 2");
  json_decref(m);
  harness_close(&h);
}
END_TEST

START_TEST(messages_survive_a_restart) {
  harness h;
  open_with_queue(&h);
  send(&h, "jobs", "\"kept\"", 0);
  send(&h, "jobs", "\"leased\"", 0);
  send(&h, "jobs", "\"later\"", HOUR_MS);
  json_t *m = pull(&h, "jobs", 1, 0);
  json_decref(m);
  m = pull(&h, "jobs", 1, 60000);
  char *lease = strdup(lease_of(m, 0));
  json_decref(m);
  harness_reopen(&h);
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", NULL), 0);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "in_flight"), 2);
  ck_assert_int_eq(int_of(st, "delayed"), 1);
  json_decref(st);
  /* a lease outlives the restart */
  json_t *res = ack(&h, "jobs", lease);
  ck_assert_int_eq(int_of(res, "acked"), 1);
  json_decref(res);
  free(lease);
  harness_advance(&h, HOUR_MS);
  m = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 2);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(m, 0), "body")), "kept");
  ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), 2);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(m, 1), "body")),
      "later");
  json_decref(m);
  harness_close(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("queues");
  TCase *tc = tcase_create("queues");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, send_pull_ack_round_trip);
  tcase_add_test(tc, send_in_a_step_is_transactional);
  tcase_add_test(tc, delayed_message_waits);
  tcase_add_test(tc, expired_lease_delivers_again);
  tcase_add_test(tc, retry_with_delay);
  tcase_add_test(tc, max_retries_dead_letters);
  tcase_add_test(tc, max_retries_without_dead_letter_drops);
  tcase_add_test(tc, retention_sweep_deletes_old_messages);
  tcase_add_test(tc, scheduler_runs_the_queue_sweep);
  tcase_add_test(tc, bad_input_is_refused);
  tcase_add_test(tc, messages_survive_a_restart);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
