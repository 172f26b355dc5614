/* test_pg_journal.c — the journal on the PostgreSQL backend (store/pg.c)
 * through journal.h, on a throwaway cluster (tests/pg_cluster.h) that an
 * unchecked fixture starts once for the run; each case gets a database of
 * its own in it.
 *
 *  - "journal": group commit from many threads (synchronous and
 *    asynchronous batches together); per-op results inside a shared
 *    transaction (duplicates, events for ended instances); instances,
 *    steps, attempts, events and wakes written and read back as sqlite.c
 *    does, a wait for a list of types woken by each and by no other; a failing
 * op fails its whole group with libpq's message and leaves the next group
 * clean; writes sent without waiting (libpq's pipeline mode), each checked, a
 * failing one failing its group, a session lost with writes queued, migrate's
 * COPY behind queued writes, a dead host's fence; the schema version row;
 * read-only; the list, count, wake-poll and sweep reads; queue messages and
 * cron ticks; connections the server dropped, made again; and a real engine
 *    whose journal is PostgreSQL, which runs instances of a three-step
 *    workflow to the end across a reopen. */
#include <check.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "duro.h"
#include "group_commit.h"
#include "harness.h"
#include "journal.h"
#include "metrics.h"
#include "pg_fixture.h"
#include "suite_run.h"
#include "wake_cases.h"

/* ---- the cluster, held by Check's runner process ------------------------ */

static pg_fixture pg = {.suite = "test_pg_journal"};

static void cluster_start(void) { pg_fixture_up(&pg); }

static void cluster_stop(void) { pg_fixture_down(&pg); }

/* The case's own database: its connection string (libpq takes the last
 * dbname given). */
static char conninfo[700];

static void fresh_db(void) {
  static int n;
  char name[64];
  snprintf(name, sizeof name, "j_%d_%d", (int)getpid(), n++);
  pg_fixture_database(&pg, name, conninfo, sizeof conninfo);
}

static journal *open_mode(int synchronous_full) {
  journal *j = NULL;
  char err[512];
  ck_assert_msg(journal_open_backend(&store_pg, conninfo, synchronous_full, &j,
                                     err, sizeof err) == 0,
                "%s", err);
  return j;
}

static journal *open_journal(void) { return open_mode(1); }

/* The one integer a query returns, read on a connection of its own. */
static int64_t count_rows(const char *sql) {
  return pg_query_int(conninfo, sql);
}

static void commit_ok(journal *j, journal_batch *b) {
  int rc = journal_commit(j, b);
  ck_assert_msg(rc == 0, "commit: %d %s", rc, journal_errmsg(j));
}

/* Inserts a queued instance and returns its rowid. */
static int64_t insert(journal *j, const char *wf, const char *id,
                      int64_t created_ms) {
  journal_instance in = {.workflow = (char *)wf,
                         .id = (char *)id,
                         .status = DURO_STATUS_QUEUED,
                         .params = "{\"n\":1}",
                         .created_ms = created_ms,
                         .retention_ms = 1000};
  journal_batch b = {0};
  journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &in;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].rc, 0);
  int64_t rowid = b.ops[0].out_rowid;
  ck_assert_int_gt(rowid, 0);
  journal_batch_free(&b);
  return rowid;
}

/* Writes every mutable column of an instance (JOP_INSTANCE_SET). */
static void set_row(journal *j, const journal_instance *in, int clear) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_INSTANCE_SET);
  op->inst = in;
  op->clear_control = clear;
  commit_ok(j, &b);
  journal_batch_free(&b);
}

/* ---- many committers ---------------------------------------------------- */

#define THREADS 8
#define PER_THREAD 40

START_TEST(group_commit_from_many_threads) {
  fresh_db();
  journal *j = open_journal();
  group_commit_drive(j, THREADS, PER_THREAD, 1, 5000);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"),
                   THREADS * PER_THREAD);
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
  commit_ok(j, &batch);
  ck_assert_int_eq(batch.ops[0].rc, 0);
  ck_assert_int_eq(batch.ops[1].rc, DURO_E_ALREADY_EXISTS);
  ck_assert_int_eq(batch.ops[2].rc, 0);
  ck_assert_int_ne(batch.ops[0].out_rowid, batch.ops[2].out_rowid);
  journal_batch_free(&batch);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"), 2);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' "
                              "AND value='17'"),
                   1);
}
END_TEST

/* Schema 11 keeps a send's records in one row: a schema 10 journal's
 * records, one a row, become rows of one line each, read back in order
 * with a later send's. */
static int note_record(void *ctx, int64_t seq, const char *body, int64_t bytes,
                       int64_t sent_ms) {
  (void)bytes, (void)sent_ms;
  char *text = ctx;
  size_t n = strlen(text);
  snprintf(text + n, 256 - n, "%lld:%s;", (long long)seq, body);
  return 0;
}

START_TEST(upgrades_schema_10_pipeline_records) {
  fresh_db();
  journal_close(open_journal());
  PGconn *c = PQconnectdb(conninfo);
  ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(
      c, "ALTER TABLE pipeline_records DROP COLUMN last;"
         "INSERT INTO pipelines VALUES('p',2,2,8,0,0,0,8,NULL,NULL,NULL,NULL,"
         "NULL,NULL);"
         "INSERT INTO pipeline_records VALUES('p',1,'\"a\"',4,5),"
         "('p',2,'\"b\"',4,6);"
         "UPDATE meta SET value='10' WHERE key='schema'");
  ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s",
                PQresultErrorMessage(r));
  PQclear(r);
  PQfinish(c);
  journal *j = open_journal();
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_PIPELINE_APPEND);
  op->queue = "p";
  op->body = "\"c\"\n\"d\"\n";
  op->from_seq = 2;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 3);
  journal_batch_free(&b);
  char text[256] = "";
  ck_assert_int_eq(
      journal_pipeline_records(j, "p", 2, INT64_MAX, 10, note_record, text), 0);
  ck_assert_str_eq(text, "2:\"b\";3:\"c\";4:\"d\";");
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' "
                              "AND value='17'"),
                   1);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM pipeline_records"), 3);
}
END_TEST

/* A journal of schema 7 is brought to 9 (8 and then 9) when opened: its
 * instances get the deadline column, none set. */
START_TEST(upgrades_schema_7_to_8) {
  fresh_db();
  journal *j = open_journal();
  insert(j, "wf", "old", 5);
  journal_close(j);
  PGconn *c = PQconnectdb(conninfo);
  ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(c, "ALTER TABLE instances DROP COLUMN deadline_ms;"
                          "UPDATE meta SET value='7' WHERE key='schema'");
  ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s",
                PQresultErrorMessage(r));
  PQclear(r);
  PQfinish(c);
  j = open_journal();
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get(j, "wf", "old", &got), 0);
  ck_assert(got.deadline_ms == JOURNAL_NONE);
  journal_instance_clear(&got);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' "
                              "AND value='17'"),
                   1);
}
END_TEST

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

/* Schema 14 keeps each message's key: a schema 13 journal's messages are
 * all there after the upgrade (and it gets schema 15's attributes and 16's
 * hosts' counts), their keys
 * computed by the first keyed lease and stored (a reopen finds them), and a
 * lease under another pointer (a reload that changed the consumer's key)
 * computes them again. */
START_TEST(upgrades_schema_13_message_keys) {
  fresh_db();
  journal_close(open_journal());
  PGconn *c = PQconnectdb(conninfo);
  ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(
      c, "DROP INDEX messages_age; ALTER TABLE messages DROP COLUMN key;"
         "CREATE INDEX messages_age ON messages(queue, sent_ms);"
         "DROP TABLE queue_key_pointers; DROP TABLE attributes;"
         "ALTER TABLE hosts DROP COLUMN counts;"
         "INSERT INTO messages(queue,body,attempts,visible_ms,sent_ms) VALUES"
         "('q','" KM(a, 1) "',0,0,1),('q','" KM(
             a, 2) "',0,0,2),"
                   "('q','" KM(
                       b, 1) "',0,0,3);"
                             "UPDATE meta SET value='13' WHERE key='schema'");
  ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s",
                PQresultErrorMessage(r));
  PQclear(r);
  PQfinish(c);
  journal *j = open_journal();
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM meta WHERE key='schema' "
                              "AND value='17'"),
                   1);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages WHERE key IS "
                              "NULL AND body LIKE '{\"account\":%'"),
                   3);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM pg_indexes WHERE "
                              "indexname='messages_age' AND indexdef LIKE "
                              "'%(queue, sent_ms, seq, key)%'"),
                   1);
  /* and schema 16's hosts' counts */
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM information_schema.columns "
                              "WHERE table_name='hosts' AND "
                              "column_name='counts'"),
                   1);
  /* and schema 15's attributes, with their indexes */
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM pg_indexes WHERE "
                              "indexname IN ('attributes_str',"
                              "'attributes_num')"),
                   2);
  /* and schema 17's indexes of the listing's time ranges */
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM pg_indexes WHERE "
                              "indexname IN ('instances_created',"
                              "'instances_ended')"),
                   2);
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
  /* a2's stored; a1's and b1's cleared, and computed again by each lease
   * while they are in a handler (one settling them never waits for a
   * lease's write) */
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages WHERE key='2'"),
                   1);
  ck_assert_int_eq(
      count_rows("SELECT COUNT(*) FROM messages WHERE key IS NULL"), 2);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM queue_key_pointers "
                              "WHERE queue='q' AND pointer='/n'"),
                   1);
  journal_close(j);
}
END_TEST

START_TEST(instance_insert_set_get) {
  fresh_db();
  journal *j = open_journal();
  int64_t rowid = insert(j, "wf", "i1", 5);
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get(j, "wf", "i1", &got), 0);
  ck_assert_int_eq(got.rowid, rowid);
  ck_assert_str_eq(got.workflow, "wf");
  ck_assert_str_eq(duro_status_name(got.status), "queued");
  ck_assert_str_eq(got.params, "{\"n\":1}");
  ck_assert_ptr_null(got.output);
  ck_assert_ptr_null(got.error);
  ck_assert_ptr_null(got.wait_type);
  ck_assert_ptr_null(got.build);
  ck_assert_int_eq(got.created_ms, 5);
  ck_assert(got.started_ms == JOURNAL_NONE);
  ck_assert(got.wake_ms == JOURNAL_NONE);
  ck_assert_int_eq(got.retention_ms, 1000);
  ck_assert_int_eq(got.control, 0);
  ck_assert_int_eq(got.restarts, 0);
  ck_assert(got.deadline_ms == JOURNAL_NONE);
  journal_instance_clear(&got);
  ck_assert_int_eq(journal_instance_get(j, "wf", "nope", &got),
                   DURO_E_NOT_FOUND);
  ck_assert_int_eq(journal_instance_get_rowid(j, rowid + 100, &got),
                   DURO_E_NOT_FOUND);

  /* control requested, then a set that clears it */
  journal_instance ctl = {.control = JOURNAL_CONTROL_PAUSE};
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_INSTANCE_CONTROL);
  op->rowid = rowid;
  op->inst = &ctl;
  op = journal_batch_add(&b, JOP_INSTANCE_RESTARTED);
  op->rowid = rowid;
  op->ts_ms = 500; /* the new run's deadline */
  op = journal_batch_add(&b, JOP_INSTANCE_PIN);
  op->rowid = rowid;
  op->step_key = "build-1";
  commit_ok(j, &b);
  journal_batch_free(&b);
  ck_assert_int_eq(journal_instance_get_rowid(j, rowid, &got), 0);
  ck_assert_int_eq(got.control, JOURNAL_CONTROL_PAUSE);
  ck_assert_int_eq(got.restarts, 1);
  ck_assert_int_eq(got.deadline_ms, 500);
  ck_assert_str_eq(got.build, "build-1");
  journal_instance_clear(&got);

  journal_instance in = {.rowid = rowid,
                         .status = DURO_STATUS_WAITING,
                         .output = "{\"o\":2}",
                         .started_ms = 10,
                         .ended_ms = JOURNAL_NONE,
                         .wake_ms = 99,
                         .paused_ms = JOURNAL_NONE,
                         .wait_type = "paid"};
  set_row(j, &in, 0);
  ck_assert_int_eq(journal_instance_get_rowid(j, rowid, &got), 0);
  ck_assert_str_eq(duro_status_name(got.status), "waiting");
  ck_assert_str_eq(got.output, "{\"o\":2}");
  ck_assert_int_eq(got.started_ms, 10);
  ck_assert(got.ended_ms == JOURNAL_NONE);
  ck_assert_int_eq(got.wake_ms, 99);
  ck_assert_str_eq(got.wait_type, "paid");
  ck_assert_int_eq(got.control, JOURNAL_CONTROL_PAUSE); /* not cleared */
  ck_assert_str_eq(got.build, "build-1");               /* not a set's */
  journal_instance_clear(&got);
  set_row(j, &in, 1);
  ck_assert_int_eq(journal_instance_get_rowid(j, rowid, &got), 0);
  ck_assert_int_eq(got.control, 0);
  journal_instance_clear(&got);

  /* a control clear of its own */
  ctl.control = JOURNAL_CONTROL_TERMINATE;
  op = journal_batch_add(&b, JOP_INSTANCE_CONTROL);
  op->rowid = rowid;
  op->inst = &ctl;
  commit_ok(j, &b);
  journal_batch_reset(&b);
  journal_batch_add(&b, JOP_INSTANCE_CONTROL_CLEAR)->rowid = rowid;
  commit_ok(j, &b);
  journal_batch_free(&b);
  ck_assert_int_eq(count_rows("SELECT control FROM instances"), 0);
  journal_close(j);
}
END_TEST

static journal_step step_row(const char *key, const char *name, int64_t seq,
                             const char *status, int64_t wake) {
  return (journal_step){
      .key = (char *)key,
      .name = (char *)name,
      .count = 1,
      .seq = seq,
      .type = wake == JOURNAL_NONE ? DURO_STEP_DO : DURO_STEP_SLEEP,
      .status = (duro_step_status)duro_step_status_parse(status),
      .attempts = 1,
      .started_ms = seq * 10,
      .ended_ms = JOURNAL_NONE,
      .wake_ms = wake,
      .attempt_started_ms = JOURNAL_NONE};
}

typedef struct seen_attempts {
  char text[512];
} seen_attempts;

static void on_attempt(void *ctx, const char *key, uint32_t number,
                       int64_t started_ms, int64_t ended_ms, const char *error,
                       const char *build) {
  seen_attempts *s = ctx;
  size_t n = strlen(s->text);
  snprintf(s->text + n, sizeof s->text - n, "%s/%u/%lld/%lld/%s/%s;", key,
           number, (long long)started_ms, (long long)ended_ms,
           error ? error : "-", build ? build : "-");
}

START_TEST(steps_and_attempts) {
  fresh_db();
  journal *j = open_journal();
  int64_t rowid = insert(j, "wf", "s1", 0);
  journal_step a = step_row("a#1", "a", 1, "complete", JOURNAL_NONE);
  a.result = "\"ra\"";
  a.ended_ms = 15;
  a.attempt_started_ms = 12;
  a.build = "b1";
  journal_step nap = step_row("nap#1", "nap", 2, "waiting", 500);
  journal_step c = step_row("c#1", "c", 3, "waiting", JOURNAL_NONE);
  c.error = "{\"name\":\"x\",\"message\":\"y\"}";
  journal_batch b = {0};
  journal_op *op;
  const journal_step *rows[] = {&a, &nap, &c};
  for (int i = 0; i < 3; i++) {
    op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rowid = rowid;
    op->step = rows[i];
  }
  op = journal_batch_add(&b, JOP_ATTEMPT_PUT);
  op->rowid = rowid;
  op->attempt = (journal_attempt){"c#1", 2, 30, 31, "boom 2", "b1"};
  op = journal_batch_add(&b, JOP_ATTEMPT_PUT);
  op->rowid = rowid;
  op->attempt = (journal_attempt){"c#1", 1, 20, 21, "boom 1", NULL};
  commit_ok(j, &b);
  journal_batch_reset(&b);

  /* a put of the same key replaces the row */
  c.attempts = 3;
  c.result = "\"rc\"";
  op = journal_batch_add(&b, JOP_STEP_PUT);
  op->rowid = rowid;
  op->step = &c;
  op = journal_batch_add(&b, JOP_STEPS_SHIFT_WAKE);
  op->rowid = rowid;
  op->from_seq = 100;
  commit_ok(j, &b);
  journal_batch_reset(&b);

  journal_step *s = NULL;
  size_t n = 0;
  ck_assert_int_eq(journal_steps_load(j, rowid, &s, &n), 0);
  ck_assert_uint_eq(n, 3);
  ck_assert_str_eq(s[0].key, "a#1");
  ck_assert_str_eq(s[0].name, "a");
  ck_assert_uint_eq(s[0].count, 1);
  ck_assert_str_eq(duro_step_kind_name(s[0].type), "do");
  ck_assert_str_eq(s[0].result, "\"ra\"");
  ck_assert_ptr_null(s[0].error);
  ck_assert_int_eq(s[0].ended_ms, 15);
  ck_assert_int_eq(s[0].attempt_started_ms, 12);
  ck_assert_str_eq(s[0].build, "b1");
  ck_assert(s[0].wake_ms == JOURNAL_NONE);
  ck_assert_str_eq(s[1].key, "nap#1");
  ck_assert_int_eq(s[1].wake_ms, 600); /* shifted */
  ck_assert_str_eq(s[2].key, "c#1");
  ck_assert_uint_eq(s[2].attempts, 3);
  ck_assert_str_eq(s[2].result, "\"rc\"");
  ck_assert_str_eq(s[2].error, "{\"name\":\"x\",\"message\":\"y\"}");
  ck_assert_ptr_null(s[2].build);
  journal_steps_free(s, n);

  seen_attempts seen = {""};
  ck_assert_int_eq(journal_attempts_each(j, rowid, on_attempt, &seen), 0);
  ck_assert_str_eq(seen.text, "c#1/1/20/21/boom 1/-;c#1/2/30/31/boom 2/b1;");

  /* an errored instance cancels its waiting steps at ended_ms */
  journal_instance in = {.rowid = rowid,
                         .status = DURO_STATUS_ERRORED,
                         .error = "{}",
                         .started_ms = 1,
                         .ended_ms = 77,
                         .wake_ms = JOURNAL_NONE,
                         .paused_ms = JOURNAL_NONE};
  set_row(j, &in, 0);
  ck_assert_int_eq(journal_steps_load(j, rowid, &s, &n), 0);
  ck_assert_str_eq(duro_step_status_name(s[0].status), "complete");
  ck_assert_str_eq(duro_step_status_name(s[1].status), "cancelled");
  ck_assert_int_eq(s[1].ended_ms, 77);
  ck_assert(s[1].wake_ms == JOURNAL_NONE);
  ck_assert_str_eq(duro_step_status_name(s[2].status), "cancelled");
  journal_steps_free(s, n);

  /* a discard from seq 2 drops nap and c, and c's attempts */
  op = journal_batch_add(&b, JOP_STEPS_DISCARD);
  op->rowid = rowid;
  op->from_seq = 2;
  commit_ok(j, &b);
  journal_batch_reset(&b);
  ck_assert_int_eq(journal_steps_load(j, rowid, &s, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(s[0].key, "a#1");
  journal_steps_free(s, n);
  seen.text[0] = 0;
  ck_assert_int_eq(journal_attempts_each(j, rowid, on_attempt, &seen), 0);
  ck_assert_str_eq(seen.text, "");
  /* -1: all of them */
  op = journal_batch_add(&b, JOP_STEPS_DISCARD);
  op->rowid = rowid;
  op->from_seq = -1;
  commit_ok(j, &b);
  journal_batch_free(&b);
  ck_assert_int_eq(journal_steps_load(j, rowid, &s, &n), 0);
  ck_assert_uint_eq(n, 0);
  journal_steps_free(s, n);
  journal_close(j);
}
END_TEST

START_TEST(events_and_wakes) {
  fresh_db();
  journal *j = open_journal();
  int64_t rowid = insert(j, "wf", "e1", 0);
  journal_instance in = {.rowid = rowid,
                         .status = DURO_STATUS_WAITING,
                         .started_ms = 1,
                         .ended_ms = JOURNAL_NONE,
                         .wake_ms = JOURNAL_NONE,
                         .paused_ms = JOURNAL_NONE,
                         .wait_type = "paid"};
  set_row(j, &in, 0);

  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_EVENT_INSERT);
  op->rowid = rowid;
  op->event_type = "shipped";
  op->event_payload = "{\"a\":1}";
  op->ts_ms = 40;
  /* not the type it waits for: no wake */
  op = journal_batch_add(&b, JOP_WAKE_IF_WAITING);
  op->rowid = rowid;
  op->event_type = "shipped";
  op->ts_ms = 40;
  op = journal_batch_add(&b, JOP_WAKE_IF_EVENT_PENDING);
  op->rowid = rowid;
  op->ts_ms = 41;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].rc, 0);
  int64_t first = b.ops[0].out_rowid;
  ck_assert_int_gt(first, 0);
  ck_assert_int_eq(b.ops[1].out_rowid, 0);
  ck_assert_int_eq(b.ops[2].out_rowid, 0);
  journal_batch_reset(&b);

  op = journal_batch_add(&b, JOP_EVENT_INSERT);
  op->rowid = rowid;
  op->event_type = "paid";
  op->event_payload = "{}";
  op->ts_ms = 50;
  op = journal_batch_add(&b, JOP_WAKE_IF_WAITING);
  op->rowid = rowid;
  op->event_type = "paid";
  op->ts_ms = 50;
  commit_ok(j, &b);
  int64_t second = b.ops[0].out_rowid;
  ck_assert_int_gt(second, first);
  ck_assert_int_eq(b.ops[1].out_rowid, 1);
  journal_batch_reset(&b);

  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get_rowid(j, rowid, &got), 0);
  ck_assert_int_eq(got.wake_ms, 50);
  journal_instance_clear(&got);

  journal_event *ev = NULL;
  size_t n = 0;
  ck_assert_int_eq(journal_events_pending(j, rowid, &ev, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(ev[0].seq, first);
  ck_assert_str_eq(ev[0].type, "shipped");
  ck_assert_str_eq(ev[0].payload, "{\"a\":1}");
  ck_assert_int_eq(ev[0].ts_ms, 40);
  ck_assert_str_eq(ev[1].type, "paid");
  journal_events_free(ev, n);

  /* wake-if-event-pending sees the unconsumed "paid" */
  op = journal_batch_add(&b, JOP_WAKE_IF_EVENT_PENDING);
  op->rowid = rowid;
  op->ts_ms = 60;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  journal_batch_reset(&b);

  op = journal_batch_add(&b, JOP_EVENT_CONSUME);
  op->event_seq = second;
  op->step_key = "pay#1";
  op = journal_batch_add(&b, JOP_WAKE_IF_EVENT_PENDING);
  op->rowid = rowid;
  op->ts_ms = 70;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[1].out_rowid, 0); /* consumed: nothing pending */
  journal_batch_reset(&b);
  ck_assert_int_eq(journal_events_pending(j, rowid, &ev, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(ev[0].seq, first);
  journal_events_free(ev, n);
  /* every event, each with the step that consumed it (NULL: none) */
  ck_assert_int_eq(journal_events_all(j, rowid, &ev, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(ev[0].seq, first);
  ck_assert_ptr_null(ev[0].consumed_by);
  ck_assert_int_eq(ev[1].seq, second);
  ck_assert_str_eq(ev[1].type, "paid");
  ck_assert_int_eq(ev[1].ts_ms, 50);
  ck_assert_str_eq(ev[1].consumed_by, "pay#1");
  journal_events_free(ev, n);

  /* once it has ended, an event is refused, in the same group as others */
  in.status = DURO_STATUS_COMPLETE;
  in.ended_ms = 80;
  in.wait_type = NULL;
  set_row(j, &in, 0);
  int64_t other = insert(j, "wf", "e2", 0);
  op = journal_batch_add(&b, JOP_EVENT_INSERT);
  op->rowid = rowid;
  op->event_type = "paid";
  op->event_payload = "{}";
  op = journal_batch_add(&b, JOP_EVENT_INSERT);
  op->rowid = other;
  op->event_type = "paid";
  op->event_payload = "{}";
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].rc, DURO_E_INSTANCE_ENDED);
  ck_assert_int_eq(b.ops[1].rc, 0);
  journal_batch_free(&b);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM events"), 3);
}
END_TEST

/* An event wakes a wait for its type, one of a list (duro_wait_any), and
 * no other type, however close its name. */
START_TEST(wakes_match_whole_types) {
  fresh_db();
  journal *j = open_journal();
  wake_cases_type_lists(j);
  journal_close(j);
}
END_TEST

/* A failing op fails the whole group with the server's words; nothing of
 * it stays, and the next group commits. */
START_TEST(failed_op_fails_its_group) {
  fresh_db();
  journal *j = open_journal();
  int64_t rowid = insert(j, "wf", "f1", 0);
  journal_step bad = step_row("k#1", "k", 1, "complete", JOURNAL_NONE);
  bad.key = NULL; /* NOT NULL */
  journal_instance ok = {.workflow = "wf",
                         .id = "f2",
                         .status = DURO_STATUS_QUEUED,
                         .params = "null"};
  journal_batch b = {0};
  journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &ok;
  journal_op *op = journal_batch_add(&b, JOP_STEP_PUT);
  op->rowid = rowid;
  op->step = &bad;
  ck_assert_int_eq(journal_commit(j, &b), DURO_E_STORAGE);
  ck_assert_msg(strstr(journal_errmsg(j), "null value") != NULL, "%s",
                journal_errmsg(j));
  char msg[256];
  ck_assert_int_eq(journal_failing(j, msg, sizeof msg, NULL), 1);
  journal_batch_free(&b);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"), 1);
  insert(j, "wf", "f3", 0);
  ck_assert_int_eq(journal_failing(j, NULL, 0, NULL), 0);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"), 2);
}
END_TEST

/* Ends every other session on the case's database (as a server restart
 * would) and waits until they are gone. */
static void drop_sessions(void) {
  PGconn *c = PQconnectdb(conninfo);
  ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
  PQclear(PQexec(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname=current_database() AND "
                    "pid<>pg_backend_pid()"));
  for (int i = 0; i < 500; i++) {
    PGresult *r = PQexec(c, "SELECT COUNT(*) FROM pg_stat_activity WHERE "
                            "datname=current_database() AND "
                            "pid<>pg_backend_pid()");
    int left = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (left == 0)
      break;
    usleep(10000);
  }
  PQfinish(c);
}

/* Connections the server dropped are made again: the next group and the
 * next read succeed. */
START_TEST(dropped_connections_are_made_again) {
  fresh_db();
  journal *j = open_journal();
  insert(j, "wf", "d1", 0);
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get(j, "wf", "d1", &got), 0);
  journal_instance_clear(&got);
  drop_sessions();
  insert(j, "wf", "d2", 0);
  ck_assert_int_eq(journal_failing(j, NULL, 0, NULL), 0);
  drop_sessions();
  ck_assert_int_eq(journal_instance_get(j, "wf", "d2", &got), 0);
  ck_assert_str_eq(got.id, "d2");
  journal_instance_clear(&got);
  journal_close(j);
}
END_TEST

/* A group's writes whose results only need checking are sent without
 * waiting for each one (libpq's pipeline mode): a group of many commits
 * them all; a failing one fails its whole group and leaves nothing,
 * whether the first to read its result is an op that needs its own at
 * once (an instance insert) or the COMMIT; the next group commits. */
START_TEST(queued_writes_are_each_checked) {
  fresh_db();
  journal *j = open_journal();
  int64_t rowid = insert(j, "wf", "q1", 0);
  enum { N = 600 }; /* more than are ever left unread */
  static char keys[N][16];
  static journal_step rows[N];
  journal_batch b = {0};
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "k#%d", i);
    rows[i] = step_row(keys[i], "k", i, "complete", JOURNAL_NONE);
    journal_op *op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rowid = rowid;
    op->step = &rows[i];
  }
  commit_ok(j, &b);
  journal_batch_free(&b);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM steps"), N);

  journal_step bad = step_row("bad", "k", N, "complete", JOURNAL_NONE);
  bad.name = NULL; /* NOT NULL */
  journal_step good = step_row("good", "k", N + 1, "complete", JOURNAL_NONE);
  journal_instance in = {.workflow = "wf",
                         .id = "q2",
                         .status = DURO_STATUS_QUEUED,
                         .params = "null"};
  for (int at_commit = 0; at_commit < 2; at_commit++) {
    journal_op *op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rowid = rowid;
    op->step = &good;
    op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rowid = rowid;
    op->step = &bad;
    op = journal_batch_add(&b, JOP_INSTANCE_SET);
    op->inst =
        &(journal_instance){.rowid = rowid, .status = DURO_STATUS_RUNNING};
    if (!at_commit)
      journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &in;
    ck_assert_int_eq(journal_commit(j, &b), DURO_E_STORAGE);
    ck_assert_msg(strstr(journal_errmsg(j), "null value") != NULL, "%s",
                  journal_errmsg(j));
    journal_batch_free(&b);
    ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM steps"), N);
    ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"), 1);
    ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances WHERE "
                                "status='queued'"),
                     1);
    insert(j, at_commit ? "wf2" : "wf1", "q3", 0);
    ck_assert_int_eq(journal_failing(j, NULL, 0, NULL), 0);
    ck_assert_int_eq(count_rows("DELETE FROM instances WHERE id='q3' "
                                "RETURNING 1"),
                     1);
  }
  journal_close(j);
}
END_TEST

/* The writer connection the server drops while a group's writes are
 * queued on it: the group fails, and the next one connects again. */
START_TEST(connection_lost_with_writes_queued) {
  fresh_db();
  void *db = NULL;
  char err[512];
  ck_assert_msg(store_pg.open(conninfo, 1, &db, err, sizeof err) == 0, "%s",
                err);
  journal_step s1 = step_row("s#1", "s", 1, "complete", JOURNAL_NONE);
  journal_op op = {.kind = JOP_STEP_PUT, .rowid = 1, .step = &s1};
  ck_assert_int_eq(store_pg.begin(db), 0);
  ck_assert_int_eq(store_pg.apply(db, &op), 0); /* queued */
  drop_sessions();
  int rc = store_pg.apply(db, &op);
  if (rc == 0)
    rc = store_pg.commit(db);
  ck_assert_int_eq(rc, DURO_E_STORAGE);
  store_pg.rollback(db);
  ck_assert_int_eq(store_pg.begin(db), 0);
  ck_assert_int_eq(store_pg.apply(db, &op), 0);
  ck_assert_int_eq(store_pg.commit(db), 0);
  store_pg.close(db);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM steps"), 1);
}
END_TEST

static void on_lost(void *ctx) {
  __atomic_add_fetch((int *)ctx, 1, __ATOMIC_SEQ_CST);
}

/* A joined host's group begins with the fence on its lease row, sent
 * with the group's writes: once the row is dead (another host took over),
 * a group fails whole, whether its first result is read at COMMIT or by
 * an op that needs its own (an instance insert), and the loss is
 * reported once. */
START_TEST(dead_host_fails_its_groups) {
  fresh_db();
  journal *j = open_journal();
  int lost = 0;
  store_host_hooks hooks = {.lost = on_lost, .ctx = &lost};
  char err[256];
  ck_assert_msg(journal_join(j, 600000, &hooks, err, sizeof err) == 0, "%s",
                err);
  int64_t rowid = insert(j, "wf", "h1", 0);
  ck_assert_int_eq(count_rows("UPDATE hosts SET dead=true RETURNING 1"), 1);
  journal_step s1 = step_row("s#1", "s", 1, "complete", JOURNAL_NONE);
  journal_instance in = {.workflow = "wf",
                         .id = "h2",
                         .status = DURO_STATUS_QUEUED,
                         .params = "null"};
  for (int insert_too = 0; insert_too < 2; insert_too++) {
    journal_batch b = {0};
    journal_op *op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rowid = rowid;
    op->step = &s1;
    if (insert_too)
      journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &in;
    ck_assert_int_eq(journal_commit(j, &b), DURO_E_STORAGE);
    ck_assert_msg(strstr(journal_errmsg(j), "lost its lease") != NULL, "%s",
                  journal_errmsg(j));
    journal_batch_free(&b);
  }
  ck_assert_int_eq(__atomic_load_n(&lost, __ATOMIC_SEQ_CST), 1);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM steps"), 0);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"), 1);
  journal_close(j);
}
END_TEST

/* The hosts of a shared store as GET /hosts lists them: each with the
 * instances it owns that have not ended, alive while its lease holds; a
 * host that closed is dead, and one dead for over a day is not listed. */
typedef struct hosts_seen {
  journal_host_row rows[8];
  char names[8][64], counts[8][64];
  size_t n;
} hosts_seen;

static void note_host(void *ctx, const journal_host_row *row) {
  hosts_seen *s = ctx;
  if (s->n == 8)
    return;
  snprintf(s->names[s->n], sizeof s->names[s->n], "%s", row->name);
  snprintf(s->counts[s->n], sizeof s->counts[s->n], "%s",
           row->counts ? row->counts : "(none)");
  s->rows[s->n] = *row;
  s->rows[s->n].name = s->names[s->n];
  s->rows[s->n].counts = s->counts[s->n];
  s->n++;
}

/* A host's counts, as its engine would give them at each renewal. */
static char *seven_steps(void *ctx) {
  (void)ctx;
  return strdup("{\"steps_completed\":7}");
}

START_TEST(hosts_are_listed) {
  fresh_db();
  journal *a = open_journal(), *b = open_journal();
  store_host_hooks hooks = {0}, counting = {.counts = seven_steps};
  char err[256];
  ck_assert_msg(journal_join(a, 600000, &counting, err, sizeof err) == 0, "%s",
                err);
  ck_assert_msg(journal_join(b, 600000, &hooks, err, sizeof err) == 0, "%s",
                err);
  insert(a, "wf", "a1", 0);
  insert(a, "wf", "a2", 0);
  int64_t b1 = insert(b, "wf", "b1", 0);
  insert(b, "wf", "b2", 0);
  /* b2 ends: it counts no more */
  char sql[128];
  snprintf(sql, sizeof sql,
           "UPDATE instances SET status='complete', ended_ms=1 WHERE "
           "rowid<>%lld AND id='b2' RETURNING 1",
           (long long)b1);
  ck_assert_int_eq(count_rows(sql), 1);
  /* a host dead for two days: not listed */
  ck_assert_int_eq(count_rows("INSERT INTO hosts(name,pid,lease_ms,dead,"
                              "heartbeat) VALUES('gone',1,1000,true,now()-"
                              "interval '2 days') RETURNING 1"),
                   1);
  /* a's counts are on its row from its keeper's first renewal on; b has
   * none to give */
  hosts_seen s = {0};
  for (int tries = 0; tries < 500; tries++) {
    s = (hosts_seen){0};
    ck_assert_int_eq(journal_hosts_each(a, note_host, &s), 0);
    if (strcmp(s.counts[0], "(none)"))
      break;
    usleep(20000);
  }
  ck_assert_str_eq(s.counts[0], "{\"steps_completed\":7}");
  ck_assert_str_eq(s.counts[1], "(none)");
  ck_assert_int_eq(s.n, 2);
  ck_assert_int_eq(s.rows[0].id, journal_host(a));
  ck_assert_int_eq(s.rows[1].id, journal_host(b));
  ck_assert_int_eq(s.rows[0].live, 2);
  ck_assert_int_eq(s.rows[1].live, 1);
  for (size_t i = 0; i < 2; i++) {
    ck_assert(!s.rows[i].dead);
    ck_assert_int_eq(s.rows[i].lease_ms, 600000);
    ck_assert_int_gt(s.rows[i].pid, 0);
    ck_assert_int_ge(s.rows[i].heartbeat_age_ms, 0);
    ck_assert_int_lt(s.rows[i].heartbeat_age_ms, 600000);
    ck_assert_int_ge(s.rows[i].heartbeat_ms, s.rows[i].started_ms);
  }
  /* b leaves cleanly: dead, still listed (within the day) */
  journal_close(b);
  s = (hosts_seen){0};
  ck_assert_int_eq(journal_hosts_each(a, note_host, &s), 0);
  ck_assert_int_eq(s.n, 2);
  ck_assert(!s.rows[0].dead);
  ck_assert(s.rows[1].dead);
  journal_close(a);
  /* a store one host has to itself has no hosts' rows */
  journal *alone = open_journal();
  ck_assert_int_eq(journal_hosts_each(alone, note_host, &s),
                   DURO_E_INVALID_ARGUMENT);
  journal_close(alone);
}
END_TEST

/* A host frozen inside a group's transaction (its fence taken, its
 * COMMIT not yet sent: SIGSTOP, a paused VM) does not keep its hosts row
 * locked for ever: once it is past its lease, another host's takeover
 * pass ends its sessions, marks it dead and takes its instances (it
 * waited for the frozen group's lock for as long as the freeze lasted;
 * here the taker's statement_timeout of 8 s says so). */
static void no_takeover_fn(void *ctx, int64_t rowid, int64_t wake_ms) {
  (void)ctx;
  (void)rowid;
  (void)wake_ms;
}

START_TEST(frozen_group_lets_its_host_be_taken_over) {
  fresh_db();
  void *a = NULL, *b = NULL;
  char err[512], slow[800];
  ck_assert_msg(store_pg.open(conninfo, 1, &a, err, sizeof err) == 0, "%s",
                err);
  snprintf(slow, sizeof slow, "%s options='-c statement_timeout=8000'",
           conninfo);
  ck_assert_msg(store_pg.open(slow, 1, &b, err, sizeof err) == 0, "%s", err);
  int lost = 0;
  store_host_hooks hooks = {.lost = on_lost, .ctx = &lost};
  int64_t host_a = 0, host_b = 0;
  ck_assert_msg(store_pg.join(a, 1000, &hooks, &host_a, err, sizeof err) == 0,
                "%s", err);
  store_pg.quiet(a); /* its keeper stops: no renewal from now on */
  journal_instance in = {.workflow = "wf",
                         .id = "f1",
                         .status = DURO_STATUS_QUEUED,
                         .params = "null"};
  journal_op op = {.kind = JOP_INSTANCE_INSERT, .inst = &in};
  ck_assert_int_eq(store_pg.begin(a), 0);
  ck_assert_int_eq(store_pg.apply(a, &op), 0); /* its result read: sent */
  /* a is frozen here, inside its group: no COMMIT */
  ck_assert_msg(store_pg.join(b, 600000, &hooks, &host_b, err, sizeof err) == 0,
                "%s", err);
  usleep(1500 * 1000); /* past a's lease */
  size_t moved = 0;
  int rc = store_pg.takeover(b, 100, no_takeover_fn, NULL, &moved);
  ck_assert_msg(rc == 0, "b's takeover failed: %d", rc);
  char sql[96];
  /* marked dead (and its row gone: it owns nothing) */
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM hosts WHERE id=%lld AND NOT dead",
           (long long)host_a);
  ck_assert_int_eq(count_rows(sql), 0);
  ck_assert_int_ne(store_pg.commit(a), 0); /* its session was ended */
  store_pg.close(b);
  store_pg.close(a);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"), 0);
}
END_TEST

/* A bulk job (journal_bulk) on a shared store: its row names the host
 * that runs it; another host's claim takes it only once that host is
 * dead (or gone), and then the dead one's progress is fenced out while
 * the taker's is written. */
static int64_t bulk_op(journal *j, journal_op_kind kind, journal_bulk *b,
                       int64_t id, int64_t host) {
  journal_batch batch = {0};
  journal_op *op = journal_batch_add(&batch, kind);
  op->bulk = b;
  op->rowid = id;
  op->from_seq = host;
  int rc = journal_commit(j, &batch);
  int64_t out = rc ? -1 : op->out_rowid;
  journal_batch_free(&batch);
  return out;
}

START_TEST(bulk_job_taken_over_from_a_dead_host) {
  fresh_db();
  journal *a = open_journal(), *b = open_journal();
  int lost = 0;
  store_host_hooks hooks = {.lost = on_lost, .ctx = &lost};
  char err[256];
  ck_assert_msg(journal_join(a, 600000, &hooks, err, sizeof err) == 0, "%s",
                err);
  ck_assert_msg(journal_join(b, 600000, &hooks, err, sizeof err) == 0, "%s",
                err);
  journal_bulk job = {.workflow = "wf",
                      .action = "terminate",
                      .filter = {.status = DURO_STATUS_WAITING, .prefix = "p-"},
                      .bound = 10,
                      .cursor = 11,
                      .matched = 3,
                      .created_ms = 1000,
                      .host = journal_host(a),
                      .state = "running",
                      .ended_ms = JOURNAL_NONE};
  job.id = bulk_op(a, JOP_BULK_INSERT, &job, 0, 0);
  ck_assert_int_gt(job.id, 0);
  /* a lives: b's claim takes nothing, a's progress is written */
  ck_assert_int_eq(bulk_op(b, JOP_BULK_CLAIM, NULL, job.id, journal_host(b)),
                   0);
  job.cursor = 7;
  job.done = 1;
  ck_assert_int_eq(bulk_op(a, JOP_BULK_PROGRESS, &job, 0, 0), 1);
  /* a is found dead: b takes it, a's writes fail, b's go */
  char sql[128];
  snprintf(sql, sizeof sql,
           "UPDATE hosts SET dead=true WHERE id=%lld "
           "RETURNING 1",
           (long long)journal_host(a));
  ck_assert_int_eq(count_rows(sql), 1);
  ck_assert_int_eq(bulk_op(b, JOP_BULK_CLAIM, NULL, job.id, journal_host(b)),
                   1);
  job.cursor = 5;
  ck_assert_int_eq(bulk_op(a, JOP_BULK_PROGRESS, &job, 0, 0), -1);
  journal_bulk got;
  ck_assert_int_eq(journal_bulk_get(b, job.id, &got), 0);
  ck_assert_int_eq(got.host, journal_host(b));
  ck_assert_int_eq(got.cursor, 7);
  ck_assert_int_eq(got.done, 1);
  ck_assert_str_eq(got.filter.prefix, "p-");
  ck_assert_int_eq(got.filter.status, DURO_STATUS_WAITING);
  ck_assert_int_eq(got.ended_ms, JOURNAL_NONE);
  journal_bulk_clear(&got);
  /* b's progress and end; a cancel after it changes nothing */
  job.host = journal_host(b);
  job.cursor = 1;
  job.done = 3;
  job.state = "done";
  job.ended_ms = 2000;
  ck_assert_int_eq(bulk_op(b, JOP_BULK_PROGRESS, &job, 0, 0), 1);
  journal_batch c = {0};
  journal_op *op = journal_batch_add(&c, JOP_BULK_CANCEL);
  op->rowid = job.id;
  op->ts_ms = 3000;
  commit_ok(b, &c);
  ck_assert_int_eq(op->out_rowid, 0);
  journal_batch_free(&c);
  ck_assert_int_eq(journal_bulk_get(b, job.id, &got), 0);
  ck_assert_str_eq(got.state, "done");
  ck_assert_int_eq(got.ended_ms, 2000);
  journal_bulk_clear(&got);
  /* swept once ended before the bound, not at it */
  for (int64_t before = 2000; before <= 2001; before++) {
    journal_batch w = {0};
    op = journal_batch_add(&w, JOP_BULK_SWEEP);
    op->ts_ms = before;
    op->from_seq = 100;
    commit_ok(b, &w);
    ck_assert_int_eq(op->out_rowid, before == 2001);
    journal_batch_free(&w);
  }
  ck_assert_int_eq(journal_bulk_get(b, job.id, &got), DURO_E_NOT_FOUND);
  journal_close(a);
  journal_close(b);
}
END_TEST

/* A copy's rows, as table_export hands them. */
static int two_counts(void *ctx, store_row_fn put, void *put_ctx) {
  (void)ctx;
  const char *a[] = {"qa", "1", "2"}, *b[] = {"qb", "3", "0"};
  int rc = put(put_ctx, a);
  return rc ? rc : put(put_ctx, b);
}

static int two_messages(void *ctx, store_row_fn put, void *put_ctx) {
  (void)ctx;
  const char *a[] = {"7", "q", "{}", "0", "0", NULL, "0", NULL},
             *b[] = {"9", "q", "{}", "0", "0", NULL, "0", NULL};
  int rc = put(put_ctx, a);
  return rc ? rc : put(put_ctx, b);
}

/* `duro migrate`'s path (table_import and key_continue within a group's
 * transaction: COPY, which cannot run in pipeline mode) works on a
 * connection whose groups ran in it, even right behind queued writes of
 * the same transaction. */
START_TEST(copy_after_queued_writes) {
  fresh_db();
  void *db = NULL;
  char err[512];
  ck_assert_msg(store_pg.open(conninfo, 1, &db, err, sizeof err) == 0, "%s",
                err);
  journal_step s1 = step_row("s#1", "s", 1, "complete", JOURNAL_NONE);
  journal_op op = {.kind = JOP_STEP_PUT, .rowid = 1, .step = &s1};
  ck_assert_int_eq(store_pg.begin(db), 0);
  ck_assert_int_eq(store_pg.apply(db, &op), 0);
  ck_assert_int_eq(store_pg.commit(db), 0);

  const store_table counts = {"queue_counts", "queue,dropped,dead_lettered", 3,
                              NULL};
  const store_table messages = {
      "messages", "seq,queue,body,attempts,visible_ms,lease,sent_ms,last_error",
      8, "seq"};
  journal_step s2 = step_row("s#2", "s", 2, "complete", JOURNAL_NONE);
  op.step = &s2;
  int64_t n = 0;
  ck_assert_int_eq(store_pg.begin(db), 0);
  ck_assert_int_eq(store_pg.apply(db, &op), 0); /* queued */
  ck_assert_int_eq(store_pg.table_import(db, &counts, two_counts, NULL, &n), 0);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(store_pg.apply(db, &op), 0); /* queued again */
  ck_assert_int_eq(store_pg.table_import(db, &messages, two_messages, NULL, &n),
                   0);
  ck_assert_int_eq(store_pg.key_continue(db, &messages, 20), 0);
  ck_assert_int_eq(store_pg.commit(db), 0);
  store_pg.close(db);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM steps"), 2);
  ck_assert_int_eq(count_rows("SELECT SUM(dropped) FROM queue_counts"), 4);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages"), 2);
  ck_assert_int_eq(
      count_rows("SELECT nextval(pg_get_serial_sequence('messages','seq'))"),
      21);
}
END_TEST

/* Read-only: reads work, every write fails. */
START_TEST(read_only_reads_and_refuses_writes) {
  fresh_db();
  journal *j = open_journal();
  insert(j, "wf", "r1", 0);
  journal_close(j);
  j = open_mode(-1);
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get(j, "wf", "r1", &got), 0);
  journal_instance_clear(&got);
  journal_instance in = {.workflow = "wf",
                         .id = "r2",
                         .status = DURO_STATUS_QUEUED,
                         .params = "null"};
  journal_batch b = {0};
  journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &in;
  ck_assert_int_eq(journal_commit(j, &b), DURO_E_STORAGE);
  ck_assert_msg(strstr(journal_errmsg(j), "read-only") != NULL, "%s",
                journal_errmsg(j));
  journal_batch_free(&b);
  journal_close(j);
  /* a database with no journal is not opened read-only */
  fresh_db();
  char err[512];
  ck_assert_int_eq(
      journal_open_backend(&store_pg, conninfo, -1, &j, err, sizeof err),
      DURO_E_STORAGE);
  ck_assert_msg(strstr(err, "schema") != NULL, "%s", err);
}
END_TEST

/* ---- list, count, wake-poll and sweep reads ----------------------------- */

static void on_row(void *ctx, const journal_list_row *row) {
  char *t = ctx;
  size_t n = strlen(t);
  snprintf(t + n, 256 - n, "%s:%s:%lld;", row->id,
           duro_status_name(row->status), (long long)row->created_ms);
}

static void on_pinned(void *ctx, const char *wf, const char *build, int64_t n) {
  char *t = ctx;
  size_t len = strlen(t);
  snprintf(t + len, 256 - len, "%s/%s=%lld;", wf, build, (long long)n);
}

static void on_count(void *ctx, const char *wf, duro_status status, int64_t n) {
  on_pinned(ctx, wf, duro_status_name(status), n);
}

static void on_recover(void *ctx, int64_t rowid, duro_status status,
                       int control) {
  char *t = ctx;
  size_t len = strlen(t);
  snprintf(t + len, 256 - len, "%lld:%s:%d;", (long long)rowid,
           duro_status_name(status), control);
}

START_TEST(list_count_wake_and_sweep) {
  fresh_db();
  journal *j = open_journal();
  int64_t r1 = insert(j, "wf", "i1", 100);
  int64_t r2 = insert(j, "wf", "i2", 200);
  int64_t r3 = insert(j, "wf", "i3", 300);
  int64_t r4 = insert(j, "other", "o1", 50);
  journal_instance w2 = {.rowid = r2,
                         .status = DURO_STATUS_WAITING,
                         .ended_ms = JOURNAL_NONE,
                         .started_ms = 1,
                         .wake_ms = 1000,
                         .paused_ms = JOURNAL_NONE};
  set_row(j, &w2, 0);
  journal_instance w3 = w2;
  w3.rowid = r3;
  w3.wake_ms = 500;
  set_row(j, &w3, 0);
  journal_instance done = {.rowid = r4,
                           .status = DURO_STATUS_COMPLETE,
                           .started_ms = 1,
                           .ended_ms = 2000,
                           .wake_ms = JOURNAL_NONE,
                           .paused_ms = JOURNAL_NONE};
  set_row(j, &done, 0);
  journal_instance ctl = {.control = JOURNAL_CONTROL_TERMINATE};
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_INSTANCE_CONTROL);
  op->rowid = r2;
  op->inst = &ctl;
  op = journal_batch_add(&b, JOP_INSTANCE_PIN);
  op->rowid = r3;
  op->step_key = "h1";
  op = journal_batch_add(&b, JOP_INSTANCE_PIN);
  op->rowid = r4; /* ended: not counted as pinned */
  op->step_key = "h1";
  commit_ok(j, &b);
  journal_batch_reset(&b);

  int64_t rowids[8], wakes[8];
  size_t n = 0;
  ck_assert_int_eq(journal_due(j, 0, 1000, 8, rowids, wakes, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(rowids[0], r3);
  ck_assert_int_eq(wakes[0], 500);
  ck_assert_int_eq(rowids[1], r2);
  ck_assert_int_eq(journal_due(j, 500, 999, 8, rowids, wakes, &n), 0);
  ck_assert_uint_eq(n, 0);
  ck_assert_int_eq(journal_due(j, 0, 1000, 1, rowids, wakes, &n), 0);
  ck_assert_uint_eq(n, 1);
  int64_t wake = 0;
  ck_assert_int_eq(journal_next_wake(j, 0, &wake), 0);
  ck_assert_int_eq(wake, 500);
  ck_assert_int_eq(journal_next_wake(j, 500, &wake), 0);
  ck_assert_int_eq(wake, 1000);
  ck_assert_int_eq(journal_next_wake(j, 1000, &wake), 0);
  ck_assert(wake == JOURNAL_NONE);

  char t[256] = "";
  ck_assert_int_eq(journal_recover_each(j, on_recover, t), 0);
  char want[128];
  snprintf(want, sizeof want, "%lld:queued:0;%lld:waiting:2;", (long long)r1,
           (long long)r2);
  ck_assert_str_eq(t, want);

  ck_assert_int_eq(journal_queued_from(j, 0, 8, rowids, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(rowids[0], r1);
  ck_assert_int_eq(journal_queued_from(j, r1 + 1, 8, rowids, &n), 0);
  ck_assert_uint_eq(n, 0);
  int64_t created = 0;
  ck_assert_int_eq(journal_oldest_queued(j, NULL, &created), 0);
  ck_assert_int_eq(created, 100);
  ck_assert_int_eq(journal_oldest_queued(j, "other", &created), 0);
  ck_assert(created == JOURNAL_NONE);

  int pinned = 0;
  ck_assert_int_eq(journal_build_pinned(j, "wf", "h1", &pinned), 0);
  ck_assert_int_eq(pinned, 1);
  ck_assert_int_eq(journal_build_pinned(j, "other", "h1", &pinned), 0);
  ck_assert_int_eq(pinned, 0);
  t[0] = 0;
  ck_assert_int_eq(journal_pinned_builds(j, on_pinned, t), 0);
  ck_assert_str_eq(t, "wf/h1=1;");

  t[0] = 0;
  journal_list_filter any = {.status = -1};
  ck_assert_int_eq(journal_list(j, "wf", &any, 0, 2, on_row, t), 0);
  ck_assert_str_eq(t, "i3:waiting:300;i2:waiting:200;");
  t[0] = 0;
  ck_assert_int_eq(journal_list(j, "wf", &any, r2, 10, on_row, t), 0);
  ck_assert_str_eq(t, "i1:queued:100;");
  t[0] = 0;
  journal_list_filter queued = {.status = DURO_STATUS_QUEUED};
  ck_assert_int_eq(journal_list(j, "wf", &queued, 0, 10, on_row, t), 0);
  ck_assert_str_eq(t, "i1:queued:100;");
  /* by id prefix and creation time: [after, before) */
  t[0] = 0;
  journal_list_filter prefixed = {.status = -1, .prefix = "i2"};
  ck_assert_int_eq(journal_list(j, "wf", &prefixed, 0, 10, on_row, t), 0);
  ck_assert_str_eq(t, "i2:waiting:200;");
  t[0] = 0;
  journal_list_filter in_time = {
      .status = -1, .created_after = 200, .created_before = 300};
  ck_assert_int_eq(journal_list(j, "wf", &in_time, 0, 10, on_row, t), 0);
  ck_assert_str_eq(t, "i2:waiting:200;");
  t[0] = 0;
  journal_list_filter ended = {.status = -1, .ended_after = 1};
  ck_assert_int_eq(journal_list(j, "wf", &ended, 0, 10, on_row, t), 0);
  ck_assert_str_eq(t, ""); /* none of them ended */
  t[0] = 0;
  ck_assert_int_eq(journal_count_by_status(j, on_count, t), 0);
  ck_assert_str_eq(t, "other/complete=1;wf/queued=1;wf/waiting=2;");

  /* the sweep: retention 1000 after ended 2000 */
  op = journal_batch_add(&b, JOP_EVENT_INSERT);
  op->rowid = r4; /* refused: ended, nothing to sweep there */
  op->event_type = "x";
  op->event_payload = "{}";
  journal_step st = step_row("a#1", "a", 1, "complete", JOURNAL_NONE);
  op = journal_batch_add(&b, JOP_STEP_PUT);
  op->rowid = r4;
  op->step = &st;
  op = journal_batch_add(&b, JOP_SWEEP);
  op->ts_ms = 2999;
  op->from_seq = 10;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[2].out_rowid, 0);
  journal_batch_reset(&b);
  op = journal_batch_add(&b, JOP_SWEEP);
  op->ts_ms = 3000;
  op->from_seq = 10;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  journal_batch_free(&b);
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get_rowid(j, r4, &got), DURO_E_NOT_FOUND);
  journal_close(j);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM steps"), 0);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances"), 3);
}
END_TEST

/* ---- queues ---------------------------------------------------------------
 */

static int64_t send(journal *j, const char *queue, const char *body,
                    int64_t sent, int64_t visible) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_MESSAGE_INSERT);
  op->queue = queue;
  op->body = body;
  op->ts_ms = sent;
  op->visible_ms = visible;
  commit_ok(j, &b);
  int64_t seq = b.ops[0].out_rowid;
  journal_batch_free(&b);
  return seq;
}

static void on_stats(void *ctx, const char *queue,
                     const journal_queue_stats *st) {
  char *t = ctx;
  size_t n = strlen(t);
  snprintf(t + n, 256 - n, "%s:%lld/%lld/%lld/%lld/%lld;", queue,
           (long long)st->ready, (long long)st->delayed,
           (long long)st->in_flight, (long long)st->oldest_sent_ms,
           (long long)st->oldest_ready_ms);
}

static void on_lease(void *ctx, const char *lease) {
  char *t = ctx;
  size_t n = strlen(t);
  snprintf(t + n, 256 - n, "%s;", lease);
}

static void on_queue_counts(void *ctx, const char *queue, int64_t dropped,
                            int64_t dead) {
  char *t = ctx;
  size_t n = strlen(t);
  snprintf(t + n, 256 - n, "%s:%lld/%lld;", queue, (long long)dropped,
           (long long)dead);
}

START_TEST(queue_messages) {
  fresh_db();
  journal *j = open_journal();
  int64_t m1 = send(j, "q", "1", 10, 10);
  int64_t m2 = send(j, "q", "2", 11, 11);
  int64_t m3 = send(j, "q", "3", 12, 500); /* delayed */
  ck_assert_int_gt(m2, m1);
  ck_assert_int_gt(m3, m2);

  journal_queue_ready_info ri = {0};
  ck_assert_int_eq(journal_queue_ready(j, "q", 100, 10, &ri), 0);
  ck_assert_uint_eq(ri.ready, 2);
  ck_assert_int_eq(ri.oldest_visible_ms, 10);
  ck_assert_int_eq(ri.next_visible_ms, 500);

  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_MESSAGE_LEASE);
  op->queue = "q";
  op->ts_ms = 100;
  op->visible_ms = 200;
  op->lease_token = "tok";
  op->n_leases = 5;
  op->max_attempts = 2;
  commit_ok(j, &b);
  ck_assert_uint_eq(b.ops[0].n_messages, 2);
  ck_assert_int_eq(b.ops[0].out_rowid, 0);
  journal_message *m = b.ops[0].messages;
  ck_assert_int_eq(m[0].seq, m1);
  ck_assert_str_eq(m[0].body, "1");
  ck_assert_uint_eq(m[0].attempts, 1);
  ck_assert_int_eq(m[0].sent_ms, 10);
  ck_assert_str_eq(m[0].queue, "q");
  char lease1[64], lease2[64];
  snprintf(lease1, sizeof lease1, "%s", m[0].lease);
  snprintf(lease2, sizeof lease2, "%s", m[1].lease);
  char want[64];
  snprintf(want, sizeof want, "tok-%lld", (long long)m1);
  ck_assert_str_eq(lease1, want);
  journal_messages_free(b.ops[0].messages, b.ops[0].n_messages);
  journal_batch_reset(&b);

  char t[256] = "";
  ck_assert_int_eq(journal_queue_stats_each(j, NULL, 150, on_stats, t), 0);
  ck_assert_str_eq(t, "q:0/1/2/10/-9223372036854775808;");
  t[0] = 0;
  ck_assert_int_eq(journal_queue_leases(j, "q", 150, "tok", on_lease, t), 0);
  ck_assert_ptr_nonnull(strstr(t, lease1));
  ck_assert_ptr_nonnull(strstr(t, lease2));
  t[0] = 0;
  ck_assert_int_eq(journal_queue_leases(j, "q", 150, "to", on_lease, t), 0);
  ck_assert_str_eq(t, "");

  /* ack the first; an ack after the lease ran out does nothing */
  op = journal_batch_add(&b, JOP_MESSAGE_ACK);
  op->queue = "q";
  op->lease = lease1;
  op->ts_ms = 150;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  journal_batch_reset(&b);
  op = journal_batch_add(&b, JOP_MESSAGE_ACK);
  op->queue = "q";
  op->lease = lease2;
  op->ts_ms = 250;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, 0);
  journal_batch_reset(&b);

  /* retry the second: delayed, with its error */
  op = journal_batch_add(&b, JOP_MESSAGE_RETRY);
  op->queue = "q";
  op->lease = lease2;
  op->ts_ms = 150;
  op->visible_ms = 300;
  op->error = "oops";
  op->max_attempts = 2;
  op->dead_letter_queue = "dlq";
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, JOURNAL_RETRY_DELAYED);
  journal_batch_reset(&b);
  /* the lease is no longer held */
  op = journal_batch_add(&b, JOP_MESSAGE_RETRY);
  op->queue = "q";
  op->lease = lease2;
  op->ts_ms = 150;
  op->max_attempts = 2;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, JOURNAL_RETRY_NOT_HELD);
  journal_batch_reset(&b);

  /* second delivery of m2, then its retry goes to the dead letters */
  op = journal_batch_add(&b, JOP_MESSAGE_LEASE);
  op->queue = "q";
  op->ts_ms = 300;
  op->visible_ms = 400;
  op->lease_token = "t2";
  op->n_leases = 1;
  op->max_attempts = 2;
  commit_ok(j, &b);
  ck_assert_uint_eq(b.ops[0].n_messages, 1);
  ck_assert_int_eq(b.ops[0].messages[0].seq, m2);
  ck_assert_uint_eq(b.ops[0].messages[0].attempts, 2);
  ck_assert_str_eq(b.ops[0].messages[0].last_error, "oops");
  snprintf(lease2, sizeof lease2, "%s", b.ops[0].messages[0].lease);
  journal_messages_free(b.ops[0].messages, b.ops[0].n_messages);
  journal_batch_reset(&b);
  op = journal_batch_add(&b, JOP_MESSAGE_RETRY);
  op->queue = "q";
  op->lease = lease2;
  op->ts_ms = 350;
  op->visible_ms = 1000;
  op->error = "again";
  op->max_attempts = 2;
  op->dead_letter_queue = "dlq";
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, JOURNAL_RETRY_DEAD_LETTERED);
  journal_batch_reset(&b);

  /* m3, leased twice and never acked, is dropped at the third pull */
  for (int i = 0; i < 3; i++) {
    op = journal_batch_add(&b, JOP_MESSAGE_LEASE);
    op->queue = "q";
    op->ts_ms = 600 + i * 100;
    op->visible_ms = 650 + i * 100;
    op->lease_token = "t3";
    op->n_leases = 1;
    op->max_attempts = 2;
    commit_ok(j, &b);
    ck_assert_uint_eq(b.ops[0].n_messages, i < 2 ? 1 : 0);
    ck_assert_int_eq(b.ops[0].out_rowid, i < 2 ? 0 : 1);
    journal_messages_free(b.ops[0].messages, b.ops[0].n_messages);
    journal_batch_reset(&b);
  }
  t[0] = 0;
  ck_assert_int_eq(journal_queue_counts_each(j, on_queue_counts, t), 0);
  ck_assert_str_eq(t, "q:1/1;");
  t[0] = 0;
  ck_assert_int_eq(journal_queue_stats_each(j, "dlq", 1000, on_stats, t), 0);
  ck_assert_str_eq(t, "dlq:1/0/0/11/350;");

  /* expiry by sent time; ids are never reused */
  op = journal_batch_add(&b, JOP_MESSAGES_EXPIRE);
  op->queue = "dlq";
  op->ts_ms = 12;
  op->from_seq = 10;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  journal_batch_free(&b);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM messages"), 0);
  ck_assert_int_gt(send(j, "q", "4", 0, 0), m3);
  journal_close(j);
}
END_TEST

/* ---- cron -----------------------------------------------------------------
 */

static void on_tick(void *ctx, const journal_cron_tick *tk) {
  char *t = ctx;
  size_t n = strlen(t);
  snprintf(t + n, 256 - n, "%lld:%s:%lld:%s:%s;", (long long)tk->tick_ms,
           tk->state, (long long)tk->fired_ms,
           tk->instance ? tk->instance : "-", tk->error ? tk->error : "-");
}

static int64_t tick(journal *j, int64_t at, const char *state, int64_t fired,
                    const char *instance) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_CRON_TICK);
  op->queue = "nightly";
  op->visible_ms = at;
  op->body = state;
  op->ts_ms = fired;
  op->lease = instance;
  commit_ok(j, &b);
  int64_t claimed = b.ops[0].out_rowid;
  journal_batch_free(&b);
  return claimed;
}

START_TEST(cron_ticks) {
  fresh_db();
  journal *j = open_journal();
  journal_cron c;
  ck_assert_int_eq(journal_cron_state(j, "nightly", &c), 0);
  ck_assert(c.since_ms == JOURNAL_NONE);
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_CRON_SINCE);
  op->queue = "nightly";
  op->ts_ms = 5;
  op = journal_batch_add(&b, JOP_CRON_SINCE); /* already known */
  op->queue = "nightly";
  op->ts_ms = 9;
  commit_ok(j, &b);
  journal_batch_reset(&b);

  ck_assert_int_eq(tick(j, 100, "fired", 101, "i-1"), 1);
  ck_assert_int_eq(tick(j, 100, "fired", 102, "i-2"), 0); /* claimed */
  ck_assert_int_eq(tick(j, 200, "missed", JOURNAL_NONE, NULL), 1);
  ck_assert_int_eq(tick(j, 300, "skipped", JOURNAL_NONE, NULL), 1);
  op = journal_batch_add(&b, JOP_CRON_TICK_SET);
  op->queue = "nightly";
  op->visible_ms = 100;
  op->body = "failed";
  op->error = "boom";
  op = journal_batch_add(&b, JOP_CRON_TICK_SET); /* settled once */
  op->queue = "nightly";
  op->visible_ms = 100;
  op->body = "complete";
  op = journal_batch_add(&b, JOP_CRON_MISSED_EXTRA);
  op->queue = "nightly";
  op->from_seq = 4;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  ck_assert_int_eq(b.ops[1].out_rowid, 0);
  journal_batch_reset(&b);

  ck_assert_int_eq(journal_cron_state(j, "nightly", &c), 0);
  ck_assert_int_eq(c.since_ms, 5);
  ck_assert_int_eq(c.last_tick_ms, 300);
  ck_assert_int_eq(c.complete, 0);
  ck_assert_int_eq(c.failed, 1);
  ck_assert_int_eq(c.missed, 5);
  ck_assert_int_eq(c.skipped, 1);

  char t[256] = "";
  ck_assert_int_eq(journal_cron_ticks(j, "nightly", NULL, 2, on_tick, t), 0);
  ck_assert_str_eq(t, "300:skipped:-9223372036854775808:-:-;"
                      "200:missed:-9223372036854775808:-:-;");
  t[0] = 0;
  ck_assert_int_eq(journal_cron_ticks(j, "nightly", "failed", 9, on_tick, t),
                   0);
  ck_assert_str_eq(t, "100:failed:101:i-1:boom;");

  /* the sweep keeps the newest tick and the counts */
  op = journal_batch_add(&b, JOP_CRON_SWEEP);
  op->ts_ms = 1000;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].out_rowid, 2);
  journal_batch_free(&b);
  ck_assert_int_eq(journal_cron_state(j, "nightly", &c), 0);
  ck_assert_int_eq(c.last_tick_ms, 300);
  ck_assert_int_eq(c.failed, 1);
  journal_close(j);
}
END_TEST

/* ---- a real engine on it ------------------------------------------------- */

static int cb_named(duro_attempt *a, void *arg) {
  char buf[64];
  snprintf(buf, sizeof buf, "\"%s\"", (const char *)arg);
  return duro_attempt_result(a, buf);
}

/* a, a sleep, b, c: the output joins what they returned. */
static duro_rc wf_three(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *ra, *rb, *rc;
  DURO_TRY(duro_do(step, "a", NULL, cb_named, "a", &ra));
  DURO_TRY(duro_sleep(step, "nap", "1 minute"));
  DURO_TRY(duro_do(step, "b", NULL, cb_named, "b", &rb));
  DURO_TRY(duro_do(step, "c", NULL, cb_named, "c", &rc));
  char out[128];
  snprintf(out, sizeof out, "[%s,%s,%s]", ra, rb, rc);
  return duro_set_output(step, out);
}

START_TEST(engine_runs_three_steps) {
  fresh_db();
  harness h;
  harness_open_backend(&h, &store_pg, conninfo);
  harness_register(&h, "three", wf_three);
  harness_start(&h);
  const char *ids[] = {"t1", "t2", "t3"};
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(duro_instance_create(h.e, "three", ids[i], NULL, -1, NULL),
                     0);
  ck_assert_int_eq(duro_instance_create(h.e, "three", "t1", NULL, -1, NULL),
                   DURO_E_ALREADY_EXISTS);
  ck_assert_uint_eq(harness_run(&h), 3);
  for (int i = 0; i < 3; i++)
    ck_assert_str_eq(harness_status(&h, "three", ids[i]), "waiting");
  /* a restart while they sleep: the journal holds their wakes */
  harness_reopen(&h);
  ck_assert_uint_eq(harness_advance(&h, 60 * 1000), 3);
  for (int i = 0; i < 3; i++) {
    ck_assert_str_eq(harness_status(&h, "three", ids[i]), "complete");
    json_t *d = harness_describe(&h, "three", ids[i]);
    ck_assert_str_eq(json_string_value(json_object_get(d, "status")),
                     "complete");
    json_t *out = json_object_get(d, "output");
    char *text = json_dumps(out, JSON_COMPACT);
    ck_assert_str_eq(text, "[\"a\",\"b\",\"c\"]");
    free(text);
    ck_assert_ptr_nonnull(harness_step(d, "c#1"));
    json_decref(d);
  }
  harness_close(&h);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM steps"), 12);
  ck_assert_int_eq(count_rows("SELECT COUNT(*) FROM instances WHERE "
                              "status='complete'"),
                   3);
}
END_TEST

/* An instance's rows whole (journal_rows.c): read out of PostgreSQL as
 * an export reads them, written into a SQLite journal as the test kit's
 * import writes them, and back into PostgreSQL, every column and which
 * step took each event the same. */
static void rows_expect_same(const journal_rows *a, const journal_rows *b) {
  ck_assert_str_eq(a->inst.id, b->inst.id);
  ck_assert_int_eq(a->inst.status, b->inst.status);
  ck_assert_str_eq(a->inst.params, b->inst.params);
  ck_assert_int_eq(a->inst.wake_ms, b->inst.wake_ms);
  ck_assert_int_eq(a->inst.started_ms, b->inst.started_ms);
  ck_assert_str_eq(a->inst.wait_type, b->inst.wait_type);
  ck_assert_str_eq(a->inst.build, b->inst.build);
  ck_assert_int_eq(a->inst.created_ms, b->inst.created_ms);
  ck_assert_uint_eq(a->n_steps, b->n_steps);
  for (size_t i = 0; i < a->n_steps; i++) {
    ck_assert_str_eq(a->steps[i].key, b->steps[i].key);
    ck_assert_int_eq(a->steps[i].seq, b->steps[i].seq);
    ck_assert_int_eq(a->steps[i].type, b->steps[i].type);
    ck_assert_int_eq(a->steps[i].status, b->steps[i].status);
    ck_assert_pstr_eq(a->steps[i].result, b->steps[i].result);
    ck_assert_int_eq(a->steps[i].wake_ms, b->steps[i].wake_ms);
  }
  ck_assert_uint_eq(a->n_attempts, b->n_attempts);
  for (size_t i = 0; i < a->n_attempts; i++) {
    ck_assert_str_eq(a->attempts[i].key, b->attempts[i].key);
    ck_assert_uint_eq(a->attempts[i].number, b->attempts[i].number);
    ck_assert_pstr_eq(a->attempts[i].error, b->attempts[i].error);
  }
  ck_assert_uint_eq(a->n_events, b->n_events);
  for (size_t i = 0; i < a->n_events; i++) {
    ck_assert_str_eq(a->events[i].type, b->events[i].type);
    ck_assert_pstr_eq(a->events[i].payload, b->events[i].payload);
    ck_assert_int_eq(a->events[i].ts_ms, b->events[i].ts_ms);
    ck_assert_pstr_eq(a->events[i].consumed_by, b->events[i].consumed_by);
  }
}

START_TEST(rows_whole_across_backends) {
  fresh_db();
  journal *j = open_journal();
  int64_t rowid = insert(j, "wf", "r1", 5);
  journal_step a = step_row("a#1", "a", 1, "complete", JOURNAL_NONE);
  a.result = "{\"big\":123456789012345678901234567890}";
  journal_step w = step_row("go#1", "go", 2, "complete", JOURNAL_NONE);
  w.type = DURO_STEP_WAIT_FOR_EVENT;
  w.result = "{\"ok\":true}";
  journal_step nap = step_row("nap#1", "nap", 3, "waiting", 900);
  journal_batch b = {0};
  journal_op *op;
  const journal_step *steps[] = {&a, &w, &nap};
  for (int i = 0; i < 3; i++) {
    op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rowid = rowid;
    op->step = steps[i];
  }
  op = journal_batch_add(&b, JOP_ATTEMPT_PUT);
  op->rowid = rowid;
  op->attempt = (journal_attempt){"a#1", 1, 10, 11, "boom", "b0"};
  static const char *const types[] = {"go", "later"};
  for (int i = 0; i < 2; i++) {
    op = journal_batch_add(&b, JOP_EVENT_INSERT);
    op->rowid = rowid;
    op->event_type = types[i];
    op->event_payload = "{\"p\":1}";
    op->ts_ms = 20 + i;
  }
  commit_ok(j, &b);
  int64_t go_seq = b.ops[4].out_rowid;
  journal_batch_reset(&b);
  op = journal_batch_add(&b, JOP_EVENT_CONSUME);
  op->event_seq = go_seq;
  op->step_key = "go#1";
  op = journal_batch_add(&b, JOP_INSTANCE_PIN);
  op->rowid = rowid;
  op->step_key = "b1";
  commit_ok(j, &b);
  journal_batch_free(&b);
  journal_instance row = {.rowid = rowid,
                          .status = DURO_STATUS_WAITING,
                          .started_ms = 6,
                          .ended_ms = JOURNAL_NONE,
                          .wake_ms = 900,
                          .paused_ms = JOURNAL_NONE,
                          .wait_type = "later"};
  set_row(j, &row, 0);

  journal_rows pg_rows;
  ck_assert_int_eq(journal_rows_read(j, "wf", "r1", &pg_rows), 0);
  ck_assert_uint_eq(pg_rows.n_steps, 3);
  ck_assert_uint_eq(pg_rows.n_attempts, 1);
  ck_assert_str_eq(pg_rows.events[0].consumed_by, "go#1");
  ck_assert_ptr_null(pg_rows.events[1].consumed_by);
  ck_assert_int_eq(journal_rows_write(j, &pg_rows, NULL),
                   DURO_E_ALREADY_EXISTS);
  journal_rows none;
  ck_assert_int_eq(journal_rows_read(j, "wf", "nope", &none), DURO_E_NOT_FOUND);

  char dir[] = "/tmp/duro-rows-XXXXXX", path[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/j.db", dir);
  journal *sq = NULL;
  char err[256];
  ck_assert_msg(journal_open(path, 1, &sq, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(journal_rows_write(sq, &pg_rows, NULL), 0);
  journal_rows sq_rows;
  ck_assert_int_eq(journal_rows_read(sq, "wf", "r1", &sq_rows), 0);
  rows_expect_same(&pg_rows, &sq_rows);

  /* and back into PostgreSQL, as another instance */
  free(sq_rows.inst.id);
  sq_rows.inst.id = strdup("r2");
  int64_t r2 = 0;
  ck_assert_int_eq(journal_rows_write(j, &sq_rows, &r2), 0);
  ck_assert_int_gt(r2, rowid);
  journal_rows again;
  ck_assert_int_eq(journal_rows_read(j, "wf", "r2", &again), 0);
  rows_expect_same(&sq_rows, &again);

  journal_rows_free(&again);
  journal_rows_free(&sq_rows);
  journal_rows_free(&pg_rows);
  journal_close(sq);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
  journal_close(j);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pg_journal");
  TCase *tc = tcase_create("journal");
  tcase_add_unchecked_fixture(tc, cluster_start, cluster_stop);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, group_commit_from_many_threads);
  tcase_add_test(tc, duplicate_in_a_shared_transaction);
  tcase_add_test(tc, instance_insert_set_get);
  tcase_add_test(tc, upgrades_schema_7_to_8);
  tcase_add_test(tc, upgrades_schema_10_pipeline_records);
  tcase_add_test(tc, upgrades_schema_13_message_keys);
  tcase_add_test(tc, steps_and_attempts);
  tcase_add_test(tc, events_and_wakes);
  tcase_add_test(tc, wakes_match_whole_types);
  tcase_add_test(tc, failed_op_fails_its_group);
  tcase_add_test(tc, dropped_connections_are_made_again);
  tcase_add_test(tc, queued_writes_are_each_checked);
  tcase_add_test(tc, connection_lost_with_writes_queued);
  tcase_add_test(tc, copy_after_queued_writes);
  tcase_add_test(tc, dead_host_fails_its_groups);
  tcase_add_test(tc, hosts_are_listed);
  tcase_add_test(tc, frozen_group_lets_its_host_be_taken_over);
  tcase_add_test(tc, bulk_job_taken_over_from_a_dead_host);
  tcase_add_test(tc, read_only_reads_and_refuses_writes);
  tcase_add_test(tc, list_count_wake_and_sweep);
  tcase_add_test(tc, queue_messages);
  tcase_add_test(tc, cron_ticks);
  tcase_add_test(tc, engine_runs_three_steps);
  tcase_add_test(tc, rows_whole_across_backends);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
