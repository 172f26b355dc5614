/* test_pipelines.c — pipelines at the engine's level, on a virtual clock:
 * records sent are written in batches once roll.size bytes wait or the
 * oldest waited roll.interval; the files, read back with gzip -dc, hold
 * every record exactly once, in order; a plan left by a crash (before
 * its file, or after its rename but before "done") is carried out again
 * into the same file with the same bytes, never a second one.  A send is
 * one op whose records get consecutive seqs; one whose lines do not
 * match its count stores nothing.  A write that fails is tried again
 * after 1 s, doubling up to max_retry_delay.  A csv pipeline's files,
 * read back by Python's csv module, hold a header and a row a record;
 * a send to it holding a record that is no object stores nothing. */
#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "duro.h"
#include "harness.h"
#include "journal.h"
#include "pipeline.h"
#include "pipeline_internal.h"
#include "suite_run.h"

static harness h;
static char sink[400];
static duro_pipeline_options opt, zopt, copt;
/* The csv pipeline "rows": keys, pointers (one escaping a '/'), one into
 * an array. */
static const char *const columns[] = {
    "name", "/user/id", "/user/tags", "note", "/a~1b", "flag", "n", "/list/1"};

static void setup(void) {
  harness_open(&h);
  snprintf(sink, sizeof sink, "%s/sink", h.dir);
  opt = (duro_pipeline_options){.dir = sink,
                                .partition = "{yyyy}/{mm}/{dd}/{hh}",
                                .compression = DURO_PIPELINE_GZIP,
                                .roll_size = 1000,
                                .roll_interval_ms = 10000,
                                .max_backlog = 1000000};
  harness_register_pipeline(&h, "events", &opt);
  zopt = opt;
  zopt.compression = DURO_PIPELINE_ZSTD;
  zopt.max_retry_delay_ms = 5000; /* events keeps the default, a minute */
  harness_register_pipeline(&h, "zevents", &zopt);
  copt = opt;
  copt.format = DURO_PIPELINE_CSV;
  copt.columns = columns;
  copt.n_columns = sizeof columns / sizeof *columns;
  harness_register_pipeline(&h, "rows", &copt);
  ck_assert_int_eq(duro_pipeline_bind(h.e, "ROWS", "rows"), 0);
  ck_assert_int_eq(duro_pipeline_bind(h.e, "EVENTS", "events"), 0);
  ck_assert_int_eq(duro_pipeline_bind(h.e, "EVENTS", "events"),
                   DURO_E_ALREADY_EXISTS);
  ck_assert_int_eq(duro_pipeline_bind(h.e, "OTHER", "nope"), DURO_E_NOT_FOUND);
  harness_start(&h);
}

static void teardown(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", sink);
  ck_assert_int_eq(system(cmd), 0);
  harness_close(&h);
}

/* Sends records {"i":from}..{"i":to-1}, each padded to about 50 bytes. */
static void send_range(int from, int to) {
  for (int i = from; i < to; i++) {
    char rec[100];
    snprintf(rec, sizeof rec, "{\"i\":%d,\"pad\":\"%040d\"}", i, i);
    const char *one[] = {rec};
    ck_assert_int_eq(duro_pipeline_append(h.e, "events", one, 1, NULL), 0);
  }
}

/* The sink's files (relative paths, sorted), temporary ones too. */
static size_t list_files(char out[][256], size_t cap) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "cd '%s' 2>/dev/null && find . -type f | sort",
           sink);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  size_t n = 0;
  char line[256];
  while (fgets(line, sizeof line, f) && n < cap) {
    line[strcspn(line, "\n")] = '\0';
    snprintf(out[n++], 256, "%s", line + 2);
  }
  pclose(f);
  return n;
}

/* Every record of every file, in file order, read by gzip -dc: each
 * must be {"i":k} for k = 0, 1, ... n-1, once.  Returns n. */
static int read_back(void) {
  char files[64][256];
  size_t nf = list_files(files, 64);
  int next = 0;
  for (size_t i = 0; i < nf; i++) {
    ck_assert_msg(strstr(files[i], ".tmp") == NULL, "left over: %s", files[i]);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s/%s'", sink, files[i]);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    while (fgets(line, sizeof line, f)) {
      int k = -1;
      ck_assert_int_eq(sscanf(line, "{\"i\":%d,", &k), 1);
      ck_assert_msg(k == next, "%s: record %d where %d was next", files[i], k,
                    next);
      next++;
    }
    ck_assert_int_eq(pclose(f), 0);
  }
  return next;
}

static journal_pipeline state(void) {
  journal_pipeline st;
  ck_assert_int_eq(journal_pipeline_get(engine_journal(h.e), "events", &st), 0);
  return st;
}

START_TEST(test_size_then_interval) {
  send_range(0, 15); /* 15 x 50 bytes: under 1000 */
  harness_run(&h);
  char files[8][256];
  ck_assert_uint_eq(list_files(files, 8), 0);
  send_range(15, 30); /* 1500 bytes: a file's worth waits */
  harness_run(&h);
  ck_assert_uint_eq(list_files(files, 8), 1);
  ck_assert_str_eq(files[0],
                   "2026/01/01/00/events-000000000001-000000000017.jsonl.gz");
  journal_pipeline st = state();
  ck_assert_int_eq(st.written, 17); /* 17 records of 57-58 bytes fit */
  ck_assert_int_eq(st.backlog, 13);
  /* The rest goes once the oldest waited the interval. */
  harness_advance(&h, 9999);
  ck_assert_uint_eq(list_files(files, 8), 1);
  harness_advance(&h, 1);
  ck_assert_uint_eq(list_files(files, 8), 2);
  ck_assert_int_eq(read_back(), 30);
  st = state();
  ck_assert_int_eq(st.accepted, 30);
  ck_assert_int_eq(st.written, 30);
  ck_assert_int_eq(st.files, 2);
  ck_assert_int_eq(st.backlog, 0);
  ck_assert_int_eq(st.backlog_bytes, 0);
  ck_assert_int_eq(st.written_bytes, st.accepted_bytes);
}
END_TEST

/* Commits a plan for records first..last of `name` (options o) as the
 * flusher would, then stops the engine: the crash between (a) and (b). */
static void plan_and_crash_of(const char *name, const duro_pipeline_options *o,
                              int64_t first, int64_t last, int write_file) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_PIPELINE_PLAN);
  op->queue = name;
  op->from_seq = first;
  op->event_seq = last;
  op->ts_ms = engine_now(h.e);
  op->rowid = 0;
  op->visible_ms = engine_now(h.e) + PIPELINE_PLAN_LEASE_MS;
  ck_assert_int_eq(journal_commit(engine_journal(h.e), &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  journal_batch_free(&b);
  if (write_file) { /* (b) done, renamed; "done" never committed */
    pipeline p = {.name = (char *)name, .o = *o};
    char err[512];
    ck_assert_int_eq(pipeline_write_batch(engine_journal(h.e), &p, first, last,
                                          engine_now(h.e), err, sizeof err),
                     0);
  }
}

static void plan_and_crash(int64_t first, int64_t last, int write_file) {
  plan_and_crash_of("events", &opt, first, last, write_file);
}

static char *slurp(const char *rel, size_t *len) {
  char path[800];
  snprintf(path, sizeof path, "%s/%s", sink, rel);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  char *buf = malloc(1 << 20);
  *len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

START_TEST(test_plan_redone_after_crash) {
  send_range(0, 10); /* 500 bytes: not due */
  plan_and_crash(1, 7, 0);
  send_range(10, 12);
  harness_reopen(&h);
  harness_run(&h); /* the plan first, exactly as recorded */
  char files[8][256];
  ck_assert_uint_eq(list_files(files, 8), 1);
  ck_assert_str_eq(files[0],
                   "2026/01/01/00/events-000000000001-000000000007.jsonl.gz");
  harness_advance(&h, 10000);
  ck_assert_uint_eq(list_files(files, 8), 2);
  ck_assert_int_eq(read_back(), 12);
}
END_TEST

/* The one file of the sink (its name into file), left by a crash after
 * its rename, is written again after a restart with the same bytes. */
static void assert_rewritten_same_bytes(char file[256]) {
  char files[8][256];
  ck_assert_uint_eq(list_files(files, 8), 1);
  size_t n1, n2;
  char *before = slurp(files[0], &n1);
  harness_reopen(&h);
  harness_run(&h);
  ck_assert_uint_eq(list_files(files, 8), 1); /* no second file */
  char *after = slurp(files[0], &n2);
  ck_assert_uint_eq(n1, n2);
  ck_assert(memcmp(before, after, n1) == 0);
  free(before);
  free(after);
  memcpy(file, files[0], 256);
}

START_TEST(test_renamed_file_rewritten_same_bytes) {
  send_range(0, 10);
  plan_and_crash(1, 10, 1);
  char file[256];
  assert_rewritten_same_bytes(file);
  ck_assert_int_eq(read_back(), 10);
  journal_pipeline st = state();
  ck_assert_int_eq(st.files, 1);
  ck_assert_int_eq(st.backlog, 0);
  ck_assert_int_eq(st.plan_first, 0);
}
END_TEST

/* "done" of a plan no longer recorded changes nothing: a host that lost
 * its plan to another cannot count the batch twice. */
START_TEST(test_done_fenced) {
  send_range(0, 3);
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_PIPELINE_DONE);
  op->queue = "events";
  op->from_seq = 1;
  op->event_seq = 3;
  ck_assert_int_eq(journal_commit(engine_journal(h.e), &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 0);
  journal_batch_free(&b);
  ck_assert_int_eq(state().backlog, 3);
}
END_TEST

START_TEST(test_backlog_bound_and_unknown) {
  const char *one[] = {"1"};
  ck_assert_int_eq(duro_pipeline_append(h.e, "nope", one, 1, NULL),
                   DURO_E_NOT_FOUND);
  static char big[600000];
  memset(big, 'x', sizeof big - 3);
  big[0] = '"';
  big[sizeof big - 3] = '"';
  const char *rec[] = {big};
  ck_assert_int_eq(duro_pipeline_append(h.e, "events", rec, 1, NULL), 0);
  ck_assert_int_eq(duro_pipeline_append(h.e, "events", rec, 1, NULL), 0);
  /* past max_backlog: refused, nothing stored */
  ck_assert_int_eq(duro_pipeline_append(h.e, "events", one, 1, NULL),
                   DURO_E_OVERLOADED);
  ck_assert_int_eq(state().accepted, 2);
  /* once written, sends are taken again: a send over the bound it last
   * saw reads the backlog again before it refuses */
  ck_assert_uint_ge(duro_pipelines_dispatch(h.e), 1);
  ck_assert_int_eq(state().backlog_bytes, 0);
  ck_assert_int_eq(duro_pipeline_append(h.e, "events", one, 1, NULL), 0);
  ck_assert_int_eq(state().accepted, 3);
}
END_TEST

typedef struct seen {
  int64_t seq[8], bytes[8];
  char body[8][32];
  int n;
} seen;

static int see(void *ctx, int64_t seq, const char *body, int64_t bytes,
               int64_t sent_ms) {
  (void)sent_ms;
  seen *s = ctx;
  s->seq[s->n] = seq;
  s->bytes[s->n] = bytes;
  snprintf(s->body[s->n++], sizeof s->body[0], "%s", body);
  return s->n == 8;
}

/* The journal's op: a send's records in one op, consecutive seqs from
 * out_rowid, each its own row of its own bytes; an op whose lines are
 * not its count, or of a pipeline never declared, stores nothing. */
START_TEST(test_append_op_many) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_PIPELINE_APPEND);
  op->queue = "events", op->body = "1\n[2]\n\"three\"\n", op->from_seq = 3;
  op = journal_batch_add(&b, JOP_PIPELINE_APPEND);
  op->queue = "events", op->body = "4\n5\n", op->from_seq = 3; /* 2 lines */
  op = journal_batch_add(&b, JOP_PIPELINE_APPEND);
  op->queue = "events", op->body = "6\n7", op->from_seq = 2; /* no last \n */
  op = journal_batch_add(&b, JOP_PIPELINE_APPEND);
  op->queue = "nope", op->body = "8\n", op->from_seq = 1;
  op = journal_batch_add(&b, JOP_PIPELINE_APPEND);
  op->queue = "events", op->body = "{}\n{\"a\":1}\n", op->from_seq = 2;
  ck_assert_int_eq(journal_commit(engine_journal(h.e), &b), 0);
  ck_assert_int_eq(b.ops[0].rc, 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  ck_assert_int_eq(b.ops[1].rc, DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(b.ops[2].rc, DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(b.ops[3].rc, DURO_E_NOT_FOUND);
  ck_assert_int_eq(b.ops[4].rc, 0);
  ck_assert_int_eq(b.ops[4].out_rowid, 4);
  journal_batch_free(&b);
  journal_pipeline st = state();
  ck_assert_int_eq(st.accepted, 5);
  ck_assert_int_eq(st.next_seq, 5);
  ck_assert_int_eq(st.accepted_bytes, 2 + 4 + 8 + 3 + 8);
  ck_assert_int_eq(st.backlog_bytes, st.accepted_bytes);
  seen s = {0};
  ck_assert_int_eq(journal_pipeline_records(engine_journal(h.e), "events", 1,
                                            INT64_MAX, 8, see, &s),
                   0);
  static const char *bodies[] = {"1", "[2]", "\"three\"", "{}", "{\"a\":1}"};
  ck_assert_int_eq(s.n, 5);
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(s.seq[i], i + 1);
    ck_assert_str_eq(s.body[i], bodies[i]);
    ck_assert_int_eq(s.bytes[i], (int64_t)strlen(bodies[i]) + 1);
  }
  /* a record of two lines is no compact JSON: refused */
  const char *two[] = {"1", "{\n}"};
  ck_assert_int_eq(duro_pipeline_append(h.e, "events", two, 2, NULL),
                   DURO_E_INVALID_MESSAGE);
  int64_t first = 0;
  ck_assert_int_eq(duro_pipeline_append(h.e, "events", two, 1, &first), 0);
  ck_assert_int_eq(first, 6);
  ck_assert_int_eq(state().accepted, 6);
}
END_TEST

/* ---- sends from a plugin's code (duro_env_pipeline) ---- */

static int rc_outside, rc_bad, rc_many, rc_big, rc_unbound;

typedef struct emit_range {
  duro_pipeline *p;
  int from, to;
} emit_range;

/* Sends {"i":k} for k in the range as loose JSON, then fails its first
 * attempt: only the attempt that completes may have sent. */
static int send_then_maybe_fail(duro_attempt *a, void *arg) {
  const emit_range *r = arg;
  char text[8][96];
  const char *rec[8];
  for (int k = r->from; k < r->to; k++) {
    snprintf(text[k - r->from], sizeof text[0],
             "{ \"i\" : %d,\n \"pad\":\"%040d\" }", k, k);
    rec[k - r->from] = text[k - r->from];
  }
  ck_assert_int_eq(duro_pipeline_send(r->p, rec, (size_t)(r->to - r->from)), 0);
  if (duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "the sink's upstream is down");
  return duro_attempt_result(a, "1");
}

/* Refusals: no JSON, too many records, a record over 1,000,000 bytes. */
static int send_refused(duro_attempt *a, void *arg) {
  duro_pipeline *p = arg;
  const char *bad[] = {"1", "{nope"};
  rc_bad = duro_pipeline_send(p, bad, 2);
  static const char *many[10001];
  for (size_t i = 0; i < 10001; i++)
    many[i] = "1";
  rc_many = duro_pipeline_send(p, many, 10001);
  char *big = malloc(1000002);
  memset(big, 'x', 1000001);
  big[0] = '"';
  big[999999] = '"'; /* 1,000,000 bytes with its quotes: not over */
  big[1000000] = '\0';
  const char *one[] = {big};
  ck_assert_int_eq(duro_pipeline_send(p, one, 1), 0);
  big[999999] = 'x';
  big[1000000] = '"';
  big[1000001] = '\0';
  rc_big = duro_pipeline_send(p, one, 1);
  free(big);
  rc_unbound = duro_pipeline_send(NULL, bad, 1);
  return duro_attempt_result(a, "1");
}

static duro_rc emitter(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  duro_pipeline *p = duro_env_pipeline(env, "EVENTS");
  ck_assert_ptr_nonnull(p);
  ck_assert_ptr_null(duro_env_pipeline(env, "NOPE"));
  const char *one[] = {"\"outside\""};
  rc_outside = duro_pipeline_send(p, one, 1); /* would repeat on replays */
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 3, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT}};
  emit_range r1 = {p, 0, 3}, r2 = {p, 3, 5};
  DURO_TRY(duro_do(step, "send", &cfg, send_then_maybe_fail, &r1, NULL));
  DURO_TRY(duro_do(step, "send", &cfg, send_then_maybe_fail, &r2, NULL));
  DURO_TRY(duro_do(step, "refused", NULL, send_refused, p, NULL));
  DURO_TRY(duro_sleep(step, "nap", "1 minute"));
  return duro_set_output(step, "1");
}

/* A step's records commit with its result: the failed attempts sent
 * nothing, the completing ones exactly once, made compact; replays send
 * nothing; refusals store nothing. */
START_TEST(test_plugin_sends_with_the_step) {
  harness_register(&h, "emitter", emitter);
  ck_assert_int_eq(duro_instance_create(h.e, "emitter", "e1", NULL, -1, NULL),
                   0);
  harness_run(&h); /* attempt 1 of the first step sends, then fails */
  ck_assert_int_eq(rc_outside, DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(state().accepted, 0);
  harness_advance(&h, 1000); /* its attempt 2; the second's attempt 1 */
  ck_assert_int_eq(state().accepted, 3);
  harness_advance(&h, 1000); /* the second's attempt 2; the refusals */
  ck_assert_int_eq(rc_bad, DURO_E_INVALID_MESSAGE);
  ck_assert_int_eq(rc_many, DURO_E_BATCH_TOO_LARGE);
  ck_assert_int_eq(rc_big, DURO_E_MESSAGE_TOO_LARGE);
  ck_assert_int_eq(rc_unbound, DURO_E_BINDING_NOT_FOUND);
  ck_assert_int_eq(state().accepted, 6); /* 5, and the record at the limit */
  harness_advance(&h, 60000); /* the nap ends: a replay sends nothing */
  ck_assert_str_eq(harness_status(&h, "emitter", "e1"), "complete");
  ck_assert_int_eq(state().accepted, 6);
  harness_advance(&h, 10000);
  ck_assert_int_eq(state().written, 6);
  char files[8][256], cmd[800], line[128] = "";
  ck_assert_uint_ge(list_files(files, 8), 1);
  snprintf(cmd, sizeof cmd, "gzip -dc '%s/%s' | head -c 100", sink, files[0]);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  pclose(f);
  ck_assert_str_eq(line, "{\"i\":0,\"pad\":\"" /* made compact */
                         "0000000000000000000000000000000000000000\"}\n");
}
END_TEST

/* zstd: .jsonl.zst files that `zstd -dc` reads back whole. */
START_TEST(test_zstd_files) {
  for (int i = 0; i < 30; i++) {
    char rec[100];
    snprintf(rec, sizeof rec, "{\"i\":%d,\"pad\":\"%040d\"}", i, i);
    const char *one[] = {rec};
    ck_assert_int_eq(duro_pipeline_append(h.e, "zevents", one, 1, NULL), 0);
  }
  harness_advance(&h, 10000);
  char files[8][256];
  size_t nf = list_files(files, 8);
  ck_assert_uint_ge(nf, 1);
  ck_assert_ptr_nonnull(strstr(files[0], "zevents-000000000001-"));
  char cmd[2600] = "zstd -qdc";
  for (size_t i = 0; i < nf; i++) {
    ck_assert_ptr_nonnull(strstr(files[i], ".jsonl.zst"));
    size_t used = strlen(cmd);
    snprintf(cmd + used, sizeof cmd - used, " '%s/%s'", sink, files[i]);
  }
  size_t used = strlen(cmd);
  snprintf(cmd + used, sizeof cmd - used, " | wc -l");
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  int lines = -1;
  ck_assert_int_eq(fscanf(f, "%d", &lines), 1);
  ck_assert_int_eq(pclose(f), 0);
  ck_assert_int_eq(lines, 30);
  snprintf(cmd, sizeof cmd, "zstd -qdc '%s/%s' | head -1", sink, files[0]);
  f = popen(cmd, "r");
  char line[128] = "";
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  pclose(f);
  ck_assert_str_eq(line, "{\"i\":0,\"pad\":\""
                         "0000000000000000000000000000000000000000\"}\n");
}
END_TEST

/* Failed writes of `name` so far, and its back-off now. */
static int64_t write_errors(const char *name, int64_t *retry_ms) {
  pipeline *p = pipeline_find(h.e, name);
  ck_assert_ptr_nonnull(p);
  pthread_mutex_lock(&p->flush_mu);
  *retry_ms = p->retry_ms;
  pthread_mutex_unlock(&p->flush_mu);
  pthread_mutex_lock(&p->mu);
  int64_t n = p->errors;
  pthread_mutex_unlock(&p->mu);
  return n;
}

/* A failed write of `name` (its first just made) is tried again after
 * each of `delays` (ms) in turn, not a millisecond sooner. */
static void assert_retried_after(const char *name, const int64_t *delays,
                                 size_t n) {
  int64_t retry_ms;
  int64_t errors = write_errors(name, &retry_ms);
  ck_assert_int_ge(errors, 1);
  for (size_t i = 0; i < n; i++) {
    ck_assert_int_eq(retry_ms, delays[i]);
    harness_advance(&h, delays[i] - 1);
    ck_assert_int_eq(write_errors(name, &retry_ms), errors);
    harness_advance(&h, 1);
    ck_assert_int_eq(write_errors(name, &retry_ms), ++errors);
  }
}

/* A write that fails (the sink's directory is a file) is tried again
 * after 1 s, then twice as long each time up to max_retry_delay (a
 * minute by default); once the sink works, the batch is written and the
 * back-off is gone. */
START_TEST(test_failed_write_backs_off) {
  mkdir(h.dir, 0755);         /* on PostgreSQL the harness keeps none */
  FILE *f = fopen(sink, "w"); /* no directory can be made under it */
  ck_assert_ptr_nonnull(f);
  fclose(f);
  send_range(0, 30); /* due by size */
  harness_run(&h);
  static const int64_t minute[] = {1000,  2000,  4000,  8000, 16000,
                                   32000, 60000, 60000, 60000};
  assert_retried_after("events", minute, sizeof minute / sizeof *minute);
  for (int i = 0; i < 30; i++) {
    char rec[64];
    snprintf(rec, sizeof rec, "{\"i\":%d,\"pad\":\"%040d\"}", i, i);
    const char *one[] = {rec};
    ck_assert_int_eq(duro_pipeline_append(h.e, "zevents", one, 1, NULL), 0);
  }
  harness_run(&h);
  static const int64_t capped[] = {1000, 2000, 4000, 5000, 5000, 5000};
  assert_retried_after("zevents", capped, sizeof capped / sizeof *capped);

  ck_assert_int_eq(unlink(sink), 0);
  harness_advance(&h, 60000);
  int64_t retry_ms;
  write_errors("events", &retry_ms);
  ck_assert_int_eq(retry_ms, 0);
  write_errors("zevents", &retry_ms);
  ck_assert_int_eq(retry_ms, 0);
  ck_assert_int_eq(state().written, 30);
  ck_assert_int_eq(state().backlog, 0);
}
END_TEST

/* ---- format: csv ---- */

/* Records of every kind of value: commas, quotes, CR and LF, nested
 * values, missing keys and pointers that lead nowhere. */
static const char *const csv_records[] = {
    "{\"name\":\"plain\",\"user\":{\"id\":7,\"tags\":[\"x\",\"y\"]},"
    "\"note\":\"a,b\",\"a/b\":1,\"flag\":true,\"n\":1.5,\"list\":[0,{\"k\":"
    "\"v\"}]}",
    "{\"name\":\"say \\\"hi\\\"\",\"user\":{\"id\":\"u-8\"},"
    "\"note\":\"line1\\nline2\\r\\nend\",\"flag\":false,\"n\":null}",
    "{\"name\":\"\",\"other\":1}",
    "{\"user\":\"not an object\",\"list\":[1],\"n\":-20}",
};

/* What Python's csv module reads from the file `rel`, gunzip'ed, as one
 * JSON text: a list of rows, each a list of strings. */
static char *csv_read_back(const char *rel) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd,
           "gzip -dc '%s/%s' | python3 -c 'import csv, io, json, sys; "
           "r = csv.reader(io.TextIOWrapper(sys.stdin.buffer, "
           "encoding=\"utf-8\", newline=\"\"), strict=True); "
           "print(json.dumps(list(r), separators=(\",\", \":\")))'",
           sink, rel);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  static char out[4096];
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = '\0';
  ck_assert_int_eq(pclose(f), 0);
  out[strcspn(out, "\n")] = '\0';
  return out;
}

static const char csv_expected[] =
    "[[\"name\",\"/user/id\",\"/user/tags\",\"note\",\"/a~1b\",\"flag\","
    "\"n\",\"/list/1\"],"
    "[\"plain\",\"7\",\"[\\\"x\\\",\\\"y\\\"]\",\"a,b\",\"1\",\"true\","
    "\"1.5\",\"{\\\"k\\\":\\\"v\\\"}\"],"
    "[\"say \\\"hi\\\"\",\"u-8\",\"\",\"line1\\nline2\\r\\nend\",\"\","
    "\"false\",\"\",\"\"],"
    "[\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\"],"
    "[\"\",\"\",\"\",\"\",\"\",\"\",\"-20\",\"\"]]";

/* The file as Python reads it, and its bytes as written: CRLF lines,
 * quoted fields, an empty string "" beside null's nothing. */
START_TEST(test_csv_files) {
  ck_assert_int_eq(duro_pipeline_append(h.e, "rows", csv_records, 4, NULL), 0);
  harness_advance(&h, 10000);
  char files[8][256];
  ck_assert_uint_eq(list_files(files, 8), 1);
  ck_assert_str_eq(files[0],
                   "2026/01/01/00/rows-000000000001-000000000004.csv.gz");
  ck_assert_str_eq(csv_read_back(files[0]), csv_expected);
  char cmd[800], raw[1024];
  snprintf(cmd, sizeof cmd, "gzip -dc '%s/%s'", sink, files[0]);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(raw, 1, sizeof raw - 1, f);
  raw[n] = '\0';
  ck_assert_int_eq(pclose(f), 0);
  ck_assert_str_eq(raw, "name,/user/id,/user/tags,note,/a~1b,flag,n,/list/1\r\n"
                        "plain,7,\"[\"\"x\"\",\"\"y\"\"]\",\"a,b\",1,true,1.5,"
                        "\"{\"\"k\"\":\"\"v\"\"}\"\r\n"
                        "\"say \"\"hi\"\"\",u-8,,\"line1\nline2\r\nend\",,"
                        "false,,\r\n"
                        "\"\",,,,,,,\r\n"
                        ",,,,,,-20,\r\n");
}
END_TEST

/* A csv batch written again after a crash (its file renamed, "done" never
 * committed) is the same bytes, and its only file. */
START_TEST(test_csv_rewritten_same_bytes) {
  ck_assert_int_eq(duro_pipeline_append(h.e, "rows", csv_records, 2, NULL), 0);
  ck_assert_int_eq(duro_pipeline_append(h.e, "rows", csv_records + 2, 2, NULL),
                   0);
  plan_and_crash_of("rows", &copt, 1, 4, 1);
  char file[256];
  assert_rewritten_same_bytes(file);
  ck_assert_str_eq(csv_read_back(file), csv_expected);
}
END_TEST

static int rc_csv_step;

static int send_non_object(duro_attempt *a, void *arg) {
  const char *mixed[] = {"{\"name\":\"ok\"}", "[1, 2]"};
  rc_csv_step = duro_pipeline_send(arg, mixed, 2);
  return duro_attempt_result(a, "1");
}

static duro_rc csv_sender(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev;
  duro_pipeline *p = duro_env_pipeline(env, "ROWS");
  DURO_TRY(duro_do(step, "send", NULL, send_non_object, p, NULL));
  return duro_set_output(step, "1");
}

static int64_t accepted_of(const char *name) {
  journal_pipeline st;
  ck_assert_int_eq(journal_pipeline_get(engine_journal(h.e), name, &st), 0);
  return st.accepted;
}

/* A send holding a record that is no object stores none of its records,
 * over the engine's API and from a step; a jsonl pipeline takes any. */
START_TEST(test_csv_refuses_non_objects) {
  const char *mixed[] = {"{\"a\":1}", "[1]"}, *scalar[] = {"3"};
  ck_assert_int_eq(duro_pipeline_append(h.e, "rows", mixed, 2, NULL),
                   DURO_E_INVALID_MESSAGE);
  ck_assert_int_eq(duro_pipeline_append(h.e, "rows", scalar, 1, NULL),
                   DURO_E_INVALID_MESSAGE);
  ck_assert_int_eq(accepted_of("rows"), 0);
  ck_assert_int_eq(duro_pipeline_append(h.e, "events", mixed, 2, NULL), 0);
  ck_assert(duro_pipeline_objects_only(h.e, "rows"));
  ck_assert(!duro_pipeline_objects_only(h.e, "events"));
  ck_assert(!duro_pipeline_objects_only(h.e, "nope"));
  harness_register(&h, "csv_sender", csv_sender);
  ck_assert_int_eq(
      duro_instance_create(h.e, "csv_sender", "c1", NULL, -1, NULL), 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "csv_sender", "c1"), "complete");
  ck_assert_int_eq(rc_csv_step, DURO_E_INVALID_MESSAGE);
  ck_assert_int_eq(accepted_of("rows"), 0);
}
END_TEST

/* Registration: csv needs columns, each a key or a JSON pointer; jsonl
 * takes none. */
START_TEST(test_csv_register_refusals) {
  duro_pipeline_options o = opt;
  o.format = DURO_PIPELINE_CSV;
  ck_assert_int_eq(duro_pipeline_register(h.e, "c1", &o),
                   DURO_E_INVALID_ARGUMENT);
  static const char *const bad[] = {"ok", "/a~2"};
  o.columns = bad;
  o.n_columns = 2;
  ck_assert_int_eq(duro_pipeline_register(h.e, "c2", &o),
                   DURO_E_INVALID_ARGUMENT);
  o.format = DURO_PIPELINE_JSONL;
  o.n_columns = 1;
  ck_assert_int_eq(duro_pipeline_register(h.e, "c3", &o),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert(!duro_pipeline_exists(h.e, "c1"));
}
END_TEST

static Suite *pipelines_suite(void) {
  Suite *s = suite_create("pipelines");
  TCase *tc = tcase_create("flush");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_size_then_interval);
  tcase_add_test(tc, test_plan_redone_after_crash);
  tcase_add_test(tc, test_renamed_file_rewritten_same_bytes);
  tcase_add_test(tc, test_done_fenced);
  tcase_add_test(tc, test_backlog_bound_and_unknown);
  tcase_add_test(tc, test_append_op_many);
  tcase_add_test(tc, test_plugin_sends_with_the_step);
  tcase_add_test(tc, test_zstd_files);
  tcase_add_test(tc, test_failed_write_backs_off);
  tcase_add_test(tc, test_csv_files);
  tcase_add_test(tc, test_csv_rewritten_same_bytes);
  tcase_add_test(tc, test_csv_refuses_non_objects);
  tcase_add_test(tc, test_csv_register_refusals);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(pipelines_suite()); }
