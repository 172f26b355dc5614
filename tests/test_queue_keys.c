/* test_queue_keys.c — a push consumer's concurrency by key
 * (queues.consumers[].concurrency, store/queue_keys.h) on the in-process
 * engine: leases as a keyed consumer takes them (one at a time and in
 * order per key with limit 1, two with limit 2, a retried message keeping
 * its key's place, messages without the key not held, a long backlog of
 * one key not delaying another), the held count of GET /queues and
 * /metrics, a restart keeping it all (the journal is the only state), and
 * handlers fed by the dispatch pass on the virtual clock and on worker
 * threads.  Also on PostgreSQL (DURO_TEST_PG). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "journal.h"
#include "queue.h"
#include "suite_run.h"
#include "view_queue.h"

static char err[256];

static void open_queue(harness *h) {
  harness_open(h);
  harness_start(h);
  ck_assert_int_eq(duro_queue_register(h->e, "pay", NULL), 0);
}

static void send(harness *h, const char *body, int64_t delay_ms) {
  ck_assert_msg(duro_queue_enqueue(h->e, "pay", body, delay_ms, NULL, err,
                                   sizeof err) == 0,
                "send %s: %s", body, err);
}

/* A batch as a keyed consumer leases it: its bodies joined by spaces
 * into `out`, its leases kept in `leases` (each freed by the caller's
 * settle). */
typedef struct leased {
  char bodies[512];
  char *lease[DURO_QUEUE_MAX_BATCH];
  uint32_t attempts[DURO_QUEUE_MAX_BATCH];
  size_t n;
} leased;

static void lease_by(harness *h, const char *pointer, uint32_t batch,
                     uint32_t limit, leased *out) {
  journal_message *m = NULL;
  size_t n = 0;
  ck_assert_int_eq(queue_lease_by_key(h->e, "pay", batch, 60000, NULL, pointer,
                                      limit, &m, &n, err, sizeof err),
                   0);
  *out = (leased){.n = n};
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(out->bodies);
    snprintf(out->bodies + len, sizeof out->bodies - len, "%s%s", i ? " " : "",
             m[i].body);
    out->lease[i] = strdup(m[i].lease);
    out->attempts[i] = m[i].attempts;
  }
  journal_messages_free(m, n);
}

static void lease(harness *h, uint32_t batch, uint32_t limit, leased *out) {
  lease_by(h, "/account", batch, limit, out);
}

/* Acks message i of the batch (retry_ms < 0), or retries it after
 * retry_ms. */
static void settle(harness *h, leased *l, size_t i, int64_t retry_ms) {
  duro_queue_ack_result res;
  const char *lease = l->lease[i];
  duro_queue_retry r = {lease, retry_ms, NULL};
  ck_assert_int_eq(duro_queue_settle(h->e, "pay", retry_ms < 0 ? &lease : NULL,
                                     retry_ms < 0, retry_ms < 0 ? NULL : &r,
                                     retry_ms >= 0, &res, err, sizeof err),
                   0);
  ck_assert_uint_eq(res.n_errors, 0);
  duro_queue_ack_result_free(&res);
}

static void leased_free(leased *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->lease[i]);
  l->n = 0;
}

static json_t *stats(harness *h) {
  json_t *st = NULL;
  ck_assert_int_eq(duro_queue_stats(h->e, "pay", &st), 0);
  return st;
}

static int ack_all(duro_message_batch *b, duro_env *env) {
  (void)env;
  return duro_batch_ack_all(b);
}

/* The held count GET /queues/pay shows for a consumer of /account with
 * `limit` (one registered for the read: these cases lease by hand). */
static json_int_t held_now(harness *h, uint32_t limit) {
  duro_queue_consumer_opts o = {.concurrency_key = "/account",
                                .concurrency_limit = limit};
  ck_assert_int_eq(duro_queue_consume(h->e, "pay", ack_all, &o), 0);
  json_t *st = stats(h);
  json_int_t held = json_integer_value(json_object_get(st, "held"));
  ck_assert_ptr_nonnull(json_object_get(st, "held"));
  json_decref(st);
  ck_assert_int_eq(duro_queue_unconsume(h->e, "pay"), 0);
  return held;
}

/* Short bodies: {"account":"a","n":1} is written a1. */
#define M(acct, n) "{\"account\":\"" #acct "\",\"n\":" #n "}"

START_TEST(limit_one_keeps_each_key_in_order) {
  harness h;
  open_queue(&h);
  send(&h, M(a, 1), 0);
  send(&h, M(a, 2), 0);
  send(&h, M(b, 1), 0);
  send(&h, M(a, 3), 0);
  send(&h, M(b, 2), 0);
  leased l;
  lease(&h, 10, 1, &l);
  ck_assert_str_eq(l.bodies, M(a, 1) " " M(b, 1));
  leased again;
  lease(&h, 10, 1, &again); /* both keys are in a handler */
  ck_assert_uint_eq(again.n, 0);
  settle(&h, &l, 0, -1); /* a1 acked: a2 is next, not a3 */
  lease(&h, 10, 1, &again);
  ck_assert_str_eq(again.bodies, M(a, 2));
  settle(&h, &l, 1, -1);
  leased b;
  lease(&h, 10, 1, &b);
  ck_assert_str_eq(b.bodies, M(b, 2));
  settle(&h, &again, 0, -1);
  leased_free(&again);
  lease(&h, 10, 1, &again);
  ck_assert_str_eq(again.bodies, M(a, 3));
  leased_free(&l);
  leased_free(&b);
  leased_free(&again);
  harness_close(&h);
}
END_TEST

START_TEST(limit_two_lets_two_of_a_key_in) {
  harness h;
  open_queue(&h);
  for (int i = 1; i <= 5; i++) {
    char body[64];
    snprintf(body, sizeof body, "{\"account\":7,\"n\":%d}", i);
    send(&h, body, 0);
  }
  leased l, more;
  lease(&h, 10, 2, &l);
  ck_assert_str_eq(l.bodies, "{\"account\":7,\"n\":1} {\"account\":7,\"n\":2}");
  lease(&h, 10, 2, &more);
  ck_assert_uint_eq(more.n, 0);
  settle(&h, &l, 1, -1); /* the second done: the third may go */
  lease(&h, 10, 2, &more);
  ck_assert_str_eq(more.bodies, "{\"account\":7,\"n\":3}");
  leased_free(&more);
  lease(&h, 10, 2, &more);
  ck_assert_uint_eq(more.n, 0);
  /* the number 7 and the string "7" are two keys */
  send(&h, "{\"account\":\"7\"}", 0);
  lease(&h, 10, 2, &more);
  ck_assert_str_eq(more.bodies, "{\"account\":\"7\"}");
  leased_free(&l);
  leased_free(&more);
  harness_close(&h);
}
END_TEST

/* A retried message keeps its key's place through its back-off: the
 * later ones wait behind it, are not failed, and not counted as
 * attempts; other keys go on. */
START_TEST(a_retried_message_keeps_its_place) {
  harness h;
  open_queue(&h);
  send(&h, M(a, 1), 0);
  send(&h, M(a, 2), 0);
  send(&h, M(b, 1), 0);
  leased l, next;
  lease(&h, 10, 1, &l);
  ck_assert_str_eq(l.bodies, M(a, 1) " " M(b, 1));
  settle(&h, &l, 0, 5000); /* a1 back off 5 s */
  settle(&h, &l, 1, -1);
  send(&h, M(b, 2), 0);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(b, 2)); /* a2 waits behind a1 */
  ck_assert_int_eq(held_now(&h, 1), 1);
  ck_assert_int_eq(held_now(&h, 2), 0); /* a2 may go beside a1 */
  settle(&h, &next, 0, -1);
  leased_free(&next);
  harness_advance(&h, 4999);
  lease(&h, 10, 1, &next);
  ck_assert_uint_eq(next.n, 0);
  harness_advance(&h, 1);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(a, 1));
  ck_assert_uint_eq(next.attempts[0], 2);
  /* retried again at once: still ahead of a2 */
  settle(&h, &next, 0, 0);
  leased_free(&next);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(a, 1));
  ck_assert_uint_eq(next.attempts[0], 3);
  settle(&h, &next, 0, -1);
  leased_free(&next);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(a, 2));
  ck_assert_uint_eq(next.attempts[0], 1); /* held back: no attempt spent */
  leased_free(&l);
  leased_free(&next);
  harness_close(&h);
}
END_TEST

/* A body without the key, with null there, or whose key is not where the
 * pointer says is not limited; a message delayed at its send joins its
 * key's line when it becomes visible. */
START_TEST(messages_without_the_key_are_not_held) {
  harness h;
  open_queue(&h);
  send(&h, M(a, 1), 0);
  send(&h, "{\"n\":1}", 0);
  send(&h, "{\"n\":2}", 0);
  send(&h, "{\"account\":null}", 0);
  send(&h, "[1,2]", 0);
  send(&h, "\"a\"", 0);
  send(&h, M(a, 9), 30000); /* delayed: not in a's line yet */
  send(&h, M(a, 2), 0);
  leased l, next;
  lease(&h, 10, 1, &l);
  ck_assert_str_eq(l.bodies, M(a, 1) " {\"n\":1} {\"n\":2} "
                                     "{\"account\":null} [1,2] \"a\"");
  settle(&h, &l, 0, -1);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(a, 2));
  settle(&h, &next, 0, -1);
  leased_free(&next);
  harness_advance(&h, 30000);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(a, 9));
  leased_free(&l);
  leased_free(&next);
  harness_close(&h);
}
END_TEST

/* 10,000 messages of one key waiting do not keep another key's message
 * out of the next batch. */
START_TEST(a_long_backlog_does_not_delay_other_keys) {
  harness h;
  open_queue(&h);
  duro_queue_send_req reqs[DURO_QUEUE_MAX_BATCH];
  for (size_t i = 0; i < DURO_QUEUE_MAX_BATCH; i++)
    reqs[i] = (duro_queue_send_req){.body = M(big, 0)};
  for (int k = 0; k < 100; k++)
    ck_assert_int_eq(duro_queue_enqueue_batch(h.e, "pay", reqs,
                                              DURO_QUEUE_MAX_BATCH, NULL, err,
                                              sizeof err),
                     0);
  send(&h, M(small, 1), 0);
  send(&h, M(small, 2), 0);
  leased l, next;
  lease(&h, 10, 1, &l);
  ck_assert_str_eq(l.bodies, M(big, 0) " " M(small, 1));
  ck_assert_int_eq(held_now(&h, 1), 9999 + 1);
  settle(&h, &l, 1, -1);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(small, 2));
  leased_free(&l);
  leased_free(&next);
  harness_close(&h);
}
END_TEST

/* The keys stored with the messages are the pointer's: a lease under
 * another pointer (a reload that changed the consumer's key) groups them
 * by the new one, and going back groups them by the old one again. */
#define MR(acct, region)                                                       \
  "{\"account\":\"" #acct "\",\"region\":\"" #region "\"}"

START_TEST(a_changed_key_groups_the_messages_anew) {
  harness h;
  open_queue(&h);
  send(&h, MR(a, x), 0);
  send(&h, MR(b, x), 0);
  send(&h, MR(a, y), 0);
  send(&h, MR(c, y), 0);
  send(&h, MR(b, z), 0);
  leased l, next;
  lease(&h, 10, 1, &l); /* every key stored: a, b, a, c, b */
  ck_assert_str_eq(l.bodies, MR(a, x) " " MR(b, x) " " MR(c, y));
  /* by region: x and y are in handlers, z is free (by account, a and b
   * would not be) */
  lease_by(&h, "/region", 10, 1, &next);
  ck_assert_str_eq(next.bodies, MR(b, z));
  settle(&h, &next, 0, -1);
  settle(&h, &l, 2, -1); /* c's: region y is free */
  leased_free(&next);
  /* by account again: a is in a handler (by region, y would be free) */
  lease(&h, 10, 1, &next);
  ck_assert_uint_eq(next.n, 0);
  lease_by(&h, "/region", 10, 1, &next);
  ck_assert_str_eq(next.bodies, MR(a, y));
  leased_free(&next);
  leased_free(&l);
  harness_close(&h);
}
END_TEST

/* The journal is all there is: a restart finds a key's message still in
 * its lease (its key busy), and when the lease runs out that message,
 * not the next, is delivered again. */
START_TEST(a_restart_keeps_the_rule) {
  harness h;
  open_queue(&h);
  send(&h, M(a, 1), 0);
  send(&h, M(a, 2), 0);
  send(&h, M(b, 1), 0);
  leased l, next;
  lease(&h, 1, 1, &l);
  ck_assert_str_eq(l.bodies, M(a, 1));
  harness_reopen(&h);
  ck_assert_int_eq(duro_queue_register(h.e, "pay", NULL), 0);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(b, 1));
  leased_free(&next);
  harness_advance(&h, 60000); /* a1's lease ran out */
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(a, 1) " " M(b, 1));
  ck_assert_uint_eq(next.attempts[0], 2);
  settle(&h, &next, 0, -1);
  settle(&h, &next, 1, -1);
  leased_free(&next);
  lease(&h, 10, 1, &next);
  ck_assert_str_eq(next.bodies, M(a, 2));
  leased_free(&l);
  leased_free(&next);
  harness_close(&h);
}
END_TEST

/* ---- a push consumer: its handler fed by the dispatch pass ------------- */

static char order[1024];
static int fail_first; /* retry each message's first attempt */

/* Records "a1 b1 ..." in delivery order and checks that no batch holds
 * two messages of one key (limit 1: one in the handler at a time). */
static int record(duro_message_batch *b, duro_env *env) {
  (void)env;
  char seen[DURO_QUEUE_MAX_BATCH];
  for (size_t i = 0; i < duro_batch_size(b); i++) {
    const duro_message *m = duro_batch_message(b, i);
    const char *acct = strstr(m->body, "\"account\":\"");
    ck_assert_ptr_nonnull(acct);
    char key = acct[11];
    for (size_t k = 0; k < i; k++)
      ck_assert_msg(seen[k] != key, "two of key %c in one batch", key);
    seen[i] = key;
    const char *n = strstr(m->body, "\"n\":") + 4;
    size_t len = strlen(order);
    snprintf(order + len, sizeof order - len, "%s%c%c%s", len ? " " : "", key,
             *n, fail_first && m->attempts == 1 ? "!" : "");
    if (fail_first && m->attempts == 1)
      ck_assert_int_eq(duro_message_retry(b, i, 1000), 0);
  }
  return 0; /* the unmarked ones acked */
}

static void consume(harness *h, uint32_t batch) {
  duro_queue_consumer_opts o = {.max_batch_size = batch,
                                .concurrency_key = "/account",
                                .concurrency_limit = 1};
  ck_assert_int_eq(duro_queue_consume(h->e, "pay", record, &o), 0);
}

START_TEST(push_consumer_delivers_each_key_in_order) {
  harness h;
  open_queue(&h);
  order[0] = 0;
  fail_first = 1;
  consume(&h, 10);
  send(&h, M(a, 1), 0);
  send(&h, M(a, 2), 0);
  send(&h, M(b, 1), 0);
  send(&h, M(a, 3), 0);
  send(&h, M(b, 2), 0);
  harness_run(&h);
  /* each key's first try retried: its next waits the back-off out */
  ck_assert_str_eq(order, "a1! b1!");
  harness_advance(&h, 1000);
  ck_assert_str_eq(order, "a1! b1! a1 b1 a2! b2!");
  harness_advance(&h, 1000);
  ck_assert_str_eq(order, "a1! b1! a1 b1 a2! b2! a2 b2 a3!");
  harness_advance(&h, 1000);
  ck_assert_str_eq(order, "a1! b1! a1 b1 a2! b2! a2 b2 a3! a3");
  json_t *st = stats(&h);
  ck_assert_int_eq(json_integer_value(json_object_get(st, "ready")) +
                       json_integer_value(json_object_get(st, "delayed")) +
                       json_integer_value(json_object_get(st, "in_flight")),
                   0);
  json_t *c = json_object_get(json_object_get(st, "consumer"), "concurrency");
  ck_assert_str_eq(json_string_value(json_object_get(c, "key")), "/account");
  ck_assert_int_eq(json_integer_value(json_object_get(c, "limit")), 1);
  json_decref(st);
  harness_close(&h);
}
END_TEST

/* The scheduler is told when a held key's turn can come: the end of the
 * back-off of the message ahead of it. */
START_TEST(push_consumer_wakes_when_a_back_off_ends) {
  harness h;
  open_queue(&h);
  order[0] = 0;
  fail_first = 1;
  consume(&h, 10);
  send(&h, M(a, 1), 0);
  send(&h, M(a, 2), 0);
  harness_run(&h);
  ck_assert_str_eq(order, "a1!");
  int64_t next = 0;
  ck_assert_uint_eq(queue_consumers_dispatch(h.e, &next), 0);
  ck_assert_int_eq(next, T0_MS + 1000);
  harness_close(&h);
}
END_TEST

/* On worker threads, batches of one message each, four at once: never
 * two of a key in the handler together, while the keys go side by
 * side. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int in_key[4], most_in_key, in_all, most_in_all, handled;

static int slow(duro_message_batch *b, duro_env *env) {
  (void)env;
  int key = strstr(duro_batch_message(b, 0)->body, "\"account\":\"")[11] - 'a';
  pthread_mutex_lock(&mu);
  if (++in_key[key] > most_in_key)
    most_in_key = in_key[key];
  if (++in_all > most_in_all)
    most_in_all = in_all;
  pthread_mutex_unlock(&mu);
  usleep(30000);
  pthread_mutex_lock(&mu);
  in_key[key]--;
  in_all--;
  handled++;
  pthread_mutex_unlock(&mu);
  return 0;
}

static int read_locked(int *v) {
  pthread_mutex_lock(&mu);
  int x = *v;
  pthread_mutex_unlock(&mu);
  return x;
}

START_TEST(threads_never_run_two_of_a_key) {
  harness h;
  harness_open_workers(&h, 2);
  harness_start(&h);
  ck_assert_int_eq(duro_queue_register(h.e, "pay", NULL), 0);
  duro_queue_consumer_opts o = {.max_batch_size = 1,
                                .max_concurrency = 4,
                                .concurrency_key = "/account",
                                .concurrency_limit = 1};
  ck_assert_int_eq(duro_queue_consume(h.e, "pay", slow, &o), 0);
  for (int i = 0; i < 6; i++) {
    send(&h, M(a, 0), 0);
    send(&h, M(b, 0), 0);
  }
  for (int i = 0; read_locked(&handled) < 12; i++) {
    ck_assert_msg(i < 1000, "12 messages not handled within 10 s");
    usleep(10000);
  }
  ck_assert_int_eq(read_locked(&most_in_key), 1);
  ck_assert_int_eq(read_locked(&most_in_all), 2);
  harness_close(&h);
}
END_TEST

/* ---- what is refused, what is shown ------------------------------------ */

START_TEST(bad_options_are_refused) {
  harness h;
  open_queue(&h);
  duro_queue_consumer_opts o = {.concurrency_key = "account",
                                .concurrency_limit = 1};
  ck_assert_int_eq(duro_queue_consume(h.e, "pay", record, &o),
                   DURO_E_INVALID_ARGUMENT);
  o = (duro_queue_consumer_opts){.concurrency_key = "/account"};
  ck_assert_int_eq(duro_queue_consume(h.e, "pay", record, &o),
                   DURO_E_INVALID_ARGUMENT);
  /* a plain consumer shows no held count */
  o = (duro_queue_consumer_opts){0};
  ck_assert_int_eq(duro_queue_consume(h.e, "pay", record, &o), 0);
  json_t *st = stats(&h);
  ck_assert_ptr_null(json_object_get(st, "held"));
  json_decref(st);
  harness_close(&h);
}
END_TEST

START_TEST(metrics_show_the_held) {
  harness h;
  open_queue(&h);
  duro_queue_consumer_opts o = {.max_batch_size = 10,
                                .concurrency_key = "/account",
                                .concurrency_limit = 1};
  ck_assert_int_eq(duro_queue_consume(h.e, "pay", record, &o), 0);
  send(&h, M(a, 1), 0);
  send(&h, M(a, 2), 0);
  send(&h, M(a, 3), 0);
  leased l;
  lease(&h, 1, 1, &l); /* a1 in a handler: a2 and a3 held */
  char *text = duro_engine_metrics(h.e);
  ck_assert_msg(strstr(text, "duro_queue_held_messages{queue=\"pay\"} 2\n"),
                "%s", text);
  free(text);
  leased_free(&l);
  harness_close(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("queue_keys");
  TCase *tc = tcase_create("leases");
  tcase_add_test(tc, limit_one_keeps_each_key_in_order);
  tcase_add_test(tc, limit_two_lets_two_of_a_key_in);
  tcase_add_test(tc, a_retried_message_keeps_its_place);
  tcase_add_test(tc, messages_without_the_key_are_not_held);
  tcase_add_test(tc, a_long_backlog_does_not_delay_other_keys);
  tcase_add_test(tc, a_restart_keeps_the_rule);
  tcase_add_test(tc, a_changed_key_groups_the_messages_anew);
  suite_add_tcase(s, tc);
  tc = tcase_create("consumer");
  tcase_add_test(tc, push_consumer_delivers_each_key_in_order);
  tcase_add_test(tc, push_consumer_wakes_when_a_back_off_ends);
  tcase_add_test(tc, threads_never_run_two_of_a_key);
  tcase_add_test(tc, bad_options_are_refused);
  tcase_add_test(tc, metrics_show_the_held);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
