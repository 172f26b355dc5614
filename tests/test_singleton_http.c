/* test_singleton_http.c — flow.singleton over the HTTP API of a real
 * `duro run` (DURO_BIN, tests/host_run.h) of the order-flow example
 * (ORDERS_PLUGIN), whose instances wait live for a "manual review"
 * event, one singleton a customer's email:
 *
 *  - skip: a create whose email has a live instance answers 200
 *    {"id": <the live one>, "skipped": true} and creates nothing (with
 *    ?wait=, the live one's status, skipped); a batch says it per item; after a
 * kill -9 of the engine the same; once the live one is terminated a create is
 * created (201);
 *  - queue: both are created, the second `queued` with describe's
 *    waiting_for naming its holder, and starts once that one is
 *    terminated;
 *  - flow.debounce (an hour's period, so nothing starts while the test
 *    runs): the first create is created (201) and `queued`, the next of
 *    its email answers 200 {"id": <the first>, "debounced": true} and the
 *    first takes its params; after a kill -9 of the engine it still has
 *    them and the next create merges into it too; the CLI says so;
 *  - a kill -9 of the engine while one client merges creates into a
 *    pending instance one after another, going on into the restarted
 *    engine: the instance ends up with the params of the last create
 *    acknowledged (or of the last sent, when its answer was lost), and
 *    it is the one instance of the key. */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define SETTLE_MS 20000

static const char *order(char *buf, size_t len, const char *id,
                         const char *email) {
  snprintf(buf, len,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"%s\",\"email\":\"%s\","
           "\"amount\":5,\"graceSeconds\":0}}",
           id, id, email);
  return buf;
}

/* POST a create of `id`: its status and body (caller frees r). */
static void create(const host_run *h, http_resp *r, const char *wf,
                   const char *id, const char *email) {
  char path[128], body[256];
  snprintf(path, sizeof path, "/workflows/%s/instances", wf);
  host_request(h, r, "POST", path, order(body, sizeof body, id, email));
}

static void expect_created(const host_run *h, const char *wf, const char *id,
                           const char *email) {
  http_resp r;
  create(h, &r, wf, id, email);
  ck_assert_msg(r.status == 201, "%s: %ld %s", id, r.status, r.body);
  ck_assert_str_eq(jstr(r.json, "id"), id);
  http_resp_free(&r);
}

static void expect_skipped(const host_run *h, const char *id, const char *email,
                           const char *live) {
  http_resp r;
  create(h, &r, "order-flow", id, email);
  ck_assert_msg(r.status == 200, "%s: %ld %s", id, r.status, r.body);
  ck_assert_str_eq(jstr(r.json, "id"), live);
  ck_assert(json_is_true(jget(r.json, "skipped")));
  http_resp_free(&r);
  char path[128];
  snprintf(path, sizeof path, "/workflows/order-flow/instances/%s", id);
  host_request(h, &r, "GET", path, NULL);
  ck_assert_msg(r.status == 404, "%s exists: %ld", id, r.status);
  http_resp_free(&r);
}

static void terminate(const host_run *h, const char *wf, const char *id) {
  char path[128];
  snprintf(path, sizeof path, "/workflows/%s/instances/%s/status", wf, id);
  http_resp r;
  host_request(h, &r, "PATCH", path, "{\"status\":\"terminate\"}");
  ck_assert_msg(r.status == 200, "terminate %s: %ld", id, r.status);
  http_resp_free(&r);
}

static void kill_engine_settle(const host_run *h);

/* A kill -9 of h's engine, and its restart by the supervisor awaited. */
static void kill_engine(const host_run *h) {
  pid_t engine = host_last_engine(h);
  ck_assert_int_eq(kill(engine, SIGKILL), 0);
  ck_assert(host_wait_gone(engine, 10000));
  kill_engine_settle(h);
}

/* The supervisor's restart of a killed engine awaited. */
static void kill_engine_settle(const host_run *h) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    http_resp r = {0};
    int up = host_request_try(h, &r, "GET", "/healthz", NULL) == 0 &&
             r.status == 200;
    http_resp_free(&r);
    if (up)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "the engine did not come back");
    proc_sleep_ms(50);
  }
}

START_TEST(singletons_over_http) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, "singleton");
  host_write_config(&H, db, "{ workers: 2 }", "orders", ORDERS_PLUGIN,
                    "      - name: order-flow\n"
                    "        binding: ORDER_FLOW\n"
                    "        class_name: OrderFlow\n"
                    "        flow: {singleton: {key: /email, mode: skip}}\n"
                    "      - name: order-queue\n"
                    "        binding: ORDER_QUEUE\n"
                    "        class_name: OrderFlow\n"
                    "        flow: {singleton: {key: /email, mode: queue}}\n");
  host_start(&H);
  H.restarts = 1;

  /* skip */
  expect_created(&H, "order-flow", "o1", "a@example.com");
  json_decref(host_wait_status(&H, "order-flow", "o1", "waiting",
                               proc_now_ms() + SETTLE_MS));
  expect_skipped(&H, "o2", "a@example.com", "o1");
  /* with ?wait= the wait is for the live one, and says it was skipped */
  char body[256];
  http_resp w;
  host_request(&H, &w, "POST", "/workflows/order-flow/instances?wait=10ms",
               order(body, sizeof body, "o2", "a@example.com"));
  ck_assert_msg(w.status == 200, "%ld %s", w.status, w.body);
  ck_assert_str_eq(jstr(w.json, "id"), "o1");
  ck_assert_str_eq(jstr(w.json, "status"), "waiting");
  ck_assert(json_is_true(jget(w.json, "skipped")));
  http_resp_free(&w);
  /* the CLI says so */
  char *out = NULL;
  const char *args[] = {"trigger",
                        "order-flow",
                        "{\"orderId\":\"o7\",\"email\":\"a@example.com\","
                        "\"amount\":5,\"graceSeconds\":0}",
                        "--id",
                        "o7",
                        NULL};
  ck_assert_int_eq(host_cli(&H, args, &out), 0);
  assert_contains(out, "skipped: o1 is live with the same singleton key "
                       "(nothing created)");
  free(out);
  char b1[256], b2[256], batch[600];
  snprintf(batch, sizeof batch, "{\"instances\":[%s,%s]}",
           order(b1, sizeof b1, "o3", "a@example.com"),
           order(b2, sizeof b2, "o4", "b@example.com"));
  http_resp r;
  host_request(&H, &r, "POST", "/workflows/order-flow/instances/batch", batch);
  ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
  json_t *created = jget(r.json, "created");
  ck_assert_int_eq(json_array_size(created), 2);
  ck_assert_str_eq(jstr(json_array_get(created, 0), "id"), "o1");
  ck_assert(json_is_true(jget(json_array_get(created, 0), "skipped")));
  ck_assert_int_eq(
      json_integer_value(jget(json_array_get(created, 0), "index")), 0);
  ck_assert_str_eq(jstr(json_array_get(created, 1), "id"), "o4");
  ck_assert_ptr_null(jget(json_array_get(created, 1), "skipped"));
  http_resp_free(&r);

  /* queue */
  expect_created(&H, "order-queue", "q1", "a@example.com");
  json_decref(host_wait_status(&H, "order-queue", "q1", "waiting",
                               proc_now_ms() + SETTLE_MS));
  expect_created(&H, "order-queue", "q2", "a@example.com");

  /* nothing of it was only in the dead engine's memory */
  kill_engine(&H);
  expect_skipped(&H, "o5", "a@example.com", "o1");
  json_t *d = host_describe(&H, "order-queue", "q2");
  ck_assert_str_eq(jstr(d, "status"), "queued");
  ck_assert_str_eq(jstr(d, "waiting_for"),
                   "flow: singleton /email=\"a@example.com\" (held by q1)");
  json_decref(d);

  terminate(&H, "order-flow", "o1");
  expect_created(&H, "order-flow", "o6", "a@example.com");
  terminate(&H, "order-queue", "q1");
  json_decref(host_wait_status(&H, "order-queue", "q2", "waiting",
                               proc_now_ms() + SETTLE_MS));

  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

/* GET's params of instance id of order-debounce: its amount. */
static json_int_t amount_of(const host_run *h, const char *id) {
  json_t *d = host_describe(h, "order-debounce", id);
  json_t *params = jget(d, "params");
  ck_assert_msg(params != NULL, "%s has no params", id);
  json_int_t amount = json_integer_value(jget(params, "amount"));
  json_decref(d);
  return amount;
}

static void expect_debounced(const host_run *h, const char *id, int amount,
                             const char *pending) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"%s\",\"email\":"
           "\"d@example.com\",\"amount\":%d,\"graceSeconds\":0}}",
           id, id, amount);
  http_resp r;
  host_request(h, &r, "POST", "/workflows/order-debounce/instances", body);
  ck_assert_msg(r.status == 200, "%s: %ld %s", id, r.status, r.body);
  ck_assert_str_eq(jstr(r.json, "id"), pending);
  ck_assert(json_is_true(jget(r.json, "debounced")));
  http_resp_free(&r);
  ck_assert_int_eq(amount_of(h, pending), amount);
}

START_TEST(debounce_over_http) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, "debounce");
  host_write_config(&H, db, "{ workers: 2 }", "orders", ORDERS_PLUGIN,
                    "      - name: order-debounce\n"
                    "        binding: ORDER_DEBOUNCE\n"
                    "        class_name: OrderFlow\n"
                    "        flow: {debounce: {key: /email, period: 1h}}\n");
  host_start(&H);
  H.restarts = 1;
  expect_created(&H, "order-debounce", "d1", "d@example.com");
  expect_debounced(&H, "d2", 7, "d1");
  json_t *d = host_describe(&H, "order-debounce", "d1");
  ck_assert_str_eq(jstr(d, "status"), "queued");
  assert_contains(jstr(d, "waiting_for"),
                  "flow: debounce /email=\"d@example.com\" (2 creates; "
                  "starts in ");
  json_decref(d);
  /* nothing of it was only in the dead engine's memory */
  kill_engine(&H);
  ck_assert_int_eq(amount_of(&H, "d1"), 7);
  expect_debounced(&H, "d3", 9, "d1");
  char *out = NULL;
  const char *args[] = {"trigger",
                        "order-debounce",
                        "{\"orderId\":\"d4\",\"email\":\"d@example.com\","
                        "\"amount\":11,\"graceSeconds\":0}",
                        "--id",
                        "d4",
                        NULL};
  ck_assert_int_eq(host_cli(&H, args, &out), 0);
  assert_contains(out, "debounced: d1 takes these params");
  free(out);
  ck_assert_int_eq(amount_of(&H, "d1"), 11);
  expect_created(&H, "order-debounce", "e1", "e@example.com"); /* apart */
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

/* One client merging creates of one key, amount 1, 2, 3, ... each sent
 * once its predecessor was answered (or got no answer). */
typedef struct merger {
  const host_run *h;
  int stop;  /* atomic */
  int acked; /* the last amount answered 200/201 (atomic) */
  int sent;  /* the last amount sent (atomic) */
  int lost;  /* requests with no answer */
} merger;

static void *merge_loop(void *arg) {
  merger *m = arg;
  for (int v = 1; !__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE); v++) {
    char body[256];
    snprintf(body, sizeof body,
             "{\"id\":\"m-%d\",\"params\":{\"orderId\":\"m\",\"email\":"
             "\"m@example.com\",\"amount\":%d,\"graceSeconds\":0}}",
             v, v);
    __atomic_store_n(&m->sent, v, __ATOMIC_RELEASE);
    http_resp r = {0};
    if (host_request_try(m->h, &r, "POST",
                         "/workflows/order-debounce/instances", body) == 0 &&
        (r.status == 200 || r.status == 201))
      __atomic_store_n(&m->acked, v, __ATOMIC_RELEASE);
    else
      m->lost++;
    http_resp_free(&r);
  }
  return NULL;
}

START_TEST(a_debounce_merge_survives_a_kill) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, "debounce-kill");
  host_write_config(&H, db, "{ workers: 2 }", "orders", ORDERS_PLUGIN,
                    "      - name: order-debounce\n"
                    "        binding: ORDER_DEBOUNCE\n"
                    "        class_name: OrderFlow\n"
                    "        flow: {debounce: {key: /email, period: 1h}}\n");
  host_start(&H);
  H.restarts = 1;
  merger m = {.h = &H};
  pthread_t th;
  pthread_create(&th, NULL, merge_loop, &m);
  /* a while of merges, then the engine dies in the midst of them */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (__atomic_load_n(&m.acked, __ATOMIC_ACQUIRE) < 50) {
    ck_assert_msg(proc_now_ms() < deadline, "%d merges answered in %d s",
                  __atomic_load_n(&m.acked, __ATOMIC_ACQUIRE),
                  SETTLE_MS / 1000);
    proc_sleep_ms(5);
  }
  pid_t engine = host_last_engine(&H);
  ck_assert_int_eq(kill(engine, SIGKILL), 0);
  ck_assert(host_wait_gone(engine, 10000));
  /* the client goes on until the engine is back: its last requests
   * reach the new one, which merges them into the same instance */
  kill_engine_settle(&H);
  __atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  json_t *d = host_describe(&H, "order-debounce", "m-1");
  ck_assert_str_eq(jstr(d, "status"), "queued");
  json_int_t amount = json_integer_value(jget(jget(d, "params"), "amount"));
  json_decref(d);
  /* the last create acknowledged, or the last sent if its answer was
   * lost (committed or not): never one before them */
  ck_assert_msg(amount == m.acked || amount == m.sent,
                "params of amount %lld: %d acknowledged last, %d sent last "
                "(%d without an answer)",
                (long long)amount, m.acked, m.sent, m.lost);
  ck_assert_int_gt(m.lost + m.acked, 50);
  /* one instance in all: the creates merged, none created another */
  http_resp r;
  host_request(&H, &r, "GET", "/workflows/order-debounce", NULL);
  ck_assert_int_eq(r.status, 200);
  ck_assert_int_eq(
      json_integer_value(jget(jget(r.json, "instances"), "queued")), 1);
  http_resp_free(&r);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("singleton_http");
  TCase *tc = tcase_create("singleton");
  proc_fixtures(tc, "duro-singleton-http");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, singletons_over_http);
  tcase_add_test(tc, debounce_over_http);
  tcase_add_test(tc, a_debounce_merge_survives_a_kill);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
