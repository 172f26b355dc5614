/* test_queues.c — durable queues on the in-process engine and a virtual
 * clock: the send / pull / ack cycle, a peek that leases nothing, delays,
 * leases that expire, retries, dead-letter queues, retention (and the
 * scheduler thread running its sweep, on the real clock), the limits on
 * what is sent, and messages surviving a restart of the engine. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "harness.h"
#include "json_pointer.h"
#include "queue.h"
#include "suite_run.h"
#include "view_health.h"
#include "view_queue.h"

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

/* Pulls as pull() does and lets go of the messages: how many came. */
static size_t pulled(harness *h, const char *q, uint32_t n, int64_t vis) {
  json_t *m = pull(h, q, n, vis);
  size_t got = json_array_size(m);
  json_decref(m);
  return got;
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
  /* 128 random bits in hex, then the message's id */
  char want[40];
  snprintf(want, sizeof want, "-%lld", (long long)a);
  ck_assert_uint_eq(strlen(lease_of(m, 0)), 32 + strlen(want));
  ck_assert_str_eq(lease_of(m, 0) + 32, want);
  ck_assert_str_ne(lease_of(m, 0), lease_of(m, 1));
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "in_flight"), 2);
  ck_assert_int_eq(int_of(st, "ready"), 0);
  json_decref(st);
  /* leased: nothing more to pull */
  ck_assert_uint_eq(pulled(&h, "jobs", 10, 0), 0);
  /* a lease id naming the right message with another token, or no
   * message at all, holds nothing */
  char forged[64];
  snprintf(forged, sizeof forged, "%032d%s", 0, lease_of(m, 0) + 32);
  const char *bogus[] = {forged, "-1", "x", ""};
  for (size_t k = 0; k < 4; k++) {
    json_t *r = ack(&h, "jobs", bogus[k]);
    ck_assert_int_eq(int_of(r, "acked"), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(r, "errors")), 1);
    json_decref(r);
  }
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
  ck_assert_uint_eq(pulled(&h, "jobs", 1, 0), 0);
  harness_advance(&h, 59999);
  ck_assert_uint_eq(pulled(&h, "jobs", 1, 0), 0);
  harness_advance(&h, 1);
  ck_assert_uint_eq(pulled(&h, "jobs", 1, 0), 1);
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
  ck_assert_uint_eq(pulled(&h, "jobs", 1, 5000), 0);
  harness_advance(&h, 1);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "ready"), 1);
  ck_assert_int_eq(int_of(st, "in_flight"), 0);
  ck_assert_int_eq(int_of(st, "oldest_age_ms"), 5000);
  ck_assert_int_eq(int_of(st, "lag_ms"), 0); /* visible again just now */
  json_decref(st);
  harness_advance(&h, 250);
  st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "lag_ms"), 250);
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

/* An expired lease is a failed attempt: after max_retries + 1 deliveries
 * never acked (a handler that crashed the host each time, say) the
 * message goes to the dead-letter queue, or is dropped, instead of being
 * delivered forever. */
START_TEST(expired_leases_count_as_attempts) {
  harness h;
  harness_open(&h);
  harness_start(&h);
  duro_queue_options o = {.max_retries = 1, .dead_letter = "dlq"};
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", &o), 0);
  ck_assert_int_eq(duro_queue_register(h.e, "dlq", NULL), 0);
  duro_queue_options drop = {.max_retries = 0};
  ck_assert_int_eq(duro_queue_register(h.e, "drops", &drop), 0);
  send(&h, "jobs", "\"poison\"", 0);
  send(&h, "drops", "\"poison\"", 0);
  for (int attempt = 1; attempt <= 2; attempt++) {
    json_t *m = pull(&h, "jobs", 1, 1000);
    ck_assert_uint_eq(json_array_size(m), 1);
    ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), attempt);
    json_decref(m);
    harness_advance(&h, 1000); /* never acked: the lease runs out */
  }
  ck_assert_uint_eq(pulled(&h, "jobs", 1, 1000), 0);
  json_t *m = pull(&h, "dlq", 1, 1000);
  ck_assert_uint_eq(json_array_size(m), 1);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), 3);
  json_decref(m);
  ck_assert_uint_eq(pulled(&h, "drops", 1, 1000), 1);
  harness_advance(&h, 1000);
  ck_assert_uint_eq(pulled(&h, "drops", 1, 1000), 0);
  json_t *st = stats(&h, "drops");
  ck_assert_int_eq(int_of(st, "dropped"), 1);
  json_decref(st);
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
  ck_assert_uint_eq(pulled(&h, "jobs", 1, 0), 0);
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
  ck_assert_int_eq(int_of(st, "dead_lettered"), 1);
  ck_assert_int_eq(int_of(st, "dropped"), 0);
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

/* Peeks and returns the messages (caller decrefs). */
static json_t *peek(harness *h, const char *q, uint32_t limit) {
  json_t *out = NULL;
  ck_assert_int_eq(duro_queue_peek(h->e, q, limit, &out, err, sizeof err), 0);
  ck_assert(json_is_array(out));
  return out;
}

static void assert_peeked(json_t *m, int64_t id, json_int_t attempts,
                          int64_t visible_ms, int leased) {
  ck_assert_int_eq(int_of(m, "id"), id);
  ck_assert_int_eq(int_of(m, "attempts"), attempts);
  ck_assert_int_eq(int_of(m, "visible_ms"), visible_ms);
  ck_assert(json_is_boolean(json_object_get(m, "leased")));
  ck_assert_int_eq(json_is_true(json_object_get(m, "leased")), leased);
  ck_assert_ptr_null(json_object_get(m, "lease_id"));
}

/* A peek lists the oldest messages, leased, delayed or ready, and
 * changes none of them: a pull afterwards gets them as if no one had
 * looked. */
START_TEST(peek_lists_without_leasing) {
  harness h;
  open_with_queue(&h);
  int64_t a = send(&h, "jobs", "{\"n\":1}", 0);
  harness_advance(&h, 10);
  int64_t b = send(&h, "jobs", "2", 60000);
  harness_advance(&h, 10);
  int64_t c = send(&h, "jobs", "3", 0);
  json_t *m = pull(&h, "jobs", 1, 5000); /* a, leased until T0 + 5020 */
  ck_assert_int_eq(int_of(json_array_get(m, 0), "id"), a);
  json_decref(m);
  for (int look = 0; look < 2; look++) {
    m = peek(&h, "jobs", 20);
    ck_assert_uint_eq(json_array_size(m), 3);
    assert_peeked(json_array_get(m, 0), a, 1, T0_MS + 5020, 1);
    assert_peeked(json_array_get(m, 1), b, 0, T0_MS + 60010, 0);
    assert_peeked(json_array_get(m, 2), c, 0, T0_MS + 20, 0);
    ck_assert_int_eq(int_of(json_object_get(json_array_get(m, 0), "body"), "n"),
                     1);
    ck_assert_int_eq(int_of(json_array_get(m, 0), "sent_ms"), T0_MS);
    json_decref(m);
  }
  m = peek(&h, "jobs", 2);
  ck_assert_uint_eq(json_array_size(m), 2);
  ck_assert_int_eq(int_of(json_array_get(m, 1), "id"), b);
  json_decref(m);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "ready"), 1);
  ck_assert_int_eq(int_of(st, "delayed"), 1);
  ck_assert_int_eq(int_of(st, "in_flight"), 1);
  json_decref(st);
  /* looked at twice, c is still delivered for the first time */
  m = pull(&h, "jobs", 10, 5000);
  ck_assert_uint_eq(json_array_size(m), 1);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "id"), c);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), 1);
  json_decref(m);
  /* a's lease ran out: not leased any more, and its count is its pulls */
  harness_advance(&h, 5000);
  m = peek(&h, "jobs", 1);
  assert_peeked(json_array_get(m, 0), a, 1, T0_MS + 5020, 0);
  json_decref(m);
  m = pull(&h, "jobs", 1, 5000);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "id"), a);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), 2);
  json_decref(m);
  /* an empty queue, an unknown one, a bad limit */
  ck_assert_int_eq(duro_queue_register(h.e, "empty", NULL), 0);
  m = peek(&h, "empty", 100);
  ck_assert_uint_eq(json_array_size(m), 0);
  json_decref(m);
  ck_assert_int_eq(duro_queue_peek(h.e, "nope", 20, &m, err, sizeof err),
                   DURO_E_QUEUE_NOT_FOUND);
  ck_assert_int_eq(duro_queue_peek(h.e, "jobs", 0, &m, err, sizeof err),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(duro_queue_peek(h.e, "jobs", 101, &m, err, sizeof err),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_ptr_null(m);
  harness_close(&h);
}
END_TEST

/* A dead-letter queue's message keeps its attempts and last error, and a
 * peek shows them as they are (a pull would count one more). */
START_TEST(peek_shows_dead_letters_unchanged) {
  harness h;
  harness_open(&h);
  harness_start(&h);
  duro_queue_options o = {.max_retries = 0, .dead_letter = "dlq"};
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", &o), 0);
  ck_assert_int_eq(duro_queue_register(h.e, "dlq", NULL), 0);
  int64_t id = send(&h, "jobs", "{\"k\":7}", 0);
  json_t *m = pull(&h, "jobs", 1, 0);
  json_decref(retry(&h, "jobs", lease_of(m, 0), 0, "\"boom\""));
  json_decref(m);
  for (int look = 0; look < 2; look++) {
    m = peek(&h, "dlq", 20);
    ck_assert_uint_eq(json_array_size(m), 1);
    assert_peeked(json_array_get(m, 0), id, 1, T0_MS, 0);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_array_get(m, 0), "last_error")),
        "\"boom\"");
    json_decref(m);
  }
  m = pull(&h, "dlq", 10, 0);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), 2);
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
  /* the count is in the journal: a restart keeps it */
  harness_reopen(&h);
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", NULL), 0);
  st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "dropped"), 1);
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
  ck_assert_int_eq(duro_queues_sweep(h.e, 0, &n), 0);
  ck_assert_uint_eq(n, 1);
  json_t *m = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "body"), 2);
  json_decref(m);
  harness_advance(&h, 4 * 24 * HOUR_MS);
  ck_assert_int_eq(duro_queues_sweep(h.e, 0, &n), 0);
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

/* A sweep bounded to `max` messages stops there and says more may be
 * due; the next calls take the rest (the scheduler calls it a pass at a
 * time, so a queue of millions of old messages holds up no wake). */
START_TEST(retention_sweep_is_bounded) {
  harness h;
  harness_open(&h);
  harness_start(&h);
  duro_queue_options o = {.max_retries = -1, .retention_ms = HOUR_MS};
  ck_assert_int_eq(duro_queue_register(h.e, "a", &o), 0);
  ck_assert_int_eq(duro_queue_register(h.e, "b", &o), 0);
  for (int i = 0; i < 15; i++)
    send(&h, "a", "1", 0);
  for (int i = 0; i < 10; i++)
    send(&h, "b", "1", 0);
  harness_advance(&h, HOUR_MS + 1);
  size_t n = 0, total = 0;
  ck_assert_int_eq(duro_queues_sweep(h.e, 10, &n), 1);
  ck_assert_uint_eq(n, 10);
  total += n;
  ck_assert_int_eq(duro_queues_sweep(h.e, 10, &n), 1);
  ck_assert_uint_eq(n, 10);
  total += n;
  ck_assert_int_eq(duro_queues_sweep(h.e, 10, &n), 0);
  ck_assert_uint_eq(n, 5);
  total += n;
  ck_assert_uint_eq(total, 25);
  ck_assert_int_eq(duro_queues_sweep(h.e, 10, &n), 0);
  ck_assert_uint_eq(n, 0);
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
  /* Cloudflare's 128 KB is 128,000 bytes, not 131,072 */
  char *big = repeat_body(128001);
  ck_assert_int_eq(
      duro_queue_enqueue(h.e, "jobs", big, 0, &id, err, sizeof err),
      DURO_E_MESSAGE_TOO_LARGE);
  ck_assert_str_eq(err,
                   "message body is 128001 bytes, more than the 128000-byte "
                   "limit");
  free(big);
  char *max = repeat_body(128000);
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
    reqs[i] = (duro_queue_send_req){.body = "1"};
  ck_assert_int_eq(
      duro_queue_enqueue_batch(h.e, "jobs", reqs, 101, NULL, err, sizeof err),
      DURO_E_BATCH_TOO_LARGE);
  ck_assert_ptr_nonnull(strstr(err, "100"));
  /* 256,001 bytes over three bodies, each within its own limit */
  char *b1 = repeat_body(128000);
  char *b2 = repeat_body(127990);
  char *b3 = repeat_body(11);
  duro_queue_send_req three[] = {{.body = b1}, {.body = b2}, {.body = b3}};
  ck_assert_int_eq(
      duro_queue_enqueue_batch(h.e, "jobs", three, 3, NULL, err, sizeof err),
      DURO_E_BATCH_TOO_LARGE);
  ck_assert_str_eq(err, "the batch's bodies are 256001 bytes, more than the "
                        "256000-byte limit");
  three[2].body = "1"; /* 255,991 bytes: accepted */
  int64_t ids[3];
  ck_assert_int_eq(
      duro_queue_enqueue_batch(h.e, "jobs", three, 3, ids, err, sizeof err), 0);
  ck_assert_int_eq(ids[1], ids[0] + 1);
  free(b1), free(b2), free(b3);
  /* a bad message anywhere refuses the whole batch */
  duro_queue_send_req mixed[] = {{.body = "1"}, {.body = "nope"}};
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
  ck_assert_uint_eq(pulled(&h, "jobs", 10, 0), 0);
  harness_advance(&h, 1000);  /* attempt 2 sends and completes */
  harness_advance(&h, 60000); /* the nap ends: a replay of the step */
  ck_assert_str_eq(harness_status(&h, "sender", "s1"), "complete");
  json_t *m = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(m, 0), "body")),
      "attempt 2");
  json_decref(m);
  harness_close(&h);
}
END_TEST

static int step_send_rc[2];

/* Sends a body of 128,000 bytes and one of 128,001 from a step. */
static int send_at_and_over_the_limit(duro_attempt *a, void *arg) {
  duro_queue *q = arg;
  char *at = repeat_body(128000), *over = repeat_body(128001);
  step_send_rc[0] = duro_queue_send(q, at, 0);
  step_send_rc[1] = duro_queue_send(q, over, 0);
  free(at);
  free(over);
  return duro_attempt_result(a, "1");
}

static duro_rc limit_sender(duro_step *step, const duro_event *ev,
                            duro_env *env) {
  (void)ev;
  DURO_TRY(duro_do(step, "send", NULL, send_at_and_over_the_limit,
                   duro_env_queue(env, "JOBS"), NULL));
  return duro_set_output(step, "1");
}

/* A step's send has the limits of any other: 128,000 bytes go, one more
 * is refused (and the step may carry on). */
START_TEST(send_in_a_step_checks_the_body_limit) {
  harness h;
  open_with_queue(&h);
  ck_assert_int_eq(duro_queue_bind(h.e, "JOBS", "jobs"), 0);
  harness_register(&h, "limits", limit_sender);
  ck_assert_int_eq(duro_instance_create(h.e, "limits", "l1", NULL, -1, NULL),
                   0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "limits", "l1"), "complete");
  ck_assert_int_eq(step_send_rc[0], 0);
  ck_assert_int_eq(step_send_rc[1], DURO_E_MESSAGE_TOO_LARGE);
  json_t *m = pull(&h, "jobs", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  ck_assert_uint_eq(
      strlen(json_string_value(json_object_get(json_array_get(m, 0), "body"))),
      128000 - 2);
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

/* ---- the no-code consumer: queue → one workflow instance per job id ---- */

static int job_runs[256]; /* step callback runs per job number */

static int count_run(duro_attempt *a, void *arg) {
  int n = (int)(intptr_t)arg;
  ck_assert(n >= 0 && n < 256);
  job_runs[n]++;
  return duro_attempt_result(a, "1");
}

/* Its params are the message body {"jobId", "n"}. */
static duro_rc job_flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  json_t *p = json_loads(ev->params, JSON_DECODE_ANY, NULL);
  json_int_t n = json_integer_value(json_object_get(p, "n"));
  json_decref(p);
  DURO_TRY(duro_do(step, "work", NULL, count_run, (void *)(intptr_t)n, NULL));
  return duro_set_output(step, ev->params);
}

static void open_with_consumer(harness *h, const duro_queue_options *o) {
  memset(job_runs, 0, sizeof job_runs);
  harness_open(h);
  harness_register(h, "job-flow", job_flow);
  harness_start(h);
  ck_assert_int_eq(duro_queue_register(h->e, "jobs", o), 0);
  ck_assert_int_eq(duro_queue_register(h->e, "dlq", NULL), 0);
  ck_assert_int_eq(
      duro_queue_consume_workflow(h->e, "jobs", "job-flow", "/jobId", 10), 0);
}

static size_t instance_count(harness *h) {
  json_t *l = NULL;
  ck_assert_int_eq(duro_instance_list(h->e, "job-flow", NULL, 1000, NULL, &l),
                   0);
  size_t n = json_array_size(json_object_get(l, "instances"));
  json_decref(l);
  return n;
}

START_TEST(consumer_creates_and_acks) {
  harness h;
  open_with_consumer(&h, NULL);
  ck_assert_int_eq(
      duro_queue_consume_workflow(h.e, "nope", "job-flow", "/jobId", 10),
      DURO_E_QUEUE_NOT_FOUND);
  ck_assert_int_eq(
      duro_queue_consume_workflow(h.e, "jobs", "job-flow", "jobId", 10),
      DURO_E_INVALID_ARGUMENT);
  send(&h, "jobs", "{\"jobId\":\"a-1\",\"n\":1}", 0);
  send(&h, "jobs", "{\"jobId\":42,\"n\":2}", 0);
  ck_assert_uint_eq(duro_queues_dispatch(h.e), 2);
  ck_assert_uint_eq(duro_queues_dispatch(h.e), 0);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "ready") + int_of(st, "in_flight"), 0);
  json_decref(st);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "job-flow", "a-1"), "complete");
  ck_assert_str_eq(harness_status(&h, "job-flow", "42"), "complete");
  json_t *d = harness_describe(&h, "job-flow", "42");
  ck_assert_int_eq(int_of(json_object_get(d, "params"), "jobId"), 42);
  json_decref(d);
  ck_assert_int_eq(job_runs[1], 1);
  ck_assert_int_eq(job_runs[2], 1);
  /* the run loop dispatches too: a later send runs to completion */
  send(&h, "jobs", "{\"jobId\":\"b\",\"n\":3}", 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "job-flow", "b"), "complete");
  harness_close(&h);
}
END_TEST

/* 100 job ids, each sent twice, plus redeliveries of leases that expired
 * under a consumer that died: exactly 100 instances, each run once. */
START_TEST(consumer_exactly_one_instance_per_job) {
  harness h;
  open_with_consumer(&h, NULL);
  char body[64];
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < 100; i++) {
      snprintf(body, sizeof body, "{\"jobId\":\"job-%d\",\"n\":%d}", i, i);
      send(&h, "jobs", body, 0);
    }
  /* a consumer that leases 60 messages and dies without acking */
  ck_assert_uint_eq(pulled(&h, "jobs", 60, 5000), 60);
  harness_run(&h);           /* the 140 others */
  harness_advance(&h, 5000); /* the 60 come back */
  /* and the same job ids sent again, after their instances completed */
  for (int i = 0; i < 100; i += 7) {
    snprintf(body, sizeof body, "{\"jobId\":\"job-%d\",\"n\":%d}", i, i);
    send(&h, "jobs", body, 0);
  }
  harness_run(&h);
  ck_assert_uint_eq(instance_count(&h), 100);
  for (int i = 0; i < 100; i++) {
    snprintf(body, sizeof body, "job-%d", i);
    ck_assert_str_eq(harness_status(&h, "job-flow", body), "complete");
    ck_assert_msg(job_runs[i] == 1, "job %d ran %d times", i, job_runs[i]);
  }
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(
      int_of(st, "ready") + int_of(st, "in_flight") + int_of(st, "delayed"), 0);
  json_decref(st);
  harness_close(&h);
}
END_TEST

/* A body without a usable id is retried, then dead-lettered with why. */
START_TEST(consumer_bad_pointer_dead_letters) {
  harness h;
  duro_queue_options o = {
      .max_retries = 2, .retry_delay_ms = 1000, .dead_letter = "dlq"};
  open_with_consumer(&h, &o);
  send(&h, "jobs", "{\"job\":\"x\"}", 0);
  send(&h, "jobs", "{\"jobId\":{\"nested\":1}}", 0);
  send(&h, "jobs", "{\"jobId\":\"ok\",\"n\":5}", 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "job-flow", "ok"), "complete");
  for (int i = 0; i < 2; i++) { /* attempts 1 and 2 failed */
    json_t *st = stats(&h, "jobs");
    ck_assert_int_eq(int_of(st, "delayed"), 2);
    json_decref(st);
    harness_advance(&h, 1000);
  }
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(
      int_of(st, "ready") + int_of(st, "delayed") + int_of(st, "in_flight"), 0);
  json_decref(st);
  json_t *m = pull(&h, "dlq", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 2);
  json_t *m0 = json_array_get(m, 0), *m1 = json_array_get(m, 1);
  ck_assert_int_eq(int_of(m0, "attempts"), 4); /* 3, +1 for this pull */
  ck_assert_str_eq(
      json_string_value(json_object_get(m0, "last_error")),
      "\"id_from \\\"/jobId\\\": no such member in the message body\"");
  ck_assert_str_eq(
      json_string_value(json_object_get(m1, "last_error")),
      "\"id_from \\\"/jobId\\\": the value is not a string or a number\"");
  json_decref(m);
  ck_assert_uint_eq(instance_count(&h), 1);
  harness_close(&h);
}
END_TEST

START_TEST(json_pointers) {
  json_t *doc =
      json_loads("{\"a\":{\"b/c\":[10,{\"~k\":\"v\"}]},\"\":1}", 0, NULL);
  ck_assert_ptr_eq(duro_json_pointer_get(doc, ""), doc);
  ck_assert_int_eq(json_integer_value(duro_json_pointer_get(doc, "/a/b~1c/0")),
                   10);
  ck_assert_str_eq(
      json_string_value(duro_json_pointer_get(doc, "/a/b~1c/1/~0k")), "v");
  ck_assert_int_eq(json_integer_value(duro_json_pointer_get(doc, "/")), 1);
  ck_assert_ptr_null(duro_json_pointer_get(doc, "/a/b~1c/01"));
  ck_assert_ptr_null(duro_json_pointer_get(doc, "/a/b~1c/2"));
  ck_assert_ptr_null(duro_json_pointer_get(doc, "/a/x"));
  ck_assert(!duro_json_pointer_valid("a"));
  ck_assert(!duro_json_pointer_valid("/a~2"));
  ck_assert(!duro_json_pointer_valid("/a~"));
  json_decref(doc);
}
END_TEST

/* With workers, the scheduler thread runs the consumer: no inline call. */
START_TEST(consumer_runs_on_the_scheduler) {
  harness h;
  memset(job_runs, 0, sizeof job_runs);
  harness_open_workers(&h, 2);
  harness_register(&h, "job-flow", job_flow);
  harness_start(&h);
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", NULL), 0);
  ck_assert_int_eq(
      duro_queue_consume_workflow(h.e, "jobs", "job-flow", "/jobId", 3), 0);
  char body[64];
  for (int i = 0; i < 20; i++) {
    snprintf(body, sizeof body, "{\"jobId\":\"j%d\",\"n\":%d}", i % 10, i % 10);
    send(&h, "jobs", body, 0);
  }
  for (int i = 0;; i++) {
    int done = 1;
    for (int k = 0; k < 10 && done; k++) {
      snprintf(body, sizeof body, "j%d", k);
      duro_status st;
      done = duro_instance_status(h.e, "job-flow", body, &st) == 0 &&
             st == DURO_STATUS_COMPLETE;
    }
    if (done)
      break;
    ck_assert_msg(i < 100, "the jobs did not complete within 10 s");
    usleep(100 * 1000);
  }
  /* the second message of each id (created already: acked) may come a
   * pass after the last instance completed */
  for (int i = 0;; i++) {
    json_t *st = stats(&h, "jobs");
    int left = int_of(st, "ready") + int_of(st, "in_flight");
    json_decref(st);
    if (!left)
      break;
    ck_assert_msg(i < 100, "%d messages left after 10 s", left);
    usleep(100 * 1000);
  }
  ck_assert_uint_eq(instance_count(&h), 10);
  for (int k = 0; k < 10; k++)
    ck_assert_int_eq(job_runs[k], 1);
  harness_close(&h);
}
END_TEST

/* ---- lifecycle messages ---------------------------------------------------
 */

static int fail_for_good(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_fail_final(a, "it failed");
}

/* Params {"do": "ok" | "fail" | "sleep"}. */
static duro_rc life_flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  if (strstr(ev->params, "fail"))
    DURO_TRY(duro_do(step, "fail", NULL, fail_for_good, NULL, NULL));
  if (strstr(ev->params, "sleep"))
    DURO_TRY(duro_sleep(step, "nap", "1 hour"));
  return duro_set_output(step, "{\"ok\":true}");
}

/* The next lifecycle message's "type, instance" (and its output or
 * error name), or "" when there is none. */
static const char *next_life(harness *h, char *buf, size_t len) {
  json_t *m = pull(h, "life", 1, 0);
  buf[0] = '\0';
  json_t *b = json_object_get(json_array_get(m, 0), "body");
  if (b) {
    json_t *out = json_object_get(b, "output"),
           *err = json_object_get(b, "error");
    snprintf(buf, len, "%s %s%s%s",
             json_string_value(json_object_get(b, "type")),
             json_string_value(json_object_get(b, "instance_id")),
             out ? " ok" : "", err ? " error" : "");
    ck_assert_str_eq(json_string_value(json_object_get(b, "workflow")),
                     "life-flow");
    json_t *r = ack(
        h, "life",
        json_string_value(json_object_get(json_array_get(m, 0), "lease_id")));
    json_decref(r);
  }
  json_decref(m);
  return buf;
}

/* Each start and end of an instance is one message, committed with the
 * status change: started then complete / errored; a terminate of a
 * sleeping instance; a restart starts it again; a pause says nothing. */
START_TEST(lifecycle_messages) {
  harness h;
  harness_open(&h);
  duro_workflow_limits lim = {.lifecycle_queue = "life"};
  ck_assert_int_eq(
      duro_engine_register(h.e, "life-flow", NULL, life_flow, &lim, "test"), 0);
  harness_start(&h);
  ck_assert_int_eq(duro_queue_register(h.e, "life", NULL), 0);
  char buf[128];
  ck_assert_int_eq(
      duro_instance_create(h.e, "life-flow", "a", "{\"do\":\"ok\"}", -1, NULL),
      0);
  ck_assert_int_eq(duro_instance_create(h.e, "life-flow", "b",
                                        "{\"do\":\"fail\"}", -1, NULL),
                   0);
  ck_assert_int_eq(duro_instance_create(h.e, "life-flow", "c",
                                        "{\"do\":\"sleep\"}", -1, NULL),
                   0);
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), ""); /* none ran yet */
  harness_run(&h);
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "started a");
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "complete a ok");
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "started b");
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "errored b error");
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "started c");
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "");
  ck_assert_int_eq(duro_instance_pause(h.e, "life-flow", "c"), 0);
  harness_run(&h);
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "");
  ck_assert_int_eq(duro_instance_terminate(h.e, "life-flow", "c"), 0);
  harness_run(&h);
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "terminated c");
  ck_assert_int_eq(duro_instance_restart(h.e, "life-flow", "a", NULL, 0), 0);
  harness_run(&h);
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "started a");
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "complete a ok");
  ck_assert_str_eq(next_life(&h, buf, sizeof buf), "");
  harness_close(&h);
}
END_TEST

/* ---- push consumers: a plugin's queue handler ------------------------- */

static size_t batch_sizes[64], n_batches;
static int handler_rc;
static char last_bodies[8][64];

/* Records the batch; marks nothing: its return code decides. */
static int record_batch(duro_message_batch *b, duro_env *env) {
  (void)env;
  ck_assert_str_eq(duro_batch_queue(b), "jobs");
  ck_assert_uint_lt(n_batches, 64);
  batch_sizes[n_batches++] = duro_batch_size(b);
  for (size_t i = 0; i < duro_batch_size(b) && i < 8; i++) {
    const duro_message *m = duro_batch_message(b, i);
    ck_assert_uint_eq(m->size, sizeof(duro_message));
    snprintf(last_bodies[i], sizeof last_bodies[i], "%s", m->body);
  }
  ck_assert_ptr_null(duro_batch_message(b, duro_batch_size(b)));
  return handler_rc;
}

static void open_push(harness *h, duro_queue_fn fn, uint32_t size,
                      int64_t timeout_ms, const duro_queue_options *qo) {
  n_batches = 0;
  handler_rc = 0;
  harness_open(h);
  harness_start(h);
  ck_assert_int_eq(duro_queue_register(h->e, "jobs", qo), 0);
  ck_assert_int_eq(duro_queue_register(h->e, "dlq", NULL), 0);
  duro_queue_consumer_opts o = {.max_batch_size = size,
                                .max_batch_timeout_ms = timeout_ms};
  ck_assert_int_eq(duro_queue_consume(h->e, "jobs", fn, &o), 0);
}

static json_int_t left_in(harness *h, const char *q) {
  json_t *st = stats(h, q);
  json_int_t n =
      int_of(st, "ready") + int_of(st, "delayed") + int_of(st, "in_flight");
  json_decref(st);
  return n;
}

START_TEST(push_batches_by_size_and_timeout) {
  harness h;
  open_push(&h, record_batch, 3, 5000, NULL);
  char body[32];
  for (int i = 0; i < 7; i++) {
    snprintf(body, sizeof body, "{\"n\":%d}", i);
    send(&h, "jobs", body, 0);
  }
  harness_run(&h); /* two full batches; one message waits for more */
  ck_assert_uint_eq(n_batches, 2);
  ck_assert_uint_eq(batch_sizes[0], 3);
  ck_assert_uint_eq(batch_sizes[1], 3);
  ck_assert_str_eq(last_bodies[0], "{\"n\":3}");
  harness_advance(&h, 4999);
  ck_assert_uint_eq(n_batches, 2);
  harness_advance(&h, 1); /* it waited max_batch_timeout */
  ck_assert_uint_eq(n_batches, 3);
  ck_assert_uint_eq(batch_sizes[2], 1);
  ck_assert_str_eq(last_bodies[0], "{\"n\":6}");
  ck_assert_int_eq(left_in(&h, "jobs"), 0); /* returned 0: all acked */
  harness_close(&h);
}
END_TEST

/* The batch timeout runs from when the oldest message became visible,
 * a time the journal keeps: the scheduler is told exactly when to look,
 * and a restart does not start the wait over.  A delayed message names
 * the time it becomes visible. */
START_TEST(push_batch_timeout_is_exact_and_survives_a_restart) {
  harness h;
  open_push(&h, record_batch, 3, 5000, NULL);
  send(&h, "jobs", "{\"n\":0}", 0);
  int64_t next = 0;
  ck_assert_uint_eq(queue_consumers_dispatch(h.e, &next), 0);
  ck_assert_int_eq(next, T0_MS + 5000);
  harness_advance(&h, 3000);
  ck_assert_uint_eq(n_batches, 0);
  /* a clean restart: the consumer is registered again, as the host does */
  harness_reopen(&h);
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", NULL), 0);
  duro_queue_consumer_opts o = {.max_batch_size = 3,
                                .max_batch_timeout_ms = 5000};
  ck_assert_int_eq(duro_queue_consume(h.e, "jobs", record_batch, &o), 0);
  ck_assert_uint_eq(queue_consumers_dispatch(h.e, &next), 0);
  ck_assert_int_eq(next, T0_MS + 5000);
  harness_advance(&h, 1999);
  ck_assert_uint_eq(n_batches, 0);
  harness_advance(&h, 1);
  ck_assert_uint_eq(n_batches, 1);
  ck_assert_uint_eq(batch_sizes[0], 1);
  /* nothing visible: a delayed message says when it will be */
  send(&h, "jobs", "{\"n\":1}", 60000);
  ck_assert_uint_eq(queue_consumers_dispatch(h.e, &next), 0);
  ck_assert_int_eq(next, T0_MS + 5000 + 60000);
  harness_close(&h);
}
END_TEST

/* Even messages acked, odd ones retried in 1 s; then all acked. */
static int ack_even(duro_message_batch *b, duro_env *env) {
  (void)env;
  batch_sizes[n_batches++] = duro_batch_size(b);
  if (duro_batch_message(b, 0)->attempts > 1)
    return duro_batch_ack_all(b);
  for (size_t i = 0; i < duro_batch_size(b); i++)
    ck_assert_int_eq(
        i % 2 ? duro_message_retry(b, i, 1000) : duro_message_ack(b, i), 0);
  ck_assert_int_eq(duro_message_ack(b, duro_batch_size(b)),
                   DURO_E_INVALID_ARGUMENT);
  return 1; /* every message is marked: the code changes nothing */
}

START_TEST(push_per_message_ack_and_retry) {
  harness h;
  open_push(&h, ack_even, 10, 0, NULL);
  for (int i = 0; i < 4; i++)
    send(&h, "jobs", "1", 0);
  harness_run(&h);
  ck_assert_uint_eq(n_batches, 1);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "delayed"), 2);
  ck_assert_int_eq(int_of(st, "ready") + int_of(st, "in_flight"), 0);
  json_decref(st);
  harness_advance(&h, 1000);
  ck_assert_uint_eq(n_batches, 2);
  ck_assert_uint_eq(batch_sizes[1], 2);
  ck_assert_int_eq(left_in(&h, "jobs"), 0);
  harness_close(&h);
}
END_TEST

/* Unmarked messages: retried when the handler fails, acked when not. */
START_TEST(push_return_code_decides_unmarked) {
  harness h;
  duro_queue_options qo = {.max_retries = -1, .retry_delay_ms = 60000};
  open_push(&h, record_batch, 10, 0, &qo);
  send(&h, "jobs", "\"a\"", 0);
  send(&h, "jobs", "\"b\"", 0);
  handler_rc = 7;
  harness_run(&h);
  ck_assert_uint_eq(n_batches, 1);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "delayed"), 2); /* the queue's retry_delay */
  json_decref(st);
  handler_rc = 0;
  harness_advance(&h, 60000);
  ck_assert_uint_eq(n_batches, 2);
  ck_assert_uint_eq(batch_sizes[1], 2);
  ck_assert_int_eq(left_in(&h, "jobs"), 0);
  harness_close(&h);
}
END_TEST

static int retry_everything(duro_message_batch *b, duro_env *env) {
  (void)env;
  n_batches++;
  return duro_batch_retry_all(b, 0);
}

START_TEST(push_dead_letters_after_max_retries) {
  harness h;
  duro_queue_options qo = {.max_retries = 2, .dead_letter = "dlq"};
  open_push(&h, retry_everything, 10, 0, &qo);
  send(&h, "jobs", "{\"k\":1}", 0);
  harness_run(&h);
  ck_assert_uint_eq(n_batches, 3); /* 1 + max_retries deliveries */
  ck_assert_int_eq(left_in(&h, "jobs"), 0);
  json_t *m = pull(&h, "dlq", 10, 0);
  ck_assert_uint_eq(json_array_size(m), 1);
  ck_assert_int_eq(int_of(json_array_get(m, 0), "attempts"), 4);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(m, 0), "last_error")),
      "\"retried by the queue handler\"");
  json_decref(m);
  harness_close(&h);
}
END_TEST

/* A consumer stopped (a new build without a handler): the queue is left
 * to pull consumers. */
START_TEST(push_unconsume_stops_the_handler) {
  harness h;
  open_push(&h, record_batch, 10, 0, NULL);
  ck_assert_int_eq(duro_queue_unconsume(h.e, "jobs"), 0);
  ck_assert_int_eq(duro_queue_unconsume(h.e, "jobs"), DURO_E_QUEUE_NOT_FOUND);
  send(&h, "jobs", "1", 0);
  harness_run(&h);
  ck_assert_uint_eq(n_batches, 0);
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "ready"), 1);
  json_decref(st);
  harness_close(&h);
}
END_TEST

/* With workers, batches run on threads of their own, at most
 * max_concurrency at once. */
static int in_handler, most_in_handler, released, handled;
static pthread_mutex_t conc_mu = PTHREAD_MUTEX_INITIALIZER;

static int slow_handler(duro_message_batch *b, duro_env *env) {
  (void)env;
  pthread_mutex_lock(&conc_mu);
  in_handler++;
  if (in_handler > most_in_handler)
    most_in_handler = in_handler;
  pthread_mutex_unlock(&conc_mu);
  for (;;) {
    pthread_mutex_lock(&conc_mu);
    int go = released;
    pthread_mutex_unlock(&conc_mu);
    if (go)
      break;
    usleep(5000);
  }
  pthread_mutex_lock(&conc_mu);
  in_handler--;
  handled += (int)duro_batch_size(b);
  pthread_mutex_unlock(&conc_mu);
  return 0;
}

static int conc_read(int *v) {
  pthread_mutex_lock(&conc_mu);
  int x = *v;
  pthread_mutex_unlock(&conc_mu);
  return x;
}

START_TEST(push_max_concurrency) {
  harness h;
  harness_open_workers(&h, 1);
  harness_start(&h);
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", NULL), 0);
  duro_queue_consumer_opts o = {.max_batch_size = 1, .max_concurrency = 2};
  ck_assert_int_eq(duro_queue_consume(h.e, "jobs", slow_handler, &o), 0);
  for (int i = 0; i < 6; i++)
    send(&h, "jobs", "1", 0);
  for (int i = 0; conc_read(&in_handler) < 2; i++) {
    ck_assert_msg(i < 500, "two batches did not start within 5 s");
    usleep(10000);
  }
  usleep(1500 * 1000); /* a scheduler pass or more: no third batch */
  ck_assert_int_eq(conc_read(&most_in_handler), 2);
  pthread_mutex_lock(&conc_mu);
  released = 1;
  pthread_mutex_unlock(&conc_mu);
  for (int i = 0; conc_read(&handled) < 6; i++) {
    ck_assert_msg(i < 500, "the batches did not finish within 5 s");
    usleep(10000);
  }
  ck_assert_int_eq(conc_read(&most_in_handler), 2);
  for (int i = 0; left_in(&h, "jobs") > 0; i++) {
    ck_assert_msg(i < 500, "the last ack did not land within 5 s");
    usleep(10000);
  }
  harness_close(&h);
}
END_TEST

/* A handler that hangs on a "hang" body until the test lets it go (then
 * returns 0, which would ack all it did not mark), acking the others as it
 * goes. */
static int hang_released, hang_entered, hang_late_rc = 1, innocent;

static int hanging_handler(duro_message_batch *b, duro_env *env) {
  (void)env;
  for (size_t i = 0; i < duro_batch_size(b); i++) {
    if (!strstr(duro_batch_message(b, i)->body, "hang")) {
      ck_assert_int_eq(duro_message_ack(b, i), 0);
      pthread_mutex_lock(&conc_mu);
      innocent++;
      pthread_mutex_unlock(&conc_mu);
      continue;
    }
    pthread_mutex_lock(&conc_mu);
    hang_entered++;
    pthread_mutex_unlock(&conc_mu);
    while (!conc_read(&hang_released))
      usleep(5000);
    /* late: the batch was settled at the deadline */
    hang_late_rc = duro_message_ack(b, i);
  }
  return 0;
}

static json_t *hung_handlers(harness *h) {
  json_t *health = duro_engine_health(h->e);
  json_t *hung = json_incref(json_object_get(health, "hung_queue_handlers"));
  if (hung)
    ck_assert_str_eq(json_string_value(json_object_get(health, "status")),
                     "degraded");
  json_decref(health);
  return hung;
}

/* A handler past its visibility timeout is abandoned: the message it
 * acked stays acked, the one it hung on is retried (an attempt counted,
 * the reason kept), its only concurrency slot goes to the next batch, the
 * health report shows it until it returns, and its late return acks
 * nothing. */
START_TEST(push_hung_handler_is_abandoned) {
  harness h;
  harness_open_workers(&h, 1);
  harness_start(&h);
  duro_queue_options qo = {
      .max_retries = 1, .retry_delay_ms = HOUR_MS, .dead_letter = "dlq"};
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", &qo), 0);
  ck_assert_int_eq(duro_queue_register(h.e, "dlq", NULL), 0);
  duro_queue_consumer_opts o = {.max_batch_size = 2,
                                .max_concurrency = 1,
                                .visibility_ms = 1000,
                                .plugin = "hanger"};
  ck_assert_int_eq(duro_queue_consume(h.e, "jobs", hanging_handler, &o), 0);
  /* one commit, so that one batch takes both: acks "first", hangs */
  duro_queue_send_req both[] = {{.body = "\"first\""}, {.body = "\"hang\""}};
  ck_assert_int_eq(
      duro_queue_enqueue_batch(h.e, "jobs", both, 2, NULL, err, sizeof err), 0);
  for (int i = 0; !conc_read(&hang_entered); i++) {
    ck_assert_msg(i < 500, "the batch did not start within 5 s");
    usleep(10000);
  }
  /* Behind it, on the consumer's only slot: handled once it is abandoned. */
  for (int i = 0; i < 5; i++)
    send(&h, "jobs", "\"innocent\"", 0);
  for (int i = 0; conc_read(&innocent) < 6; i++) {
    ck_assert_msg(i < 1000,
                  "%d of 6 handled within 10 s: the hung handler "
                  "holds the slot",
                  conc_read(&innocent));
    usleep(10000);
  }
  json_t *hung = hung_handlers(&h);
  ck_assert_uint_eq(json_array_size(hung), 1);
  json_t *one = json_array_get(hung, 0);
  ck_assert_str_eq(json_string_value(json_object_get(one, "queue")), "jobs");
  ck_assert_str_eq(json_string_value(json_object_get(one, "plugin")), "hanger");
  ck_assert_int_eq(int_of(one, "messages"), 2);
  ck_assert_int_eq(int_of(one, "timeout_ms"), 1000);
  ck_assert_int_ge(int_of(one, "running_ms"), 1000);
  json_decref(hung);
  /* Only the hung message is left: delayed by retry_delay, one attempt. */
  for (int i = 0; left_in(&h, "jobs") > 1; i++) {
    ck_assert_msg(i < 500, "the innocents' acks did not land within 5 s");
    usleep(10000);
  }
  json_t *st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "delayed"), 1);
  ck_assert_int_eq(int_of(st, "in_flight"), 0);
  json_decref(st);
  json_t *m = peek(&h, "jobs", 10);
  ck_assert_uint_eq(json_array_size(m), 1);
  json_t *msg = json_array_get(m, 0);
  ck_assert_str_eq(json_string_value(json_object_get(msg, "body")), "hang");
  ck_assert_int_eq(int_of(msg, "attempts"), 1);
  const char *last = json_string_value(json_object_get(msg, "last_error"));
  ck_assert_msg(last && strstr(last, "TimeoutError") &&
                    strstr(last, "visibility_timeout of 1000 ms"),
                "last_error: %s", last ? last : "(none)");
  json_decref(m);
  /* The late return: its ack refused, its return code ignored. */
  pthread_mutex_lock(&conc_mu);
  hang_released = 1;
  pthread_mutex_unlock(&conc_mu);
  for (int i = 0; (hung = hung_handlers(&h)) != NULL; i++) {
    json_decref(hung);
    ck_assert_msg(i < 500, "the released handler still listed after 5 s");
    usleep(10000);
  }
  ck_assert_int_eq(conc_read(&hang_late_rc), DURO_E_LEASE_NOT_HELD);
  st = stats(&h, "jobs");
  ck_assert_int_eq(int_of(st, "delayed"), 1);
  json_decref(st);
  harness_close(&h);
}
END_TEST

/* Past the cap of hung handler threads (max_hung, here the one worker),
 * an abandoned handler keeps its queue's slot until it returns: the
 * queue stalls rather than leave a thread behind per delivery. */
START_TEST(hung_handlers_past_the_cap_hold_the_slot) {
  harness h;
  harness_open_workers(&h, 1);
  harness_start(&h);
  duro_queue_options qo = {.max_retries = 5, .retry_delay_ms = HOUR_MS};
  ck_assert_int_eq(duro_queue_register(h.e, "jobs", &qo), 0);
  duro_queue_consumer_opts o = {.max_batch_size = 1,
                                .max_concurrency = 1,
                                .visibility_ms = 1000,
                                .plugin = "hanger"};
  ck_assert_int_eq(duro_queue_consume(h.e, "jobs", hanging_handler, &o), 0);
  send(&h, "jobs", "\"hang 1\"", 0);
  send(&h, "jobs", "\"hang 2\"", 0);
  /* The first is abandoned within the cap: its slot goes to the second,
   * which is abandoned past it. */
  for (int i = 0; conc_read(&hang_entered) < 2; i++) {
    ck_assert_msg(i < 1000, "the second hung batch did not start in 10 s");
    usleep(10000);
  }
  json_t *hung = NULL;
  for (int i = 0;; i++) {
    hung = hung_handlers(&h);
    if (hung && json_array_size(hung) == 2)
      break;
    json_decref(hung);
    ck_assert_msg(i < 500, "two hung handlers not listed within 5 s");
    usleep(10000);
  }
  json_decref(hung);
  send(&h, "jobs", "\"innocent\"", 0);
  usleep(1500 * 1000); /* a scheduler pass or more */
  ck_assert_int_eq(conc_read(&innocent), 0);
  pthread_mutex_lock(&conc_mu);
  hang_released = 1;
  pthread_mutex_unlock(&conc_mu);
  for (int i = 0; conc_read(&innocent) < 1; i++) {
    ck_assert_msg(i < 500, "the slot was not freed when the handler returned");
    usleep(10000);
  }
  harness_close(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("queues");
  TCase *tc = tcase_create("queues");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, send_pull_ack_round_trip);
  tcase_add_test(tc, send_in_a_step_is_transactional);
  tcase_add_test(tc, send_in_a_step_checks_the_body_limit);
  tcase_add_test(tc, delayed_message_waits);
  tcase_add_test(tc, expired_lease_delivers_again);
  tcase_add_test(tc, expired_leases_count_as_attempts);
  tcase_add_test(tc, retry_with_delay);
  tcase_add_test(tc, max_retries_dead_letters);
  tcase_add_test(tc, max_retries_without_dead_letter_drops);
  tcase_add_test(tc, peek_lists_without_leasing);
  tcase_add_test(tc, peek_shows_dead_letters_unchanged);
  tcase_add_test(tc, retention_sweep_deletes_old_messages);
  tcase_add_test(tc, retention_sweep_is_bounded);
  tcase_add_test(tc, scheduler_runs_the_queue_sweep);
  tcase_add_test(tc, bad_input_is_refused);
  tcase_add_test(tc, messages_survive_a_restart);
  tcase_add_test(tc, consumer_creates_and_acks);
  tcase_add_test(tc, consumer_exactly_one_instance_per_job);
  tcase_add_test(tc, consumer_bad_pointer_dead_letters);
  tcase_add_test(tc, json_pointers);
  tcase_add_test(tc, consumer_runs_on_the_scheduler);
  tcase_add_test(tc, lifecycle_messages);
  tcase_add_test(tc, push_batches_by_size_and_timeout);
  tcase_add_test(tc, push_batch_timeout_is_exact_and_survives_a_restart);
  tcase_add_test(tc, push_per_message_ack_and_retry);
  tcase_add_test(tc, push_return_code_decides_unmarked);
  tcase_add_test(tc, push_dead_letters_after_max_retries);
  tcase_add_test(tc, push_unconsume_stops_the_handler);
  tcase_add_test(tc, push_max_concurrency);
  tcase_add_test(tc, push_hung_handler_is_abandoned);
  tcase_add_test(tc, hung_handlers_past_the_cap_hold_the_slot);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
