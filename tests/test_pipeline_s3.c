/* test_pipeline_s3.c — a pipeline's s3 sink on a real `duro run`
 * (DURO_BIN, no plugin) against a real S3-compatible server the case
 * starts (tests/s3/server.sh: s3rver, which checks each request's
 * Signature Version 4, on 127.0.0.1, its objects under the case's
 * directory): every upload that lands was signed right.  The objects are listed
 * and read back over the S3 API (signed GETs), gunzip'ed by zlib and parsed
 * line by line; every wait polls with a deadline, on the real clock.
 *
 *  - objects: records sent over HTTP land in objects whose keys are the
 *    prefix, the partition and the batch's name, each record once, in
 *    the order sent; GET /pipelines shows the sink (never its keys);
 *  - csv: a `format: csv` pipeline's object has a .csv.gz key and holds
 *    its header and a row a record;
 *  - endpoint down: the server is stopped for 3 s ($DURO_S3_OUTAGE_S;
 *    `make chaos-s3` asks 30) while records are sent and uploads are
 *    due: sends are still answered 202 (past max_backlog 503 with
 *    Retry-After), the failed uploads show in GET /pipelines
 *    (last_error, write_errors) and /metrics; once the server is back
 *    every record is uploaded within max_retry_delay (2 s here) and the
 *    uploads' time, once, in order, and the error clears;
 *  - kill -9: the engine SIGKILLed (KILLS times) while records are sent
 *    and uploaded: every record answered 202 is in exactly one object
 *    exactly once, one that got no answer at most once, in order, and the
 *    objects' sequence ranges follow one another;
 *  - a stalled endpoint (the server SIGSTOPped: connections accepted, no
 *    answer) does not hold up the host's stop: the upload under way
 *    gives up;
 *  - an upload refused (403: signed with a secret key that is not the
 *    account's) is not done: the error is shown with the server's code,
 *    the batch's records still wait, no object is there;
 *  - a key variable that is not set stops the start, named. */
#include <check.h>
#include <ctype.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <zlib.h>

#include "host_run.h"
#include "http_client.h"
#include "pipeline_check.h"
#include "proc.h"

#ifndef S3_SERVER_SH
#error "S3_SERVER_SH: tests/s3/server.sh (tests/meson.build)"
#endif

#define BUCKET "my-events"
/* the server's one account (tests/s3/server.sh) */
#define ACCESS_KEY "S3RVER"
#define SECRET "S3RVER"
#define WRITE_WAIT_MS 120000 /* for what waits to be uploaded, back-off too */
/* SHA-256 of nothing: the payload hash of a GET */
#define EMPTY_SHA                                                              \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static host_run H;

/* ---- The server ---------------------------------------------------------
 */

static pid_t server = -1;
static int server_port;

static void server_kill(void) {
  if (server <= 0)
    return;
  kill(server, SIGCONT); /* one stopped on purpose */
  kill(server, SIGKILL);
  waitpid(server, NULL, 0);
  server = -1;
}

/* Starts the server on `port` (0: one the kernel picks) with its objects
 * under s3data/ of the case; waits for its "listening" line. */
static void server_start(int port) {
  char dir[400], log[400], port_s[16];
  snprintf(dir, sizeof dir, "%s/s3data", proc_tmp_dir);
  snprintf(log, sizeof log, "%s/s3.log", proc_tmp_dir);
  snprintf(port_s, sizeof port_s, "%d", port);
  /* A port let go a moment ago may take a moment to be free again. */
  int64_t deadline = proc_now_ms() + 60000;
  for (;;) {
    const char *argv[] = {"/bin/bash", S3_SERVER_SH, "run", dir,
                          port_s,      BUCKET,       NULL};
    server = proc_spawn(argv, NULL, log, log);
    int listening = 0;
    while (!listening) {
      char *text = proc_slurp(log);
      const char *at = strstr(text, "listening on 127.0.0.1:");
      if (at)
        server_port = atoi(at + strlen("listening on 127.0.0.1:"));
      listening = at != NULL;
      int gone = !listening && waitpid(server, NULL, WNOHANG) == server;
      if (gone)
        server = -1;
      ck_assert_msg(!gone || proc_now_ms() < deadline,
                    "the S3 server did not start:\n%s", proc_tail(text));
      free(text);
      if (gone)
        break;
      ck_assert_msg(proc_now_ms() < deadline, "the S3 server says nothing");
      if (!listening)
        proc_sleep_ms(100);
    }
    if (listening)
      return;
    proc_sleep_ms(500);
  }
}

/* ---- The S3 API, as a reader ---------------------------------------------
 */

typedef struct buf {
  char *data;
  size_t len;
} buf;

static size_t grow(char *data, size_t size, size_t n, void *arg) {
  buf *b = arg;
  b->data = realloc(b->data, b->len + size * n + 1);
  memcpy(b->data + b->len, data, size * n);
  b->len += size * n;
  b->data[b->len] = '\0';
  return size * n;
}

/* A signed GET of /BUCKET`rest`; the body into *out (malloc'ed). */
static void s3_get(const char *rest, buf *out) {
  char url[1200];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/%s%s", server_port, BUCKET,
           rest);
  CURL *c = curl_easy_init();
  ck_assert_ptr_nonnull(c);
  *out = (buf){calloc(1, 1), 0};
  struct curl_slist *h =
      curl_slist_append(NULL, "x-amz-content-sha256: " EMPTY_SHA);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
  curl_easy_setopt(c, CURLOPT_USERPWD, ACCESS_KEY ":" SECRET);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, grow);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
  CURLcode cc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  ck_assert_msg(cc == CURLE_OK, "GET %s: %s", url, curl_easy_strerror(cc));
  ck_assert_msg(status == 200, "GET %s: %ld %s", url, status,
                proc_tail(out->data));
}

/* gunzip of a whole gzip stream (malloc'ed, NUL-terminated). */
static char *gunzip(const buf *gz) {
  z_stream z = {0};
  ck_assert_int_eq(inflateInit2(&z, 15 + 16), Z_OK);
  size_t cap = 4 * gz->len + 1024, len = 0;
  char *text = malloc(cap);
  z.next_in = (unsigned char *)gz->data;
  z.avail_in = (uInt)gz->len;
  int zrc;
  do {
    if (cap - len < 2)
      text = realloc(text, cap *= 2);
    z.next_out = (unsigned char *)text + len;
    z.avail_out = (uInt)(cap - len - 1);
    zrc = inflate(&z, Z_NO_FLUSH);
    ck_assert_msg(zrc == Z_OK || zrc == Z_STREAM_END, "not gzip: %d", zrc);
    len = cap - 1 - z.avail_out;
  } while (zrc != Z_STREAM_END);
  ck_assert_uint_eq(z.avail_in, 0); /* one stream, nothing after it */
  inflateEnd(&z);
  text[len] = '\0';
  return text;
}

/* The objects of the bucket under `prefix` into v (their keys as names):
 * how many.  `prefix` is one name and a '/' (escaped in the query as the
 * signature's canonical query has it). */
static size_t list_objects(const char *prefix, pipeline_batch *v, size_t max) {
  char q[200];
  snprintf(q, sizeof q, "?list-type=2&max-keys=1000&prefix=%.*s%%2F",
           (int)strcspn(prefix, "/"), prefix);
  buf b;
  s3_get(q, &b);
  ck_assert_msg(strstr(b.data, "<IsTruncated>false</IsTruncated>"),
                "more than a page of objects: %s", proc_tail(b.data));
  size_t n = 0;
  for (const char *at = strstr(b.data, "<Key>"); at;
       at = strstr(at + 1, "<Key>")) {
    ck_assert_uint_lt(n, max);
    pipeline_batch *o = &v[n++];
    snprintf(o->name, sizeof o->name, "%.*s",
             (int)(strstr(at, "</Key>") - at - 5), at + 5);
    pipeline_batch_parse(o);
  }
  free(b.data);
  return n;
}

/* An object's lines, gunzip'ed, each of them JSON (malloc'ed). */
static char *read_object(const pipeline_batch *o) {
  /* the key escaped as the signature's canonical path has it */
  char rest[1000];
  size_t at = 0;
  rest[at++] = '/';
  for (const char *c = o->name; *c; c++)
    at += (size_t)(isalnum((unsigned char)*c) || strchr("-._~/", *c)
                       ? snprintf(rest + at, 2, "%c", *c)
                       : snprintf(rest + at, 4, "%%%02X", (unsigned char)*c));
  buf gz;
  s3_get(rest, &gz);
  char *text = gunzip(&gz);
  free(gz.data);
  for (const char *line = text; *line;) {
    const char *nl = strchr(line, '\n');
    ck_assert_msg(nl != NULL, "%s: a last line with no newline", o->name);
    json_error_t e;
    json_t *r = json_loadb(line, (size_t)(nl - line), 0, &e);
    ck_assert_msg(r != NULL, "%s: line %.60s: %s", o->name, line, e.text);
    json_decref(r);
    line = nl + 1;
  }
  return text;
}

/* Every object's records, in order: the objects' ranges must follow one
 * another from 1, each holding as many lines as its range says
 * (pipeline_read_batches()); *objects gets how many there are. */
static char *read_records(const char *prefix, size_t *objects) {
  static pipeline_batch v[1000];
  *objects = list_objects(prefix, v, 1000);
  return pipeline_read_batches(v, *objects, read_object);
}

/* ---- The host -------------------------------------------------------------
 */

/* A host with pipeline `events`, its sink the server's bucket under
 * events/ and `partition`, its other keys the YAML lines `keys`
 * (indented by 4). */
static void start_host(const char *name, const char *keys,
                       const char *partition) {
  char sink[600];
  snprintf(sink, sizeof sink,
           "    sink:\n"
           "      s3: { endpoint: \"http://127.0.0.1:%d\", bucket: " BUCKET
           ",\n"
           "            prefix: events/, region: auto, partition: \"%s\",\n"
           "            access_key_env: DURO_TEST_S3_KEY,\n"
           "            secret_key_env: DURO_TEST_S3_SECRET }\n",
           server_port, partition);
  pipeline_host_start(&H, name, "[]", sink, keys);
}

/* GET /pipelines/events (caller's), which never shows a key. */
static json_t *stats(void) {
  json_t *j = pipeline_stats(&H);
  char *text = json_dumps(j, 0);
  ck_assert_msg(strstr(text, SECRET) == NULL, "a key is shown");
  free(text);
  return j;
}

/* Polls until nothing waits (with `written` records written, unless
 * negative). */
static void wait_uploaded(int64_t written) {
  pipeline_wait_written(&H, written, WRITE_WAIT_MS);
}

/* What the last 503 a send got said. */
static pipeline_refusal refused;

/* Records {"s":0,"i":n0} .. {"s":0,"i":n0+count-1} (each with `pad`
 * bytes of padding) as one request: its status, 0 for no answer. */
static long send_range(int n0, int count, size_t pad) {
  return pipeline_send(&H, 0, n0, count, pad, &refused);
}

/* Every record 0..n-1 exactly once, in order, in the objects. */
static size_t assert_all_once(int n) {
  size_t objects;
  char *all = read_records("events/", &objects);
  int k = 0;
  for (const char *line = all; *line; line = strchr(line, '\n') + 1, k++) {
    int s, i;
    ck_assert_msg(sscanf(line, "{\"s\":%d,\"i\":%d", &s, &i) == 2 && s == 0,
                  "line %.40s", line);
    ck_assert_msg(i == k, "record %d is %d", k, i);
  }
  ck_assert_int_eq(k, n);
  free(all);
  return objects;
}

static void setup_env(void) {
  setenv("DURO_TEST_S3_KEY", ACCESS_KEY, 1);
  setenv("DURO_TEST_S3_SECRET", SECRET, 1);
}

static void teardown_server(void) { server_kill(); }

/* ---- The cases ------------------------------------------------------------
 */

START_TEST(objects_hold_every_record) {
  server_start(0);
  start_host("objects", "    roll: { interval: 1s }\n",
             "{yyyy}/{mm}/{dd}/{hh}");
  ck_assert_int_eq(send_range(0, 10, 10), 202);
  wait_uploaded(10);
  ck_assert_int_eq(send_range(10, 500, 100), 202);
  ck_assert_int_eq(send_range(510, 1, 0), 202);
  wait_uploaded(511);
  size_t objects = assert_all_once(511);
  ck_assert_uint_ge(objects, 2);

  /* the key: prefix, partition (the hour, UTC), the batch's name */
  static pipeline_batch v[1000];
  list_objects("events/", v, 1000);
  int y, mo, d, hh;
  long long first, last;
  ck_assert_msg(sscanf(v[0].name, "events/%4d/%2d/%2d/%2d/events-%lld-%lld", &y,
                       &mo, &d, &hh, &first, &last) == 6,
                "key %s", v[0].name);
  ck_assert_int_eq(first, 1);

  json_t *s = stats();
  ck_assert_str_eq(jstr(s, "sink.type"), "s3");
  ck_assert_str_eq(jstr(s, "sink.path"), "s3://" BUCKET "/events/");
  ck_assert_str_eq(jstr(s, "sink.region"), "auto");
  ck_assert_int_eq(pipeline_stat(s, "files"), (int64_t)objects);
  ck_assert_int_eq(pipeline_stat(s, "write_errors"), 0);
  ck_assert(json_is_null(jget(s, "last_error")));
  json_decref(s);
  host_stop(&H, proc_now_ms() + 20000, 0);
}
END_TEST

START_TEST(csv_objects) {
  server_start(0);
  start_host("csv",
             "    format: csv\n"
             "    columns: [i, s]\n"
             "    roll: { interval: 1s }\n",
             "{yyyy}");
  ck_assert_int_eq(send_range(0, 3, 0), 202);
  wait_uploaded(3);
  static pipeline_batch v[8];
  ck_assert_uint_eq(list_objects("events/", v, 8), 1);
  ck_assert_msg(strstr(v[0].name, "/events-000000000001-000000000003.csv.gz"),
                "key %s", v[0].name);
  char rest[sizeof v[0].name + 1];
  snprintf(rest, sizeof rest, "/%s", v[0].name); /* [a-z0-9./-]: as it is */
  buf gz;
  s3_get(rest, &gz);
  char *text = gunzip(&gz);
  ck_assert_str_eq(text, "i,s\r\n0,0\r\n1,0\r\n2,0\r\n");
  free(text);
  free(gz.data);
  json_t *s = stats();
  ck_assert_str_eq(jstr(s, "sink.format"), "csv");
  json_decref(s);
  host_stop(&H, proc_now_ms() + 20000, 0);
}
END_TEST

/* The value of series `name`{pipeline="events"} in GET /metrics. */
static long long metric(const char *name) {
  http_resp r;
  host_request(&H, &r, "GET", "/metrics", NULL);
  ck_assert_int_eq(r.status, 200);
  char line[200];
  snprintf(line, sizeof line, "\n%s{pipeline=\"events\"} ", name);
  const char *at = strstr(r.body, line);
  ck_assert_msg(at != NULL, "%s missing", name);
  long long v = atoll(at + strlen(line));
  http_resp_free(&r);
  return v;
}

/* How long the endpoint stays down in endpoint_down_then_back:
 * $DURO_S3_OUTAGE_S seconds, default 3 (`make chaos-s3` asks 30). */
static int outage_s(void) {
  const char *v = getenv("DURO_S3_OUTAGE_S");
  int n = v ? atoi(v) : 0;
  return n > 0 ? n : 3;
}

/* The case's max_retry_delay: once the server is back, the next upload
 * is at most this far off (the default, a minute, would make the case
 * wait up to that for nothing). */
#define RETRY_MAX_MS 2000

START_TEST(endpoint_down_then_back) {
  server_start(0);
  int port = server_port;
  /* a partition with '=' (escaped in the URL and the signature) */
  start_host("down",
             "    roll: { interval: 1s }\n"
             "    max_backlog: 1MiB\n"
             "    max_retry_delay: 2s\n",
             "dt={yyyy}-{mm}-{dd}/h={hh}");
  ck_assert_int_eq(send_range(0, 20, 10), 202);
  wait_uploaded(20);

  /* down for the outage: sends go on being accepted while uploads fail */
  server_kill();
  int64_t down_at = proc_now_ms(), up_at = down_at + outage_s() * 1000LL;
  int sent = 20;
  for (;;) {
    ck_assert_int_eq(send_range(sent, 10, 10), 202);
    sent += 10;
    json_t *s = stats();
    int failed = pipeline_stat(s, "write_errors") >= 2;
    json_decref(s);
    if (failed && proc_now_ms() >= up_at)
      break;
    ck_assert_msg(proc_now_ms() < up_at + WRITE_WAIT_MS, "no upload failed");
    proc_sleep_ms(200);
  }
  json_t *s = stats();
  assert_contains(jstr(s, "last_error"), "PUT http://127.0.0.1:");
  ck_assert_int_gt(pipeline_stat(s, "backlog.records"), 0);
  int64_t errors = pipeline_stat(s, "write_errors");
  json_decref(s);
  ck_assert_int_ge(metric("duro_pipeline_write_errors_total"), 2);
  ck_assert_int_eq(metric("duro_pipeline_write_failing"), 1);
  /* past max_backlog: refused, nothing stored */
  ck_assert_int_eq(send_range(sent, 1, 700000), 202);
  sent++;
  ck_assert_int_eq(send_range(sent, 1, 700000), 202);
  sent++;
  ck_assert_int_eq(send_range(sent, 1, 10), 503);
  ck_assert_str_eq(refused.code, "pipeline.backlog_full");
  ck_assert(refused.retry_after);

  /* back: everything waiting is uploaded, once, in order, by the next
   * try (and the uploads it takes) */
  server_start(port);
  int64_t back_at = proc_now_ms();
  wait_uploaded(sent);
  int64_t took = proc_now_ms() - back_at;
  printf("endpoint_down_then_back: the endpoint down %.1f s, %d records "
         "accepted meanwhile (%lld failed uploads), all %d uploaded %lld ms "
         "after it was back\n",
         (double)(back_at - down_at) / 1000, sent - 20, (long long)errors, sent,
         (long long)took);
  fflush(stdout);
  /* A wall-clock bound holds only on a quiet machine: asked in `make
   * chaos-s3` alone (test_pipelines checks the cap on a virtual clock). */
  if (getenv("DURO_S3_OUTAGE_S"))
    ck_assert_msg(took < RETRY_MAX_MS + 8000,
                  "uploaded %lld ms after the endpoint was back",
                  (long long)took);
  assert_all_once(sent);
  static pipeline_batch v[1000];
  list_objects("events/", v, 1000);
  ck_assert_msg(!strncmp(v[0].name, "events/dt=", 10) &&
                    strstr(v[0].name, "/h="),
                "key %s", v[0].name);
  s = stats();
  ck_assert(json_is_null(jget(s, "last_error")));
  ck_assert_int_eq(pipeline_stat(s, "sink.max_retry_delay_ms"), RETRY_MAX_MS);
  json_decref(s);
  ck_assert_int_eq(metric("duro_pipeline_write_failing"), 0);
  host_stop(&H, proc_now_ms() + 20000, 0);
}
END_TEST

#define KILLS 3

static pipeline_fates fates;

START_TEST(acked_records_survive_kill9) {
  server_start(0);
  /* small batches, so that kills land in uploads too */
  start_host("kill9", "    roll: { interval: 1s, size: 20000 }\n",
             "{yyyy}/{mm}/{dd}/{hh}");
  pipeline_killer k;
  pipeline_killer_start(&k, &H, KILLS);
  while (pipeline_killer_kills(&k) < KILLS &&
         fates.sent[0] + PIPELINE_BATCH <= PIPELINE_MAX_RECORDS)
    pipeline_send_batch(&H, &fates, 0, 20);
  for (int i = 0; i < 20; i++) /* after the last kill */
    pipeline_send_batch(&H, &fates, 0, 20);
  pipeline_killer_stop(&k);

  wait_uploaded(-1);
  size_t objects;
  char *all = read_records("events/", &objects);
  ck_assert_int_gt(pipeline_fates_check(&fates, all), 0);
  free(all);
  ck_assert_uint_gt(objects, 1);
  host_stop(&H, proc_now_ms() + 20000, 1);
}
END_TEST

START_TEST(stop_gives_up_a_stalled_upload) {
  server_start(0);
  start_host("stalled", "    roll: { interval: 1s }\n",
             "{yyyy}/{mm}/{dd}/{hh}");
  /* connections are still accepted (the kernel's backlog), never
   * answered */
  ck_assert_int_eq(kill(server, SIGSTOP), 0);
  ck_assert_int_eq(send_range(0, 5, 10), 202);
  /* the batch planned: its upload is under way */
  int64_t deadline = proc_now_ms() + WRITE_WAIT_MS;
  for (;;) {
    json_t *s = stats();
    int writing = jget(s, "writing") != NULL;
    json_decref(s);
    if (writing)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "no upload began");
    proc_sleep_ms(100);
  }
  /* well within the upload's own limit (30 s without progress) */
  host_stop(&H, proc_now_ms() + 15000, 0);
  char *log = proc_slurp(H.log);
  assert_contains(log, "given up: the host is stopping");
  free(log);
}
END_TEST

START_TEST(refused_upload_keeps_the_batch) {
  server_start(0);
  setenv("DURO_TEST_S3_SECRET", "not-the-secret", 1); /* refused 403 */
  start_host("refused", "    roll: { interval: 1s }\n",
             "{yyyy}/{mm}/{dd}/{hh}");
  ck_assert_int_eq(send_range(0, 3, 10), 202);
  int64_t deadline = proc_now_ms() + WRITE_WAIT_MS;
  for (;;) {
    json_t *s = stats();
    int failed = pipeline_stat(s, "write_errors") >= 1;
    if (failed) {
      assert_contains(jstr(s, "last_error"),
                      "answered 403 SignatureDoesNotMatch");
      ck_assert_int_eq(pipeline_stat(s, "written"), 0);
      ck_assert_int_eq(pipeline_stat(s, "backlog.records"), 3);
    }
    json_decref(s);
    if (failed)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "no upload failed");
    proc_sleep_ms(100);
  }
  static pipeline_batch v[10];
  ck_assert_uint_eq(list_objects("events/", v, 10), 0);
  host_stop(&H, proc_now_ms() + 20000, 0);
}
END_TEST

START_TEST(missing_key_variable_stops_the_start) {
  unsetenv("DURO_TEST_S3_SECRET");
  server_port = 9; /* never reached */
  host_init(&H, "nokey");
  FILE *f = fopen(H.config, "w");
  ck_assert(f != NULL);
  fprintf(f, "storage: { path: duro.db }\n"
             "http: { listen: \"127.0.0.1:0\" }\n"
             "plugins: []\n"
             "pipelines:\n"
             "  - name: events\n"
             "    binding: EVENTS\n"
             "    sink:\n"
             "      s3: { endpoint: \"http://127.0.0.1:9\", bucket: b-1,\n"
             "            access_key_env: DURO_TEST_S3_KEY,\n"
             "            secret_key_env: DURO_TEST_S3_SECRET }\n");
  ck_assert(fclose(f) == 0);
  pid_t pid = host_spawn(&H, "run");
  proc_live = pid;
  int code = proc_wait_exit(pid, proc_now_ms() + 30000);
  char *log = proc_slurp(H.log);
  ck_assert_msg(code != 0 && code != -1, "exit %d:\n%s", code, proc_tail(log));
  assert_contains(log, "pipeline events: environment variable "
                       "DURO_TEST_S3_SECRET (sink.s3.secret_key_env) is not "
                       "set");
  ck_assert_ptr_null(strstr(log, "ready:"));
  free(log);
}
END_TEST

int main(void) {
  /* The server installed once, before any case's clock runs. */
  if (system("bash '" S3_SERVER_SH "' install") != 0) {
    fprintf(stderr, "test_pipeline_s3: cannot install the S3 server "
                    "(tests/s3/server.sh install)\n");
    return 1;
  }
  Suite *s = suite_create("pipeline_s3");
  TCase *tc = tcase_create("pipeline_s3");
  proc_fixtures(tc, "duro-pipeline-s3");
  tcase_add_checked_fixture(tc, setup_env, teardown_server);
  tcase_set_timeout(tc, 300 + outage_s());
  tcase_add_test(tc, objects_hold_every_record);
  tcase_add_test(tc, csv_objects);
  tcase_add_test(tc, endpoint_down_then_back);
  tcase_add_test(tc, acked_records_survive_kill9);
  tcase_add_test(tc, stop_gives_up_a_stalled_upload);
  tcase_add_test(tc, refused_upload_keeps_the_batch);
  tcase_add_test(tc, missing_key_variable_stops_the_start);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
