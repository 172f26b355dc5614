/* test_journal.c — the store under the engine: group commit from many
 * threads (synchronous and asynchronous batches together), per-op results
 * inside a shared transaction, reads from threads that come and go,
 * instance counts kept on write, opening a database of the previous
 * schema, and the wakes an event type makes (wake_cases.h). */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duro.h"
#include "group_commit.h"
#include "harness.h"
#include "journal.h"
#include "metrics.h"
#include "proc.h"
#include "suite_run.h"
#include "wake_cases.h"

static char dir[64], db[320];

static void fresh_db(void) {
  snprintf(dir, sizeof dir, "/tmp/duro-journal-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(db, sizeof db, "%s/j.db", dir);
}

static void drop_db(void) {
  proc_remove_db(db);
  rmdir(dir);
}

static journal *open_journal(void) {
  journal *j = NULL;
  char err[256];
  ck_assert_msg(journal_open(db, 1, &j, err, sizeof err) == 0, "%s", err);
  return j;
}

static int64_t count_rows(const char *sql) {
  sqlite3 *h;
  ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
  sqlite3_stmt *st;
  ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

/* ---- many committers ------------------------------------------------------
 */

#define THREADS 16
#define PER_THREAD 150

START_TEST(group_commit_from_many_threads) {
  fresh_db();
  journal *j = open_journal();
  group_commit_drive(j, THREADS, PER_THREAD, 0, 2000);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"),
                   THREADS * PER_THREAD);
  drop_db();
}
END_TEST

START_TEST(duplicate_in_a_shared_transaction) {
  fresh_db();
  journal *j = open_journal();
  journal_instance a = {.workflow = "wf",
                        .id = "x",
                        .status = DURO_STATUS_QUEUED,
                        .params = "null"};
  journal_instance b = {.workflow = "wf",
                        .id = "y",
                        .status = DURO_STATUS_QUEUED,
                        .params = "null"};
  journal_batch batch = {0};
  journal_batch_add(&batch, JOP_INSTANCE_INSERT)->inst = &a;
  journal_batch_add(&batch, JOP_INSTANCE_INSERT)->inst = &a;
  journal_batch_add(&batch, JOP_INSTANCE_INSERT)->inst = &b;
  ck_assert_int_eq(journal_commit(j, &batch), 0);
  ck_assert_int_eq(batch.ops[0].rc, 0);
  ck_assert_int_eq(batch.ops[1].rc, DURO_E_ALREADY_EXISTS);
  ck_assert_int_eq(batch.ops[2].rc, 0);
  journal_batch_free(&batch);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"), 2);
  drop_db();
}
END_TEST

/* ---- readers ------------------------------------------------------------
 * Every push consumer's batch and every cron handler's tick runs on a
 * thread of its own; a read there must leave no connection behind. */

static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  ck_assert_ptr_nonnull(d);
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

static void *read_once(void *arg) {
  journal_instance in;
  int rc = journal_instance_get(arg, "wf", "a", &in);
  if (rc == 0)
    journal_instance_clear(&in);
  return (void *)(intptr_t)rc;
}

START_TEST(reads_from_short_lived_threads_leave_no_descriptor) {
  fresh_db();
  journal *j = open_journal();
  journal_instance a = {.workflow = "wf",
                        .id = "a",
                        .status = DURO_STATUS_QUEUED,
                        .params = "null"};
  journal_batch b = {0};
  journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &a;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  journal_batch_free(&b);
  ck_assert_ptr_null(read_once(j)); /* this thread's read: the pool's first */
  int before = open_fds();
  for (int i = 0; i < 10000; i++) {
    pthread_t t;
    void *rc;
    ck_assert_int_eq(pthread_create(&t, NULL, read_once, j), 0);
    pthread_join(t, &rc);
    ck_assert_msg(rc == NULL, "read %d: %s", i, journal_errmsg(j));
  }
  ck_assert_int_le(open_fds(), before);
  journal_close(j);
  drop_db();
}
END_TEST

/* ---- schema upgrade
 * ---------------------------------------------------------- */

START_TEST(opens_a_schema_1_database) {
  fresh_db();
  sqlite3 *h;
  ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
  /* The steps table as schema 1 made it, with a step and its attempt. */
  ck_assert_int_eq(
      sqlite3_exec(
          h,
          "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
          "INSERT INTO meta VALUES('schema','1');"
          "CREATE TABLE steps(instance INTEGER NOT NULL, key TEXT NOT NULL,"
          " seq INTEGER NOT NULL, name TEXT NOT NULL, count INTEGER NOT NULL,"
          " type TEXT NOT NULL, status TEXT NOT NULL, result TEXT, error TEXT,"
          " attempts INTEGER NOT NULL, started_ms INTEGER, ended_ms INTEGER,"
          " wake_ms INTEGER, PRIMARY KEY(instance, key)) WITHOUT ROWID;"
          "INSERT INTO steps VALUES(1,'a#1',1,'a',1,'do','complete','7',NULL,"
          " 1,10,20,NULL);",
          NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(h);

  journal *j = open_journal();
  journal_step *steps = NULL;
  size_t n = 0;
  ck_assert_int_eq(journal_steps_load(j, 1, &steps, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(steps[0].result, "7"); /* kept */
  ck_assert(steps[0].attempt_started_ms == JOURNAL_NONE);
  ck_assert_ptr_null(steps[0].build);
  journal_steps_free(steps, n);
  journal_close(j);
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' AND value='2'"),
      1);
  drop_db();
}
END_TEST

/* Schema 10 keeps a send's records in one row: a schema 9 file's
 * records, one a row, become rows of one line each, read back in order,
 * and a later send is one row of its records. */
typedef struct seen_records {
  char text[256];
  int64_t bytes;
} seen_records;

static int note_record(void *ctx, int64_t seq, const char *body, int64_t bytes,
                       int64_t sent_ms) {
  (void)sent_ms;
  seen_records *s = ctx;
  size_t n = strlen(s->text);
  snprintf(s->text + n, sizeof s->text - n, "%lld:%s;", (long long)seq, body);
  s->bytes += bytes;
  return 0;
}

START_TEST(upgrades_schema_9_pipeline_records) {
  fresh_db();
  journal_close(open_journal());
  sqlite3 *h;
  ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
  ck_assert_int_eq(
      sqlite3_exec(h,
                   "DROP TABLE pipeline_records;"
                   "CREATE TABLE pipeline_records(pipeline TEXT NOT NULL,"
                   " seq INTEGER NOT NULL, body TEXT NOT NULL, bytes INTEGER "
                   "NOT NULL, sent_ms INTEGER NOT NULL, PRIMARY KEY(pipeline,"
                   " seq)) WITHOUT ROWID;"
                   "INSERT INTO pipelines VALUES('p',2,2,8,0,0,0,8,NULL,NULL,"
                   "NULL,NULL,NULL,NULL);"
                   "INSERT INTO pipeline_records VALUES('p',1,'\"a\"',4,5),"
                   "('p',2,'\"b\"',4,6);"
                   "UPDATE meta SET value='9' WHERE key='schema'",
                   NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(h);
  journal *j = open_journal();
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_PIPELINE_APPEND);
  op->queue = "p";
  op->body = "\"c\"\n\"d\"\n";
  op->from_seq = 2;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 3);
  journal_batch_free(&b);
  seen_records s = {0};
  ck_assert_int_eq(
      journal_pipeline_records(j, "p", 2, INT64_MAX, 10, note_record, &s), 0);
  ck_assert_str_eq(s.text, "2:\"b\";3:\"c\";4:\"d\";");
  ck_assert_int_eq(s.bytes, 12);
  journal_close(j);
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' AND value='13'"),
      1);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM pipeline_records"), 3);
  ck_assert_int_eq(count_rows("SELECT last FROM pipeline_records WHERE "
                              "seq=3"),
                   4);
  drop_db();
}
END_TEST

/* A fresh journal made a file of schema `version` by `sql` (what that
 * schema lacks dropped), with instance wf/old (created at 5) in it, then
 * opened: upgraded. */
static journal *opened_as_of(const char *sql, int version) {
  fresh_db();
  journal_close(open_journal());
  sqlite3 *h;
  ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
  char *all = sqlite3_mprintf(
      "%s INSERT INTO instances(workflow,id,status,params,created_ms,"
      "retention_ms) VALUES('wf','old','queued','null',5,1000);"
      "UPDATE meta SET value='%d' WHERE key='schema'",
      sql, version);
  ck_assert_int_eq(sqlite3_exec(h, all, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_free(all);
  sqlite3_close(h);
  return open_journal();
}

/* Instance wf/new, created at 10, with `deadline_ms` (0: none) and
 * `traceparent`; with a traceparent, a message of queue q sent with it
 * in the same commit. */
static void insert_new(journal *j, int64_t deadline_ms,
                       const char *traceparent) {
  journal_instance in = {.workflow = "wf",
                         .id = "new",
                         .status = DURO_STATUS_QUEUED,
                         .params = "null",
                         .created_ms = 10,
                         .retention_ms = 1000,
                         .deadline_ms = deadline_ms,
                         .traceparent = (char *)traceparent};
  journal_batch b = {0};
  journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &in;
  if (traceparent) {
    journal_op *m = journal_batch_add(&b, JOP_MESSAGE_INSERT);
    m->queue = "q";
    m->body = "1";
    m->traceparent = traceparent;
  }
  ck_assert_int_eq(journal_commit(j, &b), 0);
  journal_batch_free(&b);
}

/* A keyed lease of queue q at ts_ms 10 (as a consumer of `pointer` with
 * limit 1 takes it): the bodies leased, joined by spaces, into out. */
static void lease_keyed(journal *j, const char *pointer, char *out,
                        size_t len) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_MESSAGE_LEASE);
  op->queue = "q";
  op->ts_ms = 10;
  op->visible_ms = 100000;
  op->lease_token = "t";
  op->n_leases = 10;
  op->key_pointer = pointer;
  op->key_limit = 1;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_int_eq(b.ops[0].rc, 0);
  out[0] = 0;
  for (size_t i = 0; i < b.ops[0].n_messages; i++) {
    size_t n = strlen(out);
    snprintf(out + n, len - n, "%s%s", i ? " " : "", b.ops[0].messages[i].body);
  }
  journal_messages_free(b.ops[0].messages, b.ops[0].n_messages);
  journal_batch_free(&b);
}

#define KM(acct, n) "{\"account\":\"" #acct "\",\"n\":" #n "}"

/* Schema 12 keeps each message's key: a schema 11 file's messages are
 * all there after the upgrade, their keys computed by the first keyed
 * lease and stored (a reopen finds them), and a lease under another
 * pointer (a reload that changed the consumer's key) computes them
 * again. */
START_TEST(upgrades_schema_11_message_keys) {
  journal *j = opened_as_of(
      "DROP INDEX messages_age; ALTER TABLE messages DROP COLUMN key;"
      "CREATE INDEX messages_age ON messages(queue, sent_ms);"
      "DROP TABLE queue_key_pointers;"
      "INSERT INTO messages(queue,body,attempts,visible_ms,sent_ms) VALUES"
      "('q','" KM(a, 1) "',0,0,1),('q','" KM(a, 2) "',0,0,2),"
                                                   "('q','" KM(b,
                                                               1) "',0,0,3);",
      11);
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' AND value='13'"),
      1);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages WHERE key IS "
                              "NULL AND body LIKE '{\"account\":%'"),
                   3);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM "
                              "pragma_index_info('messages_age')"),
                   4);
  char got[256];
  lease_keyed(j, "/account", got, sizeof got);
  ck_assert_str_eq(got, KM(a, 1) " " KM(b, 1));
  journal_close(j);
  j = open_journal();
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM messages WHERE key='\"a\"'"), 2);
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM messages WHERE key='\"b\"'"), 1);
  lease_keyed(j, "/account", got, sizeof got); /* a and b in handlers */
  ck_assert_str_eq(got, "");
  /* /n: a1 and b1 (n 1) are one key, in a handler; a2 is its own */
  lease_keyed(j, "/n", got, sizeof got);
  ck_assert_str_eq(got, KM(a, 2));
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages WHERE key='1'"),
                   2);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM queue_key_pointers "
                              "WHERE queue='q' AND pointer='/n'"),
                   1);
  journal_close(j);
  drop_db();
}
END_TEST

/* Schema 7 adds an instance's deadline to a schema 6 file in place: the
 * rows there have none, and a new one keeps its own; the file ends at
 * the current schema (8, which adds the pipelines' tables). */
START_TEST(upgrades_schema_6_to_7) {
  journal *j =
      opened_as_of("ALTER TABLE instances DROP COLUMN deadline_ms;", 6);
  journal_instance old = {0};
  ck_assert_int_eq(journal_instance_get(j, "wf", "old", &old), 0);
  ck_assert(old.deadline_ms == JOURNAL_NONE);
  journal_instance_clear(&old);
  insert_new(j, 70, NULL);
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get(j, "wf", "new", &got), 0);
  ck_assert_int_eq(got.deadline_ms, 70);
  journal_instance_clear(&got);
  journal_close(j);
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' AND value='13'"),
      1);
  drop_db();
}
END_TEST

/* Schema 11 adds the traceparent of instances and messages to a schema
 * 10 file: an old row has none, a new one keeps it. */
START_TEST(upgrades_schema_10_to_11) {
  journal *j = opened_as_of("ALTER TABLE instances DROP COLUMN traceparent;"
                            "ALTER TABLE messages DROP COLUMN traceparent;",
                            10);
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get(j, "wf", "old", &got), 0);
  ck_assert_ptr_null(got.traceparent);
  journal_instance_clear(&got);
  static const char tp[] =
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  insert_new(j, 0, tp);
  ck_assert_int_eq(journal_instance_get(j, "wf", "new", &got), 0);
  ck_assert_str_eq(got.traceparent, tp);
  journal_instance_clear(&got);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages WHERE "
                              "traceparent LIKE '00-4bf92f35%'"),
                   1);
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' AND value='13'"),
      1);
  drop_db();
}
END_TEST

/* Schema 4 adds the messages table to a schema 3 file in place (and 5
 * follows). */
START_TEST(upgrades_schema_3_to_5) {
  fresh_db();
  journal_close(open_journal());
  sqlite3 *h;
  ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(h,
                                "DROP TABLE messages;"
                                "UPDATE meta SET value='3' WHERE key='schema'",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(h);
  journal *j = open_journal();
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_MESSAGE_INSERT);
  op->queue = "q";
  op->body = "1";
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  journal_batch_free(&b);
  journal_close(j);
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' AND value='13'"),
      1);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages"), 1);
  drop_db();
}
END_TEST

/* Schema 5 drops schema 4's index on leases (a lease id names its row);
 * messages are kept. */
START_TEST(upgrades_schema_4_to_5) {
  fresh_db();
  journal_close(open_journal());
  sqlite3 *h;
  ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
  ck_assert_int_eq(
      sqlite3_exec(h,
                   "CREATE INDEX messages_lease ON messages(lease) WHERE "
                   "lease IS NOT NULL;"
                   "INSERT INTO messages(queue,body,attempts,visible_ms,"
                   "sent_ms) VALUES('q','1',0,0,0);"
                   "UPDATE meta SET value='4' WHERE key='schema'",
                   NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(h);
  journal_close(open_journal());
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' AND value='13'"),
      1);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM sqlite_master WHERE "
                              "name='messages_lease'"),
                   0);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages"), 1);
  /* ids are no longer reused once the table empties */
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM sqlite_master WHERE "
                              "name='messages' AND sql LIKE "
                              "'%AUTOINCREMENT%'"),
                   1);
  journal *j = open_journal();
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_MESSAGES_EXPIRE);
  op->queue = "q";
  op->ts_ms = 1;
  op->from_seq = 10;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  journal_batch_reset(&b);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages"), 0);
  op = journal_batch_add(&b, JOP_MESSAGE_INSERT);
  op->queue = "q";
  op->body = "2";
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 2);
  journal_batch_free(&b);
  journal_close(j);
  drop_db();
}
END_TEST

/* ---- a control request the journal holds ------------------------------------
 */

static duro_rc sleeper(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return duro_sleep(step, "nap", "1 hour");
}

START_TEST(acknowledged_terminate_wins_over_a_later_pause) {
  harness h;
  harness_open(&h);
  harness_register(&h, "wf", sleeper);
  harness_start(&h);
  ck_assert_int_eq(duro_instance_create(h.e, "wf", "t", NULL, -1, NULL), 0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "wf", "t"), "waiting");
  /* A terminate persisted while an activation ran, which the activation
   * ended before applying (the engine then hands it to a worker). */
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open(h.db, &db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(db,
                                "UPDATE instances SET control=2 WHERE id='t'",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);
  ck_assert_int_eq(duro_instance_pause(h.e, "wf", "t"), 0);
  ck_assert_str_eq(harness_status(&h, "wf", "t"), "terminated");
  harness_close(&h);
}
END_TEST

/* ---- instance counts ------------------------------------------------------
 * Kept on write (instance_counts), so that /metrics and a workflow's
 * stats read no instance rows: they must match the rows across creates,
 * status changes, sweeps, a restart, and a file that had none. */

static int quick(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

static duro_rc one_step(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  DURO_TRY(duro_do(step, "only", NULL, quick, NULL, &r));
  return duro_set_output(step, r);
}

/* How many (workflow, status, n) the counts and the rows disagree on. */
static int64_t counts_wrong(harness *h) {
  snprintf(db, sizeof db, "%s", h->db);
  return count_rows(
      "SELECT COUNT(*) FROM (SELECT * FROM (SELECT workflow, status, n FROM "
      "instance_counts WHERE n>0 EXCEPT SELECT workflow, status, COUNT(*) "
      "FROM instances GROUP BY 1, 2) UNION ALL SELECT * FROM (SELECT "
      "workflow, status, COUNT(*) FROM instances GROUP BY 1, 2 EXCEPT "
      "SELECT workflow, status, n FROM instance_counts WHERE n>0))");
}

static int64_t stat_of(harness *h, const char *wf, const char *status) {
  json_t *st = NULL;
  ck_assert_int_eq(duro_workflow_stats(h->e, wf, &st), 0);
  json_t *v = json_object_get(json_object_get(st, "instances"), status);
  int64_t n = v ? json_integer_value(v) : 0;
  json_decref(st);
  return n;
}

static void create_n(harness *h, const char *wf, const char *prefix, int n,
                     int64_t retention_ms) {
  for (int i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof id, "%s%d", prefix, i);
    ck_assert_int_eq(
        duro_instance_create(h->e, wf, id, "{}", retention_ms, NULL), 0);
  }
}

#define DAY_MS (24LL * 3600 * 1000)

START_TEST(instance_counts_kept_on_write) {
  harness h;
  harness_open(&h);
  harness_register(&h, "one", one_step);
  harness_register(&h, "nap", sleeper);
  harness_start(&h);
  create_n(&h, "one", "a", 5, DAY_MS);
  create_n(&h, "nap", "s", 3, -1);
  ck_assert_int_eq(counts_wrong(&h), 0);
  ck_assert_int_eq(stat_of(&h, "one", "queued"), 5);
  harness_run(&h);
  ck_assert_int_eq(duro_instance_pause(h.e, "nap", "s0"), 0);
  ck_assert_int_eq(duro_instance_terminate(h.e, "nap", "s1"), 0);
  ck_assert_int_eq(counts_wrong(&h), 0);
  ck_assert_int_eq(stat_of(&h, "one", "complete"), 5);
  ck_assert_int_eq(stat_of(&h, "one", "queued"), 0);
  ck_assert_int_eq(stat_of(&h, "nap", "paused"), 1);
  ck_assert_int_eq(stat_of(&h, "nap", "terminated"), 1);
  ck_assert_int_eq(stat_of(&h, "nap", "waiting"), 1);

  /* their own retention, kept as an odd number of ms (retention.c) */
  duro_clock_advance(&h.clock, DAY_MS + 1);
  size_t swept = 0;
  ck_assert_int_eq(duro_engine_sweep(h.e, &swept), 0);
  ck_assert_uint_eq(swept, 5);
  ck_assert_int_eq(counts_wrong(&h), 0);
  ck_assert_int_eq(stat_of(&h, "one", "complete"), 0);

  harness_reopen(&h);
  create_n(&h, "one", "b", 2, -1);
  harness_run(&h);
  ck_assert_int_eq(counts_wrong(&h), 0);
  ck_assert_int_eq(stat_of(&h, "one", "complete"), 2);
  ck_assert_int_eq(stat_of(&h, "nap", "paused"), 1);
  ck_assert_int_eq(stat_of(&h, "nap", "complete"), 1); /* its hour passed */

  /* A file of before the counts gets them from its rows. */
  duro_engine_close(h.e);
  h.e = NULL;
  sqlite3 *c;
  ck_assert_int_eq(sqlite3_open(h.db, &c), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(c,
                                "DROP TRIGGER instance_counts_insert;"
                                "DROP TRIGGER instance_counts_delete;"
                                "DROP TRIGGER instance_counts_move;"
                                "DROP TABLE instance_counts;",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(c);
  journal *j = NULL;
  char err[256];
  ck_assert_msg(journal_open(h.db, 1, &j, err, sizeof err) == 0, "%s", err);
  journal_close(j);
  ck_assert_int_eq(counts_wrong(&h), 0);
  ck_assert_int_eq(count_rows("SELECT n FROM instance_counts WHERE "
                              "workflow='one' AND status='complete'"),
                   2);
  harness_close(&h);
}
END_TEST

/* An event wakes a wait for its type, one of a list (duro_wait_any), and
 * no other type, however close its name. */
START_TEST(wakes_match_whole_types) {
  fresh_db();
  journal *j = open_journal();
  wake_cases_type_lists(j);
  journal_close(j);
  drop_db();
}
END_TEST

int main(void) {
  Suite *s = suite_create("journal");
  TCase *tc = tcase_create("journal");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, group_commit_from_many_threads);
  tcase_add_test(tc, duplicate_in_a_shared_transaction);
  tcase_add_test(tc, reads_from_short_lived_threads_leave_no_descriptor);
  tcase_add_test(tc, opens_a_schema_1_database);
  tcase_add_test(tc, upgrades_schema_3_to_5);
  tcase_add_test(tc, upgrades_schema_4_to_5);
  tcase_add_test(tc, upgrades_schema_10_to_11);
  tcase_add_test(tc, upgrades_schema_11_message_keys);
  tcase_add_test(tc, upgrades_schema_6_to_7);
  tcase_add_test(tc, upgrades_schema_9_pipeline_records);
  tcase_add_test(tc, acknowledged_terminate_wins_over_a_later_pause);
  tcase_add_test(tc, instance_counts_kept_on_write);
  tcase_add_test(tc, wakes_match_whole_types);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
