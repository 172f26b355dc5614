/* test_ended_http.c — restart and events of an ended instance over the
 * HTTP API of a real `duro run` (DURO_BIN, tests/host_run.h) of the
 * order-flow example (ORDERS_PLUGIN):
 *
 *  - a restart of a waiting instance is 409 instance.cannot_restart and
 *    says the instance is waiting and that only an ended one restarts;
 *  - a terminate closes the pending "manual review" wait: `cancelled`,
 *    with ended_ms and no wake;
 *  - an event for the terminated instance is 409 instance.ended naming
 *    the status, and nothing is stored: the re-run after a restart waits;
 *  - a restart from a step the journal lacks lists the journaled steps;
 *  - the re-run completes on a new event; an event for the complete
 *    instance is refused the same way;
 *  - DELETE of a waiting instance is 409 instance.cannot_delete naming
 *    its status, and it goes on waiting; ?terminate=true terminates and
 *    deletes it, saying what went; a GET is then 404 and its id is
 *    created again; `duro workflows instances delete` deletes an ended
 *    one; unknown ones are the usual 404s. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define PATH "/workflows/order-flow/instances/o1"
#define SETTLE_MS 20000

/* METHOD path body: must answer `status`; with `code`, the error's code,
 * and with `part`, a piece of its message. */
static void expect(const host_run *h, const char *method, const char *path,
                   const char *body, long status, const char *code,
                   const char *part) {
  http_resp r;
  host_request(h, &r, method, path, body);
  ck_assert_msg(r.status == status, "%s %s: %ld %s, expected %ld", method, path,
                r.status, r.body ? r.body : "", status);
  if (code)
    ck_assert_str_eq(jstr(r.json, "error.code"), code);
  if (part)
    assert_contains(jstr(r.json, "error.message"), part);
  http_resp_free(&r);
}

static void assert_step(json_t *d, const char *key, const char *status) {
  json_t *s = step_of(d, key);
  ck_assert_msg(s != NULL, "no step %s", key);
  ck_assert_str_eq(jstr(s, "status"), status);
}

START_TEST(ended_instance_restart_and_events) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, "ended");
  host_write_config(&H, db, "{ workers: 2 }", "orders", ORDERS_PLUGIN,
                    "      - { name: order-flow, binding: ORDER_FLOW,"
                    " class_name: OrderFlow }\n");
  host_start(&H);

  expect(&H, "POST", "/workflows/order-flow/instances",
         "{\"id\":\"o1\",\"params\":{\"orderId\":\"o1\",\"email\":"
         "\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
         201, NULL, NULL);
  json_t *d = host_wait_status(&H, "order-flow", "o1", "waiting",
                               proc_now_ms() + SETTLE_MS);
  json_decref(d);
  /* wait until it waits for the review, not just backs off */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    d = host_describe(&H, "order-flow", "o1");
    if (step_of(d, "manual review#1"))
      break;
    json_decref(d);
    ck_assert_msg(proc_now_ms() < deadline, "o1 never waited for review");
    proc_sleep_ms(20);
  }
  json_decref(d);

  expect(&H, "PATCH", PATH "/status", "{\"status\":\"restart\"}", 409,
         "instance.cannot_restart",
         "order-flow/o1 cannot be restarted: instance is waiting; only an "
         "ended instance (complete, errored, terminated) can be restarted");

  expect(&H, "PATCH", PATH "/status", "{\"status\":\"terminate\"}", 200, NULL,
         NULL);
  d = host_describe(&H, "order-flow", "o1");
  ck_assert_str_eq(jstr(d, "status"), "terminated");
  assert_step(d, "manual review#1", "cancelled");
  json_t *review = step_of(d, "manual review#1");
  ck_assert(json_is_integer(jget(review, "ended_ms")));
  ck_assert(json_is_null(jget(review, "wake_ms")));
  assert_step(d, "charge card#1", "complete");
  json_decref(d);

  expect(&H, "POST", PATH "/events/approval", "{\"approved\":true}", 409,
         "instance.ended", "order-flow/o1 is terminated");

  expect(&H, "PATCH", PATH "/status",
         "{\"status\":\"restart\",\"from\":{\"name\":\"manual reveiw\"}}", 409,
         "instance.cannot_restart",
         "cannot be restarted from step \"manual reveiw\"#1: the journal has "
         "no step \"manual reveiw\"#1; its steps: \"reserve stock\"#1, "
         "\"charge card\"#1, \"manual review\"#1");

  expect(&H, "PATCH", PATH "/status",
         "{\"status\":\"restart\",\"from\":{\"name\":\"manual review\"}}", 200,
         NULL, NULL);
  /* the refused event was not stored: the re-run waits for a new one */
  deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    d = host_describe(&H, "order-flow", "o1");
    json_t *s = step_of(d, "manual review#1");
    if (s && !strcmp(jstr(s, "status"), "waiting"))
      break;
    ck_assert_str_ne(jstr(d, "status"), "complete");
    json_decref(d);
    ck_assert_msg(proc_now_ms() < deadline, "o1 never waited again");
    proc_sleep_ms(20);
  }
  ck_assert_int_eq(json_integer_value(jget(d, "restarts")), 1);
  json_decref(d);

  expect(&H, "POST", PATH "/events/approval", "{\"approved\":true}", 202, NULL,
         NULL);
  d = host_wait_status(&H, "order-flow", "o1", "complete",
                       proc_now_ms() + SETTLE_MS);
  json_decref(d);
  expect(&H, "POST", PATH "/events/approval", "{\"approved\":true}", 409,
         "instance.ended", "order-flow/o1 is complete");

  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* Creates order o-ID and waits until it waits for its review. */
static void create_waiting(const host_run *h, const char *id) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"%s\",\"email\":"
           "\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
           id, id);
  expect(h, "POST", "/workflows/order-flow/instances", body, 201, NULL, NULL);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    json_t *d = host_describe(h, "order-flow", id);
    int waits = step_of(d, "manual review#1") != NULL;
    json_decref(d);
    if (waits)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "%s never waited for review", id);
    proc_sleep_ms(20);
  }
}

START_TEST(delete_instance) {
  host_run H;
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(&H, "delete");
  host_write_config(&H, db, "{ workers: 2 }", "orders", ORDERS_PLUGIN,
                    "      - { name: order-flow, binding: ORDER_FLOW,"
                    " class_name: OrderFlow }\n");
  host_start(&H);
  create_waiting(&H, "o1");

  expect(&H, "DELETE", PATH, NULL, 409, "instance.cannot_delete",
         "order-flow/o1 cannot be deleted: instance is waiting; only an "
         "ended instance (complete, errored, terminated) can be deleted");
  expect(&H, "DELETE", PATH "?terminate=yes", NULL, 400, "request.invalid",
         "\"terminate\" must be true or false");
  expect(&H, "DELETE", "/workflows/order-flow/instances/nope", NULL, 404,
         "instance.not_found", "order-flow/nope");
  expect(&H, "DELETE", "/workflows/nope/instances/o1", NULL, 404,
         "workflow.not_found", NULL);
  json_t *d = host_describe(&H, "order-flow", "o1");
  ck_assert_str_eq(jstr(d, "status"), "waiting"); /* refused: as it was */
  json_decref(d);

  http_resp r;
  host_request(&H, &r, "DELETE", PATH "?terminate=true", NULL);
  ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
  ck_assert(json_is_true(jget(r.json, "deleted")));
  ck_assert(json_is_true(jget(r.json, "terminated")));
  ck_assert_str_eq(jstr(r.json, "status"), "terminated");
  ck_assert_str_eq(jstr(r.json, "workflow"), "order-flow");
  ck_assert_int_ge(json_integer_value(jget(r.json, "rows.steps")), 3);
  ck_assert(json_is_integer(jget(r.json, "rows.events")));
  http_resp_free(&r);
  expect(&H, "GET", PATH, NULL, 404, "instance.not_found", NULL);
  expect(&H, "GET", PATH "/status", NULL, 404, "instance.not_found", NULL);
  host_request(&H, &r, "GET", "/workflows/order-flow", NULL);
  ck_assert_int_eq(json_integer_value(jget(r.json, "instances.terminated")), 0);
  ck_assert_int_eq(json_integer_value(jget(r.json, "instances.waiting")), 0);
  http_resp_free(&r);

  /* the id is free: a new instance, from the top, without the old
   * steps */
  create_waiting(&H, "o1");
  d = host_describe(&H, "order-flow", "o1");
  ck_assert_int_eq(json_integer_value(jget(d, "restarts")), 0);
  ck_assert_uint_eq(json_array_size(jget(d, "events")), 0);
  json_decref(d);
  expect(&H, "PATCH", PATH "/status", "{\"status\":\"terminate\"}", 200, NULL,
         NULL);
  char *out = NULL;
  const char *del[] = {"workflows",  "instances", "delete",
                       "order-flow", "o1",        NULL};
  ck_assert_int_eq(host_cli_verb(&H, del, &out), 0);
  assert_contains(out, "deleted order-flow/o1 (terminated): ");
  free(out);
  expect(&H, "GET", PATH, NULL, 404, "instance.not_found", NULL);
  /* a second delete finds nothing: the CLI says so and fails */
  ck_assert_int_ne(host_cli_verb(&H, del, &out), 0);
  assert_contains(out, "instance.not_found");
  free(out);

  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ended_http");
  TCase *tc = tcase_create("ended");
  proc_fixtures(tc, "duro-ended");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, ended_instance_restart_and_events);
  tcase_add_test(tc, delete_instance);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
