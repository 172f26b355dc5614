/* test_observe.c — what a real `duro run` (DURO_BIN, tests/host_run.h) of
 * the order-flow example (ORDERS_PLUGIN) shows of what it runs:
 *
 *  - with `log: {format: json}` every line of its log (the supervisor's,
 *    the engine's, the worker process's) is one JSON object, and a
 *    plugin's duro_log from a step callback, sent by its worker process,
 *    carries the workflow, instance, step and attempt as fields. */
#include <check.h>
#include <jansson.h>
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
#define ORDER_FLOW                                                             \
  "      - { name: order-flow, binding: ORDER_FLOW, class_name: OrderFlow }\n"

static void start_orders(host_run *h, const char *name, const char *sections) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(h, name);
  h->sections = sections;
  host_write_config(h, db, "{ workers: 2 }", "orders", ORDERS_PLUGIN,
                    ORDER_FLOW);
  host_start(h);
}

/* POST an order `id` that waits for its review, with no grace period. */
static void create_order(const host_run *h, const char *id) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"%s\",\"email\":"
           "\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
           id, id);
  http_resp r;
  host_request(h, &r, "POST", "/workflows/order-flow/instances", body);
  ck_assert_msg(r.status == 201, "create %s: %ld %s", id, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

static void approve(const host_run *h, const char *id) {
  char path[256];
  snprintf(path, sizeof path,
           "/workflows/order-flow/instances/%s/events/approval", id);
  http_resp r;
  host_request(h, &r, "POST", path, "{\"approved\":true}");
  ck_assert_msg(r.status == 202, "approve %s: %ld %s", id, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

/* ---- structured logs ---------------------------------------------------- */

START_TEST(json_log_lines_carry_their_instance) {
  host_run H;
  start_orders(&H, "jsonlog", "log: { format: json }\n");
  create_order(&H, "o1");
  json_decref(host_wait_status(&H, "order-flow", "o1", "waiting",
                               proc_now_ms() + SETTLE_MS));
  approve(&H, "o1");
  json_decref(host_wait_status(&H, "order-flow", "o1", "complete",
                               proc_now_ms() + SETTLE_MS));
  host_stop(&H, proc_now_ms() + 10000, 0);

  char *log = proc_slurp(H.log);
  ck_assert(log != NULL);
  int lines = 0, reserving = 0, charging = 0;
  for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
    json_error_t err;
    json_t *o = json_loads(line, 0, &err);
    ck_assert_msg(json_is_object(o), "not a JSON object: %s (%s)", line,
                  err.text);
    lines++;
    const char *t = jstr(o, "time");
    ck_assert_msg(t && strlen(t) == 24 && t[10] == 'T' && t[23] == 'Z', "%s",
                  line);
    ck_assert_msg(jstr(o, "level") && jstr(o, "message"), "%s", line);
    const char *msg = jstr(o, "message");
    if (!strncmp(msg, "reserving stock for order o1", 28) ||
        !strncmp(msg, "charging 5.00 for order o1", 26)) {
      ck_assert_str_eq(jstr(o, "workflow"), "order-flow");
      ck_assert_str_eq(jstr(o, "instance"), "o1");
      ck_assert_int_eq(json_integer_value(jget(o, "attempt")), 1);
      ck_assert_str_eq(jstr(o, "level"), "info");
      ck_assert_ptr_nonnull(jstr(o, "build"));
      if (msg[0] == 'r') {
        ck_assert_str_eq(jstr(o, "step"), "reserve stock#1");
        reserving++;
      } else {
        ck_assert_str_eq(jstr(o, "step"), "charge card#1");
        charging++;
      }
    }
    if (strstr(msg, "engine started"))
      ck_assert_str_eq(jstr(o, "source"), "supervisor");
    json_decref(o);
  }
  ck_assert_int_eq(reserving, 1);
  ck_assert_int_eq(charging, 1);
  ck_assert_int_gt(lines, 3);
  free(log);
}
END_TEST

int main(void) {
  Suite *s = suite_create("observe");
  TCase *tc = tcase_create("logs");
  proc_fixtures(tc, "duro-observe");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, json_log_lines_carry_their_instance);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
