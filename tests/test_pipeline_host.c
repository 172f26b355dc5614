/* test_pipeline_host.c — pipelines on a real `duro run` (DURO_BIN) with
 * no plugin and one pipeline `events` writing under out/ of the case's
 * directory, on the real clock: a file is waited for by polling, with a
 * deadline, never by a timed assertion.
 *
 *  - http: a JSON array and NDJSON (blank lines skipped) answered 202;
 *    every refusal (a bad NDJSON line named by its number, a record over
 *    1 MB named by its place, over 10,000 records, a body over 5 MB, an
 *    empty array, a body that is no array, an unknown pipeline, other
 *    methods, a Content-Type other than JSON or NDJSON) stores nothing;
 *    GET /pipelines counts them; once the roll
 *    interval (1 s) passed, the files read back with gzip -dc hold every
 *    record once, in the order sent, as compact JSON;
 *  - csv: `format: csv` refuses a record that is no object (400, its
 *    place named, nothing stored), GET shows the format and columns, and
 *    its .csv.gz file holds the header and a row a record;
 *  - backlog: past max_backlog a send is answered 503 with Retry-After
 *    and stores nothing;
 *  - cli: `duro pipelines send` (an array, one value, NDJSON and JSON on
 *    stdin, a bad stdin line named and nothing sent), `list` and
 *    `describe` against the host;
 *  - kill -9: two senders send numbered records in batches while the
 *    engine is SIGKILLed (3 times, or $DURO_PIPELINE_KILLS: `make
 *    chaos-pipelines` asks 100; the supervisor starting a new one each
 *    time, 0.1 s after the kill of one that was ready), sending each
 *    batch once whatever the answer.  Once all is written, every record
 *    answered 202 is in exactly one file exactly once, one that got no
 *    answer at most once, each sender's in the order it sent them, and
 *    the files' sequence ranges follow one another with no overlap. */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "host_run.h"
#include "http_client.h"
#include "pipeline_check.h"
#include "proc.h"

#define FILE_WAIT_MS 30000 /* for the flusher to write what waits */

static host_run H;

/* A host with pipeline `events` (sink out/) whose other keys are the
 * YAML lines `keys` (indented by 4), and the plugins of `plugins` (a
 * YAML list). */
static void start_host_with(const char *name, const char *plugins,
                            const char *keys) {
  pipeline_host_start(&H, name, plugins, "    sink: { files: { path: out } }\n",
                      keys);
}

static void start_host(const char *name, const char *keys) {
  start_host_with(name, "[]", keys);
}

/* POST /pipelines/events with `body` of `type` (NULL: JSON). */
static void send_records(http_resp *r, const char *type, const char *body,
                         size_t len) {
  http_req q = {.method = "POST",
                .path = "/pipelines/events",
                .body = body,
                .body_len = len,
                .content_type = type,
                .timeout_ms = H.request_ms};
  ck_assert_msg(http_send(H.port, &q, r) == CURLE_OK, "no answer");
}

static void assert_accepted(const char *type, const char *body, int n) {
  http_resp r;
  send_records(&r, type, body, 0);
  ck_assert_msg(r.status == 202, "%ld %s", r.status, r.body);
  ck_assert_int_eq(json_integer_value(jget(r.json, "accepted")), n);
  http_resp_free(&r);
}

/* The refusal of `body`: its status, code and a part of its message. */
static void assert_refused(const char *type, const char *body, size_t len,
                           long status, const char *code, const char *says) {
  http_resp r;
  send_records(&r, type, body, len);
  ck_assert_msg(r.status == status, "%ld %s", r.status, r.body);
  ck_assert_str_eq(jstr(r.json, "error.code"), code);
  assert_contains(jstr(r.json, "error.message"), says);
  http_resp_free(&r);
}

static json_t *stats(void) { return pipeline_stats(&H); }

/* Waits until `written` records are written and nothing waits. */
static void wait_written(int64_t written) {
  pipeline_wait_written(&H, written, FILE_WAIT_MS);
}

/* The lines of a file, gunzip'ed by gzip -dc (malloc'ed text). */
static char *read_file(const pipeline_batch *b) {
  char cmd[800];
  snprintf(cmd, sizeof cmd, "gzip -dc '%s'", b->name);
  FILE *p = popen(cmd, "r");
  ck_assert(p != NULL);
  size_t len = 0, cap = 4096;
  char *text = malloc(cap);
  size_t got;
  while ((got = fread(text + len, 1, cap - len - 1, p)) > 0) {
    len += got;
    if (cap - len < 2)
      text = realloc(text, cap *= 2);
  }
  text[len] = '\0';
  ck_assert_msg(pclose(p) == 0, "gzip -dc %s failed", b->name);
  return text;
}

/* Every file's lines, in the order of the files' sequence numbers, which
 * must follow one another (pipeline_read_batches()). */
static char *read_all(size_t *files) {
  static pipeline_batch v[4096];
  char cmd[800];
  snprintf(cmd, sizeof cmd,
           "find '%s/out' -type f -name 'events-*.jsonl.gz' 2>/dev/null",
           proc_tmp_dir);
  FILE *p = popen(cmd, "r");
  ck_assert(p != NULL);
  size_t n = 0;
  char line[600];
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '\0';
    ck_assert_uint_lt(n, 4096);
    snprintf(v[n].name, sizeof v[n].name, "%s", line);
    pipeline_batch_parse(&v[n++]);
  }
  ck_assert_int_eq(pclose(p), 0);
  *files = n;
  return pipeline_read_batches(v, n, read_file);
}

START_TEST(http_send_and_files) {
  start_host("http", "    roll: { interval: 1s }\n");
  assert_accepted(NULL, "[{\"n\": 1}, {\"n\":2}, \"x\", 3]", 4);
  assert_accepted("application/x-ndjson", "{\"n\": 5}\n\n  \n[6]\r\n", 2);

  /* refusals: none stores anything */
  assert_refused("application/x-ndjson", "1\n\n{bad\n4\n", 0, 400,
                 "request.invalid_json", "line 3 is not valid JSON");
  assert_refused(NULL, "[]", 0, 400, "request.invalid", "no records");
  assert_refused("application/x-ndjson", "\n\n", 0, 400, "request.invalid",
                 "no records");
  assert_refused(NULL, "{\"n\": 1}", 0, 400, "request.invalid",
                 "must be a JSON array");
  assert_refused(NULL, "[1, {bad", 0, 400, "request.invalid_json",
                 "not valid JSON");
  size_t big = 1000000;
  char *body = malloc(6000000);
  ck_assert_ptr_nonnull(body);
  /* a string of 999,999 characters is 1,000,001 bytes with its quotes */
  int at = sprintf(body, "[1, \"");
  memset(body + at, 'a', big - 1);
  strcpy(body + at + big - 1, "\"]");
  assert_refused(NULL, body, 0, 413, "pipeline.record_too_large",
                 "record 1 is 1000001 bytes");
  at = sprintf(body, "1\n\"");
  memset(body + at, 'a', big - 1);
  strcpy(body + at + big - 1, "\"\n");
  assert_refused("application/x-ndjson", body, 0, 413,
                 "pipeline.record_too_large", "line 2 is 1000001 bytes");
  at = sprintf(body, "[");
  for (int i = 0; i < 10001; i++)
    at += sprintf(body + at, "%s1", i ? "," : "");
  strcpy(body + at, "]");
  assert_refused(NULL, body, 0, 413, "pipeline.batch_too_large",
                 "more than 10000 records");
  memset(body, ' ', 5000001);
  strcpy(body + 5000001, "[1]");
  assert_refused(NULL, body, 0, 413, "pipeline.body_too_large",
                 "over the limit of 5000000");
  free(body);
  /* the cross-site guard: another type is refused, and NDJSON is taken
   * by a pipeline's route alone */
  assert_refused("text/plain", "[1]", 0, 415, "request.unsupported_media_type",
                 "application/x-ndjson");
  http_resp r;
  http_req q = {.method = "POST",
                .path = "/queues/jobs/messages",
                .body = "{\"body\": 1}",
                .content_type = "application/x-ndjson"};
  ck_assert(http_send(H.port, &q, &r) == CURLE_OK);
  ck_assert_int_eq(r.status, 415);
  http_resp_free(&r);
  host_request(&H, &r, "POST", "/pipelines/nope", "[1]");
  ck_assert_int_eq(r.status, 404);
  ck_assert_str_eq(jstr(r.json, "error.code"), "pipeline.not_found");
  http_resp_free(&r);
  host_request(&H, &r, "DELETE", "/pipelines/events", NULL);
  ck_assert_int_eq(r.status, 405);
  char allow[64];
  ck_assert_str_eq(http_resp_header(&r, "Allow", allow, sizeof allow),
                   "GET, POST");
  http_resp_free(&r);
  host_request(&H, &r, "POST", "/pipelines", "[1]");
  ck_assert_int_eq(r.status, 405);
  http_resp_free(&r);

  json_t *s = stats();
  ck_assert_int_eq(pipeline_stat(s, "accepted"), 6);
  ck_assert_str_eq(jstr(s, "sink.compression"), "gzip");
  json_decref(s);
  host_request(&H, &r, "GET", "/pipelines", NULL);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(json_array_size(r.json), 1);
  ck_assert_str_eq(jstr(json_array_get(r.json, 0), "name"), "events");
  http_resp_free(&r);

  wait_written(6);
  size_t files;
  char *all = read_all(&files);
  ck_assert_str_eq(all, "{\"n\":1}\n{\"n\":2}\n\"x\"\n3\n{\"n\":5}\n[6]\n");
  free(all);
  s = stats();
  ck_assert_int_eq(pipeline_stat(s, "files"), (int64_t)files);
  ck_assert(json_is_integer(jget(s, "last_flush_ms")));
  ck_assert(json_is_null(jget(s, "last_error")));
  json_decref(s);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* format: csv from the config to the file, over HTTP. */
START_TEST(http_csv) {
  start_host("csv", "    format: csv\n"
                    "    columns: [n, /u/id]\n"
                    "    roll: { interval: 1s }\n");
  assert_refused(NULL, "[{\"n\": 1}, 2]", 0, 400, "pipeline.record_not_object",
                 "record 1 is not a JSON object");
  assert_refused("application/x-ndjson", "{\"n\": 1}\n\n[2]\n", 0, 400,
                 "pipeline.record_not_object", "line 3 is not a JSON object");
  assert_accepted(NULL, "[{\"n\": 1, \"u\": {\"id\": \"a,b\"}}, {\"n\": 2}]",
                  2);
  json_t *s = stats();
  ck_assert_int_eq(pipeline_stat(s, "accepted"), 2);
  ck_assert_str_eq(jstr(s, "sink.format"), "csv");
  json_t *cols = jget(s, "sink.columns");
  ck_assert_uint_eq(json_array_size(cols), 2);
  ck_assert_str_eq(json_string_value(json_array_get(cols, 1)), "/u/id");
  json_decref(s);
  wait_written(2);
  char cmd[800], text[256] = "";
  snprintf(cmd, sizeof cmd,
           "gzip -dc \"$(find '%s/out' -type f -name 'events-*.csv.gz')\"",
           proc_tmp_dir);
  FILE *p = popen(cmd, "r");
  ck_assert(p != NULL);
  size_t n = fread(text, 1, sizeof text - 1, p);
  text[n] = '\0';
  ck_assert_int_eq(pclose(p), 0);
  ck_assert_str_eq(text, "n,/u/id\r\n1,\"a,b\"\r\n2,\r\n");
  /* the CLI's describe says so too */
  const char *describe[] = {"pipelines", "describe", "events", NULL};
  char *out = NULL;
  ck_assert_int_eq(host_cli_verb(&H, describe, &out), 0);
  ck_assert_msg(strstr(out, "format:        csv (n, /u/id)\n") != NULL, "%s",
                out);
  free(out);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* The emit plugin in two worker processes: each step's records reach the
 * files once (its failed first attempt's send does not), compact, in the
 * order sent; a send outside a callback and a record of no JSON are
 * refused with their errors. */
START_TEST(plugin_sends_with_its_steps) {
  start_host_with("plugin",
                  "[{name: emit, path: \"" EMIT_PLUGIN "\", workers: 2,\n"
                  "           workflows: [{name: emit, binding: EMIT,\n"
                  "                        class_name: Emit}]}]",
                  "    roll: { interval: 1s }\n");
  const char *ids[] = {"a", "b"};
  for (int i = 0; i < 2; i++) {
    char body[128];
    snprintf(body, sizeof body,
             "{\"id\": \"%s\", \"params\": {\"records\": 12, \"batch\": 5}}",
             ids[i]);
    http_resp r;
    host_request(&H, &r, "POST", "/workflows/emit/instances", body);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    http_resp_free(&r);
  }
  for (int i = 0; i < 2; i++) {
    json_t *d =
        host_wait_status(&H, "emit", ids[i], "complete", proc_now_ms() + 60000);
    ck_assert_str_eq(jstr(d, "output.outside"), "invalid_argument");
    ck_assert_str_eq(jstr(d, "output.bad"), "queue.invalid_message");
    json_decref(d);
  }
  wait_written(24);
  size_t files;
  char *all = read_all(&files);
  /* each instance's records in its order, the two interleaved */
  int next[2] = {0, 0};
  for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
    char from[8];
    int k = -1;
    ck_assert_msg(sscanf(line, "{\"from\":\"%1[ab]\",\"k\":%d}", from, &k) == 2,
                  "line %s", line);
    int which = from[0] - 'a';
    ck_assert_msg(k == next[which], "%s where k %d was next", line,
                  next[which]);
    next[which]++;
  }
  ck_assert_int_eq(next[0], 12);
  ck_assert_int_eq(next[1], 12);
  free(all);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(backlog_full_answers_503) {
  /* nothing is written (a day's interval, a GiB a file): the backlog
   * only grows */
  start_host("backlog", "    roll: { interval: 1d, size: 1GiB }\n"
                        "    max_backlog: 1MiB\n");
  char *body = malloc(700100);
  ck_assert_ptr_nonnull(body);
  int at = sprintf(body, "[\"");
  memset(body + at, 'b', 700000);
  strcpy(body + at + 700000, "\"]");
  assert_accepted(NULL, body, 1);
  assert_accepted(NULL, body, 1); /* the bound is checked before a send */
  http_resp r;
  send_records(&r, NULL, body, 0);
  ck_assert_msg(r.status == 503, "%ld %s", r.status, r.body);
  ck_assert_str_eq(jstr(r.json, "error.code"), "pipeline.backlog_full");
  char retry[16];
  ck_assert_ptr_nonnull(http_resp_header(&r, "Retry-After", retry, 16));
  http_resp_free(&r);
  free(body);
  json_t *s = stats();
  ck_assert_int_eq(pipeline_stat(s, "accepted"), 2);
  ck_assert_int_eq(pipeline_stat(s, "backlog.records"), 2);
  json_decref(s);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* `duro pipelines ARGS... --url ...` with `input` on its stdin (NULL:
 * none): its exit code, its output in *out. */
static int cli_stdin(const char *args, const char *input, char **out) {
  char in[400], cmd[1400];
  snprintf(in, sizeof in, "%s/stdin.txt", proc_tmp_dir);
  FILE *f = fopen(in, "w");
  ck_assert(f != NULL);
  fputs(input ? input : "", f);
  ck_assert(fclose(f) == 0);
  snprintf(cmd, sizeof cmd,
           "'%s' pipelines %s --url http://127.0.0.1:%d < '%s' 2>&1", DURO_BIN,
           args, H.port, in);
  FILE *p = popen(cmd, "r");
  ck_assert(p != NULL);
  size_t len = 0;
  char *text = calloc(1, 65536);
  size_t got;
  while (len < 65535 && (got = fread(text + len, 1, 65535 - len, p)) > 0)
    len += got;
  int st = pclose(p);
  *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(cli_send_list_describe) {
  start_host("cli", "    roll: { interval: 1s }\n");
  char *out;
  ck_assert_int_eq(cli_stdin("send events '[1, {\"a\": 2}]'", NULL, &out), 0);
  assert_contains(out, "sent 2 record(s) to events");
  free(out);
  ck_assert_int_eq(cli_stdin("send events '{\"b\": 3}'", NULL, &out), 0);
  assert_contains(out, "sent 1 record(s) to events");
  free(out);
  ck_assert_int_eq(cli_stdin("send events -", "4\n\n[5]\n", &out), 0);
  assert_contains(out, "sent 2 record(s) to events");
  free(out);
  ck_assert_int_eq(cli_stdin("send events -", "[\"six\",\n 7]\n", &out), 0);
  assert_contains(out, "sent 2 record(s) to events");
  free(out);
  /* refused before anything is sent, and by the host */
  ck_assert_int_eq(cli_stdin("send events -", "8\n{bad\n", &out), 2);
  assert_contains(out, "line 2 of stdin is not valid JSON");
  free(out);
  ck_assert_int_eq(cli_stdin("send events '{bad'", NULL, &out), 2);
  assert_contains(out, "RECORDS is not valid JSON");
  free(out);
  ck_assert_int_eq(cli_stdin("send events '[]'", NULL, &out), 2);
  assert_contains(out, "no records");
  free(out);
  ck_assert_int_eq(cli_stdin("send nope 1", NULL, &out), 1);
  assert_contains(out, "pipeline.not_found");
  free(out);

  wait_written(7);
  size_t files;
  char *all = read_all(&files);
  ck_assert_str_eq(all, "1\n{\"a\":2}\n{\"b\":3}\n4\n[5]\n\"six\"\n7\n");
  free(all);
  ck_assert_int_eq(cli_stdin("list", NULL, &out), 0);
  assert_contains(out, "PIPELINE");
  assert_contains(out, "events");
  free(out);
  ck_assert_int_eq(cli_stdin("describe events", NULL, &out), 0);
  assert_contains(out, "accepted       7");
  assert_contains(out, "written        7");
  assert_contains(out, "backlog        0 record(s)");
  free(out);
  ck_assert_int_eq(cli_stdin("describe nope", NULL, &out), 1);
  assert_contains(out, "pipeline.not_found");
  free(out);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* Kills of the engine in the kill -9 case: DURO_PIPELINE_KILLS, default
 * 3 (`make chaos-pipelines` runs it with 100). */
static int kills_wanted(void) {
  const char *v = getenv("DURO_PIPELINE_KILLS");
  int n = v ? atoi(v) : 0;
  return n > 0 ? n : 3;
}

static pipeline_fates fates;

typedef struct sender {
  int s;
  pipeline_killer *k;
} sender;

/* Sends batches until the last kill (once its share of the records is
 * sent it waits for the kills, which then land in flushes alone), then
 * 20 more. */
static void *send_loop(void *arg) {
  sender *x = arg;
  const int cap = PIPELINE_MAX_RECORDS / PIPELINE_SENDERS - 20 * PIPELINE_BATCH;
  while (pipeline_killer_kills(x->k) < x->k->want) {
    if (fates.sent[x->s] + PIPELINE_BATCH > cap) {
      proc_sleep_ms(100);
      continue;
    }
    pipeline_send_batch(&H, &fates, x->s, 0);
  }
  for (int i = 0; i < 20; i++)
    pipeline_send_batch(&H, &fates, x->s, 0);
  return NULL;
}

START_TEST(acked_records_survive_kill9) {
  /* small files, so that kills land in flushes too */
  start_host("kill9", "    roll: { interval: 1s, size: 20000 }\n");
  pipeline_killer k;
  pipeline_killer_start(&k, &H, kills_wanted());
  pthread_t ts[PIPELINE_SENDERS];
  sender senders[PIPELINE_SENDERS];
  for (int s = 0; s < PIPELINE_SENDERS; s++) {
    senders[s] = (sender){.s = s, .k = &k};
    ck_assert_int_eq(pthread_create(&ts[s], NULL, send_loop, &senders[s]), 0);
  }
  for (int s = 0; s < PIPELINE_SENDERS; s++)
    pthread_join(ts[s], NULL);
  pipeline_killer_stop(&k);

  /* every record accepted is written: the backlog empties */
  wait_written(-1);
  size_t files;
  char *all = read_all(&files); /* the ranges follow one another */
  ck_assert_int_gt(pipeline_fates_check(&fates, all), 0);
  ck_assert_uint_gt(files, 1);
  free(all);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pipeline_host");
  TCase *tc = tcase_create("pipeline_host");
  proc_fixtures(tc, "duro-pipeline-host");
  /* a kill and the engine back: under a second each (a ready engine's
   * SIGKILL adds nothing to the supervisor's back-off), and the rest */
  tcase_set_timeout(tc, 240 + 3 * kills_wanted());
  tcase_add_test(tc, http_send_and_files);
  tcase_add_test(tc, http_csv);
  tcase_add_test(tc, plugin_sends_with_its_steps);
  tcase_add_test(tc, backlog_full_answers_503);
  tcase_add_test(tc, cli_send_list_describe);
  tcase_add_test(tc, acked_records_survive_kill9);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
