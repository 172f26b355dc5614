/* test_cli.c — the `duro workflows …` client against a real `duro run`.
 *
 * Every case that needs a host starts DURO_BIN (fork/exec) on a config
 * generated in a fresh temporary directory: the order-flow example
 * (ORDERS_PLUGIN, class OrderFlow) on `http.listen: 127.0.0.1:0`; the port
 * comes from the host's line "ready: ... http on port N", as in
 * test_http.c.  The client is then run as a user would run it: DURO_BIN
 * `workflows VERB ... --url http://127.0.0.1:PORT`, forked and exec'ed in
 * the case's directory (no config/duro.yaml there), with its stdout and
 * stderr captured to files and its exit code checked: 0 done, 1 the
 * server said no or could not be reached, 2 a usage error.  Every client
 * run is also checked for sanitizer reports, and every error run for an
 * empty stdout.  Every case that starts a host stops it with SIGTERM and
 * asserts exit 0.
 *
 *  - trigger: with --id (options anywhere, --id=X), a duplicate, a random
 *    id, --json, invalid PARAMS and an invalid --id (nothing created);
 *    --wait in one POST ?wait= (the host's request counters), and GETs
 *    ?wait= only past http.max_wait;
 *  - instances list: the table (each row's last step, its attempts and
 *    what it waits for), --status, --limit with the "next: --cursor"
 *    line followed page by page, --json, an empty page, bad values;
 *  - describe: a retried step (flakyCard) shows its failed attempt while it
 *    waits for the retry; a completed order shows every step with its type
 *    and the output; --json equals GET of the same instance;
 *  - pause / resume / terminate print "ID: STATUS"; illegal transitions;
 *  - restart and restart --from "charge card" (the steps before it are not
 *    rerun), --count without --from;
 *  - send-event moves the instance on; missing --type, invalid --payload;
 *  - queues send (with --delay), list, describe and peek (with --limit),
 *    and their refusals;
 *  - cron list (the table and --json) and cron trigger (the instance it
 *    creates), an unknown expression, missing and split arguments;
 *  - errors: unknown instance and workflow, names with a slash, a closed
 *    port, unknown verbs and options, bad --url and --config, help;
 *  - a proxy set in the environment is not used for a loopback host;
 *  - the token: http.token_env read from --config, the variable unset, a
 *    wrong token, and a client config giving both address and token.
 *
 * Waiting is by polling with deadlines, never by sleeping a guessed time.
 * Children are killed on every way out: the helpers (proc.h) SIGKILL a child
 * past its deadline, the teardown kills a host still running, children ask
 * for SIGKILL when their parent dies, and in fork mode Check kills the
 * case's process group when the case ends.  All traffic is on loopback. */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "duro.h"
#include "http_client.h"
#include "proc.h"

#ifndef DURO_BIN
#error "build with -DDURO_BIN=\"<path of the built duro binary>\""
#endif
#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define WAIT_MS 20000   /* for a host to say ready or to exit */
#define CLI_MS 20000    /* for one client run */
#define SETTLE_MS 20000 /* for an instance to reach a status */
#define WF "order-flow"
#define TOKEN_VAR "DURO_CLI_TEST_TOKEN"
#define TOKEN "s3cret-Cli_7"

/* A valid order's params; `extra` (a string literal, may be "") goes on
 * the end of the object: ",\"graceSeconds\":1". */
#define ORDER(extra)                                                           \
  "{\"orderId\":\"42\",\"email\":\"a@b.c\",\"amount\":10" extra "}"

#define assert_contains(hay, needle)                                           \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s",    \
                (needle), proc_tail(hay))

/* ---- children ------------------------------------------------------------ */

/* The environment of a child: ours without `drop` ("NAME", may be NULL),
 * without proxy variables (the client must talk to loopback directly) and
 * without the client's own variables (a case sets those it tests), plus
 * `add` ("NAME=value", may be NULL).  The array is malloc'ed, the strings
 * borrowed. */
#define CHILD_DROP                                                             \
  "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",       \
      "ALL_PROXY", "DURO_URL", "DURO_CONFIG", "DURO_TOKEN"
static char **child_env(const char *drop, const char *add) {
  const char *names[] = {CHILD_DROP, drop, NULL};
  return proc_env(names, add);
}

/* ---- the host ------------------------------------------------------------ */

typedef struct host {
  pid_t pid;
  int port;
  char config[400];
  char log[400]; /* the host's stdout and stderr */
  char url[64];  /* http://127.0.0.1:PORT */
} host;

/* The host a case talks to. */
static host H;

/* Lines appended to the order plugin's mapping in the configs written next
 * (its queues), or NULL. */
static const char *cfg_plugin_extra;

/* A config for the order flow on 127.0.0.1:0, with `http_extra` (lines of
 * the http mapping, may be NULL). */
static void write_config(host *h, const char *name, const char *http_extra) {
  snprintf(h->config, sizeof h->config, "%s/%s.yaml", proc_tmp_dir, name);
  snprintf(h->log, sizeof h->log, "%s/%s.log", proc_tmp_dir, name);
  FILE *f = fopen(h->config, "w");
  ck_assert_msg(f != NULL, "%s: %s", h->config, strerror(errno));
  fprintf(f,
          "storage:\n"
          "  path: %s/var-%s/duro.db\n"
          "  synchronous: normal\n"
          "http:\n"
          "  listen: 127.0.0.1:0\n"
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
          "        index: [{name: amount, from: /amount, type: number}]\n",
          proc_tmp_dir, name, http_extra ? http_extra : "", ORDERS_PLUGIN);
  if (cfg_plugin_extra)
    fputs(cfg_plugin_extra, f);
  ck_assert(fclose(f) == 0);
}

/* Runs `duro run` to its "ready" line and reads the port from it. */
static void host_start_env(host *h, const char *http_extra,
                           const char *env_kv) {
  write_config(h, "h", http_extra);
  const char *argv[] = {DURO_BIN, "run", h->config, NULL};
  char **envp = child_env(NULL, env_kv);
  h->pid = proc_spawn(argv, envp, h->log, h->log);
  free(envp);
  proc_live = h->pid;
  h->port = proc_wait_port(h->pid, h->log, proc_now_ms() + WAIT_MS);
  snprintf(h->url, sizeof h->url, "http://127.0.0.1:%d", h->port);
}

static void host_start(host *h) { host_start_env(h, NULL, NULL); }

/* SIGTERM; the host must exit 0 with no sanitizer report. */
static void host_stop(host *h) {
  free(proc_stop(h->pid, h->log, proc_now_ms() + WAIT_MS));
}

/* ---- the client ---------------------------------------------------------- */

typedef struct run {
  int code; /* the exit code */
  char *out, *err;
  char what[512]; /* the command line, for messages */
} run;

static void run_free(run *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

/* Runs `duro GROUP ARGS...` (args NULL-terminated) with the environment
 * of child_env(drop, add); with `url`, "--url URL" is added last.  Fills
 * *r; fails on a hang or a sanitizer report. */
static void cli_exec(run *r, const char *group, const char *url, char **envp,
                     const char *const *args) {
  const char *argv[32];
  size_t n = 0;
  argv[n++] = DURO_BIN;
  argv[n++] = group;
  for (size_t i = 0; args[i]; i++) {
    ck_assert(n < 28);
    argv[n++] = args[i];
  }
  if (url) {
    argv[n++] = "--url";
    argv[n++] = url;
  }
  argv[n] = NULL;
  size_t w = 0;
  r->what[0] = '\0';
  for (size_t i = 1; i < n && w < sizeof r->what; i++)
    w += (size_t)snprintf(r->what + w, sizeof r->what - w, "%s%s",
                          i > 1 ? " " : "", argv[i]);

  char out[400], err[400];
  snprintf(out, sizeof out, "%s/cli.out", proc_tmp_dir);
  snprintf(err, sizeof err, "%s/cli.err", proc_tmp_dir);
  pid_t pid = proc_spawn(argv, envp, out, err);
  r->code = proc_wait_exit(pid, proc_now_ms() + CLI_MS);
  r->out = proc_slurp(out);
  r->err = proc_slurp(err);
  ck_assert_msg(r->code >= 0, "%s: hung; stderr:\n%s", r->what,
                proc_tail(r->err));
  const char *mark = proc_sanitizer_report(r->err);
  ck_assert_msg(mark == NULL, "%s: sanitizer report (\"%s\"):\n%s", r->what,
                mark, proc_tail(r->err));
}

static void cli_group_env(run *r, const char *group, const char *url,
                          const char *drop, const char *add,
                          const char *const *args) {
  char **envp = child_env(drop, add);
  cli_exec(r, group, url, envp, args);
  free(envp);
}

/* `duro workflows ARGS...` in child_env()'s environment plus `vars`
 * ("NAME=value", NULL-terminated, at most 8). */
static void cli_vars(run *r, const char *url, const char *const *vars,
                     const char *const *args) {
  const char *drop[24] = {CHILD_DROP};
  char names[8][64];
  size_t d = 0, n = 0;
  while (drop[d])
    d++;
  for (; vars[n]; n++) {
    ck_assert(n < 8);
    snprintf(names[n], sizeof names[n], "%.*s", (int)strcspn(vars[n], "="),
             vars[n]);
    drop[d++] = names[n];
  }
  drop[d] = NULL;
  char **envp = proc_env(drop, NULL);
  size_t k = 0;
  while (envp[k])
    k++;
  char **all = realloc(envp, (k + n + 1) * sizeof *all);
  ck_assert(all != NULL);
  for (size_t i = 0; i < n; i++)
    all[k++] = (char *)vars[i];
  all[k] = NULL;
  cli_exec(r, "workflows", url, all, args);
  free(all);
}

static void cli_env(run *r, const char *url, const char *drop, const char *add,
                    const char *const *args) {
  cli_group_env(r, "workflows", url, drop, add, args);
}

/* `duro workflows ARGS... --url <the case's host>`. */
#define CLI(r, ...)                                                            \
  cli_env((r), H.url, NULL, NULL, (const char *const[]){__VA_ARGS__, NULL})

/* Exit 0, nothing on stderr. */
static void expect_ok(const run *r) {
  ck_assert_msg(r->code == 0 && !r->err[0],
                "%s: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", r->what,
                r->code, proc_tail(r->out), proc_tail(r->err));
}

/* Exit `code`, nothing on stdout, `needle` on stderr. */
static void expect_fail(const run *r, int code, const char *needle) {
  ck_assert_msg(r->code == code,
                "%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r->what,
                r->code, code, proc_tail(r->out), proc_tail(r->err));
  ck_assert_msg(!r->out[0], "%s: stdout on failure:\n%s", r->what,
                proc_tail(r->out));
  ck_assert_msg(strstr(r->err, needle) != NULL,
                "%s: expected \"%s\" on stderr:\n%s", r->what, needle,
                proc_tail(r->err));
}

/* Exit 1 with exactly "duro: CODE: <message>\n" on stderr. */
static void expect_server_error(const run *r, const char *code) {
  char prefix[128];
  snprintf(prefix, sizeof prefix, "duro: %s: ", code);
  expect_fail(r, 1, prefix);
  size_t len = strlen(r->err);
  ck_assert_msg(!strncmp(r->err, prefix, strlen(prefix)) &&
                    len > strlen(prefix) + 1 && r->err[len - 1] == '\n' &&
                    !strchr(r->err, '\n')[1],
                "%s: not one line \"%s<message>\":\n%s", r->what, prefix,
                proc_tail(r->err));
}

/* ---- JSON ---------------------------------------------------------------- */

/* The client's stdout parsed; fails unless it is JSON. */
static json_t *out_json(const run *r) {
  json_error_t e;
  json_t *j = json_loads(r->out, JSON_DECODE_ANY, &e);
  ck_assert_msg(j != NULL, "%s: stdout is not JSON (%s):\n%s", r->what, e.text,
                proc_tail(r->out));
  return j;
}

/* `describe WF ID --json`, parsed (caller's). */
static json_t *describe_json(const char *id) {
  run r;
  CLI(&r, "instances", "describe", WF, id, "--json");
  expect_ok(&r);
  json_t *d = out_json(&r);
  ck_assert_msg(!strcmp(jstr(d, "id"), id), "%s: %s", r.what, proc_tail(r.out));
  run_free(&r);
  return d;
}

/* Whether `st` is one of `want` ("a|b|c"). */
static int status_in(const char *st, const char *want) {
  char pat[128], one[64];
  snprintf(pat, sizeof pat, "|%s|", want);
  snprintf(one, sizeof one, "|%s|", st);
  return *st && strstr(pat, one) != NULL;
}

/* Polls describe --json until the status is one of `want`; fails after
 * SETTLE_MS.  Returns the last description (caller's). */
static json_t *wait_status(const char *id, const char *want) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    json_t *d = describe_json(id);
    if (status_in(jstr(d, "status"), want))
      return d;
    if (proc_now_ms() >= deadline) {
      char *text = json_dumps(d, JSON_COMPACT);
      ck_abort_msg("%s: status never became %s; last: %s", id, want,
                   proc_tail(text ? text : "?"));
    }
    json_decref(d);
    proc_sleep_ms(20);
  }
}

/* `list WF --json --limit 1000`, parsed (caller's). */
static json_t *list_json(void) {
  run r;
  CLI(&r, "instances", "list", WF, "--json", "--limit", "1000");
  expect_ok(&r);
  json_t *l = out_json(&r);
  ck_assert_msg(json_is_array(jget(l, "instances")), "%s: %s", r.what,
                proc_tail(r.out));
  run_free(&r);
  return l;
}

/* Whether the list answer has an instance with this id. */
static int listed(json_t *list, const char *id) {
  size_t i;
  json_t *it;
  json_array_foreach(jget(list, "instances"), i, it) {
    if (!strcmp(jstr(it, "id"), id))
      return 1;
  }
  return 0;
}

/* `trigger WF PARAMS --id ID`, expecting "created ID (queued)". */
static void trigger(const char *id, const char *params) {
  run r;
  CLI(&r, "trigger", WF, params, "--id", id);
  expect_ok(&r);
  char want[256];
  snprintf(want, sizeof want, "created %s (queued)\n", id);
  ck_assert_msg(!strcmp(r.out, want), "%s: stdout \"%s\", want \"%s\"", r.what,
                r.out, want);
  run_free(&r);
}

/* A control verb, expecting exactly "ID: STATUS" with STATUS in `want`. */
static void control(const char *verb, const char *id, const char *want) {
  run r;
  CLI(&r, "instances", verb, WF, id);
  expect_ok(&r);
  char st[64] = "";
  size_t idl = strlen(id);
  int shape = !strncmp(r.out, id, idl) && !strncmp(r.out + idl, ": ", 2) &&
              sscanf(r.out + idl + 2, "%63[a-z]", st) == 1;
  char line[128];
  snprintf(line, sizeof line, "%s: %s\n", id, st);
  ck_assert_msg(shape && !strcmp(r.out, line) && status_in(st, want),
                "%s: stdout \"%s\", want \"%s: %s\"", r.what, r.out, id, want);
  run_free(&r);
}

/* `send-event WF ID --type approval --payload {"approved":true}`. */
static void approve(const char *id) {
  run r;
  CLI(&r, "instances", "send-event", WF, id, "--type", "approval", "--payload",
      "{\"approved\":true}");
  expect_ok(&r);
  char want[128];
  snprintf(want, sizeof want, "sent event approval to %s\n", id);
  ck_assert_msg(!strcmp(r.out, want), "%s: stdout \"%s\", want \"%s\"", r.what,
                r.out, want);
  run_free(&r);
}

/* ---- text output --------------------------------------------------------- */

/* The line of `text` that starts with `prefix`, copied into `line`
 * (without its newline); NULL when there is none.  *next, when given,
 * points at the text after that line. */
static const char *line_of(const char *text, const char *prefix, char *line,
                           size_t len, const char **next) {
  size_t pl = strlen(prefix);
  for (const char *l = text; l && *l;) {
    const char *end = strchr(l, '\n');
    size_t ll = end ? (size_t)(end - l) : strlen(l);
    if (ll >= pl && !strncmp(l, prefix, pl)) {
      snprintf(line, len, "%.*s", (int)ll, l);
      if (next)
        *next = end ? end + 1 : l + ll;
      return line;
    }
    l = end ? end + 1 : NULL;
  }
  return NULL;
}

/* The status column of the list row of `id`, into st; NULL if no row. */
static const char *row_status(const char *table, const char *id, char *st,
                              size_t len) {
  char prefix[128], line[512];
  snprintf(prefix, sizeof prefix, "%s ", id);
  if (!line_of(table, prefix, line, sizeof line, NULL))
    return NULL;
  char fmt[32];
  snprintf(fmt, sizeof fmt, "%%*s %%%zus", len - 1);
  return sscanf(line, fmt, st) == 1 ? st : NULL;
}

/* The row of step `key` in a describe report: its type, status and
 * attempts columns.  Fails when there is no such row. */
typedef struct step_row {
  char type[32], status[32], attempts[16];
  char line[512];
  const char *after; /* the text after the row */
} step_row;

static void step_row_of(const run *r, const char *key, step_row *s) {
  char prefix[128];
  snprintf(prefix, sizeof prefix, "  %s ", key);
  ck_assert_msg(line_of(r->out, prefix, s->line, sizeof s->line, &s->after),
                "%s: no row for step \"%s\":\n%s", r->what, key,
                proc_tail(r->out));
  ck_assert_msg(sscanf(s->line + strlen(prefix), "%31s %31s %15s", s->type,
                       s->status, s->attempts) == 3,
                "%s: row of \"%s\" has no type/status/attempts: %s", r->what,
                key, s->line);
}

/* ---- trigger ------------------------------------------------------------- */

/* `trigger --wait`: the output once the instance ends (an approval sent
 * by another client 700 ms in), its error and exit 1 when it errors, the
 * status when DURATION runs out; `instances status`, the light read. */
START_TEST(trigger_wait_verb) {
  host_start(&H);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    usleep(700 * 1000);
    if (!freopen("/dev/null", "w", stdout))
      _exit(126);
    execl(DURO_BIN, DURO_BIN, "workflows", "instances", "send-event", WF, "tw1",
          "--type", "approval", "--payload", "{\"approved\":true}", "--url",
          H.url, (char *)NULL);
    _exit(127);
  }
  run r;
  CLI(&r, "trigger", WF, ORDER(",\"graceSeconds\":0"), "--id", "tw1", "--wait");
  expect_ok(&r);
  assert_contains(r.out, "\"orderId\": \"42\"");
  assert_contains(r.out, "\"approved\": true");
  ck_assert_msg(!strstr(r.out, "created"), "%s", r.out);
  run_free(&r);
  int st;
  ck_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
            WEXITSTATUS(st) == 0);

  CLI(&r, "trigger", WF, "{\"orderId\":\"1\",\"email\":\"a@b.c\",\"amount\":0}",
      "--id", "tw2", "--wait", "30s");
  expect_fail(&r, 1, "tw2 errored: NonRetryableError: amount must be positive");
  run_free(&r);

  CLI(&r, "trigger", WF, ORDER(""), "--id", "tw3", "--wait=300ms", "--json");
  ck_assert_msg(r.code == 1, "exit %d: %s", r.code, r.err);
  assert_contains(r.out, "\"status\": \"waiting\"");
  assert_contains(r.err, "tw3 waiting after 300ms");
  run_free(&r);

  CLI(&r, "instances", "status", WF, "tw1");
  expect_ok(&r);
  assert_contains(r.out, "tw1: complete\noutput: {");
  run_free(&r);
  CLI(&r, "trigger", WF, ORDER(""), "--wait=soon");
  expect_fail(&r, 2, "--wait takes a duration");
  run_free(&r);
  /* --timeout: the instance's own deadline; past it, errored */
  CLI(&r, "trigger", WF, ORDER(""), "--id", "tw4", "--timeout", "1", "--wait",
      "30s");
  expect_fail(&r, 1, "tw4 errored: instance.timed_out");
  run_free(&r);
  CLI(&r, "instances", "describe", WF, "tw4");
  expect_ok(&r);
  assert_contains(r.out, "instance.timed_out");
  run_free(&r);
  CLI(&r, "trigger", WF, ORDER(""), "--id", "tw5", "--timeout", "2 hours");
  expect_ok(&r);
  run_free(&r);
  CLI(&r, "instances", "describe", WF, "tw5");
  expect_ok(&r);
  assert_contains(r.out, "deadline");
  assert_contains(r.out, "(in 2 h)");
  run_free(&r);
  CLI(&r, "trigger", WF, ORDER(""), "--timeout", "soon");
  expect_fail(&r, 2, "--timeout: \"soon\" is not a duration");
  run_free(&r);
  host_stop(&H);
}
END_TEST

/* The host's count of requests of `method` (duro_http_requests_total in
 * /metrics, which counts this read too); -1 when it shows none. */
static long long requests_of(const char *method) {
  http_resp r;
  CURLcode rc =
      http_send(H.port, &(http_req){.method = "GET", .path = "/metrics"}, &r);
  ck_assert_msg(rc == CURLE_OK && r.status == 200, "GET /metrics: HTTP %ld",
                r.status);
  char mark[80];
  snprintf(mark, sizeof mark, "\nduro_http_requests_total{method=\"%s\"} ",
           method);
  const char *at = r.body ? strstr(r.body, mark) : NULL;
  long long n = at ? atoll(at + strlen(mark)) : -1;
  http_resp_free(&r);
  return n;
}

/* The POSTs and GETs a client run makes, from the host's counters around
 * it (each count shown includes its own read: the first read after the
 * run, a GET, is not the client's). */
typedef struct round_trips {
  long long posts, gets;
} round_trips;

static round_trips trips_before(void) {
  return (round_trips){requests_of("POST"), requests_of("GET")};
}

static round_trips trips_since(round_trips b) {
  long long gets = requests_of("GET"), posts = requests_of("POST");
  ck_assert_msg(b.posts >= 0 && b.gets >= 0, "no request counters in /metrics");
  return (round_trips){posts - b.posts, gets - b.gets - 1};
}

/* `trigger --wait` creates and waits in one request (POST ?wait=); it
 * GETs ?wait= only when that wait ran out (at http.max_wait, 1 s here)
 * before DURATION did. */
START_TEST(trigger_wait_one_request) {
  host_start_env(&H, "  max_wait: 1s\n", NULL);
  run r;
  round_trips b = trips_before();
  CLI(&r, "trigger", WF, "{\"orderId\":\"1\",\"email\":\"a@b.c\",\"amount\":0}",
      "--id", "one1", "--wait", "30s");
  expect_fail(&r, 1,
              "one1 errored: NonRetryableError: amount must be positive");
  run_free(&r);
  round_trips t = trips_since(b);
  ck_assert_msg(t.posts == 1 && t.gets == 0,
                "an instance that ended at once: %lld POSTs, %lld GETs",
                t.posts, t.gets);

  b = trips_before();
  CLI(&r, "trigger", WF, ORDER(""), "--id", "one2", "--wait=300ms", "--json");
  ck_assert_msg(r.code == 1, "exit %d: %s", r.code, r.err);
  assert_contains(r.out, "\"status\": \"waiting\"");
  assert_contains(r.err, "one2 waiting after 300ms");
  run_free(&r);
  t = trips_since(b);
  ck_assert_msg(t.posts == 1 && t.gets == 0,
                "a wait that ran out: %lld POSTs, %lld GETs", t.posts, t.gets);

  /* Past http.max_wait: the create's wait is cut at 1 s, the rest is
   * waited for with GETs, to DURATION counted from the create. */
  b = trips_before();
  int64_t t0 = proc_now_ms();
  CLI(&r, "trigger", WF, ORDER(""), "--id", "one3", "--wait=2500ms");
  int64_t ms = proc_now_ms() - t0;
  expect_fail(&r, 1, "one3 waiting after 2500ms");
  run_free(&r);
  t = trips_since(b);
  ck_assert_msg(t.posts == 1 && t.gets >= 1 && t.gets <= 3,
                "a wait past http.max_wait: %lld POSTs, %lld GETs", t.posts,
                t.gets);
  ck_assert_msg(ms >= 2500, "the client gave up after %lld ms", (long long)ms);
  host_stop(&H);
}
END_TEST

START_TEST(trigger_verb) {
  host_start(&H);
  trigger("t1", ORDER(""));

  /* Options anywhere, and --id=VALUE. */
  run r;
  CLI(&r, "trigger", "--id", "t2", WF, ORDER(""));
  expect_ok(&r);
  ck_assert_str_eq(r.out, "created t2 (queued)\n");
  run_free(&r);
  CLI(&r, "trigger", WF, "--id=t3", ORDER(""), "--json");
  expect_ok(&r);
  json_t *j = out_json(&r);
  ck_assert_msg(!strcmp(jstr(j, "id"), "t3") &&
                    !strcmp(jstr(j, "status"), "queued"),
                "%s: %s", r.what, r.out);
  json_decref(j);
  run_free(&r);

  /* A duplicate: exit 1 with the server's code, the first one untouched. */
  CLI(&r, "trigger", WF, "{\"other\":true}", "--id", "t1");
  expect_server_error(&r, "instance.already_exists");
  assert_contains(r.err, "order-flow/t1");
  run_free(&r);
  json_t *d = describe_json("t1");
  ck_assert_str_eq(jstr(d, "params.orderId"), "42");
  json_decref(d);

  /* Without --id: a random id, another each time; without PARAMS too. */
  char ids[2][128];
  for (int i = 0; i < 2; i++) {
    if (i == 0)
      CLI(&r, "trigger", WF, ORDER(""));
    else
      CLI(&r, "trigger", WF);
    expect_ok(&r);
    char tailtext[32] = "";
    ck_assert_msg(sscanf(r.out, "created %127s %31[^\n]", ids[i], tailtext) ==
                          2 &&
                      !strcmp(tailtext, "(queued)"),
                  "%s: stdout \"%s\"", r.what, r.out);
    ck_assert_msg(strlen(ids[i]) >= 8 &&
                      strspn(ids[i],
                             "abcdefghijklmnopqrstuvwxyz"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") ==
                          strlen(ids[i]),
                  "%s: random id \"%s\"", r.what, ids[i]);
    run_free(&r);
    d = describe_json(ids[i]);
    json_decref(d);
  }
  ck_assert_str_ne(ids[0], ids[1]);

  /* Invalid PARAMS and --id are refused before anything is sent. */
  static const char *bad_params[] = {"{bad", "{\"a\":1,\"a\":2}", "", "[1,"};
  for (size_t i = 0; i < sizeof bad_params / sizeof bad_params[0]; i++) {
    CLI(&r, "trigger", WF, bad_params[i], "--id", "t-bad");
    /* "" is an empty argument: refused as such, before the JSON check. */
    expect_fail(&r, 2,
                bad_params[i][0] ? "PARAMS is not valid JSON"
                                 : "argument 2 is empty");
    assert_contains(r.err, "usage: duro workflows trigger");
    run_free(&r);
  }
  CLI(&r, "trigger", WF, ORDER(""), "--id", "bad id!");
  expect_fail(&r, 2, "--id must be");
  run_free(&r);
  CLI(&r, "trigger", WF, ORDER(""), "--id", "x", "--id", "y");
  expect_fail(&r, 2, "--id given twice");
  run_free(&r);
  CLI(&r, "trigger");
  expect_fail(&r, 2, "missing arguments");
  run_free(&r);

  json_t *l = list_json();
  ck_assert_msg(!listed(l, "t-bad") && !listed(l, "bad id!") &&
                    !listed(l, "x") && !listed(l, "y"),
                "a refused trigger created an instance");
  ck_assert_int_eq(json_array_size(jget(l, "instances")), 5);
  json_decref(l);
  host_stop(&H);
}
END_TEST

/* ---- version and workflows list ----------------------------------------- */

/* `duro --version` and `duro version`: this build's version and the plugin
 * ABI it loads (duro.h's); `workflows list`: every workflow the host
 * serves, with its instances by status, and --json. */
START_TEST(version_and_workflows_list) {
  char want[256];
  snprintf(want, sizeof want,
           "duro " DURO_VERSION "\nplugin ABI %d.%d (loads plugins built for "
           "%d.0 to %d.%d)\n",
           DURO_ABI_MAJOR, DURO_ABI_MINOR, DURO_ABI_MAJOR, DURO_ABI_MAJOR,
           DURO_ABI_MINOR);
  run r;
  static const char *const forms[] = {"--version", "version"};
  for (size_t i = 0; i < 2; i++) {
    cli_group_env(&r, forms[i], NULL, NULL, NULL, (const char *const[]){NULL});
    expect_ok(&r);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
  }

  host_start(&H);
  char line[512];
  CLI(&r, "list");
  expect_ok(&r);
  ck_assert_msg(line_of(r.out, "WORKFLOW ", line, sizeof line, NULL), "%s",
                r.out);
  assert_contains(line, "BY STATUS");
  ck_assert_msg(line_of(r.out, "order-flow ", line, sizeof line, NULL), "%s",
                r.out);
  char plugin[32], rest[64];
  int total = -1, backlog = -1;
  ck_assert_msg(sscanf(line, "order-flow %31s %d %d %63[^\n]", plugin, &total,
                       &backlog, rest) == 4 &&
                    !strcmp(plugin, "orders") && total == 0 && backlog == 0 &&
                    !strcmp(rest, "-"),
                "%s", line);
  run_free(&r);

  trigger("w1", ORDER(""));
  trigger("w2", ORDER(""));
  json_decref(wait_status("w1", "waiting"));
  json_decref(wait_status("w2", "waiting"));
  control("terminate", "w2", "terminated");
  CLI(&r, "list");
  expect_ok(&r);
  ck_assert_msg(line_of(r.out, "order-flow ", line, sizeof line, NULL), "%s",
                r.out);
  ck_assert_msg(
      sscanf(line, "order-flow %31s %d %d", plugin, &total, &backlog) == 3 &&
          total == 2 && backlog == 0,
      "%s", line);
  assert_contains(line, "waiting 1");
  assert_contains(line, "terminated 1");
  run_free(&r);
  CLI(&r, "list", "--json");
  expect_ok(&r);
  json_t *j = out_json(&r);
  json_t *w = json_array_get(j, 0);
  ck_assert_msg(json_array_size(j) == 1 && !strcmp(jstr(w, "name"), WF) &&
                    !strcmp(jstr(w, "plugin"), "orders") &&
                    json_integer_value(jget(w, "instances.waiting")) == 1 &&
                    json_integer_value(jget(w, "instances.terminated")) == 1,
                "%s", proc_tail(r.out));
  json_decref(j);
  run_free(&r);
  CLI(&r, "list", WF);
  expect_fail(&r, 2, "too many arguments");
  run_free(&r);
  /* the host alone on its SQLite file, with its two instances created and
   * the one that has not ended */
  cli_group_env(&r, "hosts", H.url, NULL, NULL,
                (const char *const[]){"list", NULL});
  expect_ok(&r);
  assert_contains(r.out, "one host on its own store (SQLite):\n");
  assert_contains(r.out, "alive  1 instance(s)");
  assert_contains(r.out, "(this one)\n    backlog 0  in flight ");
  assert_contains(r.out, "  created 2\n");
  run_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- instances list ------------------------------------------------------ */

START_TEST(list_verb) {
  host_start(&H);
  /* Three that error at once (amount 0), two that wait for the review. */
  static const char *ids[] = {"e0", "e1", "w0", "e2", "w1"};
  static const char *want[] = {"errored", "errored", "waiting", "errored",
                               "waiting"};
  for (int i = 0; i < 5; i++)
    trigger(ids[i], ids[i][0] == 'e'
                        ? "{\"orderId\":\"1\",\"email\":\"a@b.c\",\"amount\":0}"
                        : ORDER(""));
  for (int i = 0; i < 5; i++)
    json_decref(wait_status(ids[i], want[i]));

  /* The table: a header, then every id with its status, newest first. */
  run r;
  CLI(&r, "instances", "list", WF);
  expect_ok(&r);
  ck_assert_msg(!strncmp(r.out, "ID ", 3) && strstr(r.out, "STATUS") &&
                    strstr(r.out, "CREATED") && !strstr(r.out, "next:"),
                "%s:\n%s", r.what, r.out);
  const char *prev = r.out;
  for (int i = 4; i >= 0; i--) {
    char st[32], prefix[16], line[256];
    ck_assert_msg(
        row_status(r.out, ids[i], st, sizeof st) && !strcmp(st, want[i]),
        "%s: row of %s (want %s):\n%s", r.what, ids[i], want[i], r.out);
    snprintf(prefix, sizeof prefix, "%s ", ids[i]);
    const char *next;
    line_of(r.out, prefix, line, sizeof line, &next);
    ck_assert_msg(next > prev, "%s: %s out of order:\n%s", r.what, ids[i],
                  r.out);
    prev = next;
    /* its step and attempts: a waiting one in the review, for its event;
     * an errored one's last step the rollback of its stock */
    int step_shown =
        ids[i][0] == 'w'
            ? strstr(line, " manual review#1 ") && strstr(line, " approval")
            : strstr(line, " reserve stock#1/rollback ") != NULL;
    ck_assert_msg(step_shown, "%s: step of %s:\n%s", r.what, ids[i], r.out);
  }
  ck_assert_msg(strstr(r.out, "STEP") && strstr(r.out, "ATTEMPTS") &&
                    strstr(r.out, "WAITING FOR"),
                "%s:\n%s", r.what, r.out);
  run_free(&r);

  /* --status: only those. */
  CLI(&r, "instances", "list", WF, "--status", "waiting");
  expect_ok(&r);
  for (int i = 0; i < 5; i++) {
    char st[32];
    int shown = row_status(r.out, ids[i], st, sizeof st) != NULL;
    ck_assert_msg(shown == (want[i][0] == 'w') &&
                      (!shown || !strcmp(st, "waiting")),
                  "%s: %s:\n%s", r.what, ids[i], r.out);
  }
  run_free(&r);
  CLI(&r, "instances", "list", WF, "--status", "complete");
  expect_ok(&r);
  ck_assert_str_eq(r.out, "no instances\n");
  run_free(&r);

  /* --where, repeatable: the search attribute's instances only. */
  CLI(&r, "instances", "list", WF, "--where", "amount:0");
  expect_ok(&r);
  for (int i = 0; i < 5; i++) {
    char st[32];
    int shown = row_status(r.out, ids[i], st, sizeof st) != NULL;
    ck_assert_msg(shown == (ids[i][0] == 'e'), "%s: %s:\n%s", r.what, ids[i],
                  r.out);
  }
  run_free(&r);
  CLI(&r, "instances", "list", WF, "--where", "amount>0", "--where=amount<=10",
      "--status", "waiting");
  expect_ok(&r);
  for (int i = 0; i < 5; i++) {
    char st[32];
    int shown = row_status(r.out, ids[i], st, sizeof st) != NULL;
    ck_assert_msg(shown == (ids[i][0] == 'w'), "%s: %s:\n%s", r.what, ids[i],
                  r.out);
  }
  run_free(&r);
  CLI(&r, "instances", "list", WF, "--where", "colour:red");
  expect_fail(&r, 1, "\"colour\" is not an attribute");
  run_free(&r);

  /* --limit 2: two rows and "next: --cursor C"; following the cursors
   * visits every instance once, newest first, and the last page has no
   * cursor line. */
  char cursor[256] = "", seen[256] = "|";
  int pages = 0;
  for (;;) {
    ck_assert_msg(++pages <= 5, "paging did not end: %s", seen);
    if (cursor[0])
      CLI(&r, "instances", "list", WF, "--limit", "2", "--cursor", cursor);
    else
      CLI(&r, "instances", "list", WF, "--limit", "2");
    expect_ok(&r);
    int rows = 0;
    for (int i = 4; i >= 0; i--) {
      char st[32];
      if (row_status(r.out, ids[i], st, sizeof st)) {
        rows++;
        size_t o = strlen(seen);
        snprintf(seen + o, sizeof seen - o, "%s|", ids[i]);
      }
    }
    char line[256];
    const char *c = line_of(r.out, "next: --cursor ", line, sizeof line, NULL);
    ck_assert_msg(rows == (pages < 3 ? 2 : 1) && (c != NULL) == (pages < 3),
                  "%s: page %d:\n%s", r.what, pages, r.out);
    run_free(&r);
    if (!c)
      break;
    snprintf(cursor, sizeof cursor, "%s", line + strlen("next: --cursor "));
    ck_assert_msg(cursor[0] && !strchr(cursor, ' '), "cursor line: %s", line);
  }
  ck_assert_str_eq(seen, "|w1|e2|w0|e1|e0|");

  /* --json: the server's answer, with the cursor of a page. */
  CLI(&r, "instances", "list", WF, "--json", "--limit", "2");
  expect_ok(&r);
  json_t *j = out_json(&r);
  ck_assert_msg(
      json_array_size(jget(j, "instances")) == 2 &&
          !strcmp(jstr(json_array_get(jget(j, "instances"), 0), "id"), "w1") &&
          json_is_string(jget(j, "cursor")),
      "%s:\n%s", r.what, r.out);
  json_decref(j);
  run_free(&r);
  json_t *l = list_json();
  ck_assert_int_eq(json_array_size(jget(l, "instances")), 5);
  json_decref(l);

  /* Bad values: --limit is checked here, --status by the server. */
  static const char *bad_limits[] = {"0", "-1", "abc", "4294967296", "2x"};
  for (size_t i = 0; i < sizeof bad_limits / sizeof bad_limits[0]; i++) {
    CLI(&r, "instances", "list", WF, "--limit", bad_limits[i]);
    expect_fail(&r, 2, "--limit must be a whole number");
    run_free(&r);
  }
  CLI(&r, "instances", "list", WF, "--status", "bogus");
  expect_server_error(&r, "request.invalid");
  run_free(&r);
  CLI(&r, "instances", "list", WF, "--cursor", "abc");
  expect_server_error(&r, "request.invalid");
  run_free(&r);
  CLI(&r, "instances", "list", WF, "--from", "x");
  expect_fail(&r, 2, "--from does not apply to \"instances list\"");
  run_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- describe ------------------------------------------------------------ */

/* A retried step: the first charge attempt fails, the retry is 10 s away.
 * While the step waits for it, the report shows the failed attempt. */
START_TEST(describe_retried_step) {
  host_start(&H);
  trigger("f1", ORDER(",\"flakyCard\":true,\"graceSeconds\":1"));
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  run r;
  step_row s;
  for (;;) {
    CLI(&r, "instances", "describe", WF, "f1");
    expect_ok(&r);
    char line[256];
    if (line_of(r.out, "  charge card#1 ", line, sizeof line, NULL) &&
        strstr(r.out, "card issuer timed out"))
      break;
    ck_assert_msg(proc_now_ms() < deadline, "no failed attempt shown:\n%s",
                  proc_tail(r.out));
    run_free(&r);
    proc_sleep_ms(20);
  }
  ck_assert_msg(!strncmp(r.out, "order-flow/f1  waiting\n", 23), "%s:\n%s",
                r.what, r.out);
  step_row_of(&r, "reserve stock#1", &s);
  ck_assert_msg(!strcmp(s.type, "do") && !strcmp(s.status, "complete") &&
                    !strcmp(s.attempts, "1"),
                "%s: %s", r.what, s.line);
  step_row_of(&r, "charge card#1", &s);
  ck_assert_msg(!strcmp(s.type, "do") && !strcmp(s.status, "waiting") &&
                    !strcmp(s.attempts, "1") && strstr(s.line, "retry at "),
                "%s: %s", r.what, s.line);
  /* The next line, indented under the step: attempt 1 and its error. */
  char attempt[256];
  snprintf(attempt, sizeof attempt, "%.*s", (int)strcspn(s.after, "\n"),
           s.after);
  ck_assert_msg(!strncmp(attempt, "      attempt 1 ", 16) &&
                    strstr(attempt, "card issuer timed out (simulated)"),
                "%s: no failed attempt under charge card#1:\n%s", r.what,
                r.out);
  char line[256];
  ck_assert_msg(line_of(r.out, "  wakes    ", line, sizeof line, NULL) &&
                    strstr(line, "(in "),
                "%s: no wake time:\n%s", r.what, r.out);
  ck_assert_msg(!strstr(r.out, "manual review#1"), "%s:\n%s", r.what, r.out);
  run_free(&r);

  /* The same in the JSON: one attempt, failed, with the message. */
  json_t *d = describe_json("f1");
  json_t *a = json_array_get(jget(step_of(d, "charge card#1"), "attempts"), 0);
  ck_assert_msg(
      json_array_size(jget(step_of(d, "charge card#1"), "attempts")) == 1 &&
          !strcmp(jstr(a, "error.message"),
                  "card issuer timed out (simulated)"),
      "describe --json of f1");
  json_decref(d);
  host_stop(&H);
}
END_TEST

/* GET /workflows/order-flow/instances/ID from the host, parsed. */
static json_t *api_describe(const char *id) {
  char path[256], url[320];
  snprintf(path, sizeof path, "/workflows/" WF "/instances/%s", id);
  snprintf(url, sizeof url, "%s%s", H.url, path);
  http_resp r;
  CURLcode rc =
      http_send(H.port, &(http_req){.method = "GET", .path = path}, &r);
  const char *body = r.body ? r.body : "";
  ck_assert_msg(rc == CURLE_OK && r.status == 200, "GET %s: %s, HTTP %ld: %s",
                url, curl_easy_strerror(rc), r.status, proc_tail(body));
  /* Without JSON_DECODE_ANY, unlike r.json: a description is an object. */
  json_t *j = json_loads(body, 0, NULL);
  ck_assert_msg(j != NULL, "GET %s: not JSON: %s", url, proc_tail(body));
  http_resp_free(&r);
  return j;
}

/* A completed order: every step with its type, the output; and --json is
 * the server's description. */
START_TEST(describe_completed) {
  host_start(&H);
  trigger("c1", ORDER(",\"graceSeconds\":1"));
  json_decref(wait_status("c1", "waiting"));

  /* Waiting for the review. */
  run r;
  step_row s;
  CLI(&r, "instances", "describe", WF, "c1");
  expect_ok(&r);
  step_row_of(&r, "manual review#1", &s);
  ck_assert_msg(!strcmp(s.type, "waitForEvent") &&
                    !strcmp(s.status, "waiting") && !strcmp(s.attempts, "-") &&
                    strstr(s.line, "times out "),
                "%s: %s", r.what, s.line);
  run_free(&r);

  approve("c1");
  json_decref(wait_status("c1", "complete|errored|terminated"));
  /* the workflow at a glance */
  CLI(&r, "describe", WF);
  expect_ok(&r);
  ck_assert_msg(strstr(r.out, "workflow:      order-flow\n") &&
                    strstr(r.out, "complete       1\n") &&
                    strstr(r.out, "backlog        0 "),
                "%s:\n%s", r.what, r.out);
  run_free(&r);
  CLI(&r, "instances", "describe", WF, "c1");
  expect_ok(&r);
  ck_assert_msg(!strncmp(r.out, "order-flow/c1  complete\n", 24), "%s:\n%s",
                r.what, r.out);
  char line[512];
  ck_assert_msg(line_of(r.out, "  ended    ", line, sizeof line, NULL) &&
                    strstr(line, "(took "),
                "%s: ended:\n%s", r.what, r.out);
  ck_assert_msg(line_of(r.out, "  params   ", line, sizeof line, NULL) &&
                    strstr(line, "\"graceSeconds\":1"),
                "%s: params:\n%s", r.what, r.out);
  ck_assert_msg(line_of(r.out, "  output   {\"orderId\":\"42\",\"charge\":{",
                        line, sizeof line, NULL),
                "%s: output:\n%s", r.what, r.out);
  ck_assert_msg(!strstr(r.out, "  error    ") &&
                    !strstr(r.out, "  wakes    ") &&
                    !strstr(r.out, "attempt 1 "),
                "%s:\n%s", r.what, r.out);
  static const struct {
    const char *key, *type, *attempts;
  } steps[] = {{"reserve stock#1", "do", "1"},
               {"charge card#1", "do", "1"},
               {"manual review#1", "waitForEvent", "-"},
               {"grace period#1", "sleep", "-"},
               {"notify#1", "do", "1"},
               {"notify#2", "do", "1"},
               {"notify#3", "do", "1"}};
  const char *prev = r.out;
  for (size_t i = 0; i < 7; i++) {
    step_row_of(&r, steps[i].key, &s);
    ck_assert_msg(!strcmp(s.type, steps[i].type) &&
                      !strcmp(s.status, "complete") &&
                      !strcmp(s.attempts, steps[i].attempts) && s.after > prev,
                  "%s: step %s: %s\n%s", r.what, steps[i].key, s.line, r.out);
    prev = s.after;
  }
  step_row_of(&r, "manual review#1", &s);
  assert_contains(s.line, "{\"type\":\"approval\",\"payload\":{\"approved\":"
                          "true}");
  step_row_of(&r, "notify#1", &s);
  assert_contains(s.line, "\"messageId\":\"<c1/notify#1@orders>\"");
  step_row_of(&r, "notify#3", &s);
  assert_contains(s.line, "\"service\":\"crm\"");
  run_free(&r);

  /* --json is GET of the same instance. */
  json_t *cli = describe_json("c1");
  json_t *api = api_describe("c1");
  ck_assert_str_eq(jstr(cli, "id"), jstr(api, "id"));
  ck_assert_str_eq(jstr(cli, "status"), "complete");
  ck_assert_str_eq(jstr(cli, "status"), jstr(api, "status"));
  ck_assert_int_eq(json_array_size(jget(cli, "steps")), 7);
  ck_assert_int_eq(json_array_size(jget(cli, "steps")),
                   json_array_size(jget(api, "steps")));
  ck_assert_msg(json_equal(cli, api), "describe --json differs from GET");
  json_decref(cli);
  json_decref(api);

  CLI(&r, "instances", "describe", WF);
  expect_fail(&r, 2, "missing arguments");
  run_free(&r);
  CLI(&r, "instances", "describe", WF, "c1", "c2");
  expect_fail(&r, 2, "too many arguments");
  run_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- pause, resume, terminate -------------------------------------------- */

START_TEST(control_verbs) {
  host_start(&H);
  trigger("p1", ORDER(""));
  json_decref(wait_status("p1", "waiting"));

  control("pause", "p1", "paused");
  json_decref(wait_status("p1", "paused"));
  run r;
  CLI(&r, "instances", "list", WF, "--status", "paused");
  expect_ok(&r);
  char st[32];
  ck_assert_msg(row_status(r.out, "p1", st, sizeof st) && !strcmp(st, "paused"),
                "%s:\n%s", r.what, r.out);
  run_free(&r);
  control("resume", "p1", "queued|running|waiting");
  json_decref(wait_status("p1", "waiting"));
  CLI(&r, "instances", "resume", WF, "p1");
  expect_server_error(&r, "instance.cannot_resume");
  run_free(&r);

  control("terminate", "p1", "terminated");
  json_decref(wait_status("p1", "terminated"));
  CLI(&r, "instances", "terminate", WF, "p1");
  expect_server_error(&r, "instance.cannot_terminate");
  run_free(&r);
  CLI(&r, "instances", "pause", WF, "p1");
  expect_server_error(&r, "instance.cannot_pause");
  run_free(&r);

  /* A complete instance cannot be resumed. */
  trigger("p2", ORDER(",\"graceSeconds\":0"));
  json_decref(wait_status("p2", "waiting"));
  approve("p2");
  json_decref(wait_status("p2", "complete"));
  CLI(&r, "instances", "resume", WF, "p2");
  expect_server_error(&r, "instance.cannot_resume");
  assert_contains(r.err, "order-flow/p2: it is complete");
  run_free(&r);
  json_t *d = describe_json("p2");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  json_decref(d);

  /* terminate --rollback: the charge refunded and the stock released
   * first, then terminated */
  trigger("p3", ORDER(""));
  json_decref(wait_status("p3", "waiting"));
  CLI(&r, "instances", "terminate", WF, "p3", "--rollback");
  expect_ok(&r);
  run_free(&r);
  d = wait_status("p3", "terminated");
  ck_assert_str_eq(jstr(step_of(d, "charge card#1/rollback"), "status"),
                   "complete");
  ck_assert_str_eq(jstr(step_of(d, "reserve stock#1/rollback"), "status"),
                   "complete");
  json_decref(d);

  /* The control verbs take no extra options. */
  CLI(&r, "instances", "pause", WF, "p2", "--from", "charge card");
  expect_fail(&r, 2, "--from does not apply to \"instances pause\"");
  run_free(&r);
  CLI(&r, "instances", "pause", WF, "p2", "--rollback");
  expect_fail(&r, 2, "--rollback does not apply to \"instances pause\"");
  run_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- restart ------------------------------------------------------------- */

START_TEST(restart_verb) {
  host_start(&H);
  trigger("r1", ORDER(",\"graceSeconds\":0"));
  json_decref(wait_status("r1", "waiting"));
  approve("r1");
  json_t *before = wait_status("r1", "complete");

  /* Only an ended instance restarts; --count needs --from. */
  run r;
  CLI(&r, "instances", "restart", WF, "r1", "--count", "2");
  expect_fail(&r, 2, "--count needs --from");
  run_free(&r);
  CLI(&r, "instances", "restart", WF, "r1", "--from", "charge card", "--count",
      "0");
  expect_fail(&r, 2, "--count must be a whole number");
  run_free(&r);
  CLI(&r, "instances", "restart", WF, "r1", "--from", "no such step");
  expect_server_error(&r, "instance.cannot_restart");
  /* it says which steps there are */
  ck_assert_msg(strstr(r.err, "its steps: \"reserve stock\"#1, \"charge "
                              "card\"#1") != NULL,
                "%s: %s", r.what, r.err);
  run_free(&r);

  /* A full restart: every step runs again, from a clean journal.  The
   * approval consumed by the discarded "manual review" stays consumed:
   * the rerun waits for a new one.  (The rerun, not the old run, is
   * recognised by the started times below.) */
  control("restart", "r1", "queued|running|waiting");
  json_decref(wait_status("r1", "waiting"));
  approve("r1");
  json_t *after = wait_status("r1", "complete");
  json_t *rs0 = step_of(before, "reserve stock#1");
  json_t *rs1 = step_of(after, "reserve stock#1");
  ck_assert_msg(rs0 && rs1 &&
                    json_integer_value(jget(rs1, "started_ms")) >
                        json_integer_value(jget(rs0, "started_ms")),
                "a full restart did not rerun reserve stock");
  ck_assert_msg(!json_equal(jget(step_of(before, "manual review#1"), "result"),
                            jget(step_of(after, "manual review#1"), "result")),
                "a full restart got the consumed approval back");
  ck_assert_int_eq(json_array_size(jget(after, "steps")), 7);
  json_decref(before);
  before = after;

  /* From "charge card": it and everything after it run again, "reserve
   * stock" stays as journaled (the same started time). */
  CLI(&r, "instances", "restart", WF, "r1", "--from", "charge card");
  expect_ok(&r);
  char st[32] = "";
  ck_assert_msg(sscanf(r.out, "r1: %31[a-z]", st) == 1 &&
                    status_in(st, "queued|running|waiting"),
                "%s: %s", r.what, r.out);
  run_free(&r);
  json_decref(wait_status("r1", "waiting"));
  approve("r1");
  after = wait_status("r1", "complete");
  rs0 = step_of(before, "reserve stock#1");
  rs1 = step_of(after, "reserve stock#1");
  ck_assert_msg(rs0 && rs1 && json_equal(rs0, rs1) &&
                    json_integer_value(jget(rs0, "started_ms")) ==
                        json_integer_value(jget(rs1, "started_ms")),
                "restart --from \"charge card\" reran reserve stock");
  json_t *cc0 = step_of(before, "charge card#1");
  json_t *cc1 = step_of(after, "charge card#1");
  ck_assert_msg(cc0 && cc1 &&
                    json_integer_value(jget(cc1, "started_ms")) >
                        json_integer_value(jget(cc0, "started_ms")),
                "restart --from \"charge card\" did not rerun charge card");
  ck_assert_int_eq(json_array_size(jget(after, "steps")), 7);
  json_decref(before);
  json_decref(after);

  /* The report after it: every step complete again. */
  CLI(&r, "instances", "describe", WF, "r1");
  expect_ok(&r);
  ck_assert_msg(!strncmp(r.out, "order-flow/r1  complete\n", 24), "%s:\n%s",
                r.what, r.out);
  static const char *keys[] = {
      "reserve stock#1", "charge card#1", "manual review#1", "grace period#1",
      "notify#1",        "notify#2",      "notify#3"};
  for (size_t i = 0; i < 7; i++) {
    step_row s;
    step_row_of(&r, keys[i], &s);
    ck_assert_msg(!strcmp(s.status, "complete"), "%s: %s", r.what, s.line);
  }
  run_free(&r);

  /* --rollback: the charge refunded first (its rollback; the stock,
   * reserved before "charge card", kept), then the re-run from it */
  before = describe_json("r1");
  CLI(&r, "instances", "restart", WF, "r1", "--from", "charge card",
      "--rollback");
  expect_ok(&r);
  run_free(&r);
  after = wait_status("r1", "waiting");
  ck_assert_int_eq(json_integer_value(jget(after, "restarts")), 3);
  ck_assert_msg(json_equal(step_of(before, "reserve stock#1"),
                           step_of(after, "reserve stock#1")),
                "restart --rollback reran reserve stock");
  ck_assert_ptr_null(step_of(after, "charge card#1/rollback"));
  char *log = proc_slurp(H.log);
  ck_assert_msg(strstr(log, "refunding") && !strstr(log, "releasing"), "%s",
                log);
  free(log);
  json_decref(before);
  json_decref(after);
  /* --rollback with pause: a usage error */
  CLI(&r, "instances", "resume", WF, "r1", "--rollback");
  expect_fail(&r, 2, "--rollback does not apply to \"instances resume\"");
  run_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- send-event ---------------------------------------------------------- */

START_TEST(send_event_verb) {
  host_start(&H);
  trigger("s1", ORDER(",\"graceSeconds\":3600"));
  json_decref(wait_status("s1", "waiting"));

  /* Refused locally: nothing is sent, the instance still waits. */
  run r;
  CLI(&r, "instances", "send-event", WF, "s1", "--payload",
      "{\"approved\":true}");
  expect_fail(&r, 2, "send-event needs --type T");
  run_free(&r);
  CLI(&r, "instances", "send-event", WF, "s1", "--type", "approval",
      "--payload", "{\"approved\":");
  expect_fail(&r, 2, "--payload is not valid JSON");
  run_free(&r);
  CLI(&r, "instances", "send-event", WF, "s1", "--type", "approval",
      "--payload", "yes");
  expect_fail(&r, 2, "--payload is not valid JSON");
  run_free(&r);
  cli_env(&r, NULL, NULL, NULL,
          (const char *const[]){"instances", "send-event", WF, "s1", "--url",
                                H.url, "--type", NULL});
  expect_fail(&r, 2, "--type needs a value");
  run_free(&r);
  CLI(&r, "instances", "send-event", WF, "ghost", "--type", "approval");
  expect_server_error(&r, "instance.not_found");
  run_free(&r);
  CLI(&r, "instances", "send-event", WF, "s1", "--type", "a/b");
  expect_fail(&r, 2, "--type must be 1-100 characters");
  run_free(&r);
  json_t *d = describe_json("s1");
  json_t *mr = step_of(d, "manual review#1");
  ck_assert_msg(!strcmp(jstr(d, "status"), "waiting") && mr &&
                    !strcmp(jstr(mr, "status"), "waiting"),
                "s1 moved without an event");
  json_decref(d);

  /* The event: the review completes with the payload, the instance sleeps
   * its grace period. */
  approve("s1");
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    d = describe_json("s1");
    mr = step_of(d, "manual review#1");
    json_t *g = step_of(d, "grace period#1");
    if (mr && !strcmp(jstr(mr, "status"), "complete") && g) {
      ck_assert_msg(json_is_true(jget(mr, "result.payload.approved")) &&
                        !strcmp(jstr(mr, "result.type"), "approval") &&
                        !strcmp(jstr(g, "type"), "sleep"),
                    "s1 after the event");
      json_decref(d);
      break;
    }
    ck_assert_msg(proc_now_ms() < deadline, "the event did not move s1 on");
    json_decref(d);
    proc_sleep_ms(20);
  }
  json_decref(wait_status("s1", "waiting"));
  CLI(&r, "instances", "describe", WF, "s1");
  expect_ok(&r);
  step_row s;
  step_row_of(&r, "grace period#1", &s);
  ck_assert_msg(!strcmp(s.type, "sleep") && !strcmp(s.status, "waiting") &&
                    strstr(s.line, "until "),
                "%s: %s", r.what, s.line);
  run_free(&r);

  /* Without --payload: a null payload, which the order takes as approval. */
  trigger("s2", ORDER(",\"graceSeconds\":0"));
  json_decref(wait_status("s2", "waiting"));
  CLI(&r, "instances", "send-event", WF, "s2", "--type", "approval", "--json");
  expect_ok(&r);
  json_t *j = out_json(&r);
  ck_assert_msg(!strcmp(jstr(j, "id"), "s2") &&
                    !strcmp(jstr(j, "type"), "approval"),
                "%s: %s", r.what, r.out);
  json_decref(j);
  run_free(&r);
  d = wait_status("s2", "complete");
  ck_assert_msg(
      json_is_null(jget(step_of(d, "manual review#1"), "result.payload")),
      "s2: payload not null");
  json_decref(d);
  host_stop(&H);
}
END_TEST

/* The events an instance received, in describe's text: a misspelt type
 * stays "pending", the right one names the step that took it, and a long
 * payload is cut, saying so, unless --full. */
/* `instances export WF ID > journal.json`: the document on stdout, JSON
 * with or without --json, its events pending or not. */
START_TEST(export_verb) {
  host_start(&H);
  trigger("ex1", ORDER(",\"graceSeconds\":3600"));
  json_decref(wait_status("ex1", "waiting"));
  run r;
  CLI(&r, "instances", "send-event", WF, "ex1", "--type", "aproval",
      "--payload", "{\"approved\":true}");
  expect_ok(&r);
  run_free(&r);
  CLI(&r, "instances", "export", WF, "ex1");
  expect_ok(&r);
  json_t *d = out_json(&r);
  ck_assert_msg(!strcmp(jstr(d, "format"), "duro-journal-1") &&
                    !strcmp(jstr(d, "workflow"), WF) &&
                    !strcmp(jstr(d, "id"), "ex1") &&
                    !strcmp(jstr(d, "status"), "waiting") &&
                    json_array_size(jget(d, "steps")) == 3,
                "%s: %s", r.what, proc_tail(r.out));
  json_t *ev = json_array_get(jget(d, "events"), 0);
  ck_assert_msg(json_array_size(jget(d, "events")) == 1 &&
                    !strcmp(jstr(ev, "type"), "aproval") &&
                    !strcmp(jstr(ev, "payload"), "{\"approved\":true}") &&
                    json_is_null(jget(ev, "consumed_by")),
                "%s: events: %s", r.what, proc_tail(r.out));
  run_free(&r);
  CLI(&r, "instances", "export", WF, "ex1", "--json");
  expect_ok(&r);
  json_t *again = out_json(&r);
  /* the same journal, read again (exported_ms aside) */
  json_object_del(d, "exported_ms");
  json_object_del(again, "exported_ms");
  ck_assert_msg(json_equal(d, again), "%s: another document:\n%s", r.what,
                proc_tail(r.out));
  json_decref(again);
  json_decref(d);
  run_free(&r);
  host_stop(&H);
}
END_TEST

START_TEST(describe_events) {
  host_start(&H);
  trigger("ev1", ORDER(",\"graceSeconds\":3600"));
  json_decref(wait_status("ev1", "waiting"));
  run r;
  CLI(&r, "instances", "describe", WF, "ev1");
  expect_ok(&r);
  assert_contains(r.out, "\n  no events received\n");
  run_free(&r);

  CLI(&r, "instances", "send-event", WF, "ev1", "--type", "aproval",
      "--payload", "{\"approved\":true}");
  expect_ok(&r);
  run_free(&r);
  approve("ev1");
  /* until the review has taken its event */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  const char *by;
  json_t *d;
  for (;;) {
    d = describe_json("ev1");
    by = jstr(json_array_get(jget(d, "events"), 1), "consumed_by");
    if (*by)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "the approval was not consumed");
    json_decref(d);
    proc_sleep_ms(20);
  }
  static char note[301];
  memset(note, 'q', 300);
  char payload[400];
  snprintf(payload, sizeof payload, "{\"note\":\"%s\"}", note);
  CLI(&r, "instances", "send-event", WF, "ev1", "--type", "note", "--payload",
      payload);
  expect_ok(&r);
  run_free(&r);

  CLI(&r, "instances", "describe", WF, "ev1");
  expect_ok(&r);
  char line[512];
  ck_assert_msg(line_of(r.out, "  EVENT ", line, sizeof line, NULL), "%s",
                proc_tail(r.out));
  assert_contains(line, "CONSUMED BY");
  assert_contains(line, "PAYLOAD");
  ck_assert_msg(line_of(r.out, "  aproval ", line, sizeof line, NULL), "%s",
                proc_tail(r.out));
  assert_contains(line, " pending ");
  assert_contains(line, "Z "); /* when it was sent */
  assert_contains(line, "{\"approved\":true}");
  ck_assert_msg(line_of(r.out, "  approval ", line, sizeof line, NULL), "%s",
                proc_tail(r.out));
  char want[128];
  snprintf(want, sizeof want, " %s ", by);
  assert_contains(line, want);
  ck_assert_msg(line_of(r.out, "  note ", line, sizeof line, NULL), "%s",
                proc_tail(r.out));
  assert_contains(line, " pending ");
  assert_contains(line, "…");
  assert_contains(line, "(payload cut at ");
  assert_contains(line, "--full shows all)");
  run_free(&r);
  CLI(&r, "instances", "describe", WF, "ev1", "--full");
  expect_ok(&r);
  assert_contains(r.out, payload);
  run_free(&r);
  json_decref(d);
  host_stop(&H);
}
END_TEST

/* ---- errors -------------------------------------------------------------- */

START_TEST(not_found_and_usage) {
  host_start(&H);
  run r;
  static const char *verbs[] = {"describe", "export",    "pause",
                                "resume",   "terminate", "restart"};
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
    CLI(&r, "instances", verbs[i], WF, "ghost");
    expect_server_error(&r, "instance.not_found");
    assert_contains(r.err, "order-flow/ghost");
    run_free(&r);
  }
  CLI(&r, "trigger", "no-such-flow", "{}", "--id", "x1");
  expect_server_error(&r, "workflow.not_found");
  assert_contains(r.err, "no-such-flow");
  run_free(&r);
  CLI(&r, "instances", "list", "no-such-flow");
  expect_server_error(&r, "workflow.not_found");
  run_free(&r);
  CLI(&r, "instances", "describe", "no-such-flow", "x1");
  expect_server_error(&r, "workflow.not_found");
  run_free(&r);
  /* Names the server would refuse are refused here (exit 2), before a
   * slash in one could take the request to another route. */
  static const char *bad_ids[] = {"a b", "../x", "x/y",
                                  "../../no-such-flow/"
                                  "instances/x"};
  for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
    CLI(&r, "instances", "describe", WF, bad_ids[i]);
    expect_fail(&r, 2, "ID must be 1-100 characters");
    run_free(&r);
    CLI(&r, "instances", "pause", WF, bad_ids[i]);
    expect_fail(&r, 2, "ID must be 1-100 characters");
    run_free(&r);
  }
  CLI(&r, "instances", "list", "../order-flow");
  expect_fail(&r, 2, "WF must be 1-100 characters");
  run_free(&r);
  CLI(&r, "trigger", "a/b", "{}");
  expect_fail(&r, 2, "WF must be 1-100 characters");
  run_free(&r);

  /* Usage errors: exit 2, the usage on stderr, nothing sent. */
  CLI(&r, "instances", "fly", WF, "x1");
  expect_fail(&r, 2, "unknown command \"workflows instances fly\"");
  run_free(&r);
  CLI(&r, "trigger", WF, "--bogus");
  expect_fail(&r, 2, "unknown option \"--bogus\"");
  run_free(&r);
  CLI(&r, "instances", "list", WF, "--json=yes");
  expect_fail(&r, 2, "--json takes no value");
  run_free(&r);
  cli_env(&r, "ftp://127.0.0.1:1", NULL, NULL,
          (const char *const[]){"instances", "list", WF, NULL});
  expect_fail(&r, 2, "--url must start with http://");
  run_free(&r);
  cli_env(&r, NULL, NULL, NULL,
          (const char *const[]){"instances", "list", WF, "--config",
                                "missing.yaml", NULL});
  expect_fail(&r, 2, "missing.yaml");
  run_free(&r);

  /* Help: exit 0 on stdout. */
  cli_env(&r, NULL, NULL, NULL, (const char *const[]){"help", NULL});
  expect_ok(&r);
  assert_contains(r.out, "duro workflows instances send-event");
  run_free(&r);
  cli_env(&r, NULL, NULL, NULL,
          (const char *const[]){"instances", "restart", "--help", NULL});
  expect_ok(&r);
  assert_contains(r.out, "usage: duro workflows instances restart WF ID");
  run_free(&r);

  /* A trailing slash on --url is fine. */
  char url[80];
  snprintf(url, sizeof url, "%s/", H.url);
  cli_env(&r, url, NULL, NULL,
          (const char *const[]){"instances", "list", WF, NULL});
  expect_ok(&r);
  ck_assert_str_eq(r.out, "no instances\n");
  run_free(&r);

  json_t *l = list_json();
  ck_assert_int_eq(json_array_size(jget(l, "instances")), 0);
  json_decref(l);
  host_stop(&H);
}
END_TEST

/* A loopback port bound but not listening: connecting to it is refused,
 * and nobody else can take it while *fd is open.  The URL goes to url. */
static void closed_port(int *fd, char *url, size_t len) {
  *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert(*fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  ck_assert(bind(*fd, (struct sockaddr *)&a, sizeof a) == 0);
  ck_assert(getsockname(*fd, (struct sockaddr *)&a, &alen) == 0);
  snprintf(url, len, "http://127.0.0.1:%d", ntohs(a.sin_port));
}

/* No host: the connection is refused. */
START_TEST(host_not_running) {
  int fd;
  char url[64];
  closed_port(&fd, url, sizeof url);
  run r;
  const char *const *cmds[] = {
      (const char *const[]){"trigger", WF, "{}", "--id", "x1", NULL},
      (const char *const[]){"instances", "list", WF, NULL},
      (const char *const[]){"instances", "describe", WF, "x1", NULL},
      (const char *const[]){"instances", "pause", WF, "x1", NULL},
      (const char *const[]){"instances", "send-event", WF, "x1", "--type",
                            "approval", NULL},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    cli_env(&r, url, NULL, NULL, cmds[i]);
    expect_fail(&r, 1, "cannot reach");
    assert_contains(r.err, url);
    run_free(&r);
  }
  /* Usage errors are still found first. */
  cli_env(&r, url, NULL, NULL,
          (const char *const[]){"trigger", WF, "{bad", NULL});
  expect_fail(&r, 2, "PARAMS is not valid JSON");
  run_free(&r);
  close(fd);
}
END_TEST

/* A client config at `path` (under the case's directory) giving only
 * http.listen: 127.0.0.1:PORT. */
static void write_client_config(const char *path, int port) {
  char file[600];
  snprintf(file, sizeof file, "%s/%s", proc_tmp_dir, path);
  FILE *f = fopen(file, "w");
  ck_assert_msg(f != NULL, "%s: %s", file, strerror(errno));
  fprintf(f, "http:\n  listen: 127.0.0.1:%d\n", port);
  ck_assert(fclose(f) == 0);
}

/* Without --url or --config, the client reads ./duro.yaml (a plugin's own
 * folder, as the template lays it out), else config/duro.yaml; $DURO_URL
 * still wins over either.  Every error that reaches a host, or fails to,
 * says which URL it asked and where that came from, and an unknown
 * workflow's names the nearest one the host serves. */
START_TEST(config_found_and_host_named) {
  host_start(&H);
  int fd;
  char closed[64], closed_env[128];
  closed_port(&fd, closed, sizeof closed);
  snprintf(closed_env, sizeof closed_env, "DURO_URL=%s", closed);
  char dir[400];
  snprintf(dir, sizeof dir, "%s/config", proc_tmp_dir);
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  write_client_config("config/duro.yaml", atoi(strrchr(closed, ':') + 1));
  const char *const list[] = {"instances", "list", WF, NULL};
  run r;

  /* config/duro.yaml alone: its (closed) address, named with its file. */
  cli_env(&r, NULL, NULL, NULL, list);
  expect_fail(&r, 1, "cannot reach");
  assert_contains(r.err, closed);
  assert_contains(r.err, "from http.listen in config/duro.yaml");
  run_free(&r);

  /* ./duro.yaml is read first. */
  write_client_config("duro.yaml", H.port);
  cli_env(&r, NULL, NULL, NULL, list);
  expect_ok(&r);
  ck_assert_str_eq(r.out, "no instances\n");
  run_free(&r);
  cli_env(&r, NULL, NULL, NULL,
          (const char *const[]){"trigger", WF, ORDER(""), "--id", "c1", NULL});
  expect_ok(&r);
  ck_assert_str_eq(r.out, "created c1 (queued)\n");
  run_free(&r);

  /* The environment wins over a config found in the directory. */
  cli_env(&r, NULL, NULL, closed_env, list);
  expect_fail(&r, 1, "cannot reach");
  assert_contains(r.err, closed);
  assert_contains(r.err, "from DURO_URL");
  run_free(&r);

  /* An unknown workflow: the URL asked, where it came from, and the
   * nearest workflow the host serves, or those it serves. */
  char want[256];
  snprintf(want, sizeof want,
           "(at %s, from http.listen in duro.yaml; did you mean "
           "\"order-flow\"?)\n",
           H.url);
  cli_env(&r, NULL, NULL, NULL,
          (const char *const[]){"trigger", "order-flw", "{}", NULL});
  expect_server_error(&r, "workflow.not_found");
  assert_contains(r.err, want);
  run_free(&r);
  snprintf(want, sizeof want, "(at %s, from --url; it serves \"order-flow\")",
           H.url);
  CLI(&r, "instances", "list", "zzz");
  expect_server_error(&r, "workflow.not_found");
  assert_contains(r.err, want);
  run_free(&r);
  CLI(&r, "instances", "pause", "Order-Flow", "c1");
  expect_server_error(&r, "workflow.not_found");
  assert_contains(r.err, "did you mean \"order-flow\"?");
  run_free(&r);
  close(fd);
  host_stop(&H);
}
END_TEST

/* A proxy in the environment (here one that refuses every connection) is
 * not used for a loopback host. */
START_TEST(proxy_skipped_for_loopback) {
  host_start(&H);
  int fd;
  char proxy[64], env[96], url[80];
  closed_port(&fd, proxy, sizeof proxy);
  static const char *vars[] = {"http_proxy", "HTTP_PROXY", "all_proxy"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    snprintf(env, sizeof env, "%s=%s", vars[i], proxy);
    for (int local = 0; local < 2; local++) {
      if (local)
        snprintf(url, sizeof url, "http://localhost:%d", H.port);
      else
        snprintf(url, sizeof url, "%s", H.url);
      run r;
      cli_env(&r, url, NULL, env,
              (const char *const[]){"instances", "list", WF, NULL});
      expect_ok(&r);
      ck_assert_str_eq(r.out, "no instances\n");
      run_free(&r);
    }
  }
  close(fd);
  host_stop(&H);
}
END_TEST

/* The token: http.token_env is read from --config, its value from the
 * environment. */
START_TEST(token_from_config) {
  host_start_env(&H, "  token_env: " TOKEN_VAR "\n", TOKEN_VAR "=" TOKEN);
  run r;
  /* --config names the variable, the environment holds the token. */
  cli_env(&r, H.url, TOKEN_VAR, TOKEN_VAR "=" TOKEN,
          (const char *const[]){"trigger", WF, ORDER(""), "--id", "k1",
                                "--config", H.config, NULL});
  expect_ok(&r);
  ck_assert_str_eq(r.out, "created k1 (queued)\n");
  run_free(&r);
  cli_env(&r, H.url, TOKEN_VAR, TOKEN_VAR "=" TOKEN,
          (const char *const[]){"instances", "list", WF, "--config", H.config,
                                NULL});
  expect_ok(&r);
  char st[32];
  ck_assert_msg(row_status(r.out, "k1", st, sizeof st), "%s:\n%s", r.what,
                r.out);
  run_free(&r);

  /* The variable unset or empty: exit 2 naming it, before anything is
   * sent. */
  cli_env(&r, H.url, TOKEN_VAR, NULL,
          (const char *const[]){"trigger", WF, ORDER(""), "--id", "k2",
                                "--config", H.config, NULL});
  expect_fail(&r, 2, TOKEN_VAR " is not set");
  assert_contains(r.err, H.config);
  run_free(&r);
  cli_env(&r, H.url, TOKEN_VAR, TOKEN_VAR "=",
          (const char *const[]){"instances", "list", WF, "--config", H.config,
                                NULL});
  expect_fail(&r, 2, TOKEN_VAR);
  run_free(&r);

  /* A wrong token, or none (no --config): the server's 401. */
  cli_env(&r, H.url, TOKEN_VAR, TOKEN_VAR "=wrong",
          (const char *const[]){"instances", "list", WF, "--config", H.config,
                                NULL});
  expect_server_error(&r, "request.unauthorized");
  run_free(&r);
  cli_env(&r, H.url, TOKEN_VAR, TOKEN_VAR "=" TOKEN,
          (const char *const[]){"instances", "list", WF, NULL});
  expect_server_error(&r, "request.unauthorized");
  run_free(&r);

  /* A client config: the address from http.listen, no --url at all. */
  char client[400];
  snprintf(client, sizeof client, "%s/client.yaml", proc_tmp_dir);
  FILE *f = fopen(client, "w");
  ck_assert(f != NULL);
  fprintf(f, "http:\n  listen: 127.0.0.1:%d\n  token_env: %s\n", H.port,
          TOKEN_VAR);
  ck_assert(fclose(f) == 0);
  cli_env(&r, NULL, TOKEN_VAR, TOKEN_VAR "=" TOKEN,
          (const char *const[]){"instances", "describe", WF, "k1", "--config",
                                client, NULL});
  expect_ok(&r);
  ck_assert_msg(!strncmp(r.out, "order-flow/k1  ", 15), "%s:\n%s", r.what,
                r.out);
  run_free(&r);
  json_t *l;
  cli_env(&r, NULL, TOKEN_VAR, TOKEN_VAR "=" TOKEN,
          (const char *const[]){"instances", "list", WF, "--json", "--config",
                                client, NULL});
  expect_ok(&r);
  l = out_json(&r);
  ck_assert_msg(json_array_size(jget(l, "instances")) == 1 && listed(l, "k1"),
                "%s: %s", r.what, r.out);
  json_decref(l);
  run_free(&r);
  host_stop(&H);
}
END_TEST

/* A value too long for the screen is cut on its line, which says where and
 * how much; --full prints it whole. */
START_TEST(describe_full) {
  host_start(&H);
  static char note[5001];
  memset(note, 'n', 5000);
  char params[5200];
  snprintf(params, sizeof params, ORDER(",\"note\":\"%s\""), note);
  trigger("long1", params);
  json_t *d = describe_json("long1");
  char *compact = json_dumps(jget(d, "params"), JSON_COMPACT | JSON_ENCODE_ANY);
  ck_assert_ptr_nonnull(compact);
  size_t total = strlen(compact);
  ck_assert_uint_gt(total, 5000);
  json_decref(d);

  /* The header's values are cut at 100 characters: 99 and the "…". */
  char want[5400];
  snprintf(want, sizeof want,
           "\n  params   %.99s… (cut at 99 of %zu,%03zu bytes; --full shows "
           "all)\n",
           compact, total / 1000, total % 1000);
  run r;
  CLI(&r, "instances", "describe", WF, "long1");
  expect_ok(&r);
  assert_contains(r.out, want);
  run_free(&r);

  snprintf(want, sizeof want, "\n  params   %s\n", compact);
  CLI(&r, "instances", "describe", WF, "long1", "--full");
  expect_ok(&r);
  assert_contains(r.out, want);
  ck_assert_msg(strstr(r.out, "cut at") == NULL && !strstr(r.out, "…"),
                "%s: cut something:\n%s", r.what, proc_tail(r.out));
  run_free(&r);

  /* --full is describe's alone, and takes no value. */
  CLI(&r, "instances", "list", WF, "--full");
  expect_fail(&r, 2, "--full does not apply");
  run_free(&r);
  CLI(&r, "instances", "describe", WF, "long1", "--full=yes");
  expect_fail(&r, 2, "--full takes no value");
  run_free(&r);
  free(compact);
  host_stop(&H);
}
END_TEST

/* The environment: DURO_URL, DURO_CONFIG and DURO_TOKEN, each used when
 * its flag is not given, each below its flag. */
START_TEST(environment_variables) {
  host_start_env(&H, "  token_env: " TOKEN_VAR "\n", TOKEN_VAR "=" TOKEN);
  int fd;
  char closed[64];
  closed_port(&fd, closed, sizeof closed);
  char url_env[128], closed_env[128], cfg_env[600], missing_env[600];
  char client[400];
  snprintf(url_env, sizeof url_env, "DURO_URL=%s", H.url);
  snprintf(closed_env, sizeof closed_env, "DURO_URL=%s", closed);
  snprintf(client, sizeof client, "%s/client.yaml", proc_tmp_dir);
  snprintf(cfg_env, sizeof cfg_env, "DURO_CONFIG=%s", client);
  snprintf(missing_env, sizeof missing_env, "DURO_CONFIG=%s/nowhere.yaml",
           proc_tmp_dir);
  FILE *f = fopen(client, "w");
  ck_assert(f != NULL);
  fprintf(f, "http:\n  listen: 127.0.0.1:%d\n  token_env: %s\n", H.port,
          TOKEN_VAR);
  ck_assert(fclose(f) == 0);
  const char *const list[] = {"instances", "list", WF, NULL};
  const char *const list_config[] = {"instances", "list", WF,
                                     "--config",  client, NULL};
  run r;

  /* DURO_URL and DURO_TOKEN: no flag, no config. */
  cli_vars(&r, NULL, (const char *const[]){url_env, "DURO_TOKEN=" TOKEN, NULL},
           list);
  expect_ok(&r);
  ck_assert_str_eq(r.out, "no instances\n");
  run_free(&r);
  /* The token is DURO_TOKEN's: none or a wrong one, the host's 401. */
  cli_vars(&r, NULL, (const char *const[]){url_env, NULL}, list);
  expect_server_error(&r, "request.unauthorized");
  run_free(&r);
  cli_vars(&r, NULL, (const char *const[]){url_env, "DURO_TOKEN=wrong", NULL},
           list);
  expect_server_error(&r, "request.unauthorized");
  run_free(&r);
  /* DURO_URL is where it goes (here nowhere)... */
  cli_vars(&r, NULL,
           (const char *const[]){closed_env, "DURO_TOKEN=" TOKEN, NULL}, list);
  expect_fail(&r, 1, "cannot reach");
  assert_contains(r.err, closed);
  run_free(&r);
  /* ...unless --url says otherwise. */
  cli_vars(&r, H.url,
           (const char *const[]){closed_env, "DURO_TOKEN=" TOKEN, NULL}, list);
  expect_ok(&r);
  run_free(&r);
  cli_vars(&r, NULL, (const char *const[]){"DURO_URL=ftp://x", NULL}, list);
  expect_fail(&r, 2, "DURO_URL must start with http:// or https://");
  run_free(&r);

  /* DURO_CONFIG: the address and the token's variable from the file; an
   * empty DURO_URL counts as unset. */
  cli_vars(
      &r, NULL,
      (const char *const[]){cfg_env, TOKEN_VAR "=" TOKEN, "DURO_URL=", NULL},
      list);
  expect_ok(&r);
  run_free(&r);
  /* DURO_URL over DURO_CONFIG's address, DURO_TOKEN over its variable. */
  cli_vars(
      &r, NULL,
      (const char *const[]){cfg_env, closed_env, TOKEN_VAR "=" TOKEN, NULL},
      list);
  expect_fail(&r, 1, "cannot reach");
  run_free(&r);
  cli_vars(&r, NULL,
           (const char *const[]){cfg_env, TOKEN_VAR "=wrong",
                                 "DURO_TOKEN=" TOKEN, NULL},
           list);
  expect_ok(&r);
  run_free(&r);
  /* Neither variable set: exit 2 naming both, nothing sent. */
  cli_vars(&r, NULL, (const char *const[]){cfg_env, NULL}, list);
  expect_fail(&r, 2, TOKEN_VAR " is not set (nor is DURO_TOKEN)");
  run_free(&r);
  /* A DURO_CONFIG that names no file: exit 2, saying where it came from. */
  cli_vars(&r, NULL, (const char *const[]){missing_env, NULL}, list);
  expect_fail(&r, 2, "cannot read");
  assert_contains(r.err, "(from DURO_CONFIG)");
  run_free(&r);

  /* --config over all three: its address over DURO_URL, its variable over
   * DURO_TOKEN, and DURO_CONFIG (naming no file) is not read. */
  cli_vars(&r, NULL,
           (const char *const[]){closed_env, missing_env, TOKEN_VAR "=" TOKEN,
                                 "DURO_TOKEN=wrong", NULL},
           list_config);
  expect_ok(&r);
  run_free(&r);
  /* ...but DURO_TOKEN still stands in for its variable when that is unset. */
  cli_vars(&r, NULL, (const char *const[]){"DURO_TOKEN=" TOKEN, NULL},
           list_config);
  expect_ok(&r);
  run_free(&r);

  /* The help says the order. */
  cli_vars(&r, NULL, (const char *const[]){NULL},
           (const char *const[]){"-h", NULL});
  expect_ok(&r);
  assert_contains(r.out, "DURO_URL");
  assert_contains(r.out, "DURO_CONFIG");
  assert_contains(r.out, "DURO_TOKEN");
  assert_contains(r.out, "a flag wins over the environment");
  run_free(&r);
  close(fd);
  host_stop(&H);
}
END_TEST

/* Paths in a config are relative to the config file, not to the current
 * directory.  The client runs in the case's directory; the config is in
 * conf/ under it and names a bare "libx.so" (beside it, not on the
 * library path) and var/duro.db. */
START_TEST(config_paths_beside_file) {
  char conf[400], so[500], real_conf[PATH_MAX];
  snprintf(conf, sizeof conf, "%s/conf", proc_tmp_dir);
  ck_assert_int_eq(mkdir(conf, 0755), 0);
  ck_assert_ptr_nonnull(realpath(conf, real_conf));
  snprintf(so, sizeof so, "%s/libx.so", conf);
  ck_assert_int_eq(symlink(ORDERS_PLUGIN, so), 0);
  static const char *const texts[][2] = {
      {"duro.yaml", "OrderFlow"},
      {"typo.yaml", "OrderFlw"},
      {"keys.yaml", "OrderFlow\n        clas_name: OrderFlow"},
      {"both.yaml", "OrderFlw\n        retention: 3 dayz"},
  };
  for (size_t i = 0; i < 4; i++) {
    char file[600];
    snprintf(file, sizeof file, "%s/%s", conf, texts[i][0]);
    FILE *f = fopen(file, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "storage: { path: var/duro.db, synchronous: normal }\n"
            "http: { listen: \"127.0.0.1:0\" }\n"
            "engine: { workers: 2 }\n"
            "plugins:\n"
            "  - name: orders\n"
            "    path: libx.so\n"
            "    workflows:\n"
            "      - name: order-flow\n"
            "        binding: ORDER_FLOW\n"
            "        class_name: %s\n",
            texts[i][1]);
    ck_assert(fclose(f) == 0);
  }
  run r;
  cli_group_env(&r, "check", NULL, NULL, NULL,
                (const char *const[]){"conf/duro.yaml", NULL});
  expect_ok(&r);
  ck_assert_str_eq(r.out, "conf/duro.yaml: ok (1 plugin)\n");
  run_free(&r);

  /* A class the plugin lacks: the error lists the ones it has, at the
   * resolved path. */
  char want[PATH_MAX + 200];
  snprintf(want, sizeof want,
           "conf/typo.yaml:8:9: workflow \"order-flow\": plugin \"orders\" "
           "(%s/libx.so) exports no class \"OrderFlw\"; it exports "
           "\"OrderFlow\"",
           real_conf);
  cli_group_env(&r, "check", NULL, NULL, NULL,
                (const char *const[]){"conf/typo.yaml", NULL});
  expect_fail(&r, 1, want);
  run_free(&r);
  /* A misspelt key: the nearest one. */
  cli_group_env(&r, "check", NULL, NULL, NULL,
                (const char *const[]){"conf/keys.yaml", NULL});
  expect_fail(&r, 1,
              "conf/keys.yaml:11:9: unknown key \"clas_name\" in workflow — "
              "did you mean \"class_name\"?");
  run_free(&r);
  /* The file's error and the plugin's, in one run. */
  cli_group_env(&r, "check", NULL, NULL, NULL,
                (const char *const[]){"conf/both.yaml", NULL});
  expect_fail(&r, 1, "conf/both.yaml:11:20: ");
  assert_contains(r.err, "exports no class \"OrderFlw\"");
  assert_contains(r.err, "2 errors in conf/both.yaml");
  run_free(&r);

  /* The host puts its database beside the config, and says where. */
  char log[500], db[PATH_MAX + 50], cwd_var[500];
  snprintf(log, sizeof log, "%s/run.log", proc_tmp_dir);
  const char *argv[] = {DURO_BIN, "run", "conf/duro.yaml", NULL};
  char **envp = child_env(NULL, NULL);
  pid_t pid = proc_spawn(argv, envp, log, log);
  free(envp);
  proc_live = pid;
  proc_wait_port(pid, log, proc_now_ms() + WAIT_MS);
  snprintf(db, sizeof db, "%s/var/duro.db", real_conf);
  ck_assert_msg(access(db, F_OK) == 0, "no %s", db);
  snprintf(cwd_var, sizeof cwd_var, "%s/var", proc_tmp_dir);
  ck_assert_msg(access(cwd_var, F_OK) != 0, "%s was created", cwd_var);
  char *text = proc_stop(pid, log, proc_now_ms() + WAIT_MS);
  proc_live = -1;
  snprintf(want, sizeof want, "storage %s ", db);
  assert_contains(text, want);
  free(text);
}
END_TEST

/* ---- queues -------------------------------------------------------------- */

/* `duro queues ARGS... --url <the case's host>`. */
#define QUEUES(r, ...)                                                         \
  cli_group_env((r), "queues", H.url, NULL, NULL,                              \
                (const char *const[]){__VA_ARGS__, NULL})

START_TEST(queues_verbs) {
  cfg_plugin_extra = "    queues:\n"
                     "      consumers:\n"
                     "        - {queue: jobs}\n";
  host_start(&H);
  run r;
  QUEUES(&r, "send", "jobs", "{\"n\":1}");
  expect_ok(&r);
  assert_contains(r.out, "sent message 1 to jobs");
  run_free(&r);
  QUEUES(&r, "send", "jobs", "[2]", "--delay", "60");
  expect_ok(&r);
  run_free(&r);
  QUEUES(&r, "list");
  expect_ok(&r);
  assert_contains(r.out, "QUEUE");
  char line[256];
  ck_assert_msg(line_of(r.out, "jobs ", line, sizeof line, NULL) != NULL, "%s",
                r.out);
  /* ready 1, delayed 1, in flight 0, dropped 0 */
  int ready, delayed, in_flight, dropped;
  ck_assert_int_eq(
      sscanf(line, "jobs %d %d %d %d", &ready, &delayed, &in_flight, &dropped),
      4);
  ck_assert_msg(ready == 1 && delayed == 1 && in_flight == 0 && dropped == 0,
                "%s", line);
  run_free(&r);
  QUEUES(&r, "describe", "jobs", "--json");
  expect_ok(&r);
  json_t *j = out_json(&r);
  ck_assert_int_eq(json_integer_value(jget(j, "ready")), 1);
  ck_assert_int_eq(json_integer_value(jget(j, "delayed")), 1);
  json_decref(j);
  run_free(&r);
  QUEUES(&r, "describe", "jobs");
  expect_ok(&r);
  assert_contains(r.out, "delayed");
  run_free(&r);
  /* a look at the messages leases none: the counts stay as they were */
  for (int look = 0; look < 2; look++) {
    QUEUES(&r, "peek", "jobs");
    expect_ok(&r);
    ck_assert_msg(line_of(r.out, "ID ", line, sizeof line, NULL) != NULL, "%s",
                  r.out);
    assert_contains(line, "ATTEMPTS");
    ck_assert_msg(line_of(r.out, "1 ", line, sizeof line, NULL) != NULL, "%s",
                  r.out);
    assert_contains(line, " 0 ");
    assert_contains(line, " no ");
    assert_contains(line, "{\"n\":1}");
    ck_assert_msg(line_of(r.out, "2 ", line, sizeof line, NULL) != NULL, "%s",
                  r.out);
    assert_contains(line, "[2]");
    run_free(&r);
  }
  QUEUES(&r, "peek", "jobs", "--limit", "1", "--json");
  expect_ok(&r);
  j = out_json(&r);
  ck_assert_uint_eq(json_array_size(jget(j, "messages")), 1);
  ck_assert_int_eq(json_integer_value(jget(
                       json_array_get(jget(j, "messages"), 0), "attempts")),
                   0);
  json_decref(j);
  run_free(&r);
  QUEUES(&r, "describe", "jobs", "--json");
  expect_ok(&r);
  j = out_json(&r);
  ck_assert_int_eq(json_integer_value(jget(j, "ready")), 1);
  ck_assert_int_eq(json_integer_value(jget(j, "in_flight")), 0);
  json_decref(j);
  run_free(&r);
  QUEUES(&r, "peek", "jobs", "--limit", "0");
  expect_fail(&r, 2, "--limit must be a whole number");
  run_free(&r);
  QUEUES(&r, "peek", "jobs", "--limit", "101");
  expect_server_error(&r, "request.invalid");
  run_free(&r);
  QUEUES(&r, "peek", "nope");
  expect_server_error(&r, "queue.not_found");
  run_free(&r);

  QUEUES(&r, "send", "jobs", "{\"n\":");
  expect_fail(&r, 2, "BODY is not valid JSON");
  run_free(&r);
  QUEUES(&r, "send", "jobs", "1", "--delay", "soon");
  expect_fail(&r, 2, "--delay must be a whole number");
  run_free(&r);
  QUEUES(&r, "send", "jobs", "1", "--delay", "43201");
  expect_server_error(&r, "invalid_argument");
  run_free(&r);
  QUEUES(&r, "send", "nope", "1");
  expect_server_error(&r, "queue.not_found");
  run_free(&r);
  QUEUES(&r, "describe", "nope");
  expect_server_error(&r, "queue.not_found");
  run_free(&r);
  QUEUES(&r, "describe", "a/b");
  expect_fail(&r, 2, "QUEUE must be 1-100 characters");
  run_free(&r);
  QUEUES(&r, "send", "jobs");
  expect_fail(&r, 2, "missing arguments");
  run_free(&r);
  host_stop(&H);
}
END_TEST

/* ---- cron ---------------------------------------------------------------- */

/* `duro cron ARGS... --url <the case's host>`. */
#define CRON(r, ...)                                                           \
  cli_group_env((r), "cron", H.url, NULL, NULL,                                \
                (const char *const[]){__VA_ARGS__, NULL})

START_TEST(cron_verbs) {
  cfg_plugin_extra = "    triggers:\n"
                     "      crons:\n"
                     "        - {schedule: \"0 3 * * *\", workflow: "
                     "order-flow, id: \"nightly-{date}\"}\n";
  host_start(&H);
  run r;
  CRON(&r, "list");
  expect_ok(&r);
  char line[512];
  ck_assert_msg(line_of(r.out, "PLUGIN ", line, sizeof line, NULL) != NULL,
                "%s", r.out);
  static const char *const head[] = {"SCHEDULE", "TZ",     "TARGET",  "NEXT",
                                     "LAST",     "MISSED", "SKIPPED", "FAILED"};
  for (size_t i = 0; i < sizeof head / sizeof *head; i++)
    assert_contains(line, head[i]);
  ck_assert_msg(line_of(r.out, "orders ", line, sizeof line, NULL) != NULL,
                "%s", r.out);
  /* schedule, zone, target, the next tick at 03:00 UTC, no last tick */
  assert_contains(line, " 0 3 * * * ");
  assert_contains(line, " UTC ");
  assert_contains(line, " order-flow ");
  assert_contains(line, "T03:00:00Z ");
  assert_contains(line, " - ");
  run_free(&r);
  CRON(&r, "list", "--json");
  expect_ok(&r);
  json_t *j = out_json(&r);
  ck_assert_msg(
      json_array_size(j) == 1 &&
          !strcmp(jstr(json_array_get(j, 0), "schedule"), "0 3 * * *") &&
          json_array_size(jget(json_array_get(j, 0), "next")) == 5,
      "%s", proc_tail(r.out));
  json_decref(j);
  run_free(&r);

  /* fired by hand: one line, the instance of today's tick, which exists */
  CRON(&r, "trigger", "0 3 * * *");
  expect_ok(&r);
  ck_assert_msg(line_of(r.out, "orders: complete instance nightly-", line,
                        sizeof line, NULL) != NULL &&
                    !strchr(r.out, '\n')[1],
                "%s: %s", r.what, proc_tail(r.out));
  char id[512];
  snprintf(id, sizeof id, "%.100s",
           line + strlen("orders: complete instance "));
  run_free(&r);
  json_decref(describe_json(id));
  /* Fired again: today's instance is there, so nothing is created, and
   * neither text nor JSON says "complete" (unless midnight came between
   * the two, which gives a new id). */
  CRON(&r, "trigger", "0 3 * * *", "--json");
  expect_ok(&r);
  j = out_json(&r);
  json_t *t = json_array_get(j, 0);
  int same = json_array_size(j) == 1 && !strcmp(jstr(t, "instance"), id);
  ck_assert_msg(json_array_size(j) == 1 &&
                    !strcmp(jstr(t, "state"), same ? "exists" : "complete"),
                "%s", proc_tail(r.out));
  json_decref(j);
  run_free(&r);
  CRON(&r, "trigger", "0 3 * * *");
  expect_ok(&r);
  char want[600];
  snprintf(want, sizeof want,
           "orders: instance %s already exists: nothing was created\n", id);
  if (strcmp(r.out, want) != 0) /* only past midnight: a new day's id */
    ck_assert_msg(!strncmp(r.out, "orders: complete instance ", 26) &&
                      !strstr(r.out, id),
                  "%s: stdout \"%s\", want \"%s\"", r.what, r.out, want);
  run_free(&r);
  /* A client asking for the cron's id: refused, saying nothing was made. */
  CLI(&r, "trigger", WF, ORDER(""), "--id", id);
  expect_server_error(&r, "instance.already_exists");
  assert_contains(r.err, ": nothing was created\n");
  run_free(&r);

  CRON(&r, "trigger", "1 2 * * *");
  expect_server_error(&r, "cron.not_found");
  run_free(&r);
  CRON(&r, "trigger");
  expect_fail(&r, 2, "missing arguments");
  run_free(&r);
  CRON(&r, "trigger", "0", "3", "*", "*", "*");
  expect_fail(&r, 2, "too many arguments");
  run_free(&r);
  CRON(&r, "list", "--id", "x");
  expect_fail(&r, 2, "--id does not apply");
  run_free(&r);
  CRON(&r, "nope");
  expect_fail(&r, 2, "unknown command \"cron nope\"");
  run_free(&r);
  host_stop(&H);
}
END_TEST

static Suite *cli_suite(void) {
  Suite *s = suite_create("cli");
  struct {
    const char *name;
    int timeout;
  } groups[] = {{"verbs", 60}, {"errors", 60}};
  TCase *tc[2];
  for (int i = 0; i < 2; i++) {
    tc[i] = tcase_create(groups[i].name);
    proc_fixtures(tc[i], "duro-cli");
    tcase_set_timeout(tc[i], groups[i].timeout);
    suite_add_tcase(s, tc[i]);
  }
  tcase_add_test(tc[0], trigger_verb);
  tcase_add_test(tc[0], trigger_wait_verb);
  tcase_add_test(tc[0], trigger_wait_one_request);
  tcase_add_test(tc[0], list_verb);
  tcase_add_test(tc[0], version_and_workflows_list);
  tcase_add_test(tc[0], describe_retried_step);
  tcase_add_test(tc[0], describe_completed);
  tcase_add_test(tc[0], control_verbs);
  tcase_add_test(tc[0], restart_verb);
  tcase_add_test(tc[0], send_event_verb);
  tcase_add_test(tc[0], queues_verbs);
  tcase_add_test(tc[0], cron_verbs);
  tcase_add_test(tc[0], describe_full);
  tcase_add_test(tc[0], describe_events);
  tcase_add_test(tc[0], export_verb);

  tcase_add_test(tc[1], not_found_and_usage);
  tcase_add_test(tc[1], host_not_running);
  tcase_add_test(tc[1], config_found_and_host_named);
  tcase_add_test(tc[1], proxy_skipped_for_loopback);
  tcase_add_test(tc[1], token_from_config);
  tcase_add_test(tc[1], environment_variables);
  tcase_add_test(tc[1], config_paths_beside_file);
  return s;
}

int main(void) { return http_suite_run(cli_suite()); }
