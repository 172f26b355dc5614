/* test_telemetry.c — traces over OTLP/HTTP from a real `duro run`
 * (DURO_BIN) of the order-flow example (ORDERS_PLUGIN) and the traced
 * plugin (TRACED_PLUGIN) to a stand-in collector (tests/otlp/receiver.sh,
 * OTLP_RECEIVER), which decodes every export with OpenTelemetry's own
 * message definitions (the protobufjs code of
 * @opentelemetry/otlp-transformer, not duro's encoder) and writes the
 * spans it took down, or why it refused them:
 *
 *  - spans: an order run to its end gives one trace, a root span named
 *    for the workflow (status complete, no parent) and a child span per
 *    step attempt and per completed wait, each with the workflow,
 *    instance, step key and attempt as attributes; a failed attempt's
 *    span has the error status; nothing the collector refused;
 *  - trace context: an instance created over HTTP with a traceparent is
 *    in the caller's trace, its root span the caller's span's child, and
 *    duro_attempt_traceparent in a step (its result here) names that
 *    step's attempt span of that trace, in a worker process and in the
 *    engine; the message a step sends with it starts an instance (the
 *    no-code consumer) in the same trace, whose root is the sending
 *    attempt's child and linked from the queue batch's span; the trace
 *    survives a restart of the host (it is in the journal); an invalid
 *    traceparent is ignored;
 *  - collector down: with nothing listening the order still completes,
 *    /metrics counts the failed posts, and once the collector listens on
 *    that port the spans kept meanwhile arrive; what waits never passes
 *    max_spans, and the spans past it are counted dropped. */
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
#ifndef TRACED_PLUGIN
#error "build with -DTRACED_PLUGIN=\"<path of libtraced.so>\""
#endif
#ifndef OTLP_RECEIVER
#error "build with -DOTLP_RECEIVER=\"<path of tests/otlp/receiver.sh>\""
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

/* The receiver on `port`, up once it printed its port (its first start
 * installs it: npm ci). */
static pid_t start_receiver(int port) {
  char p[16], out[600];
  snprintf(p, sizeof p, "%d", port);
  snprintf(out, sizeof out, "%s/receiver.out", proc_tmp_dir);
  const char *argv[] = {"/bin/bash", OTLP_RECEIVER, p, spans_path, NULL};
  pid_t pid = proc_spawn(argv, NULL, out, out);
  int64_t deadline = proc_now_ms() + 150000;
  for (;;) {
    char *text = proc_slurp(out);
    int up = strstr(text, "port ") != NULL;
    if (!up && proc_now_ms() >= deadline)
      ck_abort_msg("the receiver did not start: %s", text);
    free(text);
    if (up)
      return pid;
    proc_sleep_ms(50);
  }
}

/* The receiver on a port of its choice, and that port. */
static pid_t start_receiver_any(int *port) {
  pid_t rx = start_receiver(0);
  char out[600];
  snprintf(out, sizeof out, "%s/receiver.out", proc_tmp_dir);
  char *text = proc_slurp(out);
  ck_assert_int_eq(sscanf(strstr(text, "port "), "port %d", port), 1);
  free(text);
  return rx;
}

static char sections[300];

/* A host's telemetry section: to `port`, keeping `max` spans at most
 * (0: the default). */
static void telemetry_to(host_run *h, int port, int max) {
  char more[40] = "";
  if (max)
    snprintf(more, sizeof more, ", max_spans: %d", max);
  snprintf(sections, sizeof sections,
           "telemetry: { otlp_endpoint: \"http://127.0.0.1:%d/\", "
           "service_name: shop, interval: 200ms%s }\n",
           port, more);
  h->sections = sections;
}

static void start_orders(host_run *h, const char *name, int port, int max) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/%s.db", proc_tmp_dir, name);
  host_init(h, name);
  telemetry_to(h, port, max);
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
 * once its root span (the one with the instance's status) is among them;
 * fails on a span it refused. */
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
        root |= json_object_get(json_object_get(s, "attributes"),
                                "duro.status") != NULL;
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

/* How many of `spans` are named `name`. */
static int count_named(json_t *spans, const char *name) {
  int n = 0;
  size_t i;
  json_t *s;
  json_array_foreach(spans, i, s) n +=
      !strcmp(json_string_value(json_object_get(s, "name")), name);
  return n;
}

static const char *sattr(json_t *s, const char *key) {
  return json_string_value(
      json_object_get(json_object_get(s, "attributes"), key));
}

START_TEST(an_order_is_one_trace) {
  snprintf(spans_path, sizeof spans_path, "%s/spans.ndjson", proc_tmp_dir);
  int port;
  pid_t rx = start_receiver_any(&port);
  host_run h;
  start_orders(&h, "trace", port, 0);
  run_order(&h, "o1");
  /* its two activations' spans (to the approval's wait, then to its end)
   * may come a post after the root's */
  json_t *spans;
  for (int64_t until = proc_now_ms() + SPAN_WAIT_MS;; proc_sleep_ms(100)) {
    spans = spans_of("o1");
    if (count_named(spans, "activation") >= 2)
      break;
    json_decref(spans);
    ck_assert_msg(proc_now_ms() < until, "no two activation spans of o1");
  }
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
  int charge = 0, wait = 0, notify = 0, waiting = 0, complete = 0;
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
    if (!strcmp(name, "activation")) {
      /* each activation: the instance's status after it, its outcome */
      ck_assert_str_eq(sattr(s, "duro.outcome"), "ok");
      ck_assert_int_eq(json_integer_value(json_object_get(s, "status")), 1);
      waiting += !strcmp(sattr(s, "duro.instance.status"), "waiting");
      complete += !strcmp(sattr(s, "duro.instance.status"), "complete");
    }
    notify += !strcmp(name, "notify");
  }
  ck_assert_int_eq(charge, 1);
  ck_assert_int_eq(wait, 1);
  ck_assert_int_eq(notify, 3);
  ck_assert_int_eq(waiting, 1);
  ck_assert_int_eq(complete, 1);
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
  start_orders(&h, "down", port, 0);
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

#define TRACED "      - { name: traced, binding: TRACED, class_name: Traced }\n"
#define HOPS                                                                   \
  "queues: { producers: [{ binding: HOPS, queue: hops }], consumers: "         \
  "[{ queue: hops, workflow: traced, id_from: /id }] }"

static void start_traced(host_run *h, const char *name, int port, int max,
                         const char *plugin_keys) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/%s.db", proc_tmp_dir, name);
  host_init(h, name);
  telemetry_to(h, port, max);
  h->plugin_keys = plugin_keys;
  host_write_config(h, db, "{ workers: 2 }", "traced", TRACED_PLUGIN, TRACED);
  host_start(h);
}

/* POST `body` to `path` with `header` (NULL: none): must answer `want`. */
static void post_with(const host_run *h, const char *path, const char *body,
                      const char *header, long want) {
  http_req q = {.method = "POST", .path = path, .body = body, .header = header};
  http_resp r;
  ck_assert_int_eq(http_send(h->port, &q, &r), CURLE_OK);
  ck_assert_msg(r.status == want, "%s: %ld %s", path, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

/* The span of `spans` named `name` (the root: NULL), borrowed. */
static json_t *span_named(json_t *spans, const char *name) {
  size_t i;
  json_t *s;
  json_array_foreach(spans, i, s) {
    int root = json_object_get(json_object_get(s, "attributes"),
                               "duro.status") != NULL;
    if (name ? !root &&
                   !strcmp(json_string_value(json_object_get(s, "name")), name)
             : root)
      return s;
  }
  ck_abort_msg("no span %s", name ? name : "(root)");
  return NULL;
}

static const char *str_of(json_t *s, const char *key) {
  return json_string_value(json_object_get(s, key));
}

/* Instance `id`'s output traceparent, once complete, split at its '-'s
 * (caller's, 4 parts in one buffer). */
static char *output_traceparent(const host_run *h, const char *id) {
  json_t *d =
      host_wait_status(h, "traced", id, "complete", proc_now_ms() + 30000);
  const char *tp = jstr(d, "output.traceparent");
  ck_assert_int_eq(strlen(tp), 55);
  char *out = strdup(tp);
  json_decref(d);
  return out;
}

/* The span the receiver took whose name begins with `prefix` and that
 * links to span `linked` (any: NULL), once there is one (caller's). */
static json_t *span_linking(const char *prefix, const char *linked) {
  int64_t deadline = proc_now_ms() + 90000;
  for (;;) {
    json_t *found = NULL;
    char *text = proc_slurp(spans_path);
    for (char *line = strtok(text, "\n"); line && !found;
         line = strtok(NULL, "\n")) {
      json_t *s = json_loads(line, 0, NULL);
      ck_assert_msg(s && !json_object_get(s, "invalid"), "refused: %s", line);
      const char *name = json_string_value(json_object_get(s, "name"));
      size_t i;
      json_t *l;
      json_array_foreach(json_object_get(s, "links"), i, l) {
        if (!strncmp(name, prefix, strlen(prefix)) &&
            (!linked || !strcmp(str_of(l, "spanId"), linked)))
          found = json_incref(s);
      }
      json_decref(s);
    }
    free(text);
    if (found)
      return found;
    ck_assert_msg(proc_now_ms() < deadline, "no span %s linking to %s", prefix,
                  linked ? linked : "any");
    proc_sleep_ms(200);
  }
}

/* A traceparent on an HTTP create: the instance, its attempts and the
 * instance started by the message it sends are in the caller's trace. */
static void trace_is_continued(const char *name, const char *plugin_keys) {
  snprintf(spans_path, sizeof spans_path, "%s/spans.ndjson", proc_tmp_dir);
  int port;
  pid_t rx = start_receiver_any(&port);
  host_run h;
  start_traced(&h, name, port, 0, plugin_keys);
  static const char trace[] = "4bf92f3577b34da6a3ce929d0e0e4736",
                    caller[] = "00f067aa0ba902b7";
  char header[128];
  snprintf(header, sizeof header, "traceparent: 00-%s-%s-01", trace, caller);
  post_with(&h, "/workflows/traced/instances",
            "{\"id\":\"t1\",\"params\":{\"next\":\"t2\"}}", header, 201);
  char *tp = output_traceparent(&h, "t1");
  json_t *spans = spans_of("t1");
  json_t *root = span_named(spans, NULL), *call = span_named(spans, "call");
  json_t *hop = span_named(spans, "hop");
  ck_assert_str_eq(str_of(root, "traceId"), trace);
  ck_assert_str_eq(str_of(root, "parentSpanId"), caller);
  ck_assert_str_eq(str_of(call, "traceId"), trace);
  ck_assert_str_eq(str_of(call, "parentSpanId"), str_of(root, "spanId"));
  /* what the step read is the span the host exported for it */
  char want[64];
  snprintf(want, sizeof want, "00-%s-%s-01", trace, str_of(call, "spanId"));
  ck_assert_str_eq(tp, want);
  free(tp);
  /* the message hop sent started t2, in the same trace, under hop */
  tp = output_traceparent(&h, "t2");
  ck_assert_int_eq(strncmp(tp + 3, trace, 32), 0);
  free(tp);
  json_t *spans2 = spans_of("t2");
  json_t *root2 = span_named(spans2, NULL);
  ck_assert_str_eq(str_of(root2, "traceId"), trace);
  ck_assert_str_eq(str_of(root2, "parentSpanId"), str_of(hop, "spanId"));
  /* the no-code consumer's batch is a span linked to the instance */
  json_t *batch = span_linking("queue hops", str_of(root2, "spanId"));
  ck_assert_int_eq(
      json_integer_value(json_object_get(json_object_get(batch, "attributes"),
                                         "duro.queue.messages")),
      1);
  ck_assert_str_ne(str_of(batch, "traceId"), trace);
  json_decref(batch);
  json_decref(spans2);
  json_decref(spans);
  /* an invalid traceparent is ignored: a trace of its own */
  post_with(
      &h, "/workflows/traced/instances", "{\"id\":\"t3\"}",
      "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      201);
  tp = output_traceparent(&h, "t3");
  ck_assert_int_ne(strncmp(tp + 3, trace, 32), 0);
  free(tp);
  spans = spans_of("t3");
  ck_assert_str_eq(str_of(span_named(spans, NULL), "parentSpanId"), "");
  json_decref(spans);
  /* the trace is in the journal: it goes on after a restart */
  post_with(&h, "/workflows/traced/instances",
            "{\"id\":\"t4\",\"params\":{\"wait\":true}}", header, 201);
  json_decref(
      host_wait_status(&h, "traced", "t4", "waiting", proc_now_ms() + 20000));
  host_stop(&h, proc_now_ms() + 10000, 0);
  host_start(&h);
  /* an event's sender is linked from the event's span */
  static const char sender[] = "0af7651916cd43dd8448eb211c80319c",
                    sender_span[] = "b7ad6b7169203331";
  char event_header[128];
  snprintf(event_header, sizeof event_header, "traceparent: 00-%s-%s-01",
           sender, sender_span);
  post_with(&h, "/workflows/traced/instances/t4/events/go", "{}", event_header,
            202);
  tp = output_traceparent(&h, "t4");
  ck_assert_int_eq(strncmp(tp + 3, trace, 32), 0);
  free(tp);
  spans = spans_of("t4");
  ck_assert_str_eq(str_of(span_named(spans, NULL), "parentSpanId"), caller);
  json_t *event = span_named(spans, "event go");
  ck_assert_str_eq(str_of(event, "traceId"), trace);
  ck_assert_str_eq(str_of(event, "parentSpanId"),
                   str_of(span_named(spans, NULL), "spanId"));
  json_t *link = json_array_get(json_object_get(event, "links"), 0);
  ck_assert_ptr_nonnull(link);
  ck_assert_str_eq(str_of(link, "traceId"), sender);
  ck_assert_str_eq(str_of(link, "spanId"), sender_span);
  json_decref(spans);
  host_stop(&h, proc_now_ms() + 10000, 0);
  kill(rx, SIGTERM);
  proc_wait_exit(rx, proc_now_ms() + 5000);
}

START_TEST(a_trace_is_continued_in_a_worker) {
  trace_is_continued("traced-worker", HOPS);
}
END_TEST

START_TEST(a_trace_is_continued_in_the_engine) {
  trace_is_continued("traced-engine", "workers: 0\n    " HOPS);
}
END_TEST

/* A cron trigger's tick is a span linked to the instance it started. */
START_TEST(a_cron_tick_is_a_span) {
  snprintf(spans_path, sizeof spans_path, "%s/spans.ndjson", proc_tmp_dir);
  int port;
  pid_t rx = start_receiver_any(&port);
  host_run h;
  start_traced(&h, "cron", port, 0,
               "triggers: { crons: [{ schedule: \"* * * * *\", "
               "workflow: traced, id: \"tick-{ts}\" }] }");
  json_t *tick = span_linking("cron ", NULL); /* within a minute */
  json_t *link = json_array_get(json_object_get(tick, "links"), 0);
  char id[64];
  snprintf(id, sizeof id, "tick-%lld",
           (long long)json_integer_value(json_object_get(
               json_object_get(tick, "attributes"), "duro.cron.tick_ms")));
  json_t *spans = spans_of(id);
  json_t *root = span_named(spans, NULL);
  ck_assert_str_eq(str_of(link, "traceId"), str_of(root, "traceId"));
  ck_assert_str_eq(str_of(link, "spanId"), str_of(root, "spanId"));
  json_decref(spans);
  json_decref(tick);
  host_stop(&h, proc_now_ms() + 10000, 0);
  kill(rx, SIGTERM);
  proc_wait_exit(rx, proc_now_ms() + 5000);
}
END_TEST

/* The value of `series` ("\nname{...} ") in the host's /metrics. */
static long metric(const host_run *h, const char *series) {
  http_resp r;
  host_request(h, &r, "GET", "/metrics", NULL);
  const char *m = r.body ? strstr(r.body, series) : NULL;
  ck_assert_msg(m != NULL, "no %s in /metrics", series + 1);
  long v = atol(m + strlen(series));
  http_resp_free(&r);
  return v;
}

START_TEST(a_collector_down_costs_its_buffer) {
  int port = free_port(); /* nothing listens: every post is refused */
  host_run h;
  start_traced(&h, "full", port, 100, NULL);
  /* 300 instances of 3 spans each (the instance, its one activation,
   * its one attempt) */
  for (int b = 0; b < 3; b++) {
    char body[8192] = "{\"instances\":[";
    for (int i = 0; i < 100; i++)
      snprintf(body + strlen(body), sizeof body - strlen(body),
               "%s{\"id\":\"f%d\"}", i ? "," : "", b * 100 + i);
    strcat(body, "]}");
    post_with(&h, "/workflows/traced/instances/batch", body, NULL, 200);
  }
  int64_t deadline = proc_now_ms() + SPAN_WAIT_MS;
  for (;;) {
    long buffered = metric(&h, "\nduro_telemetry_buffered_spans ");
    long dropped =
        metric(&h, "\nduro_telemetry_spans_total{outcome=\"dropped\"} ");
    ck_assert_int_le(buffered, 100);
    ck_assert_int_eq(
        metric(&h, "\nduro_telemetry_spans_total{outcome=\"exported\"} "), 0);
    if (buffered + dropped == 900)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "%ld buffered, %ld dropped",
                  buffered, dropped);
    proc_sleep_ms(100);
  }
  ck_assert_int_gt(metric(&h, "\nduro_telemetry_export_errors_total "), 0);
  host_stop(&h, proc_now_ms() + 10000, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("telemetry");
  TCase *tc = tcase_create("telemetry");
  proc_fixtures(tc, "duro-telemetry");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, an_order_is_one_trace);
  tcase_add_test(tc, a_collector_down_loses_no_step);
  tcase_add_test(tc, a_trace_is_continued_in_a_worker);
  tcase_add_test(tc, a_trace_is_continued_in_the_engine);
  tcase_add_test(tc, a_collector_down_costs_its_buffer);
  tcase_add_test(tc, a_cron_tick_is_a_span);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
