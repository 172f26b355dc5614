/* test_http.c — the HTTP control plane of a real `duro run`.
 *
 * Every case starts DURO_BIN (fork/exec) on a config generated in a fresh
 * temporary directory: the order-flow example (ORDERS_PLUGIN, class
 * OrderFlow), `http.listen: 127.0.0.1:0` and `http.max_body_bytes: 1024`.
 * The host's stdout and stderr go to a file in that directory; the case
 * reads the ephemeral port from the line "ready: ... http on port N".
 * Well-formed requests go through libcurl, malformed ones through raw
 * sockets.  Every case that starts a host ends by stopping it with SIGTERM
 * and asserting exit 0 and a stderr free of sanitizer reports.
 *
 *  - routes: create (with and without id, duplicate), batch, list (status
 *    filter, id prefix, creation and end times, search attributes
 *    (`where`, and its refusals), limit, cursor paging; each entry's
 *    last step: an event wait, a sleep, a retry after a failed attempt,
 *    a completed one's last notice),
 *    describe, PATCH status (pause, resume,
 *    terminate, restart, restart from a step, the illegal transitions),
 *    events (and the description's list of them, consumed or pending),
 *    /healthz, /metrics, /metrics/history (the case's steps in the buckets
 *    since it began), /hosts (this host alone on its SQLite file);
 *  - runs: an order held by its id from creation to its output, one that
 *    errors with the plugin's message, one the reviewer rejects;
 *  - create and wait: POST ?wait= answered 201 with the light status once
 *    the instance ends (its output, its error) or the wait runs out; a
 *    duplicate 409 at once; a bad wait and a batch's wait 400 with
 *    nothing created; a client that goes ends the wait, not the instance,
 *    nor does a kill -9 during the wait;
 *  - errors: each 400/404/405/413 with {"error":{"code","message"}}, the
 *    bearer token (401), a token_env naming an unset variable, a later
 *    request with a wrong token on a kept connection cut at its head, and
 *    503 with Retry-After while the engine's writes fail (its
 *    RLIMIT_FSIZE lowered to one byte with prlimit: a full disk);
 *  - bind: a public listen address without a token is refused, unless
 *    allow_insecure;
 *  - sweep: malformed input over raw sockets, one input per fresh host and
 *    then all of them on one host followed by 1000 concurrent keep-alive
 *    connections; the host answers /healthz after each and no instance
 *    appears;
 *  - shutdown: SIGTERM with idle and half-sent connections still open;
 *  - memory: 300 connections sending 1 MiB bodies at once, without the
 *    token (each refused 401 at its head) and with none required (past
 *    the budget reads are refused): the engine's VmRSS stays bounded;
 *    9000 GETs ?wait= parked at once hold none of that budget (a normal
 *    request is served meanwhile), those past their own budget are
 *    answered 503 with Retry-After (a create ?wait= too, before it
 *    creates anything), and closing them ends their waits;
 *  - in process: the HTTP server (host/server/http/) linked into this
 *    test with uv_queue_work wrapped (-Wl,--wrap) to fail: the request
 *    is answered 503 and nothing is left in flight for a shutdown to
 *    wait on;
 *  - queues: send, batch, pull, ack, retry into the dead-letter queue and
 *    the counts, then every refusal (404, 413, 400, 405); a dead-letter
 *    queue's messages kept however often they are pulled, and sent back
 *    (redrive) to the queue that dead-lettered them; a look at a queue's
 *    messages (GET) that changes none of them, and its refusals;
 *  - the dashboard's files: served without the token on a listener that
 *    has one, with their Content-Type, while every data route still
 *    answers 401;
 *  - crons: a nightly cron in the no-code form listed with its next five
 *    ticks, fired by hand through /__scheduled (POST and GET, "+" and %XX
 *    in the expression) into one instance however often it fires in a
 *    day, the refusals (404, 400, 405) and its /metrics series; every
 *    spelling of /__scheduled that reaches the route (a trailing or
 *    doubled slash, a dot segment, %XX) refused from another site's page
 *    as /__scheduled is.
 *
 * Children are killed on every way out: the helpers (proc.h) SIGKILL a child
 * past its deadline, the teardown kills one still running, the child asks
 * for SIGKILL when its parent dies, and in fork mode Check kills the case's
 * process group when the case ends.  All traffic is on loopback. */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "engine.h"
#include "http.h"
#include "http_client.h"
#include "proc.h"

#ifndef DURO_BIN
#error "build with -DDURO_BIN=\"<path of the built duro binary>\""
#endif
#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define WAIT_MS 20000     /* for a host to say ready or to exit */
#define SETTLE_MS 20000   /* for an instance to reach a status */
#define RAW_READ_MS 5000  /* for a raw-socket reply */
#define N_CONCURRENT 1000 /* simultaneous connections in the sweep */
#define MAX_BODY 1024     /* http.max_body_bytes of generated configs */
#define WF "/workflows/order-flow/instances"

#define assert_contains(hay, needle)                                           \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s",    \
                (needle), (hay))

/* ---- the host ------------------------------------------------------------ */

typedef struct host {
  pid_t pid;
  int port;
  char config[400];
  char log[400]; /* the child's stdout and stderr */
} host;

/* http.max_body_bytes of the configs written next (the memory cases need
 * bodies of a realistic size). */
static long cfg_max_body = MAX_BODY;
/* More plugins of the configs written next (entries of `plugins:`), or
 * "". */
static const char *cfg_plugins_extra = "";

/* A config for the order flow: `listen`, http.max_body_bytes =
 * cfg_max_body, and `http_extra` (lines of the http mapping, may be
 * NULL). */
static void write_config(host *h, const char *name, const char *listen,
                         const char *http_extra) {
  snprintf(h->config, sizeof h->config, "%s/%s.yaml", proc_tmp_dir, name);
  snprintf(h->log, sizeof h->log, "%s/%s.log", proc_tmp_dir, name);
  FILE *f = fopen(h->config, "w");
  ck_assert_msg(f != NULL, "%s: %s", h->config, strerror(errno));
  fprintf(f,
          "storage:\n"
          "  path: %s/var-%s/duro.db\n"
          "  synchronous: normal\n"
          "http:\n"
          "  listen: %s\n"
          "  max_body_bytes: %ld\n"
          "%s"
          "engine:\n"
          "  workers: 2\n"
          "plugins:\n"
          "  - name: orders\n"
          "    path: %s\n"
          "    workflows:\n"
          "      - name: order-flow\n"
          "        binding: ORDER_FLOW\n"
          "        class_name: OrderFlow\n"
          "        index: [{name: email, from: /email},\n"
          "                {name: amount, from: /amount, type: number}]\n"
          "%s",
          proc_tmp_dir, name, listen, cfg_max_body,
          http_extra ? http_extra : "", ORDERS_PLUGIN, cfg_plugins_extra);
  ck_assert(fclose(f) == 0);
}

/* Starts `duro run CONFIG` with `env_kv` ("NAME=value", may be NULL) added
 * to the environment. */
static void host_spawn(host *h, const char *env_kv) {
  const char *argv[] = {DURO_BIN, "run", h->config, NULL};
  char **envp = proc_env(NULL, env_kv);
  h->pid = proc_spawn(argv, envp, h->log, h->log);
  free(envp);
  proc_live = h->pid;
  h->port = 0;
}

/* Runs the host to its "ready" line and reads the port from it. */
static void host_start_env(host *h, const char *name, const char *listen,
                           const char *http_extra, const char *env_kv) {
  write_config(h, name, listen, http_extra);
  host_spawn(h, env_kv);
  h->port = proc_wait_port(h->pid, h->log, proc_now_ms() + WAIT_MS);
}

static void host_start(host *h, const char *name) {
  host_start_env(h, name, "127.0.0.1:0", NULL, NULL);
}

/* SIGTERM; the host must exit 0 with no sanitizer report. */
static void host_stop(host *h) {
  char *log = proc_stop(h->pid, h->log, proc_now_ms() + WAIT_MS);
  assert_contains(log, "stopping");
  free(log);
}

/* The host a case talks to through the helpers below. */
static host H;

/* The pid of h's engine process (the child of `duro run`), from the last
 * "engine started (pid N)" line of its log. */
static pid_t engine_pid(const host *h) {
  static const char mark[] = "engine started (pid ";
  char *log = proc_slurp(h->log);
  const char *last = NULL;
  for (const char *p = log; (p = strstr(p, mark)); p++)
    last = p;
  ck_assert_msg(last != NULL, "no \"%s\" in:\n%s", mark, proc_tail(log));
  pid_t pid = (pid_t)atoi(last + sizeof mark - 1);
  free(log);
  ck_assert(pid > 0);
  return pid;
}

/* VmRSS of `pid`, in KiB. */
static long rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6))
      kib = atol(line + 6);
  fclose(f);
  ck_assert_msg(kib > 0, "no VmRSS in %s", path);
  return kib;
}

/* ---- well-formed requests (libcurl, tests/http_client.h) -------------- */

/* METHOD path to the host of the case, with `body` (NULL: none) of `blen`
 * bytes and an Authorization header (NULL: none).  Returns the status. */
static long request_auth(http_resp *r, const char *method, const char *path,
                         const char *body, size_t blen, const char *auth) {
  http_req q = {.method = method,
                .path = path,
                .body = body,
                .body_len = blen,
                .auth = auth,
                .timeout_ms = 15000};
  CURLcode rc = http_send(H.port, &q, r);
  ck_assert_msg(rc == CURLE_OK, "%s %s: %s", method, path,
                curl_easy_strerror(rc));
  return r->status;
}

static long request(http_resp *r, const char *method, const char *path,
                    const char *body) {
  return request_auth(r, method, path, body, body ? strlen(body) : 0, NULL);
}

/* An error reply: `status`, Content-Type application/json and exactly
 * {"error":{"code": code, "message": non-empty}}. */
static void assert_error(const http_resp *r, long status, const char *code,
                         const char *what) {
  ck_assert_msg(r->status == status, "%s: status %ld, want %ld; body: %s", what,
                r->status, status, r->body ? r->body : "");
  char type[128];
  ck_assert_msg(
      http_resp_header(r, "content-type", type, sizeof type) &&
          !strncmp(type, "application/json", 16),
      "%s: content-type %s", what,
      http_resp_header(r, "content-type", type, sizeof type) ? type : "none");
  ck_assert_msg(json_is_object(r->json) && json_object_size(r->json) == 1 &&
                    json_is_object(jget(r->json, "error")) &&
                    json_object_size(jget(r->json, "error")) == 2,
                "%s: not {\"error\":{code,message}}: %s", what,
                r->body ? r->body : "");
  ck_assert_msg(!strcmp(jstr(r->json, "error.code"), code),
                "%s: code \"%s\", want \"%s\"; body: %s", what,
                jstr(r->json, "error.code"), code, r->body);
  ck_assert_msg(*jstr(r->json, "error.message") != '\0',
                "%s: empty message: %s", what, r->body);
}

#define expect_status(r, want, what)                                           \
  ck_assert_msg((r)->status == (want), "%s: status %ld, want %d; body: %s",    \
                (what), (r)->status, (want), (r)->body ? (r)->body : "")

/* POST a create and expect 201 {id, status: queued}. */
static void create(const char *body, const char *want_id) {
  http_resp r;
  request(&r, "POST", WF, body);
  expect_status(&r, 201, body);
  ck_assert_msg(json_object_size(r.json) == 2 &&
                    !strcmp(jstr(r.json, "status"), "queued"),
                "create %s: %s", body, r.body);
  if (want_id)
    ck_assert_str_eq(jstr(r.json, "id"), want_id);
  http_resp_free(&r);
}

static void create_order(const char *id, double amount, int grace) {
  char body[512];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"7\",\"email\":\"a@b.c\","
           "\"amount\":%g,\"graceSeconds\":%d}}",
           id, amount, grace);
  create(body, id);
}

/* GET the instance; the JSON is the caller's. */
static json_t *describe(const char *id) {
  char path[256];
  snprintf(path, sizeof path, WF "/%s", id);
  http_resp r;
  request(&r, "GET", path, NULL);
  expect_status(&r, 200, path);
  json_t *j = json_incref(r.json);
  http_resp_free(&r);
  return j;
}

/* Polls the instance until its status is one of `want` ("a|b|c"); fails
 * after SETTLE_MS.  Returns the last description (caller's). */
static json_t *wait_status(const char *id, const char *want) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    json_t *d = describe(id);
    const char *st = jstr(d, "status");
    char pat[128], one[40];
    snprintf(pat, sizeof pat, "|%s|", want);
    snprintf(one, sizeof one, "|%s|", st);
    if (*st && strstr(pat, one))
      return d;
    if (proc_now_ms() >= deadline) {
      char *text = jdump(d);
      ck_abort_msg("%s: status never became %s; last: %s", id, want, text);
    }
    json_decref(d);
    proc_sleep_ms(20);
  }
}

/* PATCH .../{id}/status with `body`; returns the reply (caller frees). */
static void patch_status(http_resp *r, const char *id, const char *body) {
  char path[256];
  snprintf(path, sizeof path, WF "/%s/status", id);
  request(r, "PATCH", path, body);
}

static void patch_ok(const char *id, const char *body, const char *want) {
  http_resp r;
  patch_status(&r, id, body);
  expect_status(&r, 200, body);
  char pat[128], one[40];
  snprintf(pat, sizeof pat, "|%s|", want);
  snprintf(one, sizeof one, "|%s|", jstr(r.json, "status"));
  ck_assert_msg(!strcmp(jstr(r.json, "id"), id) && strstr(pat, one),
                "PATCH %s %s: %s, want status %s", id, body, r.body, want);
  http_resp_free(&r);
}

static void patch_refused(const char *id, const char *body, const char *code) {
  http_resp r;
  patch_status(&r, id, body);
  char what[256];
  snprintf(what, sizeof what, "PATCH %s %s", id, body);
  assert_error(&r, 409, code, what);
  http_resp_free(&r);
}

/* Instance `id` as GET list gives it (its prefix the filter), asserting
 * it is there; the JSON is the caller's. */
static json_t *list_entry(const char *id) {
  char path[256];
  snprintf(path, sizeof path, WF "?prefix=%s", id);
  http_resp r;
  request(&r, "GET", path, NULL);
  expect_status(&r, 200, path);
  json_t *first = json_array_get(jget(r.json, "instances"), 0);
  ck_assert_msg(first && !strcmp(jstr(first, "id"), id), "list %s: %s", id,
                r.body);
  json_incref(first);
  http_resp_free(&r);
  return first;
}

/* The entry's step is `key` of `type` and `status`. */
static void assert_list_step(json_t *entry, const char *key, const char *type,
                             const char *status) {
  char *text = jdump(entry);
  ck_assert_msg(!strcmp(jstr(entry, "step.key"), key) &&
                    !strcmp(jstr(entry, "step.type"), type) &&
                    !strcmp(jstr(entry, "step.status"), status) &&
                    json_is_integer(jget(entry, "step.attempts")),
                "want step %s %s %s: %s", key, type, status, text);
  free(text);
}

/* How many instances GET list reports (all statuses). */
static size_t instance_count(void) {
  http_resp r;
  request(&r, "GET", WF "?limit=1000", NULL);
  expect_status(&r, 200, "list");
  size_t n = json_array_size(jget(r.json, "instances"));
  ck_assert_msg(json_is_array(jget(r.json, "instances")), "list: %s", r.body);
  http_resp_free(&r);
  return n;
}

static void assert_healthy(const char *after) {
  http_resp r;
  request(&r, "GET", "/healthz", NULL);
  ck_assert_msg(r.status == 200 && !strcmp(jstr(r.json, "status"), "ok"),
                "after %s: /healthz %ld %s", after, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

/* /healthz is ok within 10 s: the host lets go of what closed
 * connections held as its loop sees them close, later on a busy machine. */
static void wait_healthy(const char *after) {
  int64_t deadline = proc_now_ms() + 10000;
  for (;;) {
    http_resp r;
    request(&r, "GET", "/healthz", NULL);
    int ok = r.status == 200 && !strcmp(jstr(r.json, "status"), "ok");
    ck_assert_msg(ok || proc_now_ms() < deadline, "after %s: /healthz %ld %s",
                  after, r.status, r.body ? r.body : "");
    http_resp_free(&r);
    if (ok)
      return;
    proc_sleep_ms(50);
  }
}

/* /healthz is ok, asked with the Authorization header `auth`. */
static void assert_healthy_auth(const char *auth) {
  http_resp r;
  request_auth(&r, "GET", "/healthz", NULL, 0, auth);
  ck_assert_msg(r.status == 200 && !strcmp(jstr(r.json, "status"), "ok"),
                "/healthz %ld %s", r.status, r.body ? r.body : "");
  http_resp_free(&r);
}

/* ---- 1. every route ---------------------------------------------------------
 */

/* Whether buf holds a whole answer: its head and Content-Length bytes of
 * body (the host sends every answer with its length, so a connection
 * stays open after any status). */
static int answer_complete(const char *buf) {
  const char *end = strstr(buf, "\r\n\r\n");
  const char *cl = strcasestr(buf, "\r\nContent-Length:");
  if (!end || !cl || cl > end)
    return 0;
  return strlen(end + 4) >= strtoul(cl + 17, NULL, 10);
}

START_TEST(create_with_and_without_id) {
  host_start(&H, "h");
  create("{\"id\":\"c1\",\"params\":{\"orderId\":\"1\",\"email\":\"a@b.c\","
         "\"amount\":1}}",
         "c1");
  /* Ids up to 100 characters, with every allowed punctuation. */
  char body[256];
  snprintf(body, sizeof body, "{\"id\":\"%.*s\"}", 100,
           "A-z_0.9:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
  create(body, NULL);
  create("{\"id\":\"c2\",\"retention\":\"2d\"}", "c2");
  create("{\"id\":\"c3\",\"retention\":5000,\"params\":[1,2]}", "c3");

  /* Without an id: a random one, different each time; no body at all is
   * the same as {}. */
  char ids[3][128];
  const char *bodies[] = {"{\"params\":{\"orderId\":\"2\"}}", "{}", NULL};
  for (int i = 0; i < 3; i++) {
    http_resp r;
    request(&r, "POST", WF, bodies[i]);
    expect_status(&r, 201, bodies[i] ? bodies[i] : "(no body)");
    snprintf(ids[i], sizeof ids[i], "%s", jstr(r.json, "id"));
    ck_assert_msg(strlen(ids[i]) >= 8 && strlen(ids[i]) <= 100 &&
                      strspn(ids[i],
                             "abcdefghijklmnopqrstuvwxyz"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") ==
                          strlen(ids[i]),
                  "random id: %s", r.body);
    ck_assert_str_eq(jstr(r.json, "status"), "queued");
    http_resp_free(&r);
    json_t *d = describe(ids[i]);
    ck_assert_str_eq(jstr(d, "id"), ids[i]);
    json_decref(d);
  }
  ck_assert_str_ne(ids[0], ids[1]);
  ck_assert_str_ne(ids[1], ids[2]);

  /* A duplicate: 409 naming the instance, and the first one untouched. */
  http_resp r;
  request(&r, "POST", WF, "{\"id\":\"c1\",\"params\":{\"other\":true}}");
  assert_error(&r, 409, "instance.already_exists", "duplicate");
  assert_contains(jstr(r.json, "error.message"), "order-flow/c1");
  http_resp_free(&r);
  json_t *d = describe("c1");
  ck_assert_str_eq(jstr(d, "params.orderId"), "1");
  json_decref(d);
  ck_assert_int_eq(instance_count(), 7);
  /* The workflow at a glance: its 7 instances by status, whatever each
   * has reached by now. */
  request(&r, "GET", "/workflows/order-flow", NULL);
  expect_status(&r, 200, "GET /workflows/order-flow");
  ck_assert_str_eq(jstr(r.json, "name"), "order-flow");
  json_int_t total = 0;
  const char *k;
  json_t *v;
  json_object_foreach(jget(r.json, "instances"), k, v) total +=
      json_integer_value(v);
  ck_assert_int_eq(total, 7);
  ck_assert(json_is_integer(jget(r.json, "backlog")));
  ck_assert(json_is_integer(jget(r.json, "oldest_queued_age_ms")));
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

START_TEST(batch_create) {
  host_start(&H, "h");
  create("{\"id\":\"b-old\"}", "b-old");
  http_resp r;
  request(&r, "POST", WF "/batch",
          "{\"instances\":[{\"id\":\"b1\"},"
          "{\"id\":\"b2\",\"params\":{\"orderId\":\"2\"}},"
          "{\"id\":\"b1\"},"
          "{\"id\":\"b-old\"},"
          "{}]}");
  expect_status(&r, 200, "batch");
  ck_assert_msg(json_object_size(r.json) == 2, "batch: %s", r.body);
  json_t *created = jget(r.json, "created"), *errors = jget(r.json, "errors");
  ck_assert_msg(json_array_size(created) == 3 && json_array_size(errors) == 2,
                "batch: %s", r.body);
  ck_assert_str_eq(jstr(json_array_get(created, 0), "id"), "b1");
  ck_assert_str_eq(jstr(json_array_get(created, 1), "id"), "b2");
  const char *random_id = jstr(json_array_get(created, 2), "id");
  ck_assert_msg(*random_id, "batch: no random id: %s", r.body);

  struct {
    int index;
    const char *id, *code;
  } want[] = {{2, "b1", "instance.duplicate_in_batch"},
              {3, "b-old", "instance.already_exists"}};
  for (int i = 0; i < 2; i++) {
    json_t *e = json_array_get(errors, (size_t)i);
    ck_assert_msg(json_integer_value(jget(e, "index")) == want[i].index &&
                      !strcmp(jstr(e, "id"), want[i].id) &&
                      !strcmp(jstr(e, "code"), want[i].code) &&
                      *jstr(e, "message"),
                  "batch error %d: %s", i, r.body);
    /* The engine's internal "rc" does not leak; nothing else is there. */
    ck_assert_msg(jget(e, "rc") == NULL && json_object_size(e) == 4,
                  "batch error %d has extra fields: %s", i, r.body);
  }
  json_t *d = describe("b2");
  ck_assert_str_eq(jstr(d, "params.orderId"), "2");
  json_decref(d);
  d = describe(random_id);
  json_decref(d);
  http_resp_free(&r);
  ck_assert_int_eq(instance_count(), 4);

  /* Refused batches create nothing. */
  char big[1024];
  size_t o = (size_t)snprintf(big, sizeof big, "{\"instances\":[");
  for (int i = 0; i < 101; i++)
    o += (size_t)snprintf(big + o, sizeof big - o, "%s{}", i ? "," : "");
  snprintf(big + o, sizeof big - o, "]}");
  const struct {
    const char *body;
    const char *code;
  } bad[] = {
      {"{\"instances\":[]}", "request.invalid"},
      {big, "request.invalid"},
      {"{\"instances\":[{\"id\":\"ok1\"},{\"id\":5}]}", "request.invalid"},
      {"{\"instances\":[{\"id\":\"ok2\"},{\"nope\":1}]}", "request.invalid"},
      {"{\"instances\":[{\"id\":\"ok3\"}],\"extra\":1}", "request.invalid"},
      {"{\"instances\":{}}", "request.invalid"},
      {"[{\"id\":\"ok4\"}]", "request.invalid"},
      {"{\"instances\":[{\"id\":\"ok5\"}", "request.invalid_json"},
      {NULL, "request.invalid_json"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    request(&r, "POST", WF "/batch", bad[i].body);
    assert_error(&r, 400, bad[i].code, bad[i].body ? bad[i].body : "(none)");
    http_resp_free(&r);
  }
  /* An invalid id inside a batch is reported per instance. */
  request(&r, "POST", WF "/batch",
          "{\"instances\":[{\"id\":\"a b\"},{\"id\":\"ok6\"}]}");
  expect_status(&r, 200, "batch with an invalid id");
  ck_assert_msg(
      json_array_size(jget(r.json, "created")) == 1 &&
          json_array_size(jget(r.json, "errors")) == 1 &&
          !strcmp(jstr(json_array_get(jget(r.json, "errors"), 0), "code"),
                  "instance.invalid_id"),
      "batch with an invalid id: %s", r.body);
  http_resp_free(&r);
  ck_assert_int_eq(instance_count(), 5);
  host_stop(&H);
}
END_TEST

/* The ids of a list reply, appended to `seen` ("|id|id|..."). */
static size_t collect_ids(json_t *list, char *seen, size_t len) {
  size_t i, n = 0;
  json_t *it;
  json_array_foreach(jget(list, "instances"), i, it) {
    char key[128];
    snprintf(key, sizeof key, "|%s|", jstr(it, "id"));
    ck_assert_msg(strstr(seen, key) == NULL, "id %s listed twice", key);
    size_t o = strlen(seen);
    snprintf(seen + o, len - o, "%s", key + 1); /* seen starts with "|" */
    ck_assert_msg(*jstr(it, "status") &&
                      json_is_integer(jget(it, "created_ms")),
                  "list entry without status or created_ms");
    n++;
  }
  return n;
}

/* Pages through GET list with `query` ("status=errored&") by `limit`;
 * returns how many; `seen` gets the ids, each once, in order: "|a|b|". */
static size_t page_all(const char *query, int limit, char *seen, size_t len,
                       int *pages) {
  snprintf(seen, len, "|");
  char cursor[64] = "";
  size_t total = 0;
  *pages = 0;
  for (int guard = 0; guard < 50; guard++) {
    char path[256];
    snprintf(path, sizeof path, WF "?%slimit=%d%s%s", query, limit,
             cursor[0] ? "&cursor=" : "", cursor);
    http_resp r;
    request(&r, "GET", path, NULL);
    expect_status(&r, 200, path);
    size_t n = collect_ids(r.json, seen, len);
    ck_assert_msg(n <= (size_t)limit, "%s: %zu > limit", path, n);
    total += n;
    (*pages)++;
    json_t *c = jget(r.json, "cursor");
    if (!json_is_string(c)) {
      ck_assert_msg(c == NULL || json_is_null(c), "%s: cursor %s", path,
                    r.body);
      http_resp_free(&r);
      return total;
    }
    ck_assert_msg(n == (size_t)limit, "%s: a cursor after a short page: %s",
                  path, r.body);
    snprintf(cursor, sizeof cursor, "%s", json_string_value(c));
    http_resp_free(&r);
  }
  ck_abort_msg("paging did not end after 50 pages");
  return 0;
}

START_TEST(list_filter_and_paging) {
  host_start(&H, "h");
  /* Five that error at once (amount 0), two that wait for the review. */
  char id[32];
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "e%d", i);
    create_order(id, 0, 1);
  }
  create_order("w0", 5, 1);
  create_order("w1", 5, 1);
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "e%d", i);
    json_decref(wait_status(id, "errored"));
  }
  json_decref(wait_status("w0", "waiting"));
  json_decref(wait_status("w1", "waiting"));

  char seen[1024];
  int pages;
  /* The five errored ones by 2: 2 + 2 + 1, newest first, each once. */
  ck_assert_int_eq(page_all("status=errored&", 2, seen, sizeof seen, &pages),
                   5);
  ck_assert_int_eq(pages, 3);
  ck_assert_str_eq(seen, "|e4|e3|e2|e1|e0|");
  ck_assert_int_eq(page_all("status=waiting&", 2, seen, sizeof seen, &pages),
                   2);
  ck_assert_str_eq(seen, "|w1|w0|");
  ck_assert_int_eq(page_all("status=complete&", 2, seen, sizeof seen, &pages),
                   0);
  ck_assert_int_eq(page_all("", 3, seen, sizeof seen, &pages), 7);
  ck_assert_str_eq(seen, "|w1|w0|e4|e3|e2|e1|e0|");
  ck_assert_int_eq(page_all("status=&", 1000, seen, sizeof seen, &pages), 7);
  ck_assert_int_eq(pages, 1);

  /* By id prefix, creation and end time, with the other filters. */
  ck_assert_int_eq(page_all("prefix=e&", 2, seen, sizeof seen, &pages), 5);
  ck_assert_str_eq(seen, "|e4|e3|e2|e1|e0|");
  ck_assert_int_eq(page_all("prefix=w&", 2, seen, sizeof seen, &pages), 2);
  ck_assert_str_eq(seen, "|w1|w0|");
  ck_assert_int_eq(
      page_all("prefix=e&status=waiting&", 2, seen, sizeof seen, &pages), 0);
  ck_assert_int_eq(page_all("prefix=e3&", 2, seen, sizeof seen, &pages), 1);
  ck_assert_int_eq(page_all("created_after=2000-01-01T00:00:00Z&", 100, seen,
                            sizeof seen, &pages),
                   7);
  ck_assert_int_eq(
      page_all("created_after=4102444800000&", 100, seen, sizeof seen, &pages),
      0); /* 2100 */
  ck_assert_int_eq(page_all("created_before=2000-01-01T00:00:00%2B01:00&", 100,
                            seen, sizeof seen, &pages),
                   0);
  ck_assert_int_eq(page_all("ended_after=1&", 100, seen, sizeof seen, &pages),
                   5);
  ck_assert_str_eq(seen, "|e4|e3|e2|e1|e0|");
  ck_assert_int_eq(page_all("ended_before=4102444800000&prefix=w&", 100, seen,
                            sizeof seen, &pages),
                   0); /* a live one has not ended */

  /* The statuses listed are those of the filter; an entry says when it
   * started and ended and what it waits for. */
  http_resp r;
  request(&r, "GET", WF "?status=errored&limit=1", NULL);
  expect_status(&r, 200, "list errored");
  json_t *first = json_array_get(jget(r.json, "instances"), 0);
  ck_assert_str_eq(jstr(first, "status"), "errored");
  ck_assert(json_is_integer(jget(first, "started_ms")));
  ck_assert(json_is_integer(jget(first, "ended_ms")));
  http_resp_free(&r);
  request(&r, "GET", WF "?prefix=w1", NULL);
  expect_status(&r, 200, "list w1");
  first = json_array_get(jget(r.json, "instances"), 0);
  ck_assert(json_is_null(jget(first, "ended_ms")));
  ck_assert_msg(json_is_string(jget(first, "wait_type")), "%s", r.body);
  http_resp_free(&r);

  const char *bad[] = {"?limit=0",
                       "?limit=1001",
                       "?limit=abc",
                       "?limit=",
                       "?limit=-1",
                       "?status=bogus",
                       "?cursor=abc",
                       "?cursor=-3",
                       "?cursor=1x",
                       "?created_after=yesterday",
                       "?ended_before=2026-13-01T00:00:00Z",
                       "?created_before=-5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[128];
    snprintf(path, sizeof path, WF "%s", bad[i]);
    request(&r, "GET", path, NULL);
    assert_error(&r, 400, "request.invalid", path);
    http_resp_free(&r);
  }
  host_stop(&H);
}
END_TEST

/* GET ?where=: the instances of a search attribute's value, with the
 * other filters and the cursor; the describe shows them; a bad term is
 * 400 naming it. */
START_TEST(list_where_attributes) {
  host_start(&H, "h");
  create_order("a1", 0, 1); /* errors at once */
  create_order("a2", 5, 1);
  create_order("a3", 500, 1);
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"a4\",\"params\":{\"orderId\":\"8\","
           "\"email\":\"x@y.z\",\"amount\":5,\"graceSeconds\":1}}");
  create(body, "a4");
  json_decref(wait_status("a1", "errored"));
  json_decref(wait_status("a2", "waiting"));
  json_decref(wait_status("a3", "waiting"));
  json_decref(wait_status("a4", "waiting"));

  char seen[1024];
  int pages;
  ck_assert_int_eq(page_all("where=email:a@b.c&", 1, seen, sizeof seen, &pages),
                   3);
  ck_assert_str_eq(seen, "|a3|a2|a1|");
  ck_assert_int_eq(
      page_all("where=email:x%40y.z&", 10, seen, sizeof seen, &pages), 1);
  ck_assert_str_eq(seen, "|a4|");
  ck_assert_int_eq(page_all("where=amount%3E4&where=amount%3C=5&", 10, seen,
                            sizeof seen, &pages),
                   2);
  ck_assert_str_eq(seen, "|a4|a2|");
  ck_assert_int_eq(page_all("where=email:a@b.c&where=amount:5&", 10, seen,
                            sizeof seen, &pages),
                   1);
  ck_assert_str_eq(seen, "|a2|");
  ck_assert_int_eq(page_all("where=email:a@b.c&status=errored&", 10, seen,
                            sizeof seen, &pages),
                   1);
  ck_assert_str_eq(seen, "|a1|");
  ck_assert_int_eq(
      page_all("where=email:nobody&", 10, seen, sizeof seen, &pages), 0);

  json_t *d = describe("a3");
  char *attrs =
      json_dumps(jget(d, "attributes"), JSON_COMPACT | JSON_SORT_KEYS);
  ck_assert_str_eq(attrs, "{\"amount\":500,\"email\":\"a@b.c\"}");
  free(attrs);
  json_decref(d);

  static const struct {
    const char *query, *says;
  } bad[] = {{"?where=colour:red", "colour\\\" is not an attribute"},
             {"?where=amount%3Elots", "lots\\\" is not a number"},
             {"?where=email%3Ea", "email\\\" is a string attribute"},
             {"?where=email", "email\\\" is not name:value"},
             {"?where=email:a&where=nope:1", "nope\\\" is not an attribute"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[128];
    snprintf(path, sizeof path, WF "%s", bad[i].query);
    http_resp r;
    request(&r, "GET", path, NULL);
    assert_error(&r, 400, "request.invalid", path);
    assert_contains(r.body, bad[i].says);
    http_resp_free(&r);
  }
  host_stop(&H);
}
END_TEST

/* The search attribute a Tagged instance (plugins/fixtures/tagged.c)
 * sets from run(), in a worker process: found by a list as soon as the
 * step after it is reached, still there after the host is killed (-9)
 * and started again, one value (the replay set it again over itself),
 * replaced by the later call; an undeclared name and a value of another
 * type refused. */
#define TAGGED "/workflows/tagged/instances"

static json_t *tagged_until(const char *status) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    http_resp r;
    request(&r, "GET", TAGGED "/t1", NULL);
    expect_status(&r, 200, "describe t1");
    if (!strcmp(jstr(r.json, "status"), status)) {
      json_t *d = json_incref(r.json);
      http_resp_free(&r);
      return d;
    }
    ck_assert_msg(proc_now_ms() < deadline, "t1 never became %s: %s", status,
                  r.body);
    http_resp_free(&r);
    proc_sleep_ms(20);
  }
}

static void tagged_listed(const char *where, const char *want) {
  char path[128];
  snprintf(path, sizeof path, TAGGED "?where=%s", where);
  http_resp r;
  request(&r, "GET", path, NULL);
  expect_status(&r, 200, path);
  char seen[64] = "|";
  collect_ids(r.json, seen, sizeof seen);
  ck_assert_msg(!strcmp(seen, want), "%s: %s, not %s", path, seen, want);
  http_resp_free(&r);
}

static void tagged_attrs(json_t *d, const char *want) {
  char *attrs = json_dumps(jget(d, "attributes"), JSON_COMPACT);
  ck_assert_str_eq(attrs, want);
  free(attrs);
}

START_TEST(attribute_set_from_run_survives_kill_9) {
  cfg_plugins_extra = "  - name: tagged\n"
                      "    path: " FIXTURES_DIR "/libfixture_tagged.so\n"
                      "    workflows:\n"
                      "      - name: tagged\n"
                      "        binding: TAGGED\n"
                      "        class_name: Tagged\n"
                      "        index: [{name: stage}]\n";
  host_start(&H, "t");
  http_resp r;
  request(&r, "POST", TAGGED, "{\"id\":\"t1\"}");
  expect_status(&r, 201, "create t1");
  http_resp_free(&r);
  json_decref(tagged_until("waiting"));
  tagged_listed("stage:packed", "|t1|");

  kill(H.pid, SIGKILL);
  int st;
  ck_assert_int_eq(waitpid(H.pid, &st, 0), H.pid);
  host_spawn(&H, NULL);
  H.port = proc_wait_port(H.pid, H.log, proc_now_ms() + WAIT_MS);
  tagged_listed("stage:packed", "|t1|");
  json_t *d = tagged_until("waiting");
  tagged_attrs(d, "{\"stage\":\"packed\"}");
  json_decref(d);

  request(&r, "POST", TAGGED "/t1/events/ship", "{}");
  expect_status(&r, 202, "ship t1");
  http_resp_free(&r);
  d = tagged_until("complete");
  tagged_attrs(d, "{\"stage\":\"shipped\"}");
  char *out = json_dumps(jget(d, "output"), JSON_COMPACT);
  ck_assert_str_eq(out, "{\"unknown\":\"attribute.unknown\","
                        "\"bad\":\"invalid_argument\"}");
  free(out);
  json_decref(d);
  tagged_listed("stage:shipped", "|t1|");
  tagged_listed("stage:packed", "|");
  host_stop(&H);
  cfg_plugins_extra = "";
}
END_TEST

START_TEST(describe_instance) {
  host_start(&H, "h");
  create_order("d1", 5, 1);
  json_t *d = wait_status("d1", "waiting");
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "id"), "d1") &&
                    !strcmp(jstr(d, "workflow"), "order-flow"),
                "%s", text);
  json_t *want = json_loads("{\"orderId\":\"7\",\"email\":\"a@b.c\","
                            "\"amount\":5,\"graceSeconds\":1}",
                            0, NULL);
  ck_assert_msg(json_equal(jget(d, "params"), want), "params: %s", text);
  json_decref(want);
  ck_assert_msg(json_is_null(jget(d, "output")) &&
                    json_is_null(jget(d, "error")) &&
                    json_is_integer(jget(d, "created_ms")) &&
                    json_is_integer(jget(d, "started_ms")) &&
                    json_is_null(jget(d, "ended_ms")),
                "%s", text);
  ck_assert_msg(json_array_size(jget(d, "steps")) == 3, "steps: %s", text);
  ck_assert_msg(json_is_array(jget(d, "events")) &&
                    json_array_size(jget(d, "events")) == 0,
                "events: %s", text);

  static const struct {
    const char *key, *type, *status;
    size_t attempts;
  } steps[] = {{"reserve stock#1", "do", "complete", 1},
               {"charge card#1", "do", "complete", 1},
               {"manual review#1", "waitForEvent", "waiting", 0}};
  for (size_t i = 0; i < 3; i++) {
    json_t *s = json_array_get(jget(d, "steps"), i);
    ck_assert_msg(!strcmp(jstr(s, "key"), steps[i].key) &&
                      !strcmp(jstr(s, "type"), steps[i].type) &&
                      !strcmp(jstr(s, "status"), steps[i].status) &&
                      json_array_size(jget(s, "attempts")) == steps[i].attempts,
                  "step %zu: %s", i, text);
    if (steps[i].attempts) {
      json_t *a = json_array_get(jget(s, "attempts"), 0);
      ck_assert_msg(json_integer_value(jget(a, "number")) == 1 &&
                        json_is_null(jget(a, "error")) &&
                        json_is_integer(jget(a, "started_ms")) &&
                        json_is_integer(jget(a, "ended_ms")) &&
                        json_is_string(jget(a, "build")),
                    "attempt of %s: %s", steps[i].key, text);
    }
  }
  ck_assert_msg(
      json_real_value(jget(step_of(d, "charge card#1"), "result.amount")) ==
              5.0 &&
          !strcmp(jstr(step_of(d, "charge card#1"), "result.idempotencyKey"),
                  "d1/charge card#1"),
      "charge result: %s", text);
  free(text);
  json_decref(d);
  host_stop(&H);
}
END_TEST

/* GET .../export: the instance's journal whole, as a document another
 * journal can be rebuilt from; the instance is left as it was. */
START_TEST(export_instance) {
  host_start(&H, "h");
  create_order("x1", 5, 1);
  json_t *before = wait_status("x1", "waiting");
  http_resp r;
  request(&r, "GET", WF "/x1/export", NULL);
  expect_status(&r, 200, "export");
  json_t *d = r.json;
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "format"), "duro-journal-1") &&
                    !strcmp(jstr(d, "workflow"), "order-flow") &&
                    !strcmp(jstr(d, "id"), "x1") &&
                    !strcmp(jstr(d, "status"), "waiting") &&
                    json_is_integer(jget(d, "exported_ms")) &&
                    json_is_integer(jget(d, "created_ms")) &&
                    json_is_string(jget(d, "build")) &&
                    json_is_null(jget(d, "parent")) &&
                    !strcmp(jstr(d, "parent_close"), "terminate"),
                "%s", text);
  /* user data is the journal's text, byte for byte, in a string */
  json_t *params = json_loads(jstr(d, "params"), 0, NULL);
  json_t *want = json_loads("{\"orderId\":\"7\",\"email\":\"a@b.c\","
                            "\"amount\":5,\"graceSeconds\":1}",
                            0, NULL);
  ck_assert_msg(params && json_equal(params, want), "params: %s", text);
  json_decref(params);
  json_decref(want);
  static const struct {
    const char *key, *kind, *status;
  } steps[] = {{"reserve stock#1", "do", "complete"},
               {"charge card#1", "do", "complete"},
               {"manual review#1", "waitForEvent", "waiting"}};
  ck_assert_msg(json_array_size(jget(d, "steps")) == 3, "steps: %s", text);
  for (size_t i = 0; i < 3; i++) {
    json_t *s = json_array_get(jget(d, "steps"), i);
    ck_assert_msg(!strcmp(jstr(s, "key"), steps[i].key) &&
                      !strcmp(jstr(s, "kind"), steps[i].kind) &&
                      !strcmp(jstr(s, "status"), steps[i].status) &&
                      json_is_integer(jget(s, "seq")) &&
                      json_is_array(jget(s, "failed_attempts")),
                  "step %zu: %s", i, text);
  }
  json_t *charge =
      json_loads(jstr(json_array_get(jget(d, "steps"), 1), "result"), 0, NULL);
  ck_assert_msg(charge &&
                    !strcmp(jstr(charge, "idempotencyKey"), "x1/charge card#1"),
                "charge's result: %s", text);
  json_decref(charge);
  ck_assert_msg(json_array_size(jget(d, "events")) == 0, "events: %s", text);
  free(text);
  http_resp_free(&r);
  json_t *after = describe("x1");
  ck_assert_msg(json_equal(before, after), "export changed the instance");
  json_decref(before);
  json_decref(after);

  request(&r, "GET", WF "/nope/export", NULL);
  assert_error(&r, 404, "instance.not_found", "export of an unknown instance");
  assert_contains(jstr(r.json, "error.message"), "order-flow/nope");
  http_resp_free(&r);
  request(&r, "POST", WF "/x1/export", "{}");
  expect_status(&r, 405, "POST .../export");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

START_TEST(status_transitions) {
  host_start(&H, "h");
  create_order("t1", 5, 1);
  json_decref(wait_status("t1", "waiting"));

  /* waiting: resume and restart are illegal. */
  patch_refused("t1", "{\"status\":\"resume\"}", "instance.cannot_resume");
  patch_refused("t1", "{\"status\":\"restart\"}", "instance.cannot_restart");

  /* pause (twice: idempotent), then resume runs it back to its wait. */
  patch_ok("t1", "{\"status\":\"pause\"}", "paused");
  patch_ok("t1", "{\"status\":\"pause\"}", "paused");
  json_decref(wait_status("t1", "paused"));
  patch_ok("t1", "{\"status\":\"resume\"}", "queued|running|waiting");
  json_decref(wait_status("t1", "waiting"));

  /* terminate; then nothing but restart. */
  patch_ok("t1", "{\"status\":\"terminate\"}", "terminated");
  json_t *before = wait_status("t1", "terminated");
  patch_refused("t1", "{\"status\":\"terminate\"}",
                "instance.cannot_terminate");
  patch_refused("t1", "{\"status\":\"pause\"}", "instance.cannot_pause");
  patch_refused("t1", "{\"status\":\"resume\"}", "instance.cannot_resume");
  patch_refused("t1",
                "{\"status\":\"restart\",\"from\":{\"name\":\"no such "
                "step\"}}",
                "instance.cannot_restart");
  patch_refused("t1",
                "{\"status\":\"restart\",\"from\":{\"name\":\"charge "
                "card\",\"count\":2}}",
                "instance.cannot_restart");

  /* Restart from "charge card": "reserve stock" is kept as journaled. */
  patch_ok("t1", "{\"status\":\"restart\",\"from\":{\"name\":\"charge card\"}}",
           "queued|running|waiting");
  json_t *after = wait_status("t1", "waiting");
  char *b = jdump(before), *a = jdump(after);
  ck_assert_msg(json_equal(step_of(before, "reserve stock#1"),
                           step_of(after, "reserve stock#1")),
                "reserve stock changed:\n%s\n%s", b, a);
  ck_assert_msg(step_of(after, "charge card#1") &&
                    !strcmp(jstr(step_of(after, "charge card#1"), "status"),
                            "complete") &&
                    step_of(after, "manual review#1"),
                "after restart: %s", a);
  free(b);
  free(a);
  json_decref(before);
  json_decref(after);

  /* A restart of everything from an ended instance. */
  patch_ok("t1", "{\"status\":\"terminate\"}", "terminated");
  patch_ok("t1", "{\"status\":\"restart\"}", "queued|running|waiting");
  json_decref(wait_status("t1", "waiting"));

  /* Malformed PATCH bodies. */
  static const char *bad[] = {
      "{\"status\":\"fly\"}",
      "{}",
      "{\"status\":5}",
      "[\"pause\"]",
      "{\"status\":\"restart\",\"from\":\"charge card\"}",
      "{\"status\":\"restart\",\"from\":{\"count\":1}}",
      "{\"status\":\"restart\",\"from\":{\"name\":\"charge "
      "card\",\"count\":0}}",
      "{\"status\":\"restart\",\"from\":{\"name\":\"charge card\",\"count\":"
      "\"1\"}}",
      "{\"status\":\"pause\",\"rollback\":true}",
      "{\"status\":\"resume\",\"rollback\":false}",
      "{\"status\":\"terminate\",\"rollback\":1}",
      "{\"status\":\"restart\",\"rollback\":\"yes\"}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    http_resp r;
    patch_status(&r, "t1", bad[i]);
    assert_error(&r, 400, "request.invalid", bad[i]);
    http_resp_free(&r);
  }
  http_resp r;
  patch_status(&r, "t1", NULL);
  assert_error(&r, 400, "request.invalid_json", "PATCH without a body");
  http_resp_free(&r);
  patch_status(&r, "t1", "{\"status\":");
  assert_error(&r, 400, "request.invalid_json", "PATCH truncated");
  http_resp_free(&r);
  json_decref(wait_status("t1", "waiting"));
  host_stop(&H);
}
END_TEST

START_TEST(events_move_instances_on) {
  host_start(&H, "h");
  create_order("ev1", 5, 3600);
  /* The description says which event type the wait is blocked on. */
  json_t *w = wait_status("ev1", "waiting");
  ck_assert_msg(json_is_string(jget(w, "wait_type")) &&
                    !strcmp(jstr(w, "wait_type"), "approval"),
                "wait_type of a review wait: %s", jstr(w, "wait_type"));
  json_decref(w);
  /* and the list: its step the review, waiting (till its timeout) */
  json_t *l = list_entry("ev1");
  assert_list_step(l, "manual review#1", "waitForEvent", "waiting");
  ck_assert_str_eq(jstr(l, "step.name"), "manual review");
  ck_assert_str_eq(jstr(l, "wait_type"), "approval");
  ck_assert(json_is_integer(jget(l, "step.wake_ms")));
  json_decref(l);
  http_resp r;
  request(&r, "POST", WF "/ev1/events/approval", "{\"approved\":true}");
  expect_status(&r, 202, "event");
  ck_assert_msg(!strcmp(jstr(r.json, "id"), "ev1") &&
                    !strcmp(jstr(r.json, "type"), "approval"),
                "event reply: %s", r.body);
  http_resp_free(&r);
  /* It moves on: the review is journaled with the payload, the instance
   * sleeps its grace period. */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    json_t *d = describe("ev1");
    json_t *s = step_of(d, "manual review#1");
    json_t *g = step_of(d, "grace period#1");
    if (s && !strcmp(jstr(s, "status"), "complete") && g) {
      char *text = jdump(d);
      ck_assert_msg(json_is_true(jget(s, "result.payload.approved")) &&
                        !strcmp(jstr(s, "result.type"), "approval") &&
                        !strcmp(jstr(g, "type"), "sleep"),
                    "%s", text);
      /* the description lists the event and the step that took it */
      json_t *evs = jget(d, "events"), *e0 = json_array_get(evs, 0);
      ck_assert_msg(json_array_size(evs) == 1 &&
                        !strcmp(jstr(e0, "type"), "approval") &&
                        json_is_true(jget(e0, "payload.approved")) &&
                        json_is_integer(jget(e0, "sent_ms")) &&
                        !strcmp(jstr(e0, "consumed_by"), "manual review#1"),
                    "events: %s", text);
      free(text);
      json_decref(d);
      break;
    }
    if (proc_now_ms() >= deadline) {
      char *text = jdump(d);
      ck_abort_msg("the event did not move ev1 on: %s", text);
    }
    json_decref(d);
    proc_sleep_ms(20);
  }
  /* Asleep in its grace period: no event is awaited any more. */
  w = wait_status("ev1", "waiting");
  ck_assert_msg(json_is_null(jget(w, "wait_type")), "wait_type of a sleep: %s",
                jstr(w, "wait_type"));
  json_decref(w);
  /* listed asleep until its end */
  l = list_entry("ev1");
  assert_list_step(l, "grace period#1", "sleep", "waiting");
  ck_assert_msg(json_integer_value(jget(l, "step.wake_ms")) >
                    json_integer_value(jget(l, "created_ms")) + 3000 * 1000,
                "the grace period's end: %s", jstr(l, "id"));
  json_decref(l);
  /* a charge whose first attempt failed: listed waiting for its retry */
  create("{\"id\":\"fl1\",\"params\":{\"orderId\":\"8\",\"email\":"
         "\"a@b.c\",\"amount\":5,\"flakyCard\":true}}",
         "fl1");
  json_decref(wait_status("fl1", "waiting"));
  l = list_entry("fl1");
  assert_list_step(l, "charge card#1", "do", "waiting");
  ck_assert_int_eq(json_integer_value(jget(l, "step.attempts")), 1);
  ck_assert(json_is_integer(jget(l, "step.wake_ms")));
  json_decref(l);

  /* An event sent before the instance waits is kept for it; an event of
   * another type does not wake it; an empty body is a null payload. */
  create_order("ev2", 5, 0);
  request(&r, "POST", WF "/ev2/events/unrelated", NULL);
  expect_status(&r, 202, "unrelated event");
  http_resp_free(&r);
  request(&r, "POST", WF "/ev2/events/approval", "{\"approved\":true}");
  expect_status(&r, 202, "early event");
  http_resp_free(&r);
  json_t *d = wait_status("ev2", "complete|errored");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  /* listed with its last step, a notice sent in one attempt */
  l = list_entry("ev2");
  ck_assert_str_eq(jstr(l, "step.name"), "notify");
  assert_list_step(l, jstr(l, "step.key"), "do", "complete");
  ck_assert_int_eq(json_integer_value(jget(l, "step.attempts")), 1);
  ck_assert(json_is_null(jget(l, "step.wake_ms")));
  json_decref(l);
  /* both listed in arrival order: the other type still pending */
  char *text = jdump(d);
  json_t *evs = jget(d, "events");
  json_t *e0 = json_array_get(evs, 0), *e1 = json_array_get(evs, 1);
  ck_assert_msg(json_array_size(evs) == 2 &&
                    !strcmp(jstr(e0, "type"), "unrelated") &&
                    json_is_null(jget(e0, "payload")) &&
                    json_is_null(jget(e0, "consumed_by")) &&
                    !strcmp(jstr(e1, "type"), "approval") &&
                    !strcmp(jstr(e1, "consumed_by"), "manual review#1") &&
                    json_integer_value(jget(e0, "sent_ms")) <=
                        json_integer_value(jget(e1, "sent_ms")),
                "events of ev2: %s", text);
  free(text);
  json_decref(d);

  /* Errors. */
  request(&r, "POST", WF "/ghost/events/approval", "{}");
  assert_error(&r, 404, "instance.not_found", "event to an unknown id");
  http_resp_free(&r);
  request(&r, "POST", WF "/ev1/events/a%20b", "{}");
  assert_error(&r, 400, "request.invalid", "event type with a space");
  http_resp_free(&r);
  request(&r, "POST", WF "/ev1/events/approval", "{\"approved\":");
  assert_error(&r, 400, "request.invalid_json", "truncated payload");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

START_TEST(healthz_and_metrics) {
  host_start(&H, "h");
  http_resp r;
  request(&r, "GET", "/healthz", NULL);
  expect_status(&r, 200, "healthz");
  ck_assert_str_eq(jstr(r.json, "status"), "ok");
  http_resp_free(&r);

  int64_t t_start = (int64_t)time(NULL) * 1000 - 1000;
  create_order("m1", 5, 1);
  create_order("m2", 0, 1);
  json_decref(wait_status("m1", "waiting"));
  json_decref(wait_status("m2", "errored"));
  /* The history: 60 buckets of 10 s, the steps in those that began
   * after this case did (the host's first). */
  request(&r, "GET", "/metrics/history", NULL);
  expect_status(&r, 200, "metrics history");
  json_int_t start = json_integer_value(jget(r.json, "start_ms"));
  json_int_t now = json_integer_value(jget(r.json, "now_ms"));
  ck_assert_msg(json_integer_value(jget(r.json, "bucket_ms")) == 10000 &&
                    start <= now - 590000 && start > now - 600000 &&
                    json_integer_value(jget(r.json, "since_ms")) >= t_start,
                "history: %s", r.body);
  static const struct {
    const char *name;
    json_int_t n;
  } counted[] = {/* m1's two; m2's stock reserved, then released by its
                  * rollback once its charge failed for good */
                 {"steps_completed", 4},   {"instances_created", 2},
                 {"activations", 2},       {"attempts_failed", 1},
                 {"retries_scheduled", 0}, {"events_sent", 0}};
  for (size_t k = 0; k < sizeof counted / sizeof *counted; k++) {
    json_t *arr = jget(jget(r.json, "series"), counted[k].name);
    json_int_t sum = 0;
    size_t i;
    json_t *v;
    ck_assert_msg(json_array_size(arr) == 60, "%s: %s", counted[k].name,
                  r.body);
    json_array_foreach(arr, i, v) {
      sum += json_integer_value(v);
      if (json_integer_value(v))
        ck_assert_msg(start + (json_int_t)(i + 1) * 10000 > t_start,
                      "%s counted before the case began: %s", counted[k].name,
                      r.body);
    }
    ck_assert_msg(sum == counted[k].n, "%s: %lld, want %lld: %s",
                  counted[k].name, (long long)sum, (long long)counted[k].n,
                  r.body);
  }
  http_resp_free(&r);
  request(&r, "POST", "/metrics/history", NULL);
  assert_error(&r, 405, "request.method_not_allowed", "POST history");
  http_resp_free(&r);
  /* the hosts: this one alone on its SQLite file, with m1 (waiting) the
   * one instance that has not ended */
  request(&r, "GET", "/hosts", NULL);
  expect_status(&r, 200, "hosts");
  json_t *hosts = jget(r.json, "hosts");
  ck_assert_msg(json_is_false(jget(r.json, "shared")) &&
                    json_array_size(hosts) == 1,
                "hosts: %s", r.body);
  json_t *me = json_array_get(hosts, 0);
  ck_assert_msg(
      json_is_true(jget(me, "me")) && json_is_true(jget(me, "alive")) &&
          json_integer_value(jget(me, "instances")) == 1 &&
          json_integer_value(jget(me, "pid")) > 0 &&
          json_integer_value(jget(me, "started_ms")) >= t_start - 60000,
      "hosts: %s", r.body);
  /* with its counts as they are now, which are the totals */
  ck_assert_msg(json_integer_value(jget(me, "counts.instances_created")) >= 1 &&
                    json_equal(jget(me, "counts.steps_completed"),
                               jget(r.json, "totals.steps_completed")) &&
                    json_integer_value(jget(r.json, "totals.instances")) == 1,
                "hosts: %s", r.body);
  http_resp_free(&r);
  request(&r, "POST", "/hosts", NULL);
  assert_error(&r, 405, "request.method_not_allowed", "POST hosts");
  http_resp_free(&r);
  request(&r, "GET", "/metrics", NULL);
  expect_status(&r, 200, "metrics");
  char type[128];
  ck_assert_msg(http_resp_header(&r, "content-type", type, sizeof type) &&
                    !strncmp(type, "text/plain", 10),
                "metrics content-type");
  static const char *want[] = {
      "duro_instances{workflow=\"order-flow\",status=\"waiting\"} 1\n",
      "duro_instances{workflow=\"order-flow\",status=\"errored\"} 1\n",
      "# TYPE duro_steps_completed_total counter\n",
      /* 2 for m1, 2 for m2 (its reservation and the rollback that
       * released it) */
      "\nduro_steps_completed_total 4\n",
      "\nduro_instances_created_total 2\n",
      "# TYPE duro_step_attempt_seconds histogram\n",
      "duro_step_attempt_seconds_bucket{le=\"+Inf\"} 5\n",
      "\nduro_step_attempt_seconds_count 5\n",
      "\nduro_step_attempt_seconds_sum ",
      "# TYPE duro_journal_commit_seconds histogram\n",
      "duro_journal_commit_seconds_bucket{le=\"+Inf\"} ",
      "\nduro_journal_commit_seconds_count ",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    assert_contains(r.body, want[i]);
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- waiting for the end: ?wait= and the light status ------------------- */

#define N_WAITERS 200
#define N_PARKED 9000 /* GETs ?wait= parked at once: past their budget */

static int raw_connect(void);
static int reply_status(const char *reply);
static void raise_nofile(rlim_t want);
static char *raw_reply(int fd, int64_t until);
static long long metric_value(const char *name);

/* GET path; the reply's status into *status, its JSON (caller's) back,
 * and how long it took into *ms. */
static json_t *timed_get(const char *path, long *status, int64_t *ms) {
  http_resp r;
  int64_t t0 = proc_now_ms();
  *status = request(&r, "GET", path, NULL);
  *ms = proc_now_ms() - t0;
  json_t *j = json_incref(r.json);
  http_resp_free(&r);
  return j;
}

/* The light status: exactly its eight keys, no steps. */
static void assert_summary(json_t *j, const char *id, const char *status) {
  char *text = jdump(j);
  ck_assert_msg(
      json_object_size(j) == 9 && !jget(j, "steps") &&
          !strcmp(jstr(j, "id"), id) &&
          !strcmp(jstr(j, "workflow"), "order-flow") &&
          !strcmp(jstr(j, "status"), status) && json_object_get(j, "output") &&
          json_object_get(j, "error") &&
          json_is_integer(jget(j, "created_ms")) &&
          json_object_get(j, "started_ms") && json_object_get(j, "ended_ms") &&
          json_object_get(j, "deadline_ms"),
      "want the light status of %s, %s: %s", id, status, text);
  free(text);
}

static void send_approval(const char *id) {
  char path[256];
  snprintf(path, sizeof path, WF "/%s/events/approval", id);
  http_resp r;
  request(&r, "POST", path, "{\"approved\":true}");
  expect_status(&r, 202, path);
  http_resp_free(&r);
}

START_TEST(wait_for_the_end) {
  host_start_env(&H, "h", "127.0.0.1:0", "  max_wait: 2s\n", NULL);
  long st;
  int64_t ms;

  /* Answered when the instance ends (its grace period, a second, after
   * the approval), with its output. */
  create_order("w1", 5, 1);
  json_decref(wait_status("w1", "waiting"));
  send_approval("w1");
  json_t *j = timed_get(WF "/w1?wait=10s", &st, &ms);
  ck_assert_msg(st == 200 && ms < 1900, "status %ld after %lld ms", st,
                (long long)ms);
  assert_summary(j, "w1", "complete");
  ck_assert_msg(!strcmp(jstr(j, "output.orderId"), "7") &&
                    json_is_integer(jget(j, "ended_ms")),
                "%s", jdump(j));
  json_decref(j);

  /* Ended already: at once. */
  j = timed_get(WF "/w1?wait=10s", &st, &ms);
  ck_assert_msg(st == 200 && ms < 500, "status %ld after %lld ms", st,
                (long long)ms);
  assert_summary(j, "w1", "complete");
  json_decref(j);

  /* The wait runs out: the status as it is, after the wait, not before. */
  create_order("w2", 5, 3600);
  json_decref(wait_status("w2", "waiting"));
  j = timed_get(WF "/w2?wait=500ms", &st, &ms);
  ck_assert_msg(st == 200 && ms >= 490 && ms < 700, "status %ld after %lld ms",
                st, (long long)ms);
  assert_summary(j, "w2", "waiting");
  json_decref(j);
  j = timed_get(WF "/w2?wait=300", &st, &ms); /* bare milliseconds */
  ck_assert_msg(st == 200 && ms >= 290 && ms < 500, "status %ld after %lld ms",
                st, (long long)ms);
  json_decref(j);
  /* Clamped to http.max_wait (2 s here), not refused. */
  j = timed_get(WF "/w2?wait=1h", &st, &ms);
  ck_assert_msg(st == 200 && ms >= 1990 && ms < 2300,
                "status %ld after %lld ms", st, (long long)ms);
  assert_summary(j, "w2", "waiting");
  json_decref(j);
  /* wait=0 is the light status now. */
  j = timed_get(WF "/w2?wait=0", &st, &ms);
  ck_assert_msg(st == 200 && ms < 300, "status %ld after %lld ms", st,
                (long long)ms);
  assert_summary(j, "w2", "waiting");
  json_decref(j);

  /* A terminate ends a wait too. */
  http_resp r;
  patch_status(&r, "w2", "{\"status\":\"terminate\"}");
  http_resp_free(&r);
  j = timed_get(WF "/w2?wait=10s", &st, &ms);
  ck_assert_msg(st == 200 && ms < 1000, "status %ld after %lld ms", st,
                (long long)ms);
  assert_summary(j, "w2", "terminated");
  json_decref(j);

  /* Refusals. */
  request(&r, "GET", WF "/ghost?wait=1s", NULL);
  assert_error(&r, 404, "instance.not_found", "wait on an unknown id");
  http_resp_free(&r);
  request(&r, "GET", "/workflows/nope/instances/w1?wait=1s", NULL);
  assert_error(&r, 404, "workflow.not_found", "wait on an unknown workflow");
  http_resp_free(&r);
  request(&r, "GET", WF "/w1?wait=soon", NULL);
  assert_error(&r, 400, "request.invalid", "a bad wait");
  http_resp_free(&r);
  request(&r, "GET", WF "/w1?wait=-5s", NULL);
  assert_error(&r, 400, "request.invalid", "a negative wait");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- create and wait: POST ?wait= -------------------------------------- */

/* POSTs a create ?wait= on a raw connection of its own (its reply is read
 * later). */
static int raw_create_wait(const char *id, int grace, const char *wait) {
  char body[256], req[640];
  int blen = snprintf(body, sizeof body,
                      "{\"id\":\"%s\",\"params\":{\"orderId\":\"7\","
                      "\"email\":\"a@b.c\",\"amount\":5,\"graceSeconds\":%d}}",
                      id, grace);
  int n = snprintf(req, sizeof req,
                   "POST " WF "?wait=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Content-Type: application/json\r\nContent-Length: %d\r\n"
                   "Connection: close\r\n\r\n%s",
                   wait, blen, body);
  int fd = raw_connect();
  ck_assert(send(fd, req, (size_t)n, MSG_NOSIGNAL) == n);
  return fd;
}

/* Waits until a create sent raw (raw_create_wait) has been taken: until
 * then a GET of its id answers 404. */
static void wait_created(const char *id) {
  char path[256];
  snprintf(path, sizeof path, WF "/%s", id);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    http_resp r;
    request(&r, "GET", path, NULL);
    long st = r.status;
    http_resp_free(&r);
    if (st != 404)
      return;
    ck_assert_msg(proc_now_ms() < deadline, "%s was never created", id);
    proc_sleep_ms(20);
  }
}

/* The JSON body of a raw reply (caller's), or NULL. */
static json_t *reply_json(const char *reply) {
  const char *body = strstr(reply, "\r\n\r\n");
  return body ? json_loads(body + 4, JSON_DECODE_ANY, NULL) : NULL;
}

/* The number of instances of order-flow in /metrics, of any status. */
static long long instance_total(void);

/* One request creates the instance and answers when it ends, or when the
 * wait runs out, with its light status (201: it was created); what cannot
 * wait is refused before anything is created. */
START_TEST(create_and_wait) {
  host_start_env(&H, "h", "127.0.0.1:0", "  max_wait: 30s\n", NULL);
  http_resp r;
  const char *posts = "duro_http_requests_total{method=\"POST\"}";
  long long posts0 = metric_value(posts);
  int64_t t0 = proc_now_ms();
  /* Ends at once (amount 0 errors): its error in the create's answer, a
   * single request. */
  request(&r, "POST", WF "?wait=5s",
          "{\"id\":\"cw0\",\"params\":{\"orderId\":\"7\",\"email\":\"a@b.c\","
          "\"amount\":0}}");
  expect_status(&r, 201, "create ?wait= of an instance that errors");
  assert_summary(r.json, "cw0", "errored");
  ck_assert_str_eq(jstr(r.json, "error.message"),
                   "amount must be positive, got 0.00");
  ck_assert_msg(proc_now_ms() - t0 < 4000, "answered after the wait ran out");
  http_resp_free(&r);
  ck_assert_msg(posts0 >= 0 && metric_value(posts) == posts0 + 1,
                "POSTs %lld, then %lld", posts0, metric_value(posts));

  /* Completes within the wait (approved while the create waits): its
   * output in the create's answer. */
  int fd = raw_create_wait("cw1", 0, "5s");
  wait_created("cw1");
  json_decref(wait_status("cw1", "waiting"));
  send_approval("cw1");
  char *reply = raw_reply(fd, proc_now_ms() + RAW_READ_MS);
  json_t *j = reply_json(reply);
  ck_assert_msg(reply_status(reply) == 201, "%s", reply);
  assert_summary(j, "cw1", "complete");
  ck_assert_msg(!strcmp(jstr(j, "output.orderId"), "7") &&
                    json_is_true(jget(j, "output.approved")),
                "%s", reply);
  json_decref(j);
  free(reply);

  /* The wait runs out: 201 with the status as it is, after the wait. */
  long st;
  int64_t ms;
  t0 = proc_now_ms();
  request(&r, "POST", WF "?wait=1s",
          "{\"id\":\"cw2\",\"params\":{\"orderId\":\"7\",\"email\":\"a@b.c\","
          "\"amount\":5}}");
  ms = proc_now_ms() - t0;
  expect_status(&r, 201, "create ?wait= that runs out");
  assert_summary(r.json, "cw2", "waiting");
  ck_assert_msg(ms >= 990 && ms < 2500, "answered after %lld ms",
                (long long)ms);
  http_resp_free(&r);

  /* A duplicate id: 409 at once, no wait. */
  t0 = proc_now_ms();
  request(&r, "POST", WF "?wait=10s", "{\"id\":\"cw2\"}");
  assert_error(&r, 409, "instance.already_exists", "create ?wait= twice");
  ck_assert_msg(proc_now_ms() - t0 < 2000, "the duplicate waited");
  http_resp_free(&r);

  /* A bad wait, and a wait on a batch: 400, and nothing created. */
  long long before = instance_total();
  request(&r, "POST", WF "?wait=soon", "{\"id\":\"cw3\"}");
  assert_error(&r, 400, "request.invalid", "create with a bad wait");
  http_resp_free(&r);
  request(&r, "POST", WF "/batch?wait=5s",
          "{\"instances\":[{\"id\":\"cw4\"}]}");
  assert_error(&r, 400, "request.invalid", "a batch with a wait");
  http_resp_free(&r);
  j = timed_get(WF "/cw3", &st, &ms);
  ck_assert_int_eq(st, 404);
  json_decref(j);
  j = timed_get(WF "/cw4", &st, &ms);
  ck_assert_int_eq(st, 404);
  json_decref(j);
  ck_assert_int_eq(instance_total(), before);

  /* The client goes during the wait: the wait ends at once, and the
   * instance, created before it began, runs on to its end. */
  fd = raw_create_wait("cw5", 0, "30s");
  wait_created("cw5");
  json_decref(wait_status("cw5", "waiting"));
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (metric_value("duro_http_waiting") != 1 && proc_now_ms() < deadline)
    proc_sleep_ms(20);
  ck_assert_int_eq(metric_value("duro_http_waiting"), 1);
  close(fd);
  deadline = proc_now_ms() + 5000;
  while (metric_value("duro_http_waiting") != 0 && proc_now_ms() < deadline)
    proc_sleep_ms(20);
  ck_assert_int_eq(metric_value("duro_http_waiting"), 0);
  send_approval("cw5");
  json_decref(wait_status("cw5", "complete"));

  /* The host dies during a wait: the instance was on disk before it. */
  fd = raw_create_wait("cw6", 0, "30s");
  deadline = proc_now_ms() + SETTLE_MS;
  while (metric_value("duro_http_waiting") != 1 && proc_now_ms() < deadline)
    proc_sleep_ms(20);
  ck_assert_int_eq(metric_value("duro_http_waiting"), 1);
  kill(H.pid, SIGKILL);
  int died;
  ck_assert_int_eq(waitpid(H.pid, &died, 0), H.pid);
  ck_assert(WIFSIGNALED(died));
  close(fd);
  host_spawn(&H, NULL);
  H.port = proc_wait_port(H.pid, H.log, proc_now_ms() + WAIT_MS);
  json_decref(wait_status("cw6", "waiting"));
  host_stop(&H);
}
END_TEST

START_TEST(light_status_route) {
  host_start(&H, "h");
  create_order("l1", 0, 1); /* errors at once */
  json_decref(wait_status("l1", "errored"));
  long st;
  int64_t ms;
  json_t *j = timed_get(WF "/l1/status", &st, &ms);
  ck_assert_int_eq(st, 200);
  assert_summary(j, "l1", "errored");
  ck_assert_msg(!strcmp(jstr(j, "error.name"), "NonRetryableError") &&
                    json_is_null(jget(j, "output")),
                "%s", jdump(j));
  json_decref(j);
  http_resp r;
  request(&r, "GET", WF "/ghost/status", NULL);
  assert_error(&r, 404, "instance.not_found", "status of an unknown id");
  http_resp_free(&r);
  request(&r, "DELETE", WF "/l1/status", NULL);
  assert_error(&r, 405, "request.method_not_allowed", "DELETE status");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* Sends a GET ?wait= on a raw connection of its own; its reply is read
 * later. */
static int raw_wait(const char *id, const char *wait) {
  int fd = raw_connect();
  char req[256];
  int n = snprintf(req, sizeof req,
                   "GET " WF "/%s?wait=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Connection: close\r\n\r\n",
                   id, wait);
  ck_assert(send(fd, req, (size_t)n, MSG_NOSIGNAL) == n);
  return fd;
}

/* Reads a raw reply until the server closes (or `until`). */
static char *raw_reply(int fd, int64_t until) {
  char *out = calloc(1, 1);
  size_t olen = 0;
  while (proc_now_ms() < until) {
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      break;
    out = realloc(out, olen + (size_t)n + 1);
    ck_assert(out != NULL);
    memcpy(out + olen, buf, (size_t)n);
    olen += (size_t)n;
    out[olen] = '\0';
  }
  close(fd);
  return out;
}

START_TEST(many_waiters) {
  raise_nofile(4 * N_WAITERS);
  host_start(&H, "h");
  char id[32];
  for (int i = 0; i < N_WAITERS; i++) {
    snprintf(id, sizeof id, "m%d", i);
    create_order(id, 5, 0);
  }
  for (int i = 0; i < N_WAITERS; i++) {
    snprintf(id, sizeof id, "m%d", i);
    json_decref(wait_status(id, "waiting"));
  }
  int fds[N_WAITERS];
  for (int i = 0; i < N_WAITERS; i++) {
    snprintf(id, sizeof id, "m%d", i);
    fds[i] = raw_wait(id, "30s");
  }
  proc_sleep_ms(200); /* every GET is waiting now */
  for (int i = 0; i < N_WAITERS; i++) {
    snprintf(id, sizeof id, "m%d", i);
    send_approval(id);
  }
  int64_t until = proc_now_ms() + SETTLE_MS;
  for (int i = 0; i < N_WAITERS; i++) {
    struct timeval tv = {SETTLE_MS / 1000, 0};
    setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char *reply = raw_reply(fds[i], until);
    snprintf(id, sizeof id, "\"id\":\"m%d\"", i);
    ck_assert_msg(reply_status(reply) == 200 && strstr(reply, id) &&
                      strstr(reply, "\"status\":\"complete\""),
                  "waiter %d: %s", i, reply);
    free(reply);
  }
  /* A waiter whose client went away costs nothing once its instance
   * ends; one still waiting at shutdown is answered at once. */
  create_order("gone", 5, 3600);
  create_order("held", 5, 3600);
  json_decref(wait_status("gone", "waiting"));
  json_decref(wait_status("held", "waiting"));
  close(raw_wait("gone", "30s"));
  int held = raw_wait("held", "30s");
  proc_sleep_ms(200);
  int64_t t0 = proc_now_ms();
  host_stop(&H);
  ck_assert_msg(proc_now_ms() - t0 < 5000, "the stop waited for the wait");
  char *reply = raw_reply(held, proc_now_ms() + RAW_READ_MS);
  ck_assert_msg(reply_status(reply) == 200 &&
                    strstr(reply, "\"status\":\"waiting\""),
                "held: %s", reply);
  free(reply);
}
END_TEST

/* The value of the gauge `name` in /metrics, read with `auth` (NULL:
 * none): -1 when absent, -2 when the request got no answer (while
 * thousands of waits are still arriving their heads may fill the budget
 * of requests being received, and a read past it is refused; a client
 * retries). */
static long long metric_read(const char *name, const char *auth) {
  http_req q = {
      .method = "GET", .path = "/metrics", .auth = auth, .timeout_ms = 15000};
  http_resp r = {0};
  if (http_send(H.port, &q, &r) != CURLE_OK) {
    http_resp_free(&r);
    return -2;
  }
  expect_status(&r, 200, "/metrics");
  char mark[128];
  snprintf(mark, sizeof mark, "\n%s ", name);
  const char *at = r.body ? strstr(r.body, mark) : NULL;
  long long v = at ? atoll(at + strlen(mark)) : -1;
  http_resp_free(&r);
  return v;
}

/* The same, the request answered or the case failed. */
static long long metric_value(const char *name) {
  long long v = metric_read(name, NULL);
  ck_assert_msg(v != -2, "GET /metrics: no answer");
  return v;
}

static long long instance_total(void) {
  http_resp r;
  request(&r, "GET", "/metrics", NULL);
  expect_status(&r, 200, "/metrics");
  const char *mark = "\nduro_instances{workflow=\"order-flow\",";
  long long n = 0;
  for (const char *at = r.body; at && (at = strstr(at, mark)); at++)
    n += atoll(strchr(at, '}') + 2);
  http_resp_free(&r);
  return n;
}

/* Thousands of GETs ?wait= park on one instance: their connections'
 * buffers stay out of the budget of requests being received, so other
 * clients are served meanwhile; the waits past their own budget are
 * answered 503 with Retry-After (not reset); and clients that go away end
 * their waits at once, long before http.max_wait. */
START_TEST(parked_waits_hold_no_budget) {
  raise_nofile(2 * N_PARKED + 512);
  host_start_env(&H, "h", "127.0.0.1:0", "  max_wait: 10m\n", NULL);
  create_order("park", 5, 3600);
  json_decref(wait_status("park", "waiting"));
  int *fds = calloc(N_PARKED, sizeof *fds);
  ck_assert(fds != NULL);
  for (int i = 0; i < N_PARKED; i++)
    fds[i] = raw_wait("park", "10m");
  /* Every GET is either parked or answered. */
  int64_t deadline = proc_now_ms() + 60000;
  int answered = 0, busy = 0, cut = 0;
  long long waiting = 0;
  char example[512] = "";
  for (;;) {
    for (int i = 0; i < N_PARKED; i++) {
      struct pollfd pf = {.fd = fds[i], .events = POLLIN};
      if (fds[i] < 0 || poll(&pf, 1, 0) != 1)
        continue;
      char *reply = raw_reply(fds[i], proc_now_ms() + RAW_READ_MS);
      fds[i] = -1;
      answered++;
      if (reply_status(reply) == 503 && strcasestr(reply, "\r\nRetry-After:") &&
          strstr(reply, "\"server.busy\""))
        busy++;
      else if (!reply || !*reply)
        cut++; /* refused at a read past the receiving budget: see below */
      else
        snprintf(example, sizeof example, "%s", reply);
      free(reply);
    }
    /* A client other than the waiters is served once they are parked
     * (the strict reads below); while their heads still arrive, a read
     * past the budget may be refused, and is tried again. */
    long long now_waiting = metric_read("duro_http_waiting", NULL);
    if (now_waiting != -2)
      waiting = now_waiting;
    if ((now_waiting != -2 && waiting + answered >= N_PARKED) ||
        proc_now_ms() > deadline)
      break;
    proc_sleep_ms(200);
  }
  ck_assert_msg(waiting + answered == N_PARKED,
                "%lld waiting and %d answered of %d", waiting, answered,
                N_PARKED);
  /* None is cut unanswered: a head read past the budget of requests being
   * received is answered 503 by the gate (H2O would close the connection). */
  ck_assert_msg(cut == 0, "%d of %d waiters were cut, not answered", cut,
                N_PARKED);
  ck_assert_msg(answered == busy, "a waiter was answered: %s", example);
  ck_assert_msg(waiting >= N_PARKED / 2 && busy > 0,
                "%lld waiting, %d answered 503 (budget %lld bytes, %lld held)",
                waiting, busy, metric_value("duro_http_budget_bytes"),
                metric_value("duro_http_waiting_bytes"));
  ck_assert_int_eq(metric_value("duro_http_request_bytes") <
                       metric_value("duro_http_budget_bytes"),
                   1);
  assert_healthy("thousands of parked waits");
  create_order("during", 5, 0);
  /* A create ?wait= is refused while a retry cannot create it twice:
   * before anything is created. */
  http_resp r;
  request(&r, "POST", WF "?wait=10m", "{\"id\":\"over\"}");
  char retry[16];
  ck_assert_msg(r.status == 503 &&
                    http_resp_header(&r, "Retry-After", retry, sizeof retry),
                "create ?wait= past the waits' budget: %ld %s", r.status,
                r.body);
  http_resp_free(&r);
  long st;
  int64_t ms;
  json_decref(timed_get(WF "/over", &st, &ms));
  ck_assert_int_eq(st, 404);
  /* Their clients go: their waits end now, not in 10 minutes. */
  for (int i = 0; i < N_PARKED; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  deadline = proc_now_ms() + 20000;
  while ((waiting = metric_value("duro_http_waiting")) > 0 &&
         proc_now_ms() < deadline)
    proc_sleep_ms(100);
  ck_assert_msg(waiting == 0, "%lld waits left after their clients went",
                waiting);
  ck_assert_int_eq(metric_value("duro_http_waiting_bytes"), 0);
  /* The budget is free again: a new wait parks. */
  int again = raw_wait("park", "10m");
  deadline = proc_now_ms() + 10000;
  while (metric_value("duro_http_waiting") != 1 && proc_now_ms() < deadline)
    proc_sleep_ms(50);
  ck_assert_int_eq(metric_value("duro_http_waiting"), 1);
  host_stop(&H);
  char *reply = raw_reply(again, proc_now_ms() + RAW_READ_MS);
  ck_assert_msg(reply_status(reply) == 200, "the last waiter: %s", reply);
  free(reply);
  free(fds);
}
END_TEST

/* ---- 2. a run held by its id ------------------------------------------------
 */

START_TEST(order_completes_by_id) {
  host_start(&H, "h");
  create("{\"id\":\"order-7\",\"params\":{\"orderId\":\"7\",\"email\":"
         "\"a@b.c\",\"amount\":5,\"graceSeconds\":1}}",
         "order-7");
  json_decref(wait_status("order-7", "waiting"));
  http_resp r;
  request(&r, "POST", WF "/order-7/events/approval", "{\"approved\":true}");
  expect_status(&r, 202, "approval");
  http_resp_free(&r);
  json_t *d = wait_status("order-7", "complete|errored|terminated");
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "status"), "complete"), "%s", text);
  ck_assert_msg(!strcmp(jstr(d, "output.orderId"), "7") &&
                    json_is_true(jget(d, "output.approved")) &&
                    json_is_object(jget(d, "output.charge")) &&
                    json_real_value(jget(d, "output.charge.amount")) == 5.0 &&
                    !strcmp(jstr(d, "output.charge.currency"), "EUR") &&
                    !strncmp(jstr(d, "output.charge.chargeId"), "ch_", 3) &&
                    !strcmp(jstr(d, "output.charge.idempotencyKey"),
                            "order-7/charge card#1"),
                "output: %s", text);
  ck_assert_msg(json_is_null(jget(d, "error")) &&
                    json_is_integer(jget(d, "ended_ms")) &&
                    json_array_size(jget(d, "steps")) == 7,
                "%s", text);
  free(text);
  json_decref(d);
  host_stop(&H);
}
END_TEST

START_TEST(order_errors_with_plugin_message) {
  host_start(&H, "h");
  create("{\"id\":\"order-0\",\"params\":{\"orderId\":\"7\",\"email\":"
         "\"a@b.c\",\"amount\":0,\"graceSeconds\":1}}",
         "order-0");
  json_t *d = wait_status("order-0", "complete|errored|terminated");
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "status"), "errored") &&
                    json_is_null(jget(d, "output")) &&
                    !strcmp(jstr(d, "error.message"),
                            "amount must be positive, got 0.00") &&
                    !strcmp(jstr(d, "error.name"), "NonRetryableError"),
                "%s", text);
  json_t *s = step_of(d, "charge card#1");
  ck_assert_msg(s && !strcmp(jstr(s, "status"), "errored") &&
                    json_array_size(jget(s, "attempts")) == 1,
                "%s", text);
  free(text);
  json_decref(d);
  /* An ended instance cannot be paused. */
  patch_refused("order-0", "{\"status\":\"pause\"}", "instance.cannot_pause");
  host_stop(&H);
}
END_TEST

/* A create's own timeout: its deadline in describe; past it (1 ms here:
 * long past before the order's grace sleep ends) the instance ends
 * errored instance.timed_out; a bad one is refused, nothing created. */
START_TEST(create_with_timeout) {
  host_start(&H, "h");
  create("{\"id\":\"t-1\",\"timeout\":\"2d\"}", "t-1");
  json_t *d = describe("t-1");
  ck_assert_int_eq(json_integer_value(jget(d, "deadline_ms")) -
                       json_integer_value(jget(d, "created_ms")),
                   2 * 86400000LL);
  json_decref(d);
  create("{\"id\":\"t-2\",\"timeout\":1,\"params\":{\"orderId\":\"7\","
         "\"email\":\"a@b.c\",\"amount\":5,\"graceSeconds\":600}}",
         "t-2");
  d = wait_status("t-2", "complete|errored|terminated");
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "status"), "errored") &&
                    !strcmp(jstr(d, "error.name"), "instance.timed_out"),
                "%s", text);
  free(text);
  json_decref(d);
  const char *bad[] = {"{\"id\":\"t-3\",\"timeout\":\"soon\"}",
                       "{\"id\":\"t-3\",\"timeout\":0}",
                       "{\"id\":\"t-3\",\"timeout\":-5}",
                       "{\"id\":\"t-3\",\"timeout\":\"36501d\"}",
                       "{\"id\":\"t-3\",\"timeout\":true}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    http_resp r;
    request(&r, "POST", WF, bad[i]);
    assert_error(&r, 400, "request.invalid", bad[i]);
    assert_contains(jstr(r.json, "error.message"), "\"timeout\"");
    http_resp_free(&r);
  }
  ck_assert_int_eq(instance_count(), 2);
  host_stop(&H);
}
END_TEST

START_TEST(order_rejected_by_review) {
  host_start(&H, "h");
  create_order("order-r", 5, 1);
  json_decref(wait_status("order-r", "waiting"));
  http_resp r;
  request(&r, "POST", WF "/order-r/events/approval",
          "{\"approved\":false,\"reason\":\"fraud \\\"x\\\"\"}");
  expect_status(&r, 202, "rejection");
  http_resp_free(&r);
  json_t *d = wait_status("order-r", "complete|errored|terminated");
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "status"), "complete") &&
                    json_is_false(jget(d, "output.approved")) &&
                    !strcmp(jstr(d, "output.reason"), "rejected: fraud \"x\""),
                "%s", text);
  /* the charge refunded, then the stock released: the steps' rollbacks,
   * newest first, each handed its step's output */
  json_t *charge = NULL, *refund = NULL, *release = NULL;
  size_t i;
  json_t *s;
  json_array_foreach(jget(d, "steps"), i, s) {
    const char *key = json_string_value(json_object_get(s, "key"));
    if (!strcmp(key, "charge card#1"))
      charge = s;
    else if (!strcmp(key, "charge card#1/rollback"))
      refund = s;
    else if (!strcmp(key, "reserve stock#1/rollback"))
      release = s;
  }
  ck_assert_msg(charge && refund && release, "%s", text);
  ck_assert_str_eq(json_string_value(json_object_get(refund, "type")),
                   "rollback");
  ck_assert_str_eq(json_string_value(json_object_get(refund, "status")),
                   "complete");
  ck_assert_str_eq(json_string_value(json_object_get(
                       json_object_get(refund, "result"), "chargeId")),
                   json_string_value(json_object_get(
                       json_object_get(charge, "result"), "chargeId")));
  ck_assert_int_le(json_integer_value(json_object_get(refund, "ended_ms")),
                   json_integer_value(json_object_get(release, "started_ms")));
  free(text);
  json_decref(d);
  host_stop(&H);
}
END_TEST

/* PATCH {"status":"terminate","rollback":true} of an order waiting for its
 * review: answered at once, the charge refunded and the stock released
 * (newest first), then terminated. */
START_TEST(order_terminated_with_rollback) {
  host_start(&H, "h");
  create_order("order-t", 5, 1);
  json_decref(wait_status("order-t", "waiting"));
  http_resp r;
  patch_status(&r, "order-t", "{\"status\":\"terminate\",\"rollback\":true}");
  expect_status(&r, 200, "terminate with rollback");
  http_resp_free(&r);
  json_t *d = wait_status("order-t", "terminated");
  char *text = jdump(d);
  json_t *refund = NULL, *release = NULL;
  size_t i;
  json_t *s;
  json_array_foreach(jget(d, "steps"), i, s) {
    const char *key = json_string_value(json_object_get(s, "key"));
    if (!strcmp(key, "charge card#1/rollback"))
      refund = s;
    else if (!strcmp(key, "reserve stock#1/rollback"))
      release = s;
  }
  ck_assert_msg(refund && release && json_is_null(jget(d, "error")), "%s",
                text);
  ck_assert_str_eq(json_string_value(json_object_get(refund, "status")),
                   "complete");
  ck_assert_str_eq(json_string_value(json_object_get(release, "status")),
                   "complete");
  ck_assert_int_le(json_integer_value(json_object_get(refund, "ended_ms")),
                   json_integer_value(json_object_get(release, "started_ms")));
  free(text);
  json_decref(d);
  host_stop(&H);
}
END_TEST

/* The lines of the host's log that contain `needle`. */
static int log_lines(const char *needle) {
  char *log = proc_slurp(H.log);
  int n = 0;
  for (const char *p = log; (p = strstr(p, needle)); p++)
    n++;
  free(log);
  return n;
}

/* PATCH {"status":"restart","from":{"name":"charge card"},"rollback":true}
 * of a terminated order: the charge refunded (the stock, reserved before
 * the restart point, kept), then the re-run from "charge card"; refused
 * while it waits.  From the top: the stock released too. */
START_TEST(order_restarted_with_rollback) {
  host_start(&H, "h");
  create_order("order-rr", 5, 3600);
  json_decref(wait_status("order-rr", "waiting"));
  static const char from_charge[] =
      "{\"status\":\"restart\",\"from\":{\"name\":\"charge card\"},"
      "\"rollback\":true}";
  patch_refused("order-rr", from_charge, "instance.cannot_restart");
  patch_ok("order-rr", "{\"status\":\"terminate\"}", "terminated");
  ck_assert_int_eq(log_lines("refunding"), 0);
  patch_ok("order-rr", from_charge, "queued|running|waiting");
  json_t *d = wait_status("order-rr", "waiting");
  char *text = jdump(d);
  ck_assert_msg(json_integer_value(jget(d, "restarts")) == 1 &&
                    step_of(d, "reserve stock#1") &&
                    !step_of(d, "charge card#1/rollback"),
                "%s", text);
  free(text);
  json_decref(d);
  ck_assert_int_eq(log_lines("refunding"), 1);
  ck_assert_int_eq(log_lines("releasing"), 0);
  /* every step's, from the top */
  patch_ok("order-rr", "{\"status\":\"terminate\"}", "terminated");
  patch_ok("order-rr", "{\"status\":\"restart\",\"rollback\":true}",
           "queued|running|waiting");
  d = wait_status("order-rr", "waiting");
  ck_assert_int_eq(json_integer_value(jget(d, "restarts")), 2);
  json_decref(d);
  ck_assert_int_eq(log_lines("refunding"), 2);
  ck_assert_int_eq(log_lines("releasing"), 1);
  host_stop(&H);
}
END_TEST

/* ---- 3. errors
 * ---------------------------------------------------------------- */

typedef struct err_case {
  const char *method, *path, *body;
  long status;
  const char *code;
  const char *allow; /* the Allow header of a 405 */
} err_case;

#define ID101                                                                  \
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
  "aaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* clang-format off */
static const err_case err_cases[] = {
    /* 400: the body */
    {"POST", WF, "{\"id\":\"x\"", 400, "request.invalid_json", NULL},
    {"POST", WF, "{\"id\":\"x\",}", 400, "request.invalid_json", NULL},
    {"POST", WF, "{\"id\":\"x\",\"id\":\"y\"}", 400, "request.invalid_json", NULL},
    {"POST", WF, "{\"id\":\"\xff\"}", 400, "request.invalid_json", NULL},
    {"POST", WF, "{\"id\":5}", 400, "request.invalid", NULL},
    {"POST", WF, "{\"id\":null}", 400, "request.invalid", NULL},
    {"POST", WF, "{\"retention\":\"soon\"}", 400, "request.invalid", NULL},
    {"POST", WF, "{\"retention\":-5}", 400, "request.invalid", NULL},
    {"POST", WF, "{\"retention\":true}", 400, "request.invalid", NULL},
    /* params parsed before the bad field (the params must not leak) */
    {"POST", WF, "{\"params\":{\"a\":1},\"retention\":\"soon\"}", 400, "request.invalid", NULL},
    {"POST", WF, "{\"params\":{\"a\":1},\"id\":7}", 400, "request.invalid", NULL},
    {"POST", WF, "{\"params\":{\"a\":1},\"idd\":\"x\"}", 400, "request.invalid", NULL},
    {"POST", WF, "{\"idd\":\"x\"}", 400, "request.invalid", NULL},
    {"POST", WF, "[1,2]", 400, "request.invalid", NULL},
    {"POST", WF, "\"c9\"", 400, "request.invalid", NULL},
    {"POST", WF, "{\"id\":\"a b\"}", 400, "instance.invalid_id", NULL},
    {"POST", WF, "{\"id\":\"" ID101 "\"}", 400, "instance.invalid_id", NULL},
    {"POST", WF, "{\"id\":\"../x\"}", 400, "instance.invalid_id", NULL},
    {"POST", WF, "{\"id\":\"x/y\"}", 400, "instance.invalid_id", NULL},
    {"POST", WF, "{\"id\":\"\"}", 400, "instance.invalid_id", NULL},
    {"POST", WF, "{\"id\":\"caf\xc3\xa9\"}", 400, "instance.invalid_id", NULL},
    {"GET", WF "/a%20b", NULL, 400, "instance.invalid_id", NULL},
    {"GET", WF "/" ID101, NULL, 400, "instance.invalid_id", NULL},
    /* 404 */
    {"POST", "/workflows/nope/instances", "{}", 404, "workflow.not_found", NULL},
    {"GET", "/workflows/nope/instances", NULL, 404, "workflow.not_found", NULL},
    {"GET", "/workflows/nope/instances/x1", NULL, 404, "workflow.not_found", NULL},
    {"POST", "/workflows/nope/instances/batch", "{\"instances\":[{}]}", 404, "workflow.not_found", NULL},
    {"GET", WF "/ghost", NULL, 404, "instance.not_found", NULL},
    {"PATCH", WF "/ghost/status", "{\"status\":\"pause\"}", 404, "instance.not_found", NULL},
    {"PATCH", WF "/ghost/status", "{\"status\":\"restart\"}", 404, "instance.not_found", NULL},
    {"POST", WF "/ghost/events/approval", "{}", 404, "instance.not_found", NULL},
    {"GET", "/ui/nope.js", NULL, 404, "route.not_found", NULL},
    {"GET", "/nope", NULL, 404, "route.not_found", NULL},
    {"GET", "/workflows", NULL, 404, "route.not_found", NULL},
    {"GET", "/workflows/order-flow/x", NULL, 404, "route.not_found", NULL},
    {"GET", "/workflows/order-flow/things", NULL, 404, "route.not_found", NULL},
    {"GET", WF "/x1/nope", NULL, 404, "route.not_found", NULL},
    {"GET", WF "/x1/events", NULL, 404, "route.not_found", NULL},
    {"GET", WF "/x1/a/b/c/d/e/f/g", NULL, 404, "route.not_found", NULL},
    /* 405 */
    {"PUT", WF "/x1", "{}", 405, "request.method_not_allowed", "GET, DELETE"},
    {"DELETE", WF "/x1/status", NULL, 405, "request.method_not_allowed",
     "GET, PATCH"},
    {"POST", WF "/x1/status", "{\"status\":\"pause\"}", 405,
     "request.method_not_allowed", "GET, PATCH"},
    {"GET", WF "/x1/events/approval", NULL, 405, "request.method_not_allowed", "POST"},
    {"DELETE", WF, NULL, 405, "request.method_not_allowed", "GET, POST"},
    {"POST", "/healthz", NULL, 405, "request.method_not_allowed", "GET"},
    {"PUT", "/metrics", "x", 405, "request.method_not_allowed", "GET"},
    {"POST", "/workflows/order-flow", "{}", 405, "request.method_not_allowed",
     "GET"},
    {"GET", "/workflows/nope", NULL, 404, "workflow.not_found", NULL},
};
/* clang-format on */

#define N_ERR ((int)(sizeof err_cases / sizeof err_cases[0]))

START_TEST(error_replies) {
  host_start(&H, "h");
  create("{\"id\":\"x1\"}", "x1");
  for (int i = 0; i < N_ERR; i++) {
    const err_case *c = &err_cases[i];
    char what[512];
    snprintf(what, sizeof what, "#%d %s %.60s %.80s", i, c->method, c->path,
             c->body ? c->body : "");
    http_resp r;
    request(&r, c->method, c->path, c->body);
    assert_error(&r, c->status, c->code, what);
    if (c->allow) {
      char allow[64];
      ck_assert_msg(http_resp_header(&r, "allow", allow, sizeof allow) &&
                        !strcmp(allow, c->allow),
                    "%s: Allow %s, want %s", what,
                    http_resp_header(&r, "allow", allow, sizeof allow) ? allow
                                                                       : "none",
                    c->allow);
    }
    http_resp_free(&r);
  }
  /* Nothing was created by any of them. */
  ck_assert_int_eq(instance_count(), 1);
  host_stop(&H);
}
END_TEST

/* A create body of exactly `len` bytes: {"id":ID,"params":"xxx..."}. */
static char *sized_body(const char *id, size_t len) {
  char *b = malloc(len + 1);
  ck_assert(b != NULL);
  int head = snprintf(b, len + 1, "{\"id\":\"%s\",\"params\":\"", id);
  ck_assert(head > 0 && (size_t)head + 2 <= len);
  memset(b + head, 'x', len - (size_t)head - 2);
  memcpy(b + len - 2, "\"}", 3);
  return b;
}

START_TEST(body_over_limit_413) {
  host_start(&H, "h");
  create("{\"id\":\"x1\"}", "x1");
  /* Exactly at the limit: accepted. */
  char *body = sized_body("at-limit", MAX_BODY);
  http_resp r;
  request_auth(&r, "POST", WF, body, MAX_BODY, NULL);
  expect_status(&r, 201, "a body of exactly max_body_bytes");
  http_resp_free(&r);
  free(body);
  /* One byte over, and 4 KiB, on each route with a body. */
  const size_t sizes[] = {MAX_BODY + 1, 4096};
  const struct {
    const char *method, *path;
  } routes[] = {{"POST", WF},
                {"POST", WF "/batch"},
                {"PATCH", WF "/x1/status"},
                {"POST", WF "/x1/events/approval"},
                {"GET", "/healthz"}};
  for (size_t s = 0; s < 2; s++)
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
      body = sized_body("over", sizes[s]);
      request_auth(&r, routes[i].method, routes[i].path, body, sizes[s], NULL);
      char what[128];
      snprintf(what, sizeof what, "%s %s with %zu bytes", routes[i].method,
               routes[i].path, sizes[s]);
      assert_error(&r, 413, "request.too_large", what);
      http_resp_free(&r);
      free(body);
    }
  ck_assert_int_eq(instance_count(), 2);
  json_t *d = describe("x1");
  ck_assert_str_eq(jstr(d, "id"), "x1");
  json_decref(d);
  host_stop(&H);
}
END_TEST

/* GET path with the token; the status back, the JSON (caller's) into
 * *out when out is not NULL. */
static long get_with_token(const char *path, const char *auth, json_t **out) {
  http_resp r;
  long st = request_auth(&r, "GET", path, NULL, 0, auth);
  if (out)
    *out = json_incref(r.json);
  http_resp_free(&r);
  return st;
}

/* On a listener with a token the gate reads each connection's first
 * head: a GET ?wait= parked from such a connection still sees its client
 * go, and its wait ends at once, not at http.max_wait. */
START_TEST(token_parked_wait_ends_when_client_goes) {
  static const char *auth = "Bearer s3cret-Token_42";
  host_start_env(&H, "h", "127.0.0.1:0",
                 "  token_env: DURO_TEST_TOKEN\n  max_wait: 10m\n",
                 "DURO_TEST_TOKEN=s3cret-Token_42");
  static const char body[] =
      "{\"id\":\"tw\",\"params\":{\"orderId\":\"7\",\"email\":\"a@b.c\","
      "\"amount\":5,\"graceSeconds\":3600}}";
  http_resp r;
  ck_assert_int_eq(request_auth(&r, "POST", WF, body, sizeof body - 1, auth),
                   201);
  http_resp_free(&r);
  int64_t deadline = proc_now_ms() + 20000;
  for (;;) {
    json_t *d = NULL;
    ck_assert_int_eq(get_with_token(WF "/tw", auth, &d), 200);
    int waiting = !strcmp(jstr(d, "status"), "waiting");
    json_decref(d);
    if (waiting)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "tw never waited");
    proc_sleep_ms(50);
  }
  int fd = raw_connect();
  char req[256];
  int n = snprintf(req, sizeof req,
                   "GET " WF "/tw?wait=10m HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Authorization: %s\r\nConnection: close\r\n\r\n",
                   auth);
  ck_assert(send(fd, req, (size_t)n, MSG_NOSIGNAL) == n);
  deadline = proc_now_ms() + 10000;
  while (metric_read("duro_http_waiting", auth) != 1 &&
         proc_now_ms() < deadline)
    proc_sleep_ms(50);
  ck_assert_int_eq(metric_read("duro_http_waiting", auth), 1);
  close(fd);
  deadline = proc_now_ms() + 5000;
  long long left;
  while ((left = metric_read("duro_http_waiting", auth)) > 0 &&
         proc_now_ms() < deadline)
    proc_sleep_ms(50);
  ck_assert_msg(left == 0, "the wait outlived its client (%lld left)", left);
  host_stop(&H);
}
END_TEST

START_TEST(bearer_token_401) {
  host_start_env(&H, "h", "127.0.0.1:0", "  token_env: DURO_TEST_TOKEN\n",
                 "DURO_TEST_TOKEN=s3cret-Token_42");
  static const char *wrong[] = {
      NULL,
      "Bearer wrong",
      "Bearer s3cret-Token_4",
      "Bearer s3cret-Token_422",
      "Bearer S3CRET-TOKEN_42",
      "Bearer  s3cret-Token_42",
      "Basic czNjcmV0LVRva2VuXzQy",
      "s3cret-Token_42",
      "Bearer ",
  };
  static const char *paths[] = {"/healthz",
                                "/metrics",
                                "/metrics/history",
                                WF,
                                WF "/x",
                                "/nope",
                                "/queues/jobs/messages?limit=5"};
  for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++)
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
      http_resp r;
      request_auth(&r, "GET", paths[p], NULL, 0, wrong[i]);
      char what[128];
      snprintf(what, sizeof what, "GET %s with %s", paths[p],
               wrong[i] ? wrong[i] : "no Authorization");
      assert_error(&r, 401, "request.unauthorized", what);
      http_resp_free(&r);
    }
  http_resp r;
  request_auth(&r, "POST", WF, "{\"id\":\"t\"}", 10, "Bearer nope");
  assert_error(&r, 401, "request.unauthorized", "create without the token");
  http_resp_free(&r);

  static const char *right[] = {"Bearer s3cret-Token_42",
                                "bearer s3cret-Token_42"};
  for (size_t i = 0; i < 2; i++) {
    request_auth(&r, "GET", "/healthz", NULL, 0, right[i]);
    expect_status(&r, 200, right[i]);
    http_resp_free(&r);
    request_auth(&r, "GET", "/metrics/history", NULL, 0, right[i]);
    expect_status(&r, 200, right[i]);
    http_resp_free(&r);
    request_auth(&r, "GET", WF, NULL, 0, right[i]);
    expect_status(&r, 200, right[i]);
    ck_assert_int_eq(json_array_size(jget(r.json, "instances")), 0);
    http_resp_free(&r);
  }
  request_auth(&r, "POST", WF, "{\"id\":\"t\"}", 10, right[0]);
  expect_status(&r, 201, "create with the token");
  http_resp_free(&r);
  request_auth(&r, "GET", "/nope", NULL, 0, right[0]);
  assert_error(&r, 404, "route.not_found", "unknown route with the token");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* The dashboard's static files need no token; nothing else does without
 * it, not even a path that leaves /ui/ once normalized, or a GET of "/"
 * that carries a body. */
/* A dashboard file's answer: no other page may frame it, and it runs
 * its own script only. */
static void assert_page_policy(const http_resp *r, const char *path) {
  char v[512];
  ck_assert_msg(http_resp_header(r, "x-frame-options", v, sizeof v) &&
                    !strcmp(v, "DENY"),
                "%s: no X-Frame-Options: DENY", path);
  ck_assert_msg(
      http_resp_header(r, "content-security-policy", v, sizeof v) &&
          strstr(v, "frame-ancestors 'none'") && strstr(v, "script-src 'self'"),
      "%s: Content-Security-Policy %s", path,
      http_resp_header(r, "content-security-policy", v, sizeof v) ? v : "none");
}

START_TEST(dashboard_files_without_token) {
  host_start_env(&H, "d", "127.0.0.1:0", "  token_env: DURO_TEST_TOKEN\n",
                 "DURO_TEST_TOKEN=s3cret-Token_42");
  static const struct {
    const char *path, *type, *text;
  } files[] = {
      {"/", "text/html; charset=utf-8", "<!doctype html>"},
      {"/?x=1", "text/html; charset=utf-8", "/ui/app.js"},
      {"/ui/app.js", "text/javascript; charset=utf-8", "sessionStorage"},
      {"/ui/style.css", "text/css; charset=utf-8", ":focus-visible"},
  };
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    http_resp r;
    request_auth(&r, "GET", files[i].path, NULL, 0, NULL);
    expect_status(&r, 200, files[i].path);
    char type[128];
    ck_assert_ptr_nonnull(
        http_resp_header(&r, "content-type", type, sizeof type));
    ck_assert_str_eq(type, files[i].type);
    assert_contains(r.body, files[i].text);
    assert_page_policy(&r, files[i].path);
    http_resp_free(&r);
  }
  http_resp r;
  request_auth(&r, "GET", "/ui/nope.js", NULL, 0, NULL);
  assert_error(&r, 404, "route.not_found", "an unknown dashboard file");
  http_resp_free(&r);
  static const struct {
    const char *method, *path, *body;
  } refused[] = {
      {"GET", "/healthz", NULL},
      {"GET", "/ui/../healthz", NULL},
      {"GET", "/ui/%2e%2e/metrics", NULL},
      {"GET", "/plugins", NULL},
      {"POST", "/", NULL},
      {"GET", "/", "{}"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    request_auth(&r, refused[i].method, refused[i].path, refused[i].body, 0,
                 NULL);
    assert_error(&r, 401, "request.unauthorized", refused[i].path);
    http_resp_free(&r);
  }
  request_auth(&r, "POST", "/", NULL, 0, "Bearer s3cret-Token_42");
  assert_error(&r, 405, "request.method_not_allowed", "POST / with the token");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* Runs `duro run` on a config expected to be refused; returns its output. */
static char *raw_exchange(const char *data, size_t len, int cut);

/* A raw request to the host of the case: `head` is the request line and
 * headers (each line ended by \\r\\n, "@" replaced by the port),
 * then `body`.  Returns the reply's status; its error code into `code`. */
static int raw_ask(const char *head, const char *body, char *code, size_t len) {
  char req[2048], port[16];
  size_t n = 0;
  snprintf(port, sizeof port, "%d", H.port);
  for (const char *p = head; *p && n + 16 < sizeof req; p++)
    n += (size_t)snprintf(req + n, sizeof req - n, "%s",
                          *p == '@' ? port : (char[]){*p, 0});
  n += (size_t)snprintf(req + n, sizeof req - n,
                        "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                        strlen(body), body);
  char *reply = raw_exchange(req, n, 0);
  int st = reply_status(reply);
  const char *c = strstr(reply, "\"code\":\"");
  snprintf(code, len, "%.*s", c ? (int)strcspn(c + 8, "\"") : 0,
           c ? c + 8 : "");
  free(reply);
  return st;
}

/* On a listener without a token, a page of another site reaches nothing
 * that changes state, and a rebinding name (a Host not the listener's)
 * reaches nothing at all; the names of http.allowed_hosts are served. */
START_TEST(browsers_refused_without_token) {
  host_start_env(&H, "b", "127.0.0.1:0",
                 "  allowed_hosts: [duro.test, \"proxy.test:9000\"]\n", NULL);
  create_order("b1", 5, 3600);
  json_decref(wait_status("b1", "waiting"));
  static const struct {
    const char *head, *body;
    int status;
    const char *code;
  } cases[] = {
      /* the Host */
      {"GET /healthz HTTP/1.1\r\nHost: evil.example:@\r\n", "", 403,
       "request.forbidden_host"},
      {"GET " WF "/b1 HTTP/1.1\r\nHost: evil.example\r\n", "", 403,
       "request.forbidden_host"},
      {"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:1\r\n", "", 403,
       "request.forbidden_host"},
      {"GET /healthz HTTP/1.1\r\nHost: proxy.test:9001\r\n", "", 403,
       "request.forbidden_host"},
      {"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:@\r\n", "", 200, ""},
      {"GET /healthz HTTP/1.1\r\nHost: localhost:@\r\n", "", 200, ""},
      {"GET /healthz HTTP/1.1\r\nHost: [::1]:@\r\n", "", 200, ""},
      {"GET /healthz HTTP/1.1\r\nHost: DURO.test:8080\r\n", "", 200, ""},
      {"GET /healthz HTTP/1.1\r\nHost: proxy.test:9000\r\n", "", 200, ""},
      /* a form or a text/plain fetch: a body that is not JSON */
      {"POST " WF "/b1/events/approval HTTP/1.1\r\nHost: 127.0.0.1:@\r\n"
       "Content-Type: text/plain\r\n",
       "{\"approved\":true}", 415, "request.unsupported_media_type"},
      {"POST " WF "/b1/events/approval HTTP/1.1\r\nHost: 127.0.0.1:@\r\n",
       "{\"approved\":true}", 415, "request.unsupported_media_type"},
      {"POST " WF " HTTP/1.1\r\nHost: 127.0.0.1:@\r\n"
       "Content-Type: application/x-www-form-urlencoded\r\n",
       "id=x", 415, "request.unsupported_media_type"},
      /* another site's page */
      {"POST " WF "/b1/events/approval HTTP/1.1\r\nHost: 127.0.0.1:@\r\n"
       "Origin: http://evil.example\r\nContent-Type: application/json\r\n",
       "{\"approved\":true}", 403, "request.cross_origin"},
      {"POST /plugins/reload HTTP/1.1\r\nHost: 127.0.0.1:@\r\n"
       "Origin: http://evil.example\r\n",
       "", 403, "request.cross_origin"},
      {"POST " WF " HTTP/1.1\r\nHost: 127.0.0.1:@\r\nOrigin: null\r\n"
       "Content-Type: application/json\r\n",
       "{\"id\":\"n1\"}", 403, "request.cross_origin"},
      {"POST " WF " HTTP/1.1\r\nHost: 127.0.0.1:@\r\n"
       "Origin: http://127.0.0.1:1\r\nContent-Type: application/json\r\n",
       "{\"id\":\"n2\"}", 403, "request.cross_origin"},
      {"GET /__scheduled?cron=0+3+*+*+* HTTP/1.1\r\nHost: 127.0.0.1:@\r\n"
       "Sec-Fetch-Site: cross-site\r\n",
       "", 403, "request.cross_origin"},
      /* the dashboard's own page, and a proxy's name */
      {"POST " WF " HTTP/1.1\r\nHost: 127.0.0.1:@\r\n"
       "Origin: http://127.0.0.1:@\r\nSec-Fetch-Site: same-origin\r\n"
       "Content-Type: application/json; charset=utf-8\r\n",
       "{\"id\":\"ok1\"}", 201, ""},
      {"POST " WF " HTTP/1.1\r\nHost: duro.test\r\n"
       "Origin: https://duro.test\r\nContent-Type: application/json\r\n",
       "{\"id\":\"ok2\"}", 201, ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char code[64];
    int st = raw_ask(cases[i].head, cases[i].body, code, sizeof code);
    ck_assert_msg(st == cases[i].status && !strcmp(code, cases[i].code),
                  "case %zu: %d %s, want %d %s:\n%s", i, st, code,
                  cases[i].status, cases[i].code, cases[i].head);
  }
  /* Nothing refused was done: no event reached b1, no n1 or n2. */
  json_t *d = describe("b1");
  ck_assert_str_eq(jstr(d, "status"), "waiting");
  ck_assert_int_eq(json_array_size(jget(d, "events")), 0);
  json_decref(d);
  ck_assert_int_eq(instance_count(), 3);
  http_resp r;
  request(&r, "GET", "/", NULL);
  expect_status(&r, 200, "GET /");
  assert_page_policy(&r, "/");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

static char *run_refused(const char *listen, const char *http_extra,
                         const char *env_kv) {
  write_config(&H, "refused", listen, http_extra);
  host_spawn(&H, env_kv);
  int code = proc_wait_exit(H.pid, proc_now_ms() + WAIT_MS);
  char *log = proc_slurp(H.log);
  ck_assert_msg(code > 0 && code < 128,
                "expected a non-zero exit, got %d (-1: hung); output:\n%s",
                code, proc_tail(log));
  const char *mark = proc_sanitizer_report(log);
  ck_assert_msg(mark == NULL, "sanitizer report (\"%s\") in:\n%s", mark,
                proc_tail(log));
  ck_assert_msg(strstr(log, "ready") == NULL, "said ready:\n%s",
                proc_tail(log));
  return log;
}

START_TEST(token_env_unset_refused) {
  char *log =
      run_refused("127.0.0.1:0", "  token_env: DURO_TEST_TOKEN_UNSET\n", NULL);
  assert_contains(log, "http.token_env");
  assert_contains(log, "DURO_TEST_TOKEN_UNSET");
  assert_contains(log, H.config);
  free(log);
  log = run_refused("127.0.0.1:0", "  token_env: DURO_TEST_TOKEN\n",
                    "DURO_TEST_TOKEN=");
  assert_contains(log, "http.token_env");
  free(log);
}
END_TEST

/* ---- 4. bind policy
 * ----------------------------------------------------------- */

START_TEST(public_listen_refused) {
  static const char *listens[] = {"0.0.0.0:0", "\"[::]:0\""};
  for (int i = 0; i < 2; i++) {
    char *log = run_refused(listens[i], NULL, NULL);
    assert_contains(log, "http.listen");
    assert_contains(log, "loopback");
    assert_contains(log, H.config);
    free(log);
  }
  /* Not host:port at all. */
  char *log = run_refused("nonsense", NULL, NULL);
  assert_contains(log, "http.listen");
  free(log);
}
END_TEST

START_TEST(public_listen_allowed_insecure) {
  host_start_env(&H, "h", "0.0.0.0:0", "  allow_insecure: true\n", NULL);
  assert_healthy("start on 0.0.0.0"); /* through 127.0.0.1 */
  host_stop(&H);
  /* A token also lifts the refusal. */
  host_start_env(&H, "h2", "0.0.0.0:0", "  token_env: DURO_TEST_TOKEN\n",
                 "DURO_TEST_TOKEN=abc");
  http_resp r;
  request_auth(&r, "GET", "/healthz", NULL, 0, "Bearer abc");
  expect_status(&r, 200, "healthz with the token on 0.0.0.0");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- 5. malformed input over raw sockets
 * -------------------------------------- */

static int raw_connect(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(H.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {RAW_READ_MS / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof a) == 0,
                "connect: %s", strerror(errno));
  return fd;
}

/* Sends `data`; unless `cut`, reads the reply until the server closes, an
 * error (a reset after a refused flood) or RAW_READ_MS.  The reply,
 * NUL-terminated, malloc'ed. */
static char *raw_exchange(const char *data, size_t len, int cut) {
  int fd = raw_connect();
  for (size_t off = 0; off < len;) {
    ssize_t n = send(fd, data + off, len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break; /* the server gave up on us: read what it said */
    off += (size_t)n;
  }
  char *out = calloc(1, 1);
  size_t olen = 0;
  if (!cut) {
    int64_t deadline = proc_now_ms() + RAW_READ_MS;
    while (proc_now_ms() < deadline) {
      char buf[16384];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      if (olen < 262144) {
        out = realloc(out, olen + (size_t)n + 1);
        ck_assert(out != NULL);
        memcpy(out + olen, buf, (size_t)n);
        olen += (size_t)n;
        out[olen] = '\0';
      }
    }
  }
  close(fd);
  return out;
}

/* The first final (non-1xx) status of an HTTP/1 reply, 0 if none. */
static int reply_status(const char *reply) {
  const char *p = reply;
  while (p && !strncmp(p, "HTTP/1.", 7)) {
    int st = atoi(p + 9);
    if (st >= 200)
      return st;
    p = strstr(p, "\r\n\r\n");
    if (p)
      p += 4;
  }
  return 0;
}

enum raw_kind {
  RAW_TEXT,        /* `text` as is */
  RAW_HUGE_ID,     /* GET an instance whose id is 10 KB */
  RAW_HUGE_WF,     /* POST to a workflow whose name is 10 KB */
  RAW_HUGE_DEPTH,  /* GET a 10 KB path of 5000 segments */
  RAW_HDR_COUNT,   /* 200 headers */
  RAW_HDR_SIZE,    /* one 600 KB header */
  RAW_RANDOM,      /* 4 KiB of pseudo-random bytes */
  RAW_NUL,         /* 1000 NUL bytes */
  RAW_CHUNKED_BIG, /* a chunked create body of 2 KiB */
};

typedef struct raw_case {
  const char *name;
  enum raw_kind kind;
  const char *text;
  size_t len;       /* of text, which may hold NUL bytes */
  int cut;          /* close right after sending, read nothing */
  int status;       /* the reply's status; 0 = any (or none) but a 5xx */
  const char *code; /* the JSON error code in the reply, or NULL */
} raw_case;

#define CLOSE "Connection: close\r\n"
#define T(literal) literal, sizeof literal - 1
/* The listener's own name, and the type every body must have. */
#define HOSTH "Host: 127.0.0.1\r\nContent-Type: application/json\r\n"

/* clang-format off */
static const raw_case raw_cases[] = {
    {"truncated JSON", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Content-Length: 10\r\n\r\n{\"id\":\"tru"),
     0, 400, "request.invalid_json"},
    {"10 KB instance id in the path", RAW_HUGE_ID, NULL, 0, 0, 400, "instance.invalid_id"},
    {"10 KB workflow name in the path", RAW_HUGE_WF, NULL, 0, 0, 404, "workflow.not_found"},
    {"10 KB path of 5000 segments", RAW_HUGE_DEPTH, NULL, 0, 0, 404, "route.not_found"},
    {"garbage request line", RAW_TEXT, T("HELLO\r\n\r\n"), 0, 400, NULL},
    {"request line without a version", RAW_TEXT, T("GET /healthz\r\n\r\n"), 0, 0, NULL},
    {"unknown HTTP version", RAW_TEXT, T("GET /healthz HTTP/9.9\r\n\r\n"), 0, 400, NULL},
    {"body cut off mid-request", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH "Content-Length: 100\r\n\r\n{\"id\":\"cu"),
     1, 0, NULL},
    {"headers cut off mid-request", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH "Content-Len"), 1, 0, NULL},
    {"header flood (200 headers)", RAW_HDR_COUNT, NULL, 0, 0, 400, NULL},
    {"header flood (one 600 KB header)", RAW_HDR_SIZE, NULL, 0, 0, 0, NULL},
    {"non-HTTP bytes (random)", RAW_RANDOM, NULL, 0, 0, 0, NULL},
    {"non-HTTP bytes (NUL)", RAW_NUL, NULL, 0, 0, 400, NULL},
    {"non-HTTP bytes (TLS ClientHello)", RAW_TEXT, T(
     "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 client random......"), 0, 400, NULL},
    {"HTTP/2 preface then garbage", RAW_TEXT, T(
     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" /* then DATA on stream 0: */
     "\x00\x00\x00\x00\x00\x00\x00\x00\x00" "junk"),
     0, 0, NULL},
    {"invalid method FOO", RAW_TEXT, T(
     "FOO /healthz HTTP/1.1\r\n" HOSTH CLOSE "\r\n"), 0, 405, "request.method_not_allowed"},
    {"invalid method G@T", RAW_TEXT, T(
     "G@T /healthz HTTP/1.1\r\n" HOSTH CLOSE "\r\n"), 0, 405, "request.method_not_allowed"},
    {"invalid method with a non-UTF-8 byte", RAW_TEXT, T(
     "G\xffT /healthz HTTP/1.1\r\n" HOSTH CLOSE "\r\n"), 0, 405, "request.method_not_allowed"},
    {"DELETE on the collection", RAW_TEXT, T(
     "DELETE " WF " HTTP/1.1\r\n" HOSTH CLOSE "\r\n"), 0, 405, "request.method_not_allowed"},
    {"non-UTF-8 bytes in the path", RAW_TEXT, T(
     "GET /\xff\xfe HTTP/1.1\r\n" HOSTH CLOSE "\r\n"), 0, 404, "route.not_found"},
    {"percent-encoded non-UTF-8 in the path", RAW_TEXT, T(
     "GET /%ff%fe HTTP/1.1\r\n" HOSTH CLOSE "\r\n"), 0, 404, "route.not_found"},
    {"non-UTF-8 bytes in the query", RAW_TEXT, T(
     "GET " WF "?status=\xff HTTP/1.1\r\n" HOSTH CLOSE "\r\n"), 0, 400, "request.invalid"},
    {"non-UTF-8 bytes in a JSON body", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Content-Length: 11\r\n\r\n{\"id\":\"\xff\xfe\"}"),
     0, 400, "request.invalid_json"},
    {"Content-Length past every limit", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Content-Length: 99999999999\r\n\r\n{}"),
     0, 413, "request.too_large"},
    {"negative Content-Length", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Content-Length: -5\r\n\r\n{}"), 0, 400, NULL},
    {"two Content-Lengths", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Content-Length: 2\r\nContent-Length: 12\r\n\r\n"
     "{\"id\":\"zz\"}"), 0, 400, "request.invalid"},
    /* Request smuggling: H2O reads the chunked body, a proxy in front may
     * read 4 bytes and take the rest for a second request. */
    {"Transfer-Encoding and Content-Length", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH "Content-Length: 4\r\n"
     "Transfer-Encoding: chunked\r\n\r\n"
     "d\r\n{\"id\":\"smug\"}\r\n0\r\n\r\n"
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Content-Length: 14\r\n\r\n{\"id\":\"smug2\"}"),
     0, 400, "request.invalid"},
    {"Content-Length and Transfer-Encoding", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Transfer-Encoding: chunked\r\n"
     "Content-Length: 19\r\n\r\n"
     "d\r\n{\"id\":\"smug\"}\r\n0\r\n\r\n"), 0, 400, "request.invalid"},
    {"two Transfer-Encodings", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Transfer-Encoding: identity\r\n"
     "Transfer-Encoding: chunked\r\n\r\n"
     "d\r\n{\"id\":\"smug\"}\r\n0\r\n\r\n"), 0, 400, "request.invalid"},
    /* %00 decodes to a NUL byte, which ended the id where C strings end:
     * "r1%00x" addressed r1. */
    {"%00 in an instance id", RAW_TEXT, T(
     "GET " WF "/r1%00x HTTP/1.1\r\n" HOSTH CLOSE "\r\n"), 0, 400, "instance.invalid_id"},
    {"%00 ending an instance id", RAW_TEXT, T(
     "PATCH " WF "/r1%00/status HTTP/1.1\r\n" HOSTH CLOSE "Content-Length: 18\r\n\r\n"
     "{\"status\":\"pause\"}"), 0, 400, "instance.invalid_id"},
    {"%00 in a workflow name", RAW_TEXT, T(
     "GET /workflows/order-flow%00x/instances HTTP/1.1\r\n" HOSTH CLOSE "\r\n"),
     0, 400, "request.invalid"},
    {"%00 in an event type", RAW_TEXT, T(
     "POST " WF "/r1/events/approval%00x HTTP/1.1\r\n" HOSTH CLOSE "Content-Length: 2\r\n\r\n{}"),
     0, 400, "request.invalid"},
    {"broken chunked encoding", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"),
     0, 400, NULL},
    {"chunked body over http.max_body_bytes", RAW_CHUNKED_BIG, NULL, 0, 0, 413, "request.too_large"},
    {"Expect: 100-continue with a bad body", RAW_TEXT, T(
     "POST " WF " HTTP/1.1\r\n" HOSTH CLOSE "Expect: 100-continue\r\nContent-Length: 8\r\n\r\n{\"id\":5}"),
     0, 400, "request.invalid"},
    {"pipelined requests", RAW_TEXT, T(
     "GET /healthz HTTP/1.1\r\n" HOSTH "\r\nGET " WF "/nope HTTP/1.1\r\n" HOSTH CLOSE "\r\n"),
     0, 200, "instance.not_found"}, /* the first answer, then the second */
    {"HTTP/1.0 without Host", RAW_TEXT, T("GET /healthz HTTP/1.0\r\n\r\n"), 0, 200, NULL},
};
/* clang-format on */

#define N_RAW ((int)(sizeof raw_cases / sizeof raw_cases[0]))

/* The bytes of a raw case, malloc'ed; *len their count. */
static char *raw_bytes(const raw_case *c, size_t *len) {
  size_t cap = 700000;
  char *b = malloc(cap);
  ck_assert(b != NULL);
  size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__))
  switch (c->kind) {
  case RAW_TEXT:
    n = c->len;
    memcpy(b, c->text, n);
    break;
  case RAW_HUGE_ID:
  case RAW_HUGE_WF:
  case RAW_HUGE_DEPTH:
    PUT(c->kind == RAW_HUGE_WF   ? "POST /workflows/"
        : c->kind == RAW_HUGE_ID ? "GET " WF "/"
                                 : "GET ");
    for (int i = 0; i < 10240; i++)
      b[n++] = c->kind == RAW_HUGE_DEPTH ? (i % 2 ? 'a' : '/') : 'a';
    PUT("%s HTTP/1.1\r\n" HOSTH CLOSE "%s\r\n",
        c->kind == RAW_HUGE_WF ? "/instances" : "",
        c->kind == RAW_HUGE_WF ? "Content-Length: 2\r\n" : "");
    if (c->kind == RAW_HUGE_WF)
      PUT("{}");
    break;
  case RAW_HDR_COUNT:
    PUT("GET /healthz HTTP/1.1\r\n" HOSTH CLOSE);
    for (int i = 0; i < 200; i++)
      PUT("X-Flood-%d: v\r\n", i);
    PUT("\r\n");
    break;
  case RAW_HDR_SIZE:
    PUT("GET /healthz HTTP/1.1\r\n" HOSTH CLOSE "X-Big: ");
    memset(b + n, 'v', 600000);
    n += 600000;
    PUT("\r\n\r\n");
    break;
  case RAW_RANDOM: {
    uint32_t x = 2463534242u; /* xorshift32, a fixed seed */
    for (int i = 0; i < 4096; i++) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      b[n++] = (char)(x & 0xff);
    }
    break;
  }
  case RAW_NUL:
    memset(b, 0, 1000);
    n = 1000;
    break;
  case RAW_CHUNKED_BIG:
    PUT("POST " WF " HTTP/1.1\r\n" HOSTH CLOSE
        "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 4; i++) {
      PUT("200\r\n");
      memset(b + n, ' ', 0x200);
      n += 0x200;
      PUT("\r\n");
    }
    PUT("0\r\n\r\n");
    break;
  }
#undef PUT
  *len = n;
  return b;
}

/* Sends one raw case and checks the reply, then that the host still
 * answers and that no instance appeared (`count` before). */
static void raw_check(const raw_case *c, size_t count) {
  size_t len;
  char *data = raw_bytes(c, &len);
  char *reply = raw_exchange(data, len, c->cut);
  free(data);
  int st = reply_status(reply);
  ck_assert_msg(st < 500, "%s: a %d reply: %.300s", c->name, st, reply);
  if (c->status)
    ck_assert_msg(st == c->status, "%s: status %d, want %d; reply: %.400s",
                  c->name, st, c->status, reply);
  if (c->code) {
    char want[128];
    snprintf(want, sizeof want, "{\"error\":{\"code\":\"%s\",\"message\":\"",
             c->code);
    ck_assert_msg(strstr(reply, want) != NULL, "%s: no %s in reply: %.400s",
                  c->name, want, reply);
  }
  free(reply);
  assert_healthy(c->name);
  ck_assert_msg(instance_count() == count, "%s: instances %zu -> %zu", c->name,
                count, instance_count());
}

START_TEST(raw_input_leaves_host_serving) {
  host_start(&H, "h");
  create("{\"id\":\"r1\"}", "r1");
  create("{\"id\":\"r2\"}", "r2");
  raw_check(&raw_cases[_i], 2);
  host_stop(&H);
}
END_TEST

/* Raises the soft RLIMIT_NOFILE to at least `want` (up to the hard one);
 * a host started after this inherits it. */
static void raise_nofile(rlim_t want) {
  struct rlimit rl;
  ck_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    rl.rlim_cur =
        rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    ck_assert_msg(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s",
                  strerror(errno));
  }
  ck_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  ck_assert_msg(rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want,
                "RLIMIT_NOFILE is %llu (hard %llu), %llu needed",
                (unsigned long long)rl.rlim_cur,
                (unsigned long long)rl.rlim_max, (unsigned long long)want);
}

/* N_CONCURRENT keep-alive connections open at once, each with one GET
 * /healthz answered, all held open while the host is asked again. */
static void concurrent_connections(void) {
  enum { CONNECTING, SENDING, READING, DONE };
  static const char req[] = "GET /healthz HTTP/1.1\r\n" HOSTH "\r\n";
  int *fd = calloc(N_CONCURRENT, sizeof *fd);
  int *state = calloc(N_CONCURRENT, sizeof *state);
  size_t *sent = calloc(N_CONCURRENT, sizeof *sent);
  size_t *got = calloc(N_CONCURRENT, sizeof *got);
  char(*buf)[512] = calloc(N_CONCURRENT, sizeof *buf);
  struct pollfd *pf = calloc(N_CONCURRENT, sizeof *pf);
  ck_assert(fd && state && sent && got && buf && pf);

  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(H.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < N_CONCURRENT; i++) {
    fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_msg(fd[i] >= 0, "socket %d: %s", i, strerror(errno));
    int r = connect(fd[i], (struct sockaddr *)&a, sizeof a);
    ck_assert_msg(r == 0 || errno == EINPROGRESS, "connect %d: %s", i,
                  strerror(errno));
    state[i] = CONNECTING;
  }
  /* All connected before any request goes out; then send and read. */
  int phase_connect = 1, done = 0, connected = 0;
  int64_t deadline = proc_now_ms() + 60000;
  while (done < N_CONCURRENT) {
    ck_assert_msg(proc_now_ms() < deadline,
                  "%d of %d connections answered (%d connected) in 60 s", done,
                  N_CONCURRENT, connected);
    for (int i = 0; i < N_CONCURRENT; i++) {
      int wanted = phase_connect ? state[i] == CONNECTING
                                 : state[i] == SENDING || state[i] == READING;
      pf[i].fd = wanted ? fd[i] : -1; /* poll skips negative fds */
      pf[i].events = state[i] == READING ? POLLIN : POLLOUT;
      pf[i].revents = 0;
    }
    int r = poll(pf, N_CONCURRENT, 1000);
    ck_assert_msg(r >= 0 || errno == EINTR, "poll: %s", strerror(errno));
    for (int i = 0; i < N_CONCURRENT && r > 0; i++) {
      if (!pf[i].revents)
        continue;
      if (state[i] == CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(fd[i], SOL_SOCKET, SO_ERROR, &err, &el);
        ck_assert_msg(err == 0, "connection %d: %s (errno %d)", i,
                      strerror(err), err);
        state[i] = SENDING;
        connected++;
      } else if (state[i] == SENDING) {
        ssize_t n =
            send(fd[i], req + sent[i], sizeof req - 1 - sent[i], MSG_NOSIGNAL);
        ck_assert_msg(n > 0 || errno == EAGAIN, "send %d: %s", i,
                      strerror(errno));
        if (n > 0 && (sent[i] += (size_t)n) == sizeof req - 1)
          state[i] = READING;
      } else if (state[i] == READING) {
        ssize_t n = recv(fd[i], buf[i] + got[i], sizeof buf[i] - 1 - got[i], 0);
        ck_assert_msg(n > 0 || (n < 0 && errno == EAGAIN),
                      "connection %d closed or failed (%s) after %zu bytes: "
                      "%s",
                      i, n < 0 ? strerror(errno) : "EOF", got[i], buf[i]);
        if (n > 0) {
          got[i] += (size_t)n;
          buf[i][got[i]] = '\0';
          if (answer_complete(buf[i])) {
            ck_assert_msg(!strncmp(buf[i], "HTTP/1.1 200", 12) &&
                              strstr(buf[i], "{\"status\":\"ok\"}"),
                          "connection %d: %s", i, buf[i]);
            state[i] = DONE;
            done++;
          }
        }
      }
    }
    if (phase_connect && connected == N_CONCURRENT)
      phase_connect = 0;
  }
  /* All N_CONCURRENT still open on both sides: the host still answers. */
  assert_healthy("1000 open connections");
  http_resp r;
  request(&r, "GET", "/metrics", NULL);
  expect_status(&r, 200, "metrics with 1000 open connections");
  http_resp_free(&r);
  for (int i = 0; i < N_CONCURRENT; i++)
    close(fd[i]);
  free(fd);
  free(state);
  free(sent);
  free(got);
  free(buf);
  free(pf);
}

START_TEST(sweep_then_concurrent_connections) {
  raise_nofile(N_CONCURRENT + 256);
  host_start(&H, "h");
  create("{\"id\":\"r1\"}", "r1");
  create("{\"id\":\"r2\"}", "r2");
  for (int i = 0; i < N_RAW; i++)
    raw_check(&raw_cases[i], 2);
  concurrent_connections();
  assert_healthy("closing 1000 connections");
  ck_assert_int_eq(instance_count(), 2);
  /* Twice, so the host has seen 2000 connections come and go. */
  concurrent_connections();
  assert_healthy("closing 1000 connections again");
  create("{\"id\":\"r3\"}", "r3");
  ck_assert_int_eq(instance_count(), 3);
  host_stop(&H);
}
END_TEST

/* ---- 6. shutdown
 * -------------------------------------------------------------- */

START_TEST(sigterm_with_open_connections) {
  host_start(&H, "h");
  create_order("s1", 5, 1);
  json_decref(wait_status("s1", "waiting"));
  /* An idle keep-alive connection, a request cut off mid-body, and a
   * connection that never sent a byte. */
  int idle = raw_connect();
  static const char get[] = "GET /healthz HTTP/1.1\r\n" HOSTH "\r\n";
  ck_assert(send(idle, get, sizeof get - 1, MSG_NOSIGNAL) ==
            (ssize_t)(sizeof get - 1));
  char buf[512];
  ssize_t n = recv(idle, buf, sizeof buf - 1, 0);
  ck_assert_msg(n > 12 && !strncmp(buf, "HTTP/1.1 200", 12),
                "the keep-alive request was not answered");
  int half = raw_connect();
  static const char part[] =
      "POST " WF " HTTP/1.1\r\n" HOSTH "Content-Length: 100\r\n\r\n{\"id\":";
  ck_assert(send(half, part, sizeof part - 1, MSG_NOSIGNAL) ==
            (ssize_t)(sizeof part - 1));
  int silent = raw_connect();
  proc_sleep_ms(100); /* the host has accepted all three */
  host_stop(&H);
  close(idle);
  close(half);
  close(silent);
}
END_TEST

/* "An acknowledged write is on disk": every create and event the host
 * answered 201/202 is there after a SIGKILL and a restart. */
START_TEST(acknowledged_writes_survive_kill_9) {
  host_start(&H, "k");
  enum { N = 40 };
  char id[32], path[128];
  for (int i = 0; i < N; i++) {
    snprintf(id, sizeof id, "k%d", i);
    create_order(id, 5, 3600);
  }
  for (int i = 0; i < N; i += 2) {
    http_resp r;
    snprintf(path, sizeof path, WF "/k%d/events/approval", i);
    request(&r, "POST", path, "{\"approved\":true}");
    expect_status(&r, 202, path);
    http_resp_free(&r);
  }
  kill(H.pid, SIGKILL);
  int st;
  ck_assert_int_eq(waitpid(H.pid, &st, 0), H.pid);
  ck_assert(WIFSIGNALED(st));
  host_spawn(&H, NULL);
  H.port = proc_wait_port(H.pid, H.log, proc_now_ms() + WAIT_MS);
  ck_assert_uint_eq(instance_count(), N);
  /* the approved half gets past its review: each event was kept */
  for (int i = 0; i < N; i += 2) {
    snprintf(id, sizeof id, "k%d", i);
    json_t *d = wait_status(id, "waiting|complete");
    for (int t = 0;
         t < 200 &&
         strcmp(jstr(step_of(d, "manual review#1"), "status"), "complete") != 0;
         t++) {
      json_decref(d);
      proc_sleep_ms(25);
      d = describe(id);
    }
    ck_assert_str_eq(jstr(step_of(d, "manual review#1"), "status"), "complete");
    json_decref(d);
  }
  host_stop(&H);
}
END_TEST

/* ---- 7. storage errors
 * --------------------------------------------------------- */

/* While on, the engine's RLIMIT_FSIZE is one byte: every write SQLite
 * makes past it fails with EFBIG (SIGXFSZ is ignored, inherited from the
 * case), as on a full disk, and reads still work. */
static void storage_fails(pid_t engine, int on) {
  struct rlimit rl = {on ? 1 : RLIM_INFINITY, RLIM_INFINITY};
  ck_assert_msg(prlimit(engine, RLIMIT_FSIZE, &rl, NULL) == 0, "prlimit %d: %s",
                (int)engine, strerror(errno));
}

START_TEST(storage_errors_503) {
  signal(SIGXFSZ, SIG_IGN);
  host_start(&H, "h");
  create_order("s1", 5, 3600);
  json_decref(wait_status("s1", "waiting"));
  pid_t engine = engine_pid(&H);
  storage_fails(engine, 1);
  static const struct {
    const char *method, *path, *body;
  } writes[] = {
      {"POST", WF, "{\"id\":\"s2\"}"},
      {"POST", WF "/batch",
       "{\"instances\":[{\"id\":\"s3\"},{\"id\":\"s4\"}]}"},
      {"PATCH", WF "/s1/status", "{\"status\":\"pause\"}"},
      {"POST", WF "/s1/events/approval", "{\"approved\":true}"},
  };
  for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
    http_resp r;
    request(&r, writes[i].method, writes[i].path, writes[i].body);
    char what[160], retry[16];
    snprintf(what, sizeof what, "%s %s while writes fail", writes[i].method,
             writes[i].path);
    assert_error(&r, 503, "storage.error", what);
    ck_assert_msg(http_resp_header(&r, "retry-after", retry, sizeof retry) &&
                      !strcmp(retry, "1"),
                  "%s: no \"Retry-After: 1\" in:\n%s", what, r.headers);
    http_resp_free(&r);
  }
  /* Reads still answer; /healthz says why the writes fail. */
  http_resp r;
  request(&r, "GET", "/healthz", NULL);
  ck_assert_msg(r.status == 200 &&
                    !strcmp(jstr(r.json, "status"), "degraded") &&
                    !strcmp(jstr(r.json, "storage.status"), "writes failing"),
                "/healthz while writes fail: %ld %s", r.status, r.body);
  http_resp_free(&r);
  json_t *d = describe("s1");
  ck_assert_str_eq(jstr(d, "status"), "waiting");
  json_decref(d);

  /* Once writes succeed again, the same create goes through. */
  storage_fails(engine, 0);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    request(&r, "POST", WF, "{\"id\":\"s2\"}");
    if (r.status == 201)
      break;
    ck_assert_msg(r.status == 503 && proc_now_ms() < deadline,
                  "create after writes recovered: %ld %s", r.status, r.body);
    http_resp_free(&r);
    proc_sleep_ms(50);
  }
  http_resp_free(&r);
  ck_assert_int_eq(instance_count(), 2); /* s1, s2: not the batch's */
  host_stop(&H);
}
END_TEST

/* ---- 8. memory before authentication, and the budget
 * ------------------------------------ */

#define MEM_CONNS 300
#define MEM_BODY (1024 * 1024)

/* What happened to each of MEM_CONNS connections that each sent `head`
 * and then all of a MEM_BODY-byte body but its last byte. */
typedef struct flood {
  int fd[MEM_CONNS];
  int state[MEM_CONNS];
  int holding; /* sent all but the last byte, no answer, still open */
  int refused; /* answered with a 4xx/5xx, or closed, or reset */
  int bad;     /* answered anything else */
  char example[512];
} flood;

enum { CONNECTING, SENDING, HOLDING, ENDED };

/* Reads what connection i got: an answer, an end, or (not yet) nothing. */
static void flood_read(flood *f, int i) {
  char buf[512];
  ssize_t n = recv(f->fd[i], buf, sizeof buf - 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  buf[n > 0 ? n : 0] = '\0';
  if (n > 0 && reply_status(buf) < 400) {
    f->bad++;
    snprintf(f->example, sizeof f->example, "%s", buf);
  } else {
    f->refused++;
  }
  if (f->state[i] == HOLDING)
    f->holding--;
  f->state[i] = ENDED;
}

/* Sends the flood and returns once every connection holds or was
 * refused; the connections stay open (flood_end closes them). */
static void flood_start(flood *f, const char *head) {
  static char body[MEM_BODY];
  memset(body, 'x', sizeof body);
  int *state = f->state;
  size_t sent[MEM_CONNS], hlen = strlen(head), total = hlen + MEM_BODY - 1;
  struct pollfd pf[MEM_CONNS];
  memset(f, 0, sizeof *f);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(H.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < MEM_CONNS; i++) {
    f->fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_msg(f->fd[i] >= 0, "socket: %s", strerror(errno));
    int r = connect(f->fd[i], (struct sockaddr *)&a, sizeof a);
    ck_assert_msg(r == 0 || errno == EINPROGRESS, "connect: %s",
                  strerror(errno));
    state[i] = CONNECTING;
    sent[i] = 0;
  }
  int64_t deadline = proc_now_ms() + 60000;
  for (int open = MEM_CONNS; open > 0;) {
    ck_assert_msg(proc_now_ms() < deadline,
                  "%d connections still sending after 60 s", open);
    for (int i = 0; i < MEM_CONNS; i++) {
      int live = state[i] == CONNECTING || state[i] == SENDING;
      pf[i].fd = live ? f->fd[i] : -1;
      pf[i].events = state[i] == SENDING ? POLLIN | POLLOUT : POLLOUT;
      pf[i].revents = 0;
    }
    int r = poll(pf, MEM_CONNS, 1000);
    ck_assert_msg(r >= 0 || errno == EINTR, "poll: %s", strerror(errno));
    for (int i = 0; i < MEM_CONNS && r > 0; i++) {
      if (!pf[i].revents)
        continue;
      if (state[i] == CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(f->fd[i], SOL_SOCKET, SO_ERROR, &err, &el);
        ck_assert_msg(err == 0, "connection %d: %s", i, strerror(err));
        state[i] = SENDING;
        continue;
      }
      if (pf[i].revents & (POLLIN | POLLERR | POLLHUP)) {
        /* An answer (or a close) before the body was all sent. */
        flood_read(f, i);
        if (state[i] == ENDED)
          open--;
        continue;
      }
      size_t off = sent[i];
      const char *src = off < hlen ? head + off : body + (off - hlen);
      size_t len = off < hlen ? hlen - off : total - off;
      ssize_t n = send(f->fd[i], src, len, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        f->refused++; /* reset: the host gave up on it */
        state[i] = ENDED;
        open--;
      } else if (n > 0 && (sent[i] += (size_t)n) == total) {
        f->holding++;
        state[i] = HOLDING;
        open--;
      }
    }
  }
}

/* The kernel holds a whole 1 MiB body in the sockets' buffers, so the
 * sends end before the host has read much: this waits until the engine's
 * VmRSS has been steady for a second (at most 20 s), reading the answers
 * and ends meanwhile.  Returns the largest VmRSS seen, in KiB. */
static long flood_settle(flood *f, pid_t engine) {
  long peak = rss_kib(engine), last = peak;
  int64_t deadline = proc_now_ms() + 20000, steady_since = proc_now_ms();
  while (proc_now_ms() < deadline && proc_now_ms() - steady_since < 1000) {
    struct pollfd pf[MEM_CONNS];
    for (int i = 0; i < MEM_CONNS; i++)
      pf[i] = (struct pollfd){.fd = f->state[i] == ENDED ? -1 : f->fd[i],
                              .events = POLLIN};
    if (poll(pf, MEM_CONNS, 100) > 0)
      for (int i = 0; i < MEM_CONNS; i++)
        if (pf[i].revents)
          flood_read(f, i);
    long now = rss_kib(engine);
    if (now > peak)
      peak = now;
    if (labs(now - last) > 1024)
      steady_since = proc_now_ms();
    last = now;
  }
  return peak;
}

static void flood_end(flood *f) {
  for (int i = 0; i < MEM_CONNS; i++)
    close(f->fd[i]);
}

/* The environment of the memory cases' hosts: AddressSanitizer (the
 * test build) keeps freed memory in a quarantine of up to 256 MiB, which
 * VmRSS would count as the host's; a small one leaves what it holds. */
static void small_quarantine(void) {
  ck_assert(setenv("ASAN_OPTIONS", "detect_leaks=1:quarantine_size_mb=4", 1) ==
            0);
}

/* 300 clients without the token each send a 1 MiB create: each is
 * answered 401 from its head, and the host never holds the bodies (H2O
 * alone would have buffered them all before the handler saw the token). */
START_TEST(unauthenticated_bodies_refused_at_the_head) {
  raise_nofile(MEM_CONNS + 256);
  small_quarantine();
  cfg_max_body = MEM_BODY;
  host_start_env(&H, "h", "127.0.0.1:0", "  token_env: DURO_TEST_TOKEN\n",
                 "DURO_TEST_TOKEN=s3cret");
  pid_t engine = engine_pid(&H);
  http_resp r;
  request_auth(&r, "GET", "/healthz", NULL, 0, "Bearer s3cret");
  expect_status(&r, 200, "healthz with the token");
  http_resp_free(&r);
  long before = rss_kib(engine);
  char head[256];
  snprintf(head, sizeof head,
           "POST " WF " HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer nope\r\n"
           "Content-Length: %d\r\n\r\n",
           MEM_BODY);
  flood f;
  flood_start(&f, head);
  long during = flood_settle(&f, engine);
  ck_assert_msg(during - before < 32 * 1024,
                "the engine grew from %ld to %ld KiB with %d unauthenticated "
                "1 MiB bodies",
                before, during, MEM_CONNS);
  ck_assert_msg(f.bad == 0, "a flood connection was answered: %s", f.example);
  ck_assert_msg(f.refused == MEM_CONNS,
                "%d of %d unauthenticated connections refused, %d held open",
                f.refused, MEM_CONNS, f.holding);
  flood_end(&f);
  request_auth(&r, "GET", WF, NULL, 0, "Bearer s3cret");
  expect_status(&r, 200, "list with the token after the flood");
  ck_assert_int_eq(json_array_size(jget(r.json, "instances")), 0);
  http_resp_free(&r);
  fprintf(stderr, "unauthenticated flood: engine VmRSS %ld -> %ld KiB\n",
          before, during);
  host_stop(&H);
}
END_TEST

/* 300 clients with nothing to stop them (no token) each send a 1 MiB
 * create and hold its last byte: the host holds at most its budget
 * (64 MiB here) and refuses the reads past it.  VmRSS may pass the budget
 * by AddressSanitizer's shadow and the largest buffers' last doubling;
 * without the budget it grew by 320 MiB. */
START_TEST(bodies_past_the_budget_refused) {
  raise_nofile(MEM_CONNS + 256);
  small_quarantine();
  cfg_max_body = MEM_BODY;
  host_start(&H, "h");
  pid_t engine = engine_pid(&H);
  assert_healthy("start");
  long before = rss_kib(engine);
  char head[256];
  snprintf(head, sizeof head,
           "POST " WF " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n",
           MEM_BODY);
  flood f;
  flood_start(&f, head);
  long during = flood_settle(&f, engine);
  ck_assert_msg(during - before < 128 * 1024,
                "the engine grew from %ld to %ld KiB holding %d of %d 1 MiB "
                "bodies (budget 64 MiB)",
                before, during, f.holding, MEM_CONNS);
  ck_assert_msg(f.bad == 0, "a flood connection was answered: %s", f.example);
  ck_assert_msg(f.refused > 0, "no connection refused; %d held", f.holding);
  /* Room again once they are gone. */
  flood_end(&f);
  wait_healthy("the flood");
  create("{\"id\":\"after\"}", "after");
  ck_assert_int_eq(instance_count(), 1);
  fprintf(stderr,
          "budget flood: engine VmRSS %ld -> %ld KiB, %d held, %d refused\n",
          before, during, f.holding, f.refused);
  host_stop(&H);
}
END_TEST

/* A connection whose first request had the token: a later request on it
 * with a wrong token is read no further than its head (a proxy in front
 * may carry many clients' requests on one connection). */
START_TEST(kept_connection_wrong_token_cut_at_head) {
  enum { BIG = 64 * 1024 * 1024 };
  cfg_max_body = BIG;
  host_start_env(&H, "h", "127.0.0.1:0", "  token_env: DURO_TEST_TOKEN\n",
                 "DURO_TEST_TOKEN=s3cret");
  int fd = raw_connect();
  static const char get[] =
      "GET /healthz HTTP/1.1\r\n" HOSTH "Authorization: Bearer s3cret\r\n\r\n";
  ck_assert(send(fd, get, sizeof get - 1, MSG_NOSIGNAL) ==
            (ssize_t)(sizeof get - 1));
  char buf[1024] = "";
  size_t got = 0;
  while (!answer_complete(buf)) {
    ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
    ck_assert_msg(n > 0, "no answer to the first request");
    got += (size_t)n;
    buf[got] = '\0';
  }
  ck_assert_msg(!strncmp(buf, "HTTP/1.1 200", 12), "%s", buf);
  char head[256];
  snprintf(head, sizeof head,
           "POST " WF " HTTP/1.1\r\n" HOSTH "Authorization: Bearer nope\r\n"
           "Content-Length: %d\r\n\r\n",
           BIG);
  ck_assert(send(fd, head, strlen(head), MSG_NOSIGNAL) ==
            (ssize_t)strlen(head));
  char *chunk = malloc(65536);
  ck_assert(chunk != NULL);
  memset(chunk, 'x', 65536);
  size_t sent = 0;
  while (sent < BIG) {
    ssize_t n = send(fd, chunk, 65536, MSG_NOSIGNAL);
    if (n <= 0)
      break;
    sent += (size_t)n;
  }
  free(chunk);
  ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  ck_assert_msg(sent < BIG / 2,
                "the host took %zu bytes of a body with a wrong token; "
                "answer: %.200s",
                sent, buf);
  ck_assert_msg(n <= 0 || reply_status(buf) >= 400, "answered: %.300s", buf);
  close(fd);
  assert_healthy_auth("Bearer s3cret");
  host_stop(&H);
}
END_TEST

/* ---- 9. the server in this process
 * -------------------------------------------------------- */

/* uv_queue_work fails while this is set (-Wl,--wrap=uv_queue_work). */
static int queue_fails;

int __real_uv_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work,
                         uv_after_work_cb after);
int __wrap_uv_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work,
                         uv_after_work_cb after);
int __wrap_uv_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work,
                         uv_after_work_cb after) {
  if (queue_fails)
    return UV_ENOMEM;
  return __real_uv_queue_work(loop, req, work, after);
}

/* The step API's table, as a loaded plugin has it (duro.h). */
const duro_api *duro_api_ptr_;

static duro_rc trivial_run(duro_step *step, const duro_event *ev,
                           duro_env *env) {
  (void)ev;
  (void)env;
  return duro_set_output(step, "{}");
}

/* Sends `req` on a fresh connection to the in-process server and runs
 * its loop until the server closes the connection; the reply. */
static char *inproc_exchange(uv_loop_t *loop, int port, const char *req) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
  ck_assert(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
  char *out = calloc(1, 4096);
  size_t got = 0;
  int64_t deadline = proc_now_ms() + RAW_READ_MS;
  for (;;) {
    ck_assert_msg(proc_now_ms() < deadline, "no answer to %s in %d ms: %s", req,
                  RAW_READ_MS, out);
    uv_run(loop, UV_RUN_NOWAIT);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 5) <= 0)
      continue;
    ssize_t n = recv(fd, out + got, 4095 - got, 0);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  return out;
}

START_TEST(queue_failure_answers_503) {
  char err[512], db[400], yaml[400];
  snprintf(db, sizeof db, "%s/inproc.db", proc_tmp_dir);
  snprintf(yaml, sizeof yaml, "http:\n  listen: 127.0.0.1:0\nplugins: []\n");
  config *cfg =
      config_parse("inproc.yaml", yaml, strlen(yaml), err, sizeof err);
  ck_assert_msg(cfg != NULL, "%s", err);
  duro_api_ptr_ = duro_host_api();
  duro_engine_options opt = {.db_path = db, .workers = 0};
  duro_engine *e;
  ck_assert_msg(duro_engine_open(&opt, &e, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(duro_engine_register(e, "wf", "WF", trivial_run, NULL, NULL),
                   0);
  uv_loop_t loop;
  uv_loop_init(&loop);
  http_server *s;
  ck_assert_msg(http_start(&loop, e, cfg, -1, &s, err, sizeof err) == 0, "%s",
                err);
  /* A create runs on the loop (its commit on the journal's writer); an
   * event goes to the pool. */
  static const char create[] =
      "POST /workflows/wf/instances HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nConnection: close\r\nContent-Length: "
      "11\r\n\r\n{\"id\":\"q1\"}";
  static const char req[] = "POST /workflows/wf/instances/q1/events/go "
                            "HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Content-Type: application/json\r\nConnection: "
                            "close\r\nContent-Length: 2\r\n\r\n{}";
  queue_fails = 1;
  char *reply = inproc_exchange(&loop, http_port(s), create);
  ck_assert_msg(reply_status(reply) == 201, "a create needs no pool: %s",
                reply);
  free(reply);
  reply = inproc_exchange(&loop, http_port(s), req);
  ck_assert_msg(reply_status(reply) == 503 &&
                    strstr(reply, "\"code\":\"server.busy\"") &&
                    strcasestr(reply, "\r\nretry-after: 1\r\n"),
                "a request that cannot be queued: %s", reply);
  ck_assert_uint_eq(http_in_flight(s), 0);
  free(reply);
  queue_fails = 0;
  reply = inproc_exchange(&loop, http_port(s), req);
  ck_assert_msg(reply_status(reply) == 202, "once it can be queued: %s", reply);
  free(reply);
  /* The host's shutdown: nothing left in flight to wait for. */
  http_stop(s);
  uv_run(&loop, UV_RUN_NOWAIT);
  ck_assert_uint_eq(http_in_flight(s), 0);
  http_free(s);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  duro_engine_close(e);
  config_free(cfg);
}
END_TEST

/* ---- queues ---------------------------------------------------------------
 */

/* A host whose order plugin consumes "jobs" (one retry, then "jobs-dlq")
 * and produces into it, with bodies up to 1 MiB. */
static void host_start_queues(host *h, const char *name) {
  cfg_max_body = 1 << 20;
  write_config(h, name, "127.0.0.1:0", NULL);
  FILE *f = fopen(h->config, "a");
  ck_assert(f != NULL);
  fputs(
      "    queues:\n"
      "      producers:\n"
      "        - {binding: JOBS, queue: jobs}\n"
      "      consumers:\n"
      "        - {queue: jobs, max_retries: 1, dead_letter_queue: jobs-dlq}\n",
      f);
  ck_assert(fclose(f) == 0);
  host_spawn(h, NULL);
  h->port = proc_wait_port(h->pid, h->log, proc_now_ms() + WAIT_MS);
}

/* POST to /queues/{q}/messages{suffix} expecting `status`; the JSON is the
 * caller's. */
static json_t *queue_post(const char *q, const char *suffix, const char *body,
                          int status) {
  char path[256];
  snprintf(path, sizeof path, "/queues/%s/messages%s", q, suffix);
  http_resp r;
  request(&r, "POST", path, body);
  expect_status(&r, status, path);
  json_t *j = json_incref(r.json);
  http_resp_free(&r);
  return j;
}

/* {"acks":[{"lease_id": lease}]} or a retry of it. */
static json_t *queue_ack_one(const char *q, const char *lease, int retry) {
  char body[256];
  snprintf(body, sizeof body, "{\"%s\":[{\"lease_id\":\"%s\"}]}",
           retry ? "retries" : "acks", lease);
  return queue_post(q, "/ack", body, 200);
}

START_TEST(queue_send_pull_ack) {
  host_start_queues(&H, "q");
  json_t *one = queue_post("jobs", "", "{\"body\":{\"n\":1}}", 201);
  ck_assert(json_integer_value(jget(one, "id")) > 0);
  json_decref(one);
  json_t *b = queue_post("jobs", "/batch",
                         "{\"messages\":[{\"body\":2},{\"body\":[3],"
                         "\"delay_seconds\":3600}]}",
                         201);
  ck_assert_uint_eq(json_array_size(jget(b, "ids")), 2);
  json_decref(b);
  http_resp r;
  request(&r, "GET", "/queues/jobs", NULL);
  expect_status(&r, 200, "GET /queues/jobs");
  ck_assert_int_eq(json_integer_value(jget(r.json, "ready")), 2);
  ck_assert_int_eq(json_integer_value(jget(r.json, "delayed")), 1);
  http_resp_free(&r);

  json_t *m = queue_post("jobs", "/pull", "{\"batch_size\":10}", 200);
  json_t *msgs = jget(m, "messages");
  ck_assert_uint_eq(json_array_size(msgs), 2);
  ck_assert_int_eq(json_integer_value(jget(json_array_get(msgs, 0), "body.n")),
                   1);
  ck_assert_int_eq(
      json_integer_value(jget(json_array_get(msgs, 0), "attempts")), 1);
  const char *lease0 = jstr(json_array_get(msgs, 0), "lease_id");
  const char *lease1 = jstr(json_array_get(msgs, 1), "lease_id");
  json_t *res = queue_ack_one("jobs", lease0, 0);
  ck_assert_int_eq(json_integer_value(jget(res, "acked")), 1);
  json_decref(res);
  /* acked twice: reported, not an error of the request */
  res = queue_ack_one("jobs", lease0, 0);
  ck_assert_int_eq(json_integer_value(jget(res, "acked")), 0);
  ck_assert_str_eq(jstr(json_array_get(jget(res, "errors"), 0), "code"),
                   "queue.lease_not_held");
  json_decref(res);
  /* max_retries 1: the first retry delays it, the second dead-letters */
  res = queue_ack_one("jobs", lease1, 1);
  ck_assert_int_eq(json_integer_value(jget(res, "retried")), 1);
  json_decref(res);
  json_decref(m);
  m = queue_post("jobs", "/pull", "{\"visibility_timeout_ms\":60000}", 200);
  msgs = jget(m, "messages");
  ck_assert_uint_eq(json_array_size(msgs), 1);
  ck_assert_int_eq(
      json_integer_value(jget(json_array_get(msgs, 0), "attempts")), 2);
  res = queue_ack_one("jobs", jstr(json_array_get(msgs, 0), "lease_id"), 1);
  ck_assert_int_eq(json_integer_value(jget(res, "dead_lettered")), 1);
  json_decref(res);
  json_decref(m);
  m = queue_post("jobs-dlq", "/pull", NULL, 200);
  ck_assert_uint_eq(json_array_size(jget(m, "messages")), 1);
  json_decref(m);

  request(&r, "GET", "/queues", NULL);
  expect_status(&r, 200, "GET /queues");
  ck_assert_uint_eq(json_array_size(r.json), 2);
  ck_assert_str_eq(jstr(json_array_get(r.json, 0), "name"), "jobs");
  ck_assert_int_eq(
      json_integer_value(jget(json_array_get(r.json, 0), "delayed")), 1);
  ck_assert_int_eq(
      json_integer_value(jget(json_array_get(r.json, 0), "dead_lettered")), 1);
  ck_assert_str_eq(jstr(json_array_get(r.json, 1), "name"), "jobs-dlq");
  ck_assert_int_eq(
      json_integer_value(jget(json_array_get(r.json, 1), "in_flight")), 1);
  http_resp_free(&r);
  /* the same in /metrics */
  request(&r, "GET", "/metrics", NULL);
  expect_status(&r, 200, "GET /metrics");
  static const char *const lines[] = {
      "duro_queue_messages{queue=\"jobs\",state=\"delayed\"} 1\n",
      "duro_queue_messages{queue=\"jobs\",state=\"ready\"} 0\n",
      "duro_queue_messages{queue=\"jobs-dlq\",state=\"in_flight\"} 1\n",
      "duro_queue_dead_lettered_total{queue=\"jobs\"} 1\n",
      "duro_queue_dropped_total{queue=\"jobs\"} 0\n",
      "# TYPE duro_queue_lag_seconds gauge\n"};
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    ck_assert_msg(strstr(r.body, lines[i]), "/metrics lacks %s", lines[i]);
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* Pulls every visible message of `q` and retries each at once; returns
 * how many it pulled. */
static size_t queue_pull_retry_all(const char *q) {
  json_t *m = queue_post(q, "/pull", "{\"batch_size\":100}", 200);
  size_t i, n = json_array_size(jget(m, "messages"));
  json_t *msg;
  json_array_foreach(jget(m, "messages"), i, msg) {
    char body[256];
    snprintf(body, sizeof body,
             "{\"retries\":[{\"lease_id\":\"%s\",\"delay_seconds\":0}]}",
             jstr(msg, "lease_id"));
    json_decref(queue_post(q, "/ack", body, 200));
  }
  json_decref(m);
  return n;
}

static json_int_t queue_ready(const char *q) {
  char path[128];
  snprintf(path, sizeof path, "/queues/%s", q);
  http_resp r;
  request(&r, "GET", path, NULL);
  expect_status(&r, 200, path);
  json_int_t n = json_integer_value(jget(r.json, "ready"));
  http_resp_free(&r);
  return n;
}

/* A dead-letter queue no consumer consumes keeps its messages however often
 * they are pulled (they are out of attempts already), and sends them back
 * to the queue that dead-lettered them as new messages, oldest first. */
START_TEST(queue_redrive) {
  host_start_queues(&H, "qr");
  json_decref(queue_post("jobs", "", "{\"body\":{\"n\":1}}", 201));
  ck_assert_uint_eq(queue_pull_retry_all("jobs"), 1);
  ck_assert_uint_eq(queue_pull_retry_all("jobs"), 1); /* dead-lettered */
  json_decref(queue_post("jobs-dlq", "", "{\"body\":{\"n\":2}}", 201));
  for (int i = 0; i < 4; i++)
    ck_assert_uint_eq(queue_pull_retry_all("jobs-dlq"), 2);
  ck_assert_int_eq(queue_ready("jobs-dlq"), 2);

  json_t *out = queue_post("jobs-dlq", "/redrive", "{\"batch_size\":1}", 200);
  ck_assert_str_eq(jstr(out, "to"), "jobs");
  json_t *moved = jget(out, "moved");
  ck_assert_uint_eq(json_array_size(moved), 1);
  ck_assert_int_eq(json_integer_value(jget(json_array_get(moved, 0), "body.n")),
                   1);
  ck_assert_int_eq(
      json_integer_value(jget(json_array_get(moved, 0), "attempts")), 6);
  ck_assert(json_integer_value(jget(json_array_get(moved, 0), "new_id")) >
            json_integer_value(jget(json_array_get(moved, 0), "id")));
  json_decref(out);
  ck_assert_int_eq(queue_ready("jobs-dlq"), 1);
  ck_assert_int_eq(queue_ready("jobs"), 1);
  /* back with no attempts: max_retries 1 gives it two deliveries again */
  json_t *m = queue_post("jobs", "/pull", NULL, 200);
  ck_assert_int_eq(json_integer_value(
                       jget(json_array_get(jget(m, "messages"), 0), "body.n")),
                   1);
  ck_assert_int_eq(json_integer_value(jget(
                       json_array_get(jget(m, "messages"), 0), "attempts")),
                   1);
  json_decref(m);

  out = queue_post("jobs-dlq", "/redrive", NULL, 200);
  ck_assert_uint_eq(json_array_size(jget(out, "moved")), 1);
  json_decref(out);
  out = queue_post("jobs-dlq", "/redrive", "{}", 200); /* nothing left */
  ck_assert_uint_eq(json_array_size(jget(out, "moved")), 0);
  json_decref(out);
  ck_assert_int_eq(queue_ready("jobs-dlq"), 0);
  ck_assert_int_eq(queue_ready("jobs"), 1);

  static const struct {
    const char *q, *body;
    long status;
    const char *code;
  } refused[] = {
      {"jobs", "{}", 400, "invalid_argument"}, /* nothing dead-letters here */
      {"jobs-dlq", "{\"to\":\"nope\"}", 404, "queue.not_found"},
      {"jobs-dlq", "{\"to\":\"jobs-dlq\"}", 400, "invalid_argument"},
      {"jobs-dlq", "{\"batch_size\":0}", 400, "invalid_argument"},
      {"jobs-dlq", "{\"batch_size\":101}", 400, "invalid_argument"},
      {"jobs-dlq", "{\"to\":1}", 400, "request.invalid"},
      {"nope", "{}", 404, "queue.not_found"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    char path[128];
    snprintf(path, sizeof path, "/queues/%s/messages/redrive", refused[i].q);
    http_resp r;
    request(&r, "POST", path, refused[i].body);
    assert_error(&r, refused[i].status, refused[i].code, refused[i].body);
    http_resp_free(&r);
  }
  http_resp r;
  request(&r, "GET", "/queues/jobs-dlq/messages/redrive", NULL);
  assert_error(&r, 405, "request.method_not_allowed", "GET redrive");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* GET /queues/{q}/messages{query} answered 200: its "messages" (caller
 * decrefs). */
static json_t *queue_peek(const char *q, const char *query) {
  char path[256];
  snprintf(path, sizeof path, "/queues/%s/messages%s", q, query);
  http_resp r;
  request(&r, "GET", path, NULL);
  expect_status(&r, 200, path);
  json_t *m = json_incref(jget(r.json, "messages"));
  ck_assert_msg(json_is_array(m), "%s: %s", path, r.body);
  http_resp_free(&r);
  return m;
}

/* A look at a queue's messages, oldest first, leases none of them: a
 * dead-letter queue browsed twice keeps its attempts, and a leased
 * message is shown leased (without its lease id). */
START_TEST(queue_peek_leases_nothing) {
  host_start_queues(&H, "qp");
  json_decref(queue_post("jobs", "", "{\"body\":{\"n\":1}}", 201));
  ck_assert_uint_eq(queue_pull_retry_all("jobs"), 1);
  ck_assert_uint_eq(queue_pull_retry_all("jobs"), 1); /* dead-lettered */
  json_decref(queue_post("jobs-dlq", "", "{\"body\":{\"n\":2}}", 201));
  for (int look = 0; look < 2; look++) {
    json_t *m = queue_peek("jobs-dlq", look ? "?limit=100" : "");
    ck_assert_uint_eq(json_array_size(m), 2);
    json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
    ck_assert_int_eq(json_integer_value(jget(a, "body.n")), 1);
    ck_assert_int_eq(json_integer_value(jget(a, "attempts")), 2);
    ck_assert(json_is_false(jget(a, "leased")));
    ck_assert_int_eq(json_integer_value(jget(b, "body.n")), 2);
    ck_assert_int_eq(json_integer_value(jget(b, "attempts")), 0);
    ck_assert(json_integer_value(jget(a, "id")) <
              json_integer_value(jget(b, "id")));
    ck_assert(json_integer_value(jget(b, "visible_ms")) > 0);
    ck_assert(json_integer_value(jget(b, "sent_ms")) > 0);
    json_decref(m);
  }
  json_t *m = queue_peek("jobs-dlq", "?limit=1");
  ck_assert_uint_eq(json_array_size(m), 1);
  json_decref(m);
  /* a pull after the looks: the same attempts as if none had been made */
  json_t *p =
      queue_post("jobs-dlq", "/pull",
                 "{\"batch_size\":1,\"visibility_timeout_ms\":60000}", 200);
  ck_assert_int_eq(json_integer_value(jget(
                       json_array_get(jget(p, "messages"), 0), "attempts")),
                   3);
  json_decref(p);
  m = queue_peek("jobs-dlq", "?limit=20");
  ck_assert(json_is_true(jget(json_array_get(m, 0), "leased")));
  ck_assert_int_eq(json_integer_value(jget(json_array_get(m, 0), "attempts")),
                   3);
  ck_assert_ptr_null(jget(json_array_get(m, 0), "lease_id"));
  ck_assert(json_is_false(jget(json_array_get(m, 1), "leased")));
  json_decref(m);
  m = queue_peek("jobs", "");
  ck_assert_uint_eq(json_array_size(m), 0);
  json_decref(m);

  static const struct {
    const char *path;
    long status;
    const char *code;
  } refused[] = {
      {"/queues/nope/messages", 404, "queue.not_found"},
      {"/queues/jobs-dlq/messages?limit=0", 400, "request.invalid"},
      {"/queues/jobs-dlq/messages?limit=101", 400, "request.invalid"},
      {"/queues/jobs-dlq/messages?limit=", 400, "request.invalid"},
      {"/queues/jobs-dlq/messages?limit=5x", 400, "request.invalid"},
      {"/queues/jobs-dlq/messages?limit=-1", 400, "request.invalid"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    http_resp r;
    request(&r, "GET", refused[i].path, NULL);
    assert_error(&r, refused[i].status, refused[i].code, refused[i].path);
    http_resp_free(&r);
  }
  http_resp r;
  request(&r, "DELETE", "/queues/jobs-dlq/messages", NULL);
  assert_error(&r, 405, "request.method_not_allowed", "DELETE messages");
  char allow[64];
  ck_assert(http_resp_header(&r, "allow", allow, sizeof allow));
  ck_assert_str_eq(allow, "GET, POST");
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* A message body of `len` bytes of JSON (a string), as a request. */
static char *message_of(size_t len) {
  char *s = malloc(len + 32);
  ck_assert_ptr_nonnull(s);
  int o = sprintf(s, "{\"body\":\"");
  memset(s + o, 'a', len - 2);
  strcpy(s + o + len - 2, "\"}");
  return s;
}

START_TEST(queue_errors) {
  host_start_queues(&H, "qe");
  http_resp r;
  request(&r, "POST", "/queues/nope/messages", "{\"body\":1}");
  assert_error(&r, 404, "queue.not_found", "unknown queue");
  http_resp_free(&r);
  request(&r, "GET", "/queues/nope", NULL);
  assert_error(&r, 404, "queue.not_found", "GET unknown queue");
  http_resp_free(&r);
  /* Cloudflare's decimal units: 128 KB is 128,000 bytes */
  char *big = message_of(128001);
  request(&r, "POST", "/queues/jobs/messages", big);
  assert_error(&r, 413, "queue.message_too_large", "128,001 bytes");
  assert_contains(jstr(r.json, "error.message"),
                  "128001 bytes, more than the 128000-byte limit");
  http_resp_free(&r);
  free(big);
  char *max = message_of(128000);
  request(&r, "POST", "/queues/jobs/messages", max);
  expect_status(&r, 201, "a body of 128,000 bytes");
  http_resp_free(&r);
  free(max);
  /* 128,000 + 127,990 + 11 = 256,001 bytes of bodies */
  char *three = malloc(300000);
  ck_assert_ptr_nonnull(three);
  const size_t lens[] = {128000, 127990, 11};
  int o = sprintf(three, "{\"messages\":[");
  for (int i = 0; i < 3; i++) {
    char *m = message_of(lens[i]);
    o += sprintf(three + o, "%s%s", i ? "," : "", m);
    free(m);
  }
  strcpy(three + o, "]}");
  request(&r, "POST", "/queues/jobs/messages/batch", three);
  assert_error(&r, 413, "queue.batch_too_large", "256,001 bytes");
  assert_contains(jstr(r.json, "error.message"),
                  "256001 bytes, more than the 256000-byte limit");
  http_resp_free(&r);
  free(three);
  char many[2048] = "{\"messages\":[";
  for (int i = 0; i < 101; i++)
    strcat(many, i ? ",{\"body\":1}" : "{\"body\":1}");
  strcat(many, "]}");
  request(&r, "POST", "/queues/jobs/messages/batch", many);
  assert_error(&r, 413, "queue.batch_too_large", "101 messages");
  http_resp_free(&r);
  request(&r, "POST", "/queues/jobs/messages", "{\"body\":");
  assert_error(&r, 400, "request.invalid_json", "malformed JSON");
  http_resp_free(&r);
  request(&r, "POST", "/queues/jobs/messages", "{\"delay_seconds\":1}");
  assert_error(&r, 400, "request.invalid", "no body");
  http_resp_free(&r);
  request(&r, "POST", "/queues/jobs/messages",
          "{\"body\":1,\"delay_seconds\":-1}");
  assert_error(&r, 400, "invalid_argument", "negative delay");
  http_resp_free(&r);
  request(&r, "POST", "/queues/jobs/messages",
          "{\"body\":1,\"delay_seconds\":43201}");
  assert_error(&r, 400, "invalid_argument", "delay over 12 h");
  assert_contains(jstr(r.json, "error.message"), "12 hours");
  http_resp_free(&r);
  request(&r, "POST", "/queues/jobs/messages/pull", "{\"batch_size\":101}");
  assert_error(&r, 400, "invalid_argument", "batch_size 101");
  http_resp_free(&r);
  request(&r, "POST", "/queues/jobs/messages/ack", "{\"acks\":[1]}");
  assert_error(&r, 400, "request.invalid", "ack without lease_id");
  http_resp_free(&r);
  request(&r, "PUT", "/queues/jobs/messages", NULL);
  assert_error(&r, 405, "request.method_not_allowed", "PUT messages");
  http_resp_free(&r);
  /* nothing refused was stored: only the body at the limit */
  request(&r, "GET", "/queues/jobs", NULL);
  ck_assert_int_eq(json_integer_value(jget(r.json, "ready")), 1);
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- cron triggers ---------------------------------------------------------
 */

#define CRON_LABELS "{plugin=\"orders\",schedule=\"0 3 * * *\"}"

/* A host whose order plugin declares a nightly cron in the no-code form:
 * one order-flow instance per tick, "nightly-" and the tick's UTC date. */
static void host_start_crons(host *h, const char *name) {
  write_config(h, name, "127.0.0.1:0", NULL);
  FILE *f = fopen(h->config, "a");
  ck_assert(f != NULL);
  fputs("    triggers:\n"
        "      crons:\n"
        "        - {schedule: \"0 3 * * *\", workflow: order-flow, "
        "id: \"nightly-{date}\"}\n",
        f);
  ck_assert(fclose(f) == 0);
  host_spawn(h, NULL);
  h->port = proc_wait_port(h->pid, h->log, proc_now_ms() + WAIT_MS);
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "nightly-YYYY-MM-DD" of today, UTC. */
static void nightly_id(char out[32]) {
  time_t t = (time_t)(wall_ms() / 1000);
  struct tm tm;
  ck_assert(gmtime_r(&t, &tm) != NULL);
  strftime(out, 32, "nightly-%Y-%m-%d", &tm);
}

/* METHOD /__scheduled?QUERY answered 200 with one trigger fired, its
 * state "complete" (it created the instance) or "exists" (the instance
 * was there); *created says which.  Returns its instance id (malloc'ed). */
static char *fire_nightly(const char *method, const char *query, int *created) {
  char path[128];
  snprintf(path, sizeof path, "/__scheduled?%s", query);
  http_resp r;
  request(&r, method, path, NULL);
  expect_status(&r, 200, path);
  ck_assert_msg(json_array_size(r.json) == 1, "%s: %s", path, r.body);
  json_t *t = json_array_get(r.json, 0);
  ck_assert_msg(!strcmp(jstr(t, "plugin"), "orders") &&
                    !strcmp(jstr(t, "schedule"), "0 3 * * *") &&
                    (!strcmp(jstr(t, "state"), "complete") ||
                     !strcmp(jstr(t, "state"), "exists")),
                "%s: %s", path, r.body);
  *created = !strcmp(jstr(t, "state"), "complete");
  char *id = strdup(jstr(t, "instance"));
  http_resp_free(&r);
  return id;
}

START_TEST(cron_list_fire_and_metrics) {
  host_start_crons(&H, "cron");
  http_resp r;
  int64_t now = wall_ms();
  request(&r, "GET", "/crons", NULL);
  expect_status(&r, 200, "GET /crons");
  ck_assert_msg(json_array_size(r.json) == 1, "GET /crons: %s", r.body);
  json_t *t = json_array_get(r.json, 0);
  ck_assert_str_eq(jstr(t, "plugin"), "orders");
  ck_assert_str_eq(jstr(t, "schedule"), "0 3 * * *");
  ck_assert_str_eq(jstr(t, "workflow"), "order-flow");
  ck_assert_msg(json_is_null(jget(t, "last")), "last: %s", r.body);
  /* five ticks, at 03:00 UTC, a day apart, the first within a day */
  json_t *next = jget(t, "next");
  ck_assert_msg(json_array_size(next) == 5, "next: %s", r.body);
  int64_t first = json_integer_value(json_array_get(next, 0));
  ck_assert_msg(first > now - 60000 && first <= now + 86400000,
                "next[0] %lld, now %lld", (long long)first, (long long)now);
  for (size_t i = 0; i < 5; i++) {
    int64_t ms = json_integer_value(json_array_get(next, i));
    ck_assert_msg(ms % 86400000 == 3 * 3600000, "next[%zu]: %s", i, r.body);
    ck_assert_msg(ms == first + (int64_t)i * 86400000, "next[%zu]: %s", i,
                  r.body);
  }
  http_resp_free(&r);

  /* Fired by hand: the instance of today's tick, which then exists.  The
   * id is the date of the minute it fired in, so read the date on both
   * sides (a run across midnight UTC sees two dates). */
  char before[32], after[32];
  nightly_id(before);
  int created[3];
  char *id = fire_nightly("POST", "cron=0+3+*+*+*", &created[0]);
  ck_assert_msg(created[0], "the first fire found %s there", id);
  nightly_id(after);
  ck_assert_msg(!strcmp(id, before) || !strcmp(id, after),
                "instance \"%s\", want %s", id, after);
  json_decref(describe(id));
  ck_assert_uint_eq(instance_count(), 1);
  /* The same minute again, by POST and by a plain GET with %XX escapes:
   * "exists", the same id, no second instance. */
  char *again = fire_nightly("POST", "cron=0+3+*+*+*", &created[1]);
  char *by_get = fire_nightly("GET", "cron=0%203%20%2A%20*%20*", &created[2]);
  nightly_id(before);
  if (!strcmp(before, after)) {
    ck_assert_str_eq(again, id);
    ck_assert_str_eq(by_get, id);
    ck_assert_msg(!created[1] && !created[2], "a fire said complete again");
    ck_assert_uint_eq(instance_count(), 1);
  }
  free(again);
  free(by_get);
  free(id);

  request(&r, "POST", "/__scheduled?cron=1+2+*+*+*", NULL);
  assert_error(&r, 404, "cron.not_found", "unknown expression");
  assert_contains(jstr(r.json, "error.message"), "1 2 * * *");
  http_resp_free(&r);
  request(&r, "POST", "/__scheduled", NULL);
  assert_error(&r, 400, "invalid_argument", "no cron parameter");
  http_resp_free(&r);
  request(&r, "POST", "/__scheduled?cron=", NULL);
  assert_error(&r, 400, "invalid_argument", "empty cron parameter");
  http_resp_free(&r);
  request(&r, "POST", "/__scheduled?cron=0%2", NULL);
  assert_error(&r, 400, "invalid_argument", "broken escape");
  http_resp_free(&r);
  request(&r, "DELETE", "/__scheduled?cron=0+3+*+*+*", NULL);
  assert_error(&r, 405, "request.method_not_allowed", "DELETE /__scheduled");
  http_resp_free(&r);
  request(&r, "POST", "/crons", "{}");
  assert_error(&r, 405, "request.method_not_allowed", "POST /crons");
  http_resp_free(&r);

  request(&r, "GET", "/metrics", NULL);
  expect_status(&r, 200, "GET /metrics");
  static const char *const lines[] = {
      "# TYPE duro_cron_fires_total counter\n",
      "\nduro_cron_fires_total" CRON_LABELS " ",
      "# TYPE duro_cron_failures_total counter\n",
      "\nduro_cron_failures_total" CRON_LABELS " 0\n",
      "# TYPE duro_cron_missed_total counter\n",
      "\nduro_cron_missed_total" CRON_LABELS " ",
      "# TYPE duro_cron_skipped_total counter\n",
      "\nduro_cron_skipped_total" CRON_LABELS " ",
      "# TYPE duro_cron_next_fire_timestamp_seconds gauge\n",
  };
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    ck_assert_msg(strstr(r.body, lines[i]), "/metrics lacks %s", lines[i]);
  char want[160];
  snprintf(want, sizeof want,
           "\nduro_cron_next_fire_timestamp_seconds" CRON_LABELS " %lld\n",
           (long long)(first / 1000));
  /* unless 03:00 UTC passed meanwhile */
  if (wall_ms() < first)
    ck_assert_msg(strstr(r.body, want), "/metrics lacks %s", want);
  http_resp_free(&r);
  host_stop(&H);
}
END_TEST

/* Every spelling of /__scheduled that reaches the cron route is guarded
 * as "/__scheduled" is: a trailing or doubled slash, a dot segment, a
 * %XX escape.  Once judged by its bytes, "GET /__scheduled/" from an
 * <img> on another site's page fired the cron. */
START_TEST(scheduled_spellings_refused_cross_site) {
  host_start_crons(&H, "spell");
  static const char *const paths[] = {
      "/__scheduled",      "/__scheduled/",   "//__scheduled",
      "/__scheduled//",    "/./__scheduled",  "/__scheduled/.",
      "/x/../__scheduled", "/%5F_scheduled",  "/%5f%5fscheduled",
      "/__sch%65duled",    "/%2F__scheduled", "/__scheduled%2F",
  };
  static const char *const from[] = {
      "Sec-Fetch-Site: cross-site\r\n", /* an <img>: no Origin */
      "Sec-Fetch-Site: same-site\r\n",
      "Origin: http://evil.example\r\n",
  };
  size_t n = sizeof paths / sizeof *paths;
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < sizeof from / sizeof *from; k++) {
      char head[512], code[64];
      snprintf(head, sizeof head,
               "GET %s?cron=0+3+*+*+* HTTP/1.1\r\nHost: 127.0.0.1:@\r\n%s",
               paths[i], from[k]);
      int st = raw_ask(head, "", code, sizeof code);
      ck_assert_msg(st == 403 && !strcmp(code, "request.cross_origin"),
                    "GET %s with %s: %d %s, want 403 request.cross_origin",
                    paths[i], from[k], st, code);
    }
  }
  /* Nothing fired. */
  ck_assert_uint_eq(instance_count(), 0);
  /* Each spelling does reach the route (a plain curl, same origin): so
   * each refusal above was the guard's, not a 404's. */
  for (size_t i = 0; i < n; i++) {
    char head[512], code[64];
    snprintf(head, sizeof head,
             "GET %s?cron=0+3+*+*+* HTTP/1.1\r\nHost: 127.0.0.1:@\r\n%s",
             paths[i], i % 2 ? "Sec-Fetch-Site: same-origin\r\n" : "");
    int st = raw_ask(head, "", code, sizeof code);
    ck_assert_msg(st == 200, "GET %s from the same origin: %d %s", paths[i], st,
                  code);
  }
  ck_assert_uint_eq(instance_count(), 1);
  host_stop(&H);
}
END_TEST

static Suite *http_suite(void) {
  Suite *s = suite_create("http");
  struct {
    const char *name;
    int timeout;
  } groups[] = {{"routes", 60},  {"runs", 60},       {"errors", 60},
                {"bind", 60},    {"sweep", 180},     {"shutdown", 60},
                {"memory", 180}, {"in process", 60}, {"queues", 60},
                {"crons", 60}};
  TCase *tc[10];
  for (int i = 0; i < 10; i++) {
    tc[i] = tcase_create(groups[i].name);
    proc_fixtures(tc[i], "duro-http");
    tcase_set_timeout(tc[i], groups[i].timeout);
    suite_add_tcase(s, tc[i]);
  }
  tcase_add_test(tc[0], create_with_and_without_id);
  tcase_add_test(tc[0], batch_create);
  tcase_add_test(tc[0], list_filter_and_paging);
  tcase_add_test(tc[0], list_where_attributes);
  tcase_add_test(tc[0], describe_instance);
  tcase_add_test(tc[0], export_instance);
  tcase_add_test(tc[0], status_transitions);
  tcase_add_test(tc[0], events_move_instances_on);
  tcase_add_test(tc[0], healthz_and_metrics);

  tcase_add_test(tc[1], order_completes_by_id);
  tcase_add_test(tc[1], order_errors_with_plugin_message);
  tcase_add_test(tc[1], create_with_timeout);
  tcase_add_test(tc[1], order_rejected_by_review);
  tcase_add_test(tc[1], order_terminated_with_rollback);
  tcase_add_test(tc[1], order_restarted_with_rollback);
  tcase_add_test(tc[1], wait_for_the_end);
  tcase_add_test(tc[1], create_and_wait);
  tcase_add_test(tc[1], light_status_route);
  tcase_add_test(tc[1], many_waiters);

  tcase_add_test(tc[2], error_replies);
  tcase_add_test(tc[2], body_over_limit_413);
  tcase_add_test(tc[2], bearer_token_401);
  tcase_add_test(tc[2], dashboard_files_without_token);
  tcase_add_test(tc[2], browsers_refused_without_token);
  tcase_add_test(tc[2], token_env_unset_refused);
  tcase_add_test(tc[2], token_parked_wait_ends_when_client_goes);
  tcase_add_test(tc[2], storage_errors_503);
  tcase_add_test(tc[2], kept_connection_wrong_token_cut_at_head);

  tcase_add_test(tc[3], public_listen_refused);
  tcase_add_test(tc[3], public_listen_allowed_insecure);

  tcase_add_loop_test(tc[4], raw_input_leaves_host_serving, 0, N_RAW);
  tcase_add_test(tc[4], sweep_then_concurrent_connections);

  tcase_add_test(tc[5], sigterm_with_open_connections);
  tcase_add_test(tc[5], acknowledged_writes_survive_kill_9);
  tcase_add_test(tc[5], attribute_set_from_run_survives_kill_9);

  tcase_add_test(tc[6], unauthenticated_bodies_refused_at_the_head);
  tcase_add_test(tc[6], bodies_past_the_budget_refused);
  tcase_add_test(tc[6], parked_waits_hold_no_budget);

  tcase_add_test(tc[7], queue_failure_answers_503);
  tcase_add_test(tc[8], queue_send_pull_ack);
  tcase_add_test(tc[8], queue_errors);
  tcase_add_test(tc[8], queue_redrive);
  tcase_add_test(tc[8], queue_peek_leases_nothing);
  tcase_add_test(tc[9], cron_list_fire_and_metrics);
  tcase_add_test(tc[9], scheduled_spellings_refused_cross_site);
  return s;
}

int main(void) { return http_suite_run(http_suite()); }
