/* test_examples.c — the example plugins of examples/ on a real `duro run`
 * (DURO_BIN, tests/host_run.h), configured as their comments say, so an
 * example a user copies keeps doing what it claims.
 *
 *  - examples/jobs (JOBS_PLUGIN): a queue handler that starts one
 *    job-flow instance per job id.  50 messages are sent over HTTP, 10 of
 *    them repeating an earlier job id (40 distinct jobs), some one by one
 *    and some in a batch: exactly 40 instances exist, each completes with
 *    the example's output, the queue ends empty and nothing reaches the
 *    dead-letter queue;
 *  - examples/nightly (NIGHTLY_PLUGIN): a cron trigger's scheduled
 *    handler that starts one nightly-report instance per tick.  The
 *    trigger is fired by hand (POST /__scheduled, Cloudflare's local test
 *    route) twice: one instance, named by today's UTC date, completes
 *    with the example's totals; GET /crons shows the next ticks at 03:00
 *    UTC; a numbered weekday field is explained in the start-up log;
 *  - examples/orders (ORDERS_PLUGIN), which reads its params and builds
 *    its results with duro.h's JSON accessors alone, in a worker process
 *    (the default) and in the engine (workers: 0): an approved order's
 *    output carries the charge step's result and the amount as given
 *    (19.99); a rejection's free-text reason
 *    (quotes, a backslash, non-ASCII) comes back as it was sent; params
 *    of the wrong type are refused naming the field;
 *  - examples/fanout (FANOUT_PLUGIN): a fan-out of 100 children (child
 *    workflows) in a worker process: it completes with the sum of their
 *    squares, its describe lists the 100 children complete, and one
 *    child's names its parent. */
#include <check.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef NIGHTLY_PLUGIN
#error "build with -DNIGHTLY_PLUGIN=\"<path of libnightly.so>\""
#endif
#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif
#ifndef FANOUT_PLUGIN
#error "build with -DFANOUT_PLUGIN=\"<path of libfanout.so>\""
#endif
#ifndef JOBS_PLUGIN
#error "build with -DJOBS_PLUGIN=\"<path of libjobs.so>\""
#endif

#define SENDS 50
#define DISTINCT 40
#define SETTLE_MS 30000

/* A queue's stats (GET /queues/{q}), caller's. */
static json_t *queue_stats(const host_run *h, const char *q) {
  char path[64];
  snprintf(path, sizeof path, "/queues/%s", q);
  http_resp r;
  host_request(h, &r, "GET", path, NULL);
  ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status,
                r.body ? r.body : "");
  json_t *st = json_incref(r.json);
  http_resp_free(&r);
  return st;
}

static int64_t stat_of(json_t *st, const char *what) {
  return json_integer_value(json_object_get(st, what));
}

/* The instances of job-flow (GET .../instances?limit=1000), caller's. */
static json_t *list_jobs(const host_run *h) {
  http_resp r;
  host_request(h, &r, "GET", "/workflows/job-flow/instances?limit=1000", NULL);
  ck_assert_msg(r.status == 200, "list: %ld %s", r.status,
                r.body ? r.body : "");
  json_t *list = json_incref(jget(r.json, "instances"));
  ck_assert_msg(json_is_array(list), "list: %s", r.body);
  http_resp_free(&r);
  return list;
}

/* Job i of the 50 sent: jobs 0..39, then 0..9 again (the duplicates). */
static int job_of(int i) { return i < DISTINCT ? i : i - DISTINCT; }

START_TEST(jobs_example_one_instance_per_job) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, "jobs");
  /* The declaration at the top of examples/jobs/jobs.c. */
  host_write_config(&H, db, "{ workers: 2 }", "jobs", JOBS_PLUGIN,
                    "      - { name: job-flow, binding: JOB_FLOW,"
                    " class_name: JobFlow }\n"
                    "    queues:\n"
                    "      producers: [{ binding: JOBS, queue: jobs }]\n"
                    "      consumers: [{ queue: jobs, max_batch_size: 100,\n"
                    "                    dead_letter_queue: jobs-dlq }]\n");
  host_start(&H);

  /* Messages 0..29 one by one, 30..49 (10 distinct, 10 duplicates) in one
   * batch. */
  http_resp r;
  char body[2048];
  for (int i = 0; i < 30; i++) {
    snprintf(body, sizeof body, "{\"body\":{\"jobId\":\"job-%d\",\"send\":%d}}",
             job_of(i), i);
    host_request(&H, &r, "POST", "/queues/jobs/messages", body);
    ck_assert_msg(r.status == 201, "send %d: %ld %s", i, r.status,
                  r.body ? r.body : "");
    http_resp_free(&r);
  }
  size_t len = (size_t)snprintf(body, sizeof body, "{\"messages\":[");
  for (int i = 30; i < SENDS; i++)
    len += (size_t)snprintf(body + len, sizeof body - len,
                            "%s{\"body\":{\"jobId\":\"job-%d\",\"send\":%d}}",
                            i > 30 ? "," : "", job_of(i), i);
  snprintf(body + len, sizeof body - len, "]}");
  host_request(&H, &r, "POST", "/queues/jobs/messages/batch", body);
  ck_assert_msg(r.status == 201, "batch: %ld %s", r.status,
                r.body ? r.body : "");
  ck_assert_uint_eq(json_array_size(jget(r.json, "ids")), SENDS - 30);
  http_resp_free(&r);

  /* Every job completes, with the example's output.  An instance exists
   * once the handler has taken its message: 404 until then. */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (int j = 0; j < DISTINCT; j++) {
    char id[32], path[96];
    snprintf(id, sizeof id, "job-%d", j);
    snprintf(path, sizeof path, "/workflows/job-flow/instances/%s", id);
    for (;;) {
      host_request(&H, &r, "GET", path, NULL);
      long status = r.status;
      http_resp_free(&r);
      if (status == 200)
        break;
      ck_assert_msg(status == 404 && proc_now_ms() < deadline,
                    "%s: %ld, no instance", id, status);
      proc_sleep_ms(20);
    }
    json_t *d = host_wait_status(&H, "job-flow", id, "complete", deadline);
    ck_assert_msg(json_is_true(jget(d, "output.done")), "%s: output %s", id,
                  jdump(jget(d, "output")));
    json_decref(d);
  }

  /* The queue drains: every message acked, none retried. */
  json_t *st;
  for (;;) {
    st = queue_stats(&H, "jobs");
    if (stat_of(st, "ready") + stat_of(st, "delayed") +
            stat_of(st, "in_flight") ==
        0)
      break;
    char *text = jdump(st);
    ck_assert_msg(proc_now_ms() < deadline, "jobs not drained: %s", text);
    free(text);
    json_decref(st);
    proc_sleep_ms(50);
  }
  ck_assert_int_eq(stat_of(st, "dropped"), 0);
  json_decref(st);
  st = queue_stats(&H, "jobs-dlq");
  char *text = jdump(st);
  ck_assert_msg(stat_of(st, "ready") + stat_of(st, "delayed") +
                        stat_of(st, "in_flight") + stat_of(st, "dropped") ==
                    0,
                "jobs-dlq: %s", text);
  free(text);
  json_decref(st);

  /* Exactly the 40 jobs: the duplicates made no instance of their own. */
  json_t *list = list_jobs(&H);
  ck_assert_uint_eq(json_array_size(list), DISTINCT);
  int seen[DISTINCT] = {0};
  size_t i;
  json_t *inst;
  json_array_foreach(list, i, inst) {
    const char *id = jstr(inst, "id");
    int j = -1;
    ck_assert_msg(sscanf(id, "job-%d", &j) == 1 && j >= 0 && j < DISTINCT,
                  "unexpected instance %s", id);
    seen[j]++;
    ck_assert_str_eq(jstr(inst, "status"), "complete");
  }
  json_decref(list);
  for (int j = 0; j < DISTINCT; j++)
    ck_assert_msg(seen[j] == 1, "job-%d: %d instances", j, seen[j]);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(fanout_example_sums_children) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, "fanout");
  /* The declaration at the top of examples/fanout/fanout.c. */
  host_write_config(&H, db, "{ workers: 2 }", "fanout", FANOUT_PLUGIN,
                    "      - { name: fan-out, binding: FAN_OUT,"
                    " class_name: FanOut }\n"
                    "      - { name: square, binding: SQUARE,"
                    " class_name: Square }\n");
  host_start(&H);
  http_resp r;
  host_request(&H, &r, "POST", "/workflows/fan-out/instances",
               "{\"id\":\"f\",\"params\":{\"n\":100}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *d =
      host_wait_status(&H, "fan-out", "f", "complete", proc_now_ms() + 60000);
  ck_assert_int_eq(json_integer_value(jget(d, "output.n")), 100);
  ck_assert_int_eq(json_integer_value(jget(d, "output.sum")), 328350);
  json_t *kids = jget(d, "children");
  ck_assert_uint_eq(json_array_size(kids), 100);
  size_t i;
  json_t *k;
  json_array_foreach(kids, i, k)
      ck_assert_str_eq(jstr(k, "status"), "complete");
  char kid[128];
  snprintf(kid, sizeof kid, "%s", jstr(json_array_get(kids, 42), "id"));
  json_decref(d);
  d = host_wait_status(&H, "square", kid, "complete", proc_now_ms() + 10000);
  ck_assert_str_eq(jstr(d, "parent.id"), "f");
  ck_assert_str_eq(jstr(d, "parent.workflow"), "fan-out");
  json_decref(d);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(nightly_example_fires_by_hand) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, "nightly");
  /* The declaration at the top of examples/nightly/nightly.c, and a
   * second schedule whose weekdays are numbers. */
  host_write_config(&H, db, "{ workers: 2 }", "nightly", NIGHTLY_PLUGIN,
                    "      - { name: nightly-report, binding: REPORT,"
                    " class_name: Report }\n"
                    "    triggers:\n"
                    "      crons: [\"0 3 * * *\", \"0 9 * * 2-6\"]\n");
  host_start(&H);
  ck_assert_int_eq(
      host_count_lines(&H, "weekday field \"2-6\" means Monday to Friday"), 1);
  char id[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(id, sizeof id, "report-%Y-%m-%d", &tm);
  for (int k = 0; k < 2; k++) {
    http_resp r;
    host_request(&H, &r, "POST", "/__scheduled?cron=0+3+*+*+*", NULL);
    ck_assert_msg(r.status == 200, "fire: %ld %s", r.status,
                  r.body ? r.body : "");
    ck_assert_uint_eq(json_array_size(r.json), 1);
    ck_assert_str_eq(jstr(json_array_get(r.json, 0), "plugin"), "nightly");
    ck_assert_str_eq(jstr(json_array_get(r.json, 0), "state"), "complete");
    http_resp_free(&r);
  }
  json_t *d = host_wait_status(&H, "nightly-report", id, "complete",
                               proc_now_ms() + SETTLE_MS);
  ck_assert_int_eq(json_integer_value(jget(d, "output.orders")), 128);
  json_decref(d);
  http_resp r;
  host_request(&H, &r, "GET", "/workflows/nightly-report/instances", NULL);
  ck_assert_uint_eq(json_array_size(jget(r.json, "instances")), 1);
  http_resp_free(&r);
  host_request(&H, &r, "GET", "/crons", NULL);
  ck_assert_int_eq(r.status, 200);
  json_t *t = json_array_get(r.json, 0);
  ck_assert_str_eq(jstr(t, "schedule"), "0 3 * * *");
  json_t *next = jget(t, "next");
  ck_assert_uint_eq(json_array_size(next), 5);
  for (size_t i = 0; i < 5; i++) {
    json_int_t ms = json_integer_value(json_array_get(next, i));
    ck_assert_int_eq(ms % (24 * 3600 * 1000LL), 3 * 3600 * 1000LL);
    ck_assert_int_gt(ms, (json_int_t)now * 1000);
  }
  http_resp_free(&r);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* Sends the review of order `id`: `payload` is the event's JSON. */
static void review(const host_run *h, const char *id, const char *payload) {
  char path[128];
  snprintf(path, sizeof path,
           "/workflows/order-flow/instances/%s/events/approval", id);
  http_resp r;
  host_request(h, &r, "POST", path, payload);
  ck_assert_msg(r.status == 202 || r.status == 200, "event %s: %ld %s", id,
                r.status, r.body ? r.body : "");
  http_resp_free(&r);
}

static void create_order(const host_run *h, const char *id,
                         const char *params) {
  char body[512];
  snprintf(body, sizeof body, "{\"id\":\"%s\",\"params\":%s}", id, params);
  http_resp r;
  host_request(h, &r, "POST", "/workflows/order-flow/instances", body);
  ck_assert_msg(r.status == 201, "create %s: %ld %s", id, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

/* _i: 0 runs the plugin in a worker process (the default), 1 in the
 * engine. */
START_TEST(orders_example_json_accessors) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, _i ? "orders-engine" : "orders-worker");
  H.plugin_keys = _i ? "workers: 0" : NULL;
  host_write_config(&H, db, "{ threads: 2 }", "orders", ORDERS_PLUGIN,
                    "      - { name: order-flow, binding: ORDER_FLOW,"
                    " class_name: OrderFlow }\n");
  host_start(&H);
  int64_t deadline = proc_now_ms() + SETTLE_MS;

  create_order(&H, "ok-1",
               "{\"orderId\":\"A-1\",\"email\":\"ada@example.com\","
               "\"amount\":19.99,\"graceSeconds\":0}");
  create_order(&H, "no-1",
               "{\"orderId\":\"A-2\",\"email\":\"bob@example.com\","
               "\"amount\":5,\"graceSeconds\":0}");
  create_order(&H, "bad-1",
               "{\"orderId\":\"A-3\",\"email\":\"eve@example.com\","
               "\"amount\":\"12\"}");
  json_t *d = host_wait_status(&H, "order-flow", "ok-1", "waiting", deadline);
  json_decref(d);
  d = host_wait_status(&H, "order-flow", "no-1", "waiting", deadline);
  json_decref(d);
  review(&H, "ok-1", "{\"approved\":true}");
  review(&H, "no-1",
         "{\"approved\":false,\"reason\":\"he said \\\"no\\\" \\\\ "
         "\u00e9t\u00e9\"}");

  d = host_wait_status(&H, "order-flow", "ok-1", "complete", deadline);
  json_t *out = jget(d, "output");
  ck_assert_msg(json_is_true(jget(out, "approved")), "output %s", jdump(out));
  ck_assert_str_eq(jstr(out, "orderId"), "A-1");
  json_t *charge = jget(out, "charge");
  ck_assert_str_eq(jstr(charge, "currency"), "EUR");
  ck_assert_str_eq(jstr(charge, "idempotencyKey"), "ok-1/charge card#1");
  ck_assert_int_eq(strncmp(jstr(charge, "chargeId"), "ch_", 3), 0);
  ck_assert(json_real_value(jget(charge, "amount")) == 19.99);
  /* 'j' put the charge step's result in as it was */
  json_t *step = step_of(d, "charge card#1");
  ck_assert_ptr_nonnull(step);
  ck_assert(json_equal(jget(step, "result"), charge));
  json_decref(d);

  d = host_wait_status(&H, "order-flow", "no-1", "complete", deadline);
  out = jget(d, "output");
  ck_assert(json_is_false(jget(out, "approved")));
  ck_assert_str_eq(jstr(out, "reason"),
                   "rejected: he said \"no\" \\ \xc3\xa9t\xc3\xa9");
  json_decref(d);

  d = host_wait_status(&H, "order-flow", "bad-1", "errored", deadline);
  ck_assert_msg(strstr(jstr(jget(d, "error"), "message"),
                       "params.amount must be a number") != NULL,
                "%s", jdump(jget(d, "error")));
  json_decref(d);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("examples");
  TCase *tc = tcase_create("examples");
  proc_fixtures(tc, "duro-examples");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, fanout_example_sums_children);
  tcase_add_test(tc, jobs_example_one_instance_per_job);
  tcase_add_test(tc, nightly_example_fires_by_hand);
  tcase_add_loop_test(tc, orders_example_json_accessors, 0, 2);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
