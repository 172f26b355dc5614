/* test_telemetry.c — traces over OTLP/HTTP from a real `duro run`
 * (DURO_BIN) of the order-flow example (ORDERS_PLUGIN) to a stand-in
 * collector (tests/otlp_receiver.py), which checks every span against
 * OTLP's JSON mapping and writes the valid ones down:
 *
 *  - spans: an order run to its end gives one trace, a root span named
 *    for the workflow (status complete, no parent) and a child span per
 *    step attempt and per completed wait, each with the workflow,
 *    instance, step key and attempt as attributes; a failed attempt's
 *    span has the error status; nothing the collector refused;
 *  - collector down: with nothing listening the order still completes,
 *    /metrics counts the failed posts, and once the collector listens on
 *    that port the spans kept meanwhile arrive. */
#include <arpa/inet.h>
#include <check.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif
#ifndef OTLP_RECEIVER
#error "build with -DOTLP_RECEIVER=\"<path of otlp_receiver.py>\""
#endif

#define SPAN_WAIT_MS 30000
#define ORDER_FLOW                                                             \
  "      - { name: order-flow, binding: ORDER_FLOW, class_name: OrderFlow }\n"

static char spans_path[600];

/* A port nothing listens on now (bound, then let go). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* The receiver on `port`, up once it printed its port. */
static pid_t start_receiver(int port) {
  char p[16], out[600];
  snprintf(p, sizeof p, "%d", port);
  snprintf(out, sizeof out, "%s/receiver.out", proc_tmp_dir);
  const char *argv[] = {"/usr/bin/python3", OTLP_RECEIVER, p, spans_path, NULL};
  pid_t pid = proc_spawn(argv, NULL, out, out);
  int64_t deadline = proc_now_ms() + 20000;
  for (;;) {
    char *text = proc_slurp(out);
    int up = strstr(text, "port ") != NULL;
    free(text);
    if (up)
      return pid;
    ck_assert_msg(proc_now_ms() < deadline, "the receiver did not start");
    proc_sleep_ms(50);
  }
}

static void start_orders(host_run *h, const char *name, int port) {
  char db[400], sections[300];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  snprintf(sections, sizeof sections,
           "telemetry: { otlp_endpoint: \"http://127.0.0.1:%d/\", "
           "service_name: shop, interval: 200ms }\n",
           port);
  host_init(h, name);
  h->sections = sections;
  host_write_config(h, db, "{ workers: 2 }", "orders", ORDERS_PLUGIN,
                    ORDER_FLOW);
  host_start(h);
}

/* Runs order `id` to its end: created, approved, complete. */
static void run_order(host_run *h, const char *id) {
  char body[256], path[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"%s\",\"email\":"
           "\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
           id, id);
  http_resp r;
  host_request(h, &r, "POST", "/workflows/order-flow/instances", body);
  ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body ? r.body : "");
  http_resp_free(&r);
  json_t *d =
      host_wait_status(h, "order-flow", id, "waiting", proc_now_ms() + 20000);
  json_decref(d);
  snprintf(path, sizeof path,
           "/workflows/order-flow/instances/%s/events/approval", id);
  host_request(h, &r, "POST", path, "{\"approved\":true}");
  ck_assert_int_eq(r.status, 202);
  http_resp_free(&r);
  d = host_wait_status(h, "order-flow", id, "complete", proc_now_ms() + 20000);
  json_decref(d);
}

/* The spans the receiver took of instance `id` (a JSON array, caller's),
 * once its root span is among them; fails on a span it refused. */
static json_t *spans_of(const char *id) {
  int64_t deadline = proc_now_ms() + SPAN_WAIT_MS;
  for (;;) {
    json_t *all = json_array();
    int root = 0;
    char *text = proc_slurp(spans_path);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
      json_t *s = json_loads(line, 0, NULL);
      ck_assert_msg(s != NULL, "line %s", line);
      ck_assert_msg(!json_object_get(s, "invalid"), "refused: %s", line);
      const char *inst = json_string_value(
          json_object_get(json_object_get(s, "attributes"), "duro.instance"));
      if (inst && !strcmp(inst, id)) {
        root |=
            !strcmp(json_string_value(json_object_get(s, "parentSpanId")), "");
        json_array_append(all, s);
      }
      json_decref(s);
    }
    free(text);
    if (root)
      return all;
    json_decref(all);
    ck_assert_msg(proc_now_ms() < deadline, "no root span of %s", id);
    proc_sleep_ms(100);
  }
}

static const char *sattr(json_t *s, const char *key) {
  return json_string_value(
      json_object_get(json_object_get(s, "attributes"), key));
}

START_TEST(an_order_is_one_trace) {
  snprintf(spans_path, sizeof spans_path, "%s/spans.ndjson", proc_tmp_dir);
  pid_t rx = start_receiver(0);
  char *text = NULL;
  int port = 0;
  char out[600];
  snprintf(out, sizeof out, "%s/receiver.out", proc_tmp_dir);
  text = proc_slurp(out);
  ck_assert_int_eq(sscanf(strstr(text, "port "), "port %d", &port), 1);
  free(text);
  host_run h;
  start_orders(&h, "trace", port);
  run_order(&h, "o1");
  json_t *spans = spans_of("o1");
  json_t *root = NULL;
  size_t i;
  json_t *s;
  json_array_foreach(spans, i, s) {
    if (!strcmp(json_string_value(json_object_get(s, "parentSpanId")), ""))
      root = s;
  }
  ck_assert_ptr_nonnull(root);
  ck_assert_str_eq(json_string_value(json_object_get(root, "name")),
                   "order-flow");
  ck_assert_str_eq(json_string_value(json_object_get(root, "service")), "shop");
  ck_assert_str_eq(sattr(root, "duro.status"), "complete");
  ck_assert_int_eq(json_integer_value(json_object_get(root, "status")), 1);
  const char *trace = json_string_value(json_object_get(root, "traceId"));
  const char *root_id = json_string_value(json_object_get(root, "spanId"));
  int charge = 0, wait = 0, notify = 0;
  json_array_foreach(spans, i, s) {
    ck_assert_str_eq(json_string_value(json_object_get(s, "traceId")), trace);
    ck_assert_str_eq(sattr(s, "duro.workflow"), "order-flow");
    if (s == root)
      continue;
    ck_assert_str_eq(json_string_value(json_object_get(s, "parentSpanId")),
                     root_id);
    ck_assert_int_ge(json_integer_value(json_object_get(s, "start")),
                     json_integer_value(json_object_get(root, "start")));
    ck_assert_int_le(json_integer_value(json_object_get(s, "end")),
                     json_integer_value(json_object_get(root, "end")));
    const char *name = json_string_value(json_object_get(s, "name"));
    if (!strcmp(name, "charge card")) {
      charge++;
      ck_assert_str_eq(sattr(s, "duro.step"), "charge card#1");
      ck_assert_int_eq(json_integer_value(json_object_get(
                           json_object_get(s, "attributes"), "duro.attempt")),
                       1);
      ck_assert_str_eq(sattr(s, "duro.outcome"), "ok");
    }
    wait += sattr(s, "duro.step.kind") &&
            !strcmp(sattr(s, "duro.step.kind"), "waitForEvent");
    notify += !strcmp(name, "notify");
  }
  ck_assert_int_eq(charge, 1);
  ck_assert_int_eq(wait, 1);
  ck_assert_int_eq(notify, 3);
  json_decref(spans);
  host_stop(&h, proc_now_ms() + 10000, 0);
  kill(rx, SIGTERM);
  proc_wait_exit(rx, proc_now_ms() + 5000);
}
END_TEST

START_TEST(a_collector_down_loses_no_step) {
  snprintf(spans_path, sizeof spans_path, "%s/spans.ndjson", proc_tmp_dir);
  int port = free_port();
  host_run h;
  start_orders(&h, "down", port);
  run_order(&h, "o2"); /* completes with nothing listening */
  int64_t deadline = proc_now_ms() + SPAN_WAIT_MS;
  for (;;) {
    http_resp r;
    host_request(&h, &r, "GET", "/metrics", NULL);
    static const char series[] = "\nduro_telemetry_export_errors_total ";
    const char *m = r.body ? strstr(r.body, series) : NULL;
    long errors = m ? atol(m + strlen(series)) : 0;
    http_resp_free(&r);
    if (errors > 0)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "no failed post counted");
    proc_sleep_ms(100);
  }
  pid_t rx = start_receiver(port); /* the spans kept arrive */
  json_t *spans = spans_of("o2");
  ck_assert_uint_ge(json_array_size(spans), 5);
  json_decref(spans);
  host_stop(&h, proc_now_ms() + 10000, 0);
  kill(rx, SIGTERM);
  proc_wait_exit(rx, proc_now_ms() + 5000);
}
END_TEST

int main(void) {
  Suite *s = suite_create("telemetry");
  TCase *tc = tcase_create("telemetry");
  proc_fixtures(tc, "duro-telemetry");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, an_order_is_one_trace);
  tcase_add_test(tc, a_collector_down_loses_no_step);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
