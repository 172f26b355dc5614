/* test_bulk_host.c — bulk actions over the HTTP API of a real `duro run`
 * (DURO_BIN, tests/host_run.h) of the order-flow example
 * (ORDERS_PLUGIN):
 *
 *  - bad bodies are refused 400 request.invalid naming the field (the
 *    action, a filter field, a time, a status never stored, dry_run,
 *    terminate without delete, not an object, ids that are not an array
 *    of 1 to 1000 instance ids); an unknown workflow 404;
 *    an unknown job 404 bulk.not_found;
 *  - dry_run answers 200 {"matched"} and makes no job; a job answers 202
 *    {"id", "matched"}, GET /bulk/{id} shows its progress until done,
 *    and GET /workflows/{wf}/bulk lists it; a cancel of an ended job is
 *    409 bulk.ended;
 *  - `duro workflows instances bulk` follows a job to its end, `duro bulk
 *    status` shows it;
 *  - a job of chosen ids (filter.ids; the CLI's --id, once for each)
 *    acts on those alone and shows them;
 *  - a restart job survives a kill -9 of the engine in its midst: it
 *    ends done, its counts add up to its matches, and every instance it
 *    matched was restarted exactly once (none twice, none missed), the
 *    instances made after it untouched. */
#include <check.h>
#include <jansson.h>
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

#define WF "order-flow"
#define SETTLE_MS 60000

static void start(host_run *H, const char *name) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(H, name);
  host_write_config(H, db, "{ workers: 2 }", "orders", ORDERS_PLUGIN,
                    "      - { name: order-flow, binding: ORDER_FLOW,"
                    " class_name: OrderFlow }\n");
  host_start(H);
}

/* METHOD path body: must answer `status`; with `part`, the error's
 * message holds it.  The answer (caller frees) or NULL. */
static json_t *expect(const host_run *h, const char *method, const char *path,
                      const char *body, long status, const char *code,
                      const char *part) {
  http_resp r;
  host_request(h, &r, method, path, body);
  ck_assert_msg(r.status == status, "%s %s %s: %ld %s, expected %ld", method,
                path, body ? body : "", r.status, r.body ? r.body : "", status);
  if (code)
    ck_assert_str_eq(jstr(r.json, "error.code"), code);
  if (part)
    assert_contains(jstr(r.json, "error.message"), part);
  json_t *out = json_incref(r.json);
  http_resp_free(&r);
  return out;
}

/* n instances PREFIX-1..n, made in batches of 100, then waited for until
 * each waits for its review. */
static void make(const host_run *h, const char *prefix, int n) {
  for (int i = 1; i <= n;) {
    char *body = strdup("{\"instances\":[");
    for (int k = 0; k < 100 && i <= n; k++, i++) {
      char one[200];
      snprintf(one, sizeof one,
               "%s{\"id\":\"%s%d\",\"params\":{\"orderId\":\"%s%d\","
               "\"email\":\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
               k ? "," : "", prefix, i, prefix, i);
      body = realloc(body, strlen(body) + strlen(one) + 3);
      strcat(body, one);
    }
    strcat(body, "]}");
    json_decref(expect(h, "POST", "/workflows/" WF "/instances/batch", body,
                       200, NULL, NULL));
    free(body);
  }
}

/* GET /workflows/order-flow: how many have `status`. */
static long long counted(const host_run *h, const char *status) {
  json_t *o = expect(h, "GET", "/workflows/" WF, NULL, 200, NULL, NULL);
  char path[64];
  snprintf(path, sizeof path, "instances.%s", status);
  long long n = (long long)json_integer_value(jget(o, path));
  json_decref(o);
  return n;
}

static void wait_counted(const host_run *h, const char *status, long long n) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (counted(h, status) != n) {
    ck_assert_msg(proc_now_ms() < deadline, "never %lld %s (%lld)", n, status,
                  counted(h, status));
    proc_sleep_ms(50);
  }
}

/* GET /bulk/{id} until it is no longer running; the job (caller frees). */
static json_t *wait_job(const host_run *h, const char *id) {
  char path[64];
  snprintf(path, sizeof path, "/bulk/%s", id);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    http_resp r = {0};
    json_t *job = NULL;
    if (host_request_try(h, &r, "GET", path, NULL) == 0 && r.status == 200)
      job = json_incref(r.json);
    http_resp_free(&r);
    if (job && strcmp(jstr(job, "state"), "running"))
      return job;
    json_decref(job);
    ck_assert_msg(proc_now_ms() < deadline, "job %s never ended", id);
    proc_sleep_ms(50);
  }
}

static long long jint(json_t *o, const char *path) {
  return (long long)json_integer_value(jget(o, path));
}

START_TEST(bodies_progress_and_cli) {
  host_run H;
  start(&H, "bulk");
  make(&H, "a-", 30);
  make(&H, "b-", 10);
  wait_counted(&H, "waiting", 40);

  const char *P = "/workflows/" WF "/bulk";
  static const struct {
    const char *body, *part;
  } bad[] = {
      {"[1]", "the body must be {\"action\""},
      {"{\"action\":\"nuke\"}", "\"action\" must be terminate, restart"},
      {"{}", "\"action\" must be"},
      {"{\"action\":\"pause\",\"fliter\":{}}", "\"fliter\" is not a field"},
      {"{\"action\":\"pause\",\"filter\":[]}", "\"filter\" must be an object"},
      {"{\"action\":\"pause\",\"filter\":{\"color\":\"red\"}}",
       "filter.color is not a filter field"},
      {"{\"action\":\"pause\",\"filter\":{\"prefix\":3}}",
       "filter.prefix must be a string"},
      {"{\"action\":\"pause\",\"filter\":{\"status\":\"late\"}}",
       "filter.unknown status \"late\""},
      {"{\"action\":\"pause\",\"filter\":{\"status\":\"running\"}}",
       "filter.status running is not one a bulk action takes"},
      {"{\"action\":\"pause\",\"filter\":{\"created_after\":\"soon\"}}",
       "filter.created_after \"soon\" is not a time"},
      {"{\"action\":\"pause\",\"filter\":{\"ended_before\":-5}}",
       "filter.ended_before must be a time"},
      {"{\"action\":\"pause\",\"dry_run\":1}", "\"dry_run\" must be a boolean"},
      {"{\"action\":\"pause\",\"terminate\":true}", "only a delete takes it"},
      {"{\"action\":\"pause\",\"filter\":{\"ids\":\"a-1\"}}",
       "filter.ids must be an array of 1 to 1000 instance ids"},
      {"{\"action\":\"pause\",\"filter\":{\"ids\":[]}}",
       "filter.ids must be an array of 1 to 1000"},
      {"{\"action\":\"pause\",\"filter\":{\"ids\":[\"a-1\",7]}}",
       "filter.ids[1] must be an instance id"},
      {"{\"action\":\"pause\",\"filter\":{\"ids\":[\"a 1\"]}}",
       "filter.ids[0] must be an instance id"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    json_decref(expect(&H, "POST", P, bad[i].body, 400, "request.invalid",
                       bad[i].part));
  /* more than 1000 ids */
  json_t *many =
      json_pack("{s:s, s:{s:[]}}", "action", "pause", "filter", "ids");
  for (int i = 0; i <= 1000; i++)
    json_array_append_new(jget(many, "filter.ids"), json_sprintf("a-%d", i));
  char *text = json_dumps(many, JSON_COMPACT);
  json_decref(expect(&H, "POST", P, text, 400, "request.invalid",
                     "filter.ids must be an array of 1 to 1000"));
  free(text);
  json_decref(many);
  json_decref(expect(&H, "POST", "/workflows/nope/bulk",
                     "{\"action\":\"pause\"}", 404, "workflow.not_found",
                     NULL));
  json_decref(
      expect(&H, "GET", "/bulk/123", NULL, 404, "bulk.not_found", NULL));
  json_decref(
      expect(&H, "GET", "/bulk/abc", NULL, 404, "bulk.not_found", NULL));

  /* dry run: counted, nothing made or changed */
  json_t *o = expect(&H, "POST", P,
                     "{\"action\":\"terminate\",\"dry_run\":true,\"filter\":"
                     "{\"prefix\":\"a-\",\"status\":\"waiting\"}}",
                     200, NULL, NULL);
  ck_assert_int_eq(jint(o, "matched"), 30);
  json_decref(o);
  o = expect(&H, "GET", P, NULL, 200, NULL, NULL);
  ck_assert_uint_eq(json_array_size(jget(o, "jobs")), 0);
  json_decref(o);
  ck_assert_int_eq(counted(&H, "waiting"), 40);

  /* a job: 202, its progress until done, listed */
  o = expect(&H, "POST", P,
             "{\"action\":\"terminate\",\"filter\":{\"prefix\":\"a-\","
             "\"created_after\":\"2020-01-01T00:00:00Z\"}}",
             202, NULL, NULL);
  ck_assert_int_eq(jint(o, "matched"), 30);
  char id[24];
  snprintf(id, sizeof id, "%s", jstr(o, "id"));
  json_decref(o);
  json_t *job = wait_job(&H, id);
  ck_assert_str_eq(jstr(job, "state"), "done");
  ck_assert_str_eq(jstr(job, "workflow"), WF);
  ck_assert_str_eq(jstr(job, "action"), "terminate");
  ck_assert_str_eq(jstr(job, "filter.prefix"), "a-");
  ck_assert_int_eq(jint(job, "filter.created_after"), 1577836800000LL);
  ck_assert_int_eq(jint(job, "matched"), 30);
  ck_assert_int_eq(jint(job, "done"), 30);
  ck_assert_int_eq(jint(job, "failed") + jint(job, "skipped"), 0);
  ck_assert(jint(job, "ended_ms") >= jint(job, "created_ms"));
  ck_assert_uint_eq(json_array_size(jget(job, "errors")), 0);
  json_decref(job);
  ck_assert_int_eq(counted(&H, "terminated"), 30);
  ck_assert_int_eq(counted(&H, "waiting"), 10);
  o = expect(&H, "GET", P, NULL, 200, NULL, NULL);
  ck_assert_uint_eq(json_array_size(jget(o, "jobs")), 1);
  ck_assert_str_eq(jstr(json_array_get(jget(o, "jobs"), 0), "id"), id);
  json_decref(o);
  char cancel[64];
  snprintf(cancel, sizeof cancel, "/bulk/%s/cancel", id);
  json_decref(expect(&H, "POST", cancel, NULL, 409, "bulk.ended",
                     "has ended: nothing to cancel"));

  /* the CLI: a delete of the terminated ones, followed to its end */
  char *out;
  const char *const del[] = {"instances", "bulk",     WF,           "--action",
                             "delete",    "--status", "terminated", NULL};
  int rc = host_cli(&H, del, &out);
  ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
  assert_contains(out, "instance(s) match");
  assert_contains(out, "delete of order-flow, done: 30 of 30 matched, 30 "
                       "done, 0 failed, 0 skipped");
  free(out);
  ck_assert_int_eq(counted(&H, "terminated"), 0);
  const char *const dry[] = {"instances", "bulk",      WF,  "--action",
                             "pause",     "--dry-run", NULL};
  ck_assert_int_eq(host_cli(&H, dry, &out), 0);
  assert_contains(out, "10 instance(s) match (dry run: nothing changed)");
  free(out);
  const char *const bad_action[] = {"instances", "bulk", WF,
                                    "--action",  "nuke", NULL};
  ck_assert_int_eq(host_cli(&H, bad_action, &out), 2);
  assert_contains(out, "--action takes terminate, restart");
  free(out);
  const char *const status[] = {"bulk", "status", "2", NULL};
  ck_assert_int_eq(host_cli_verb(&H, status, &out), 0);
  assert_contains(out, "bulk 2: delete of order-flow, done");
  free(out);
  const char *const gone[] = {"bulk", "cancel", "2", NULL};
  ck_assert_int_eq(host_cli_verb(&H, gone, &out), 1);
  assert_contains(out, "bulk.ended");
  free(out);
  ck_assert_int_eq(counted(&H, "waiting"), 10);

  /* chosen ids: those alone (an unknown one matches nothing) */
  o = expect(&H, "POST", P,
             "{\"action\":\"pause\",\"filter\":{\"ids\":[\"b-1\",\"b-2\","
             "\"zz\"]}}",
             202, NULL, NULL);
  ck_assert_int_eq(jint(o, "matched"), 2);
  snprintf(id, sizeof id, "%s", jstr(o, "id"));
  json_decref(o);
  job = wait_job(&H, id);
  ck_assert_str_eq(jstr(job, "state"), "done");
  ck_assert_int_eq(jint(job, "done"), 2);
  ck_assert_uint_eq(json_array_size(jget(job, "filter.ids")), 3);
  ck_assert_str_eq(
      json_string_value(json_array_get(jget(job, "filter.ids"), 1)), "b-2");
  json_decref(job);
  ck_assert_int_eq(counted(&H, "paused"), 2);
  ck_assert_int_eq(counted(&H, "waiting"), 8);
  /* the CLI's --id, once for each */
  const char *const resume[] = {"instances", "bulk", WF,    "--action",
                                "resume",    "--id", "b-1", "--id",
                                "b-2",       "--id", "b-3", NULL};
  rc = host_cli(&H, resume, &out);
  ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
  assert_contains(out, "resume of order-flow, done: 3 of 3 matched, 2 done, "
                       "0 failed, 1 skipped");
  free(out);
  ck_assert_int_eq(counted(&H, "paused"), 0);
  const char *const bad_id[] = {"instances", "bulk", WF,    "--action",
                                "resume",    "--id", "b 1", NULL};
  ck_assert_int_eq(host_cli(&H, bad_id, &out), 2);
  assert_contains(out, "--id");
  free(out);

  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* The restarts count of each of prefix-1..n: all `want`. */
static void assert_restarts(const host_run *h, const char *prefix, int n,
                            long long want) {
  for (int i = 1; i <= n; i++) {
    char id[32];
    snprintf(id, sizeof id, "%s%d", prefix, i);
    json_t *d = host_describe(h, WF, id);
    ck_assert_msg(d != NULL, "no %s", id);
    ck_assert_msg(jint(d, "restarts") == want, "%s restarted %lld times", id,
                  jint(d, "restarts"));
    json_decref(d);
  }
}

START_TEST(a_restart_job_survives_a_kill) {
  host_run H;
  start(&H, "bulk-kill");
  H.restarts = 1;
  int n = 600;
  make(&H, "r-", n);
  wait_counted(&H, "waiting", n);
  /* all terminated first, by a job too */
  json_t *o = expect(&H, "POST", "/workflows/" WF "/bulk",
                     "{\"action\":\"terminate\"}", 202, NULL, NULL);
  json_decref(wait_job(&H, jstr(o, "id")));
  json_decref(o);
  wait_counted(&H, "terminated", n);

  o = expect(&H, "POST", "/workflows/" WF "/bulk",
             "{\"action\":\"restart\",\"filter\":{\"status\":\"terminated\"}}",
             202, NULL, NULL);
  char id[24], path[64];
  snprintf(id, sizeof id, "%s", jstr(o, "id"));
  ck_assert_int_eq(jint(o, "matched"), n);
  json_decref(o);
  make(&H, "late-", 5); /* after the job: never its */
  /* in its midst: some restarted, not all */
  snprintf(path, sizeof path, "/bulk/%s", id);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    o = expect(&H, "GET", path, NULL, 200, NULL, NULL);
    long long seen = jint(o, "done") + jint(o, "skipped");
    int running = !strcmp(jstr(o, "state"), "running");
    json_decref(o);
    ck_assert_msg(running, "the job ended before the kill");
    if (seen >= 150)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "the job never got going");
    proc_sleep_ms(5);
  }
  pid_t engine = host_last_engine(&H);
  ck_assert_int_eq(kill(engine, SIGKILL), 0);
  ck_assert(host_wait_gone(engine, 10000));

  json_t *job = wait_job(&H, id);
  ck_assert_str_eq(jstr(job, "state"), "done");
  ck_assert_int_eq(jint(job, "matched"), n);
  ck_assert_msg(
      jint(job, "done") + jint(job, "skipped") + jint(job, "failed") == n,
      "counts do not add up: %s", jdump(job));
  ck_assert_int_eq(jint(job, "done"), n);
  json_decref(job);
  assert_restarts(&H, "r-", n, 1);
  assert_restarts(&H, "late-", 5, 0);
  host_stop(&H, proc_now_ms() + 20000, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bulk_host");
  TCase *tc = tcase_create("bulk_host");
  proc_fixtures(tc, "duro-bulk");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, bodies_progress_and_cli);
  tcase_add_test(tc, a_restart_job_survives_a_kill);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
