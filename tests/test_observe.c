/* test_observe.c — what a real `duro run` (DURO_BIN, tests/host_run.h) of
 * the order-flow example (ORDERS_PLUGIN) shows of what it runs:
 *
 *  - with `log: {format: json}` every line of its log (the supervisor's,
 *    the engine's, the worker process's) is one JSON object, and a
 *    plugin's duro_log from a step callback, sent by its worker process,
 *    carries the workflow, instance, step and attempt as fields;
 *  - GET .../events/stream of an instance waiting for an event gives its
 *    history, then the event, the step's end and the completion as they
 *    come, and ends; a reconnect with Last-Event-ID gets exactly the
 *    items after that id, also after a restart of the host; an ended
 *    instance's stream gives its history and ends; an unknown one 404;
 *  - `duro workflows instances describe --follow` prints the report, then
 *    each item of the stream once, in order, across a kill -9 of the
 *    engine, and returns at the instance's end;
 *  - GET .../logs and `duro workflows instances logs` give the lines the
 *    plugin's step callbacks logged (from its worker processes), each
 *    with its step and attempt; those of the steps committed before a
 *    kill -9 of the engine are there after its restart, none twice, and
 *    --follow prints the rest and returns once the instance ended. */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"
#include <signal.h>

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

/* A kill -9 of h's engine, and its restart by the supervisor awaited. */
static void kill_engine(const host_run *h) {
  pid_t engine = host_last_engine(h);
  ck_assert_int_eq(kill(engine, SIGKILL), 0);
  ck_assert(host_wait_gone(engine, 10000));
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

/* ---- the event stream ---------------------------------------------------- */

typedef struct sse {
  const host_run *h;
  const char *id, *last; /* instance; Last-Event-ID or NULL */
  char *text;
  size_t len;
  long status;
} sse;

/* Guards a stream's text, which the test reads while it grows. */
static pthread_mutex_t sse_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t sse_take(char *p, size_t size, size_t n, void *ctx) {
  sse *s = ctx;
  pthread_mutex_lock(&sse_mu);
  s->text = realloc(s->text, s->len + size * n + 1);
  memcpy(s->text + s->len, p, size * n);
  s->len += size * n;
  s->text[s->len] = '\0';
  pthread_mutex_unlock(&sse_mu);
  return size * n;
}

/* Reads the stream of `s->id` to its end (the instance's). */
static void *sse_read(void *arg) {
  sse *s = arg;
  char url[300], hdr[200];
  snprintf(url, sizeof url,
           "http://127.0.0.1:%d/workflows/order-flow/instances/%s/events/"
           "stream",
           s->h->port, s->id);
  CURL *c = curl_easy_init();
  struct curl_slist *hl = NULL;
  if (s->last) {
    snprintf(hdr, sizeof hdr, "Last-Event-ID: %s", s->last);
    hl = curl_slist_append(hl, hdr);
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_take);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
  pthread_mutex_lock(&sse_mu);
  s->text = calloc(1, 1);
  pthread_mutex_unlock(&sse_mu);
  curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s->status);
  curl_slist_free_all(hl);
  curl_easy_cleanup(c);
  return NULL;
}

static sse sse_get(const host_run *h, const char *id, const char *last) {
  sse s = {.h = h, .id = id, .last = last};
  sse_read(&s);
  return s;
}

/* The "id: " lines of a stream's text, in order (NULL-terminated). */
static char **ids_of(const char *text, size_t *n) {
  char **v = calloc(1024, sizeof *v);
  *n = 0;
  for (const char *p = text; (p = strstr(p, "id: ")); p++)
    if (p == text || p[-1] == '\n')
      v[(*n)++] = strndup(p + 4, strcspn(p + 4, "\n"));
  return v;
}

static void ids_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

START_TEST(event_stream_follows_and_resumes) {
  host_run H;
  start_orders(&H, "stream", NULL);
  create_order(&H, "o1");
  json_decref(host_wait_status(&H, "order-flow", "o1", "waiting",
                               proc_now_ms() + SETTLE_MS));
  sse live = {.h = &H, .id = "o1"};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, sse_read, &live), 0);
  /* the history is there before the event is sent: its review wait */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    pthread_mutex_lock(&sse_mu);
    int seen = live.text && strstr(live.text, "\"manual review#1\"");
    pthread_mutex_unlock(&sse_mu);
    if (seen)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "no review wait streamed");
    proc_sleep_ms(20);
  }
  approve(&H, "o1");
  pthread_join(t, NULL);
  ck_assert_int_eq(live.status, 200);
  assert_contains(live.text, "event: event_received\n");
  assert_contains(live.text, "\"step\":\"manual review#1\",\"status\":"
                             "\"complete\"");
  assert_contains(live.text, "event: status\ndata: {\"status\":\"complete\"");
  size_t n;
  char **ids = ids_of(live.text, &n);
  ck_assert_uint_gt(n, 6);
  for (size_t i = 1; i < n; i++)
    ck_assert_str_ne(ids[i - 1], ids[i]);

  /* the ended instance's stream: the history, ending with its end.  What
   * the live stream sent is in it, in the same order; the live stream may
   * lack a row committed after one stamped later (ids are commit times:
   * concurrent branches' ends), which the history has */
  sse again = sse_get(&H, "o1", NULL);
  assert_contains(again.text, "event: status\ndata: {\"status\":\"complete\"");
  size_t n_all;
  char **all = ids_of(again.text, &n_all);
  size_t k = 0;
  for (size_t i = 0; i < n_all && k < n; i++)
    k += !strcmp(all[i], ids[k]);
  ck_assert_msg(k == n, "the live stream's id %s is not in the history",
                k < n ? ids[k] : "?");
  /* a reconnect after the 3rd item: exactly the rest of the history */
  const char *rest = strstr(again.text, all[3]);
  rest = strstr(rest, "\n\n") + 2;
  sse resumed = sse_get(&H, "o1", all[3]);
  ck_assert_msg(!strcmp(resumed.text, rest), "a resumed stream differs");
  free(resumed.text);
  /* after a kill -9 of the engine and its restart: the same ids */
  kill_engine(&H);
  resumed = sse_get(&H, "o1", all[3]);
  ck_assert_msg(!strcmp(resumed.text, rest),
                "a stream resumed after the restart differs");
  free(resumed.text);
  ids_free(all, n_all);
  free(again.text);

  sse none = sse_get(&H, "nope", NULL);
  ck_assert_int_eq(none.status, 404);
  free(none.text);
  ids_free(ids, n);
  free(live.text);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

/* `describe --follow --json` in a thread: its exit status and output. */
typedef struct follower {
  const host_run *h;
  int rc;
  char *out;
} follower;

static void *describe_follow(void *arg) {
  follower *f = arg;
  const char *args[] = {"instances", "describe", "order-flow", "o1",
                        "--follow",  "--json",   NULL};
  f->rc = host_cli(f->h, args, &f->out);
  return NULL;
}

/* describe --follow prints the report, then each item of the stream once
 * as it comes, across a kill -9 of the engine (the stream taken up again
 * with Last-Event-ID), and returns 0 at the instance's end. */
START_TEST(describe_follow_survives_kill9) {
  host_run H;
  start_orders(&H, "follow", NULL);
  create_order(&H, "o1");
  json_decref(host_wait_status(&H, "order-flow", "o1", "waiting",
                               proc_now_ms() + SETTLE_MS));
  follower f = {.h = &H};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, describe_follow, &f), 0);
  proc_sleep_ms(1000); /* most often it follows by now; right either way */
  kill_engine(&H);
  approve(&H, "o1");
  pthread_join(t, NULL);
  ck_assert_msg(f.rc == 0, "describe --follow exited %d:\n%s", f.rc, f.out);
  assert_contains(f.out, "\"status\": \"waiting\""); /* the report */
  /* the stream: its whole history once, in the journal's order */
  sse all = sse_get(&H, "o1", NULL);
  size_t n;
  char **ids = ids_of(all.text, &n);
  ck_assert_uint_gt(n, 6);
  const char *at = f.out;
  for (size_t i = 0; i < n; i++) {
    char want[128];
    snprintf(want, sizeof want, "{\"id\":\"%s\"", ids[i]);
    const char *hit = strstr(at, want);
    ck_assert_msg(hit, "item %s not printed (or out of order):\n%s", ids[i],
                  f.out);
    ck_assert_msg(!strstr(hit + 1, want), "item %s printed twice", ids[i]);
    at = hit + 1;
  }
  assert_contains(f.out, "\"event\":\"event_received\"");
  assert_contains(f.out, "\"data\":{\"status\":\"complete\"");
  ids_free(ids, n);
  free(all.text);
  free(f.out);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

/* ---- logs per instance -------------------------------------------------- */

/* GET .../logs of order `id`: its lines' messages, each after "STEP
 * ATTEMPT ", one a line (caller frees). */
static char *log_lines(host_run *h, const char *id) {
  char path[256];
  snprintf(path, sizeof path, "/workflows/order-flow/instances/%s/logs", id);
  http_resp r;
  host_request(h, &r, "GET", path, NULL);
  ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body ? r.body : "");
  json_t *lines = json_object_get(r.json, "logs");
  size_t cap = 4096, len = 0;
  char *text = calloc(1, cap);
  for (size_t i = 0; i < json_array_size(lines); i++) {
    json_t *l = json_array_get(lines, i);
    ck_assert_int_eq(json_integer_value(json_object_get(l, "n")), (int)i + 1);
    len +=
        (size_t)snprintf(text + len, cap - len, "%s %d %s\n",
                         json_string_value(json_object_get(l, "step")),
                         (int)json_integer_value(json_object_get(l, "attempt")),
                         json_string_value(json_object_get(l, "message")));
    ck_assert_uint_lt(len, cap);
  }
  http_resp_free(&r);
  return text;
}

START_TEST(logs_per_instance_survive_kill9) {
  host_run H;
  start_orders(&H, "logs", NULL);
  create_order(&H, "o1");
  json_t *d = host_wait_status(&H, "order-flow", "o1", "waiting",
                               proc_now_ms() + SETTLE_MS);
  json_decref(d);
  char *before = log_lines(&H, "o1");
  ck_assert_str_eq(before,
                   "reserve stock#1 1 reserving stock for order o1\n"
                   "charge card#1 1 charging 5.00 for order o1 (attempt 1, "
                   "key o1/charge card#1)\n");
  /* the steps committed: their lines are on disk */
  kill_engine(&H);
  char *after = log_lines(&H, "o1");
  ck_assert_str_eq(after, before); /* none lost, none twice */
  free(after);
  /* --follow prints the rest as it comes and returns at the end */
  approve(&H, "o1");
  const char *args[] = {"instances", "logs", "order-flow", "o1",
                        "--after",   "2",    "--follow",   NULL};
  char *out = NULL;
  ck_assert_int_eq(host_cli(&H, args, &out), 0);
  ck_assert_msg(strstr(out, "notify#1 attempt 1: mailing a@example.com about "
                            "order o1") != NULL,
                "%s", out);
  ck_assert_msg(strstr(out, "reserving stock") == NULL, "%s", out);
  free(out);
  d = host_describe(&H, "order-flow", "o1");
  ck_assert_str_eq(json_string_value(json_object_get(d, "status")), "complete");
  json_decref(d);
  free(before);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("observe");
  TCase *tc = tcase_create("logs");
  proc_fixtures(tc, "duro-observe");
  tcase_set_timeout(tc, 150);
  tcase_add_test(tc, json_log_lines_carry_their_instance);
  tcase_add_test(tc, event_stream_follows_and_resumes);
  tcase_add_test(tc, describe_follow_survives_kill9);
  tcase_add_test(tc, logs_per_instance_survive_kill9);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
