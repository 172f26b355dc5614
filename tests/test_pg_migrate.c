/* test_pg_migrate.c — `duro migrate` (host/store/migrate.c,
 * host/cli/migrate_cmd.c): a real `duro run` (DURO_BIN, tests/host_run.h)
 * of the order-flow example (ORDERS_PLUGIN) builds a SQLite journal, which
 * is copied into a throwaway PostgreSQL cluster (tests/pg_cluster.h) that
 * an unchecked fixture starts once for the run; each case gets a database
 * of its own in it.
 *
 *  - the copy: a journal with a complete instance, one sleeping, one
 *    waiting for its event, queue messages (the newest acked, so its id
 *    is only in SQLite's sqlite_sequence) and a cron trigger is migrated;
 *    every table's row count and the instances, steps, attempts and
 *    pending events read through journal.h are the same on both; then a
 *    real `duro run` on the PostgreSQL journal completes the waiting
 *    instance after its event, and new instances, messages and events get
 *    ids past every copied one;
 *  - the refusals: a source whose host is running (its lock held), a
 *    target that already holds rows (nothing copied, the counts said), a
 *    file that is not a journal, and a journal of another schema;
 *  - all or nothing: a row the server refuses in the last table leaves
 *    no row of any table;
 *  - an encrypted journal is copied as it is: no value in the clear in
 *    PostgreSQL, each read back with the same keys, none without. */
#include <check.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "host_run.h"
#include "http_client.h"
#include "journal.h"
#include "journal_crypt.h"
#include "migrate.h"
#include "pg_fixture.h"
#include "proc.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define SETTLE_MS 20000

static pg_fixture pg = {.suite = "test_pg_migrate"};

static void cluster_start(void) { pg_fixture_up(&pg); }

static void cluster_stop(void) { pg_fixture_down(&pg); }

/* The case's own database and its connection string (libpq takes the
 * last dbname given). */
static char conninfo[700];

static void fresh_db(void) {
  static int n;
  char name[64];
  snprintf(name, sizeof name, "m_%d_%d", (int)getpid(), n++);
  pg_fixture_database(&pg, name, conninfo, sizeof conninfo);
}

/* The one integer a query on the case's database returns. */
static int64_t pg_int(const char *sql) { return pg_query_int(conninfo, sql); }

static char db_path[400];

/* The order-flow plugin, a pull queue `jobs` and a nightly cron; the
 * journal in SQLite at db_path, or in PostgreSQL at `pg`. */
static void write_config(const host_run *h, const char *pg) {
  snprintf(db_path, sizeof db_path, "%s/var/duro.db", proc_tmp_dir);
  FILE *f = fopen(h->config, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "storage:\n  path: %s\n  synchronous: normal\n", db_path);
  if (pg)
    fprintf(f, "  postgresql: \"%s\"\n", pg);
  fprintf(f,
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: { workers: 2 }\n"
          "plugins:\n"
          "  - name: orders\n"
          "    path: %s\n"
          "    workflows:\n"
          "      - { name: order-flow, binding: ORDER_FLOW,"
          " class_name: OrderFlow }\n"
          "    queues:\n"
          "      consumers: [{ queue: jobs }]\n"
          "    triggers:\n"
          "      crons:\n"
          "        - { schedule: \"0 3 * * *\", workflow: order-flow,"
          " id: \"nightly-{date}\" }\n",
          ORDERS_PLUGIN);
  ck_assert(fclose(f) == 0);
}

/* POST with `status` expected; the answer's JSON (caller's) or NULL. */
static json_t *post(const host_run *h, const char *path, const char *body,
                    long status) {
  http_resp r;
  host_request(h, &r, "POST", path, body);
  ck_assert_msg(r.status == status, "POST %s: %ld %s", path, r.status,
                r.body ? r.body : "");
  json_t *j = r.json ? json_incref(r.json) : NULL;
  http_resp_free(&r);
  return j;
}

static void create_order(const host_run *h, const char *id, int grace_s) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"%s\",\"email\":"
           "\"a@example.com\",\"amount\":5,\"graceSeconds\":%d}}",
           id, id, grace_s);
  json_decref(post(h, "/workflows/order-flow/instances", body, 201));
}

/* Waits until the instance's step `key` exists and is `status`. */
static void wait_step(const host_run *h, const char *id, const char *key,
                      const char *status) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    json_t *d = host_describe(h, "order-flow", id);
    json_t *s = step_of(d, key);
    int there = s && !strcmp(jstr(s, "status"), status);
    json_decref(d);
    if (there)
      return;
    ck_assert_msg(proc_now_ms() < deadline, "%s: %s never %s", id, key, status);
    proc_sleep_ms(20);
  }
}

/* The approval, with backslashes (COPY's escape character) in its
 * text: "a\\b \\N" as stored. */
static void approve(const host_run *h, const char *id) {
  char path[200];
  snprintf(path, sizeof path,
           "/workflows/order-flow/instances/%s/events/"
           "approval",
           id);
  json_decref(
      post(h, path, "{\"approved\": true, \"note\": \"a\\\\b \\\\N\"}", 202));
}

static int64_t send_job(const host_run *h, int n) {
  char body[64];
  snprintf(body, sizeof body, "{\"body\":{\"job\":%d}}", n);
  json_t *j = post(h, "/queues/jobs/messages", body, 201);
  json_t *id = json_object_get(j, "id");
  int64_t v = json_is_integer(id) ? json_integer_value(id)
                                  : strtoll(json_string_value(id), NULL, 10);
  json_decref(j);
  return v;
}

/* A SQLite journal as a host leaves it: o-done complete, o-sleep asleep
 * for an hour, o-wait waiting for its approval, three messages in `jobs`
 * after the newest of four was pulled and acked, and the cron trigger's
 * row.  The host is stopped. */
static void build_sqlite_journal(host_run *h) {
  host_init(h, "sqlite");
  write_config(h, NULL);
  host_start(h);
  create_order(h, "o-done", 0);
  create_order(h, "o-sleep", 3600);
  create_order(h, "o-wait", 0);
  wait_step(h, "o-done", "manual review#1", "waiting");
  approve(h, "o-done");
  json_decref(host_wait_status(h, "order-flow", "o-done", "complete",
                               proc_now_ms() + SETTLE_MS));
  wait_step(h, "o-sleep", "manual review#1", "waiting");
  approve(h, "o-sleep");
  wait_step(h, "o-sleep", "grace period#1", "waiting");
  wait_step(h, "o-wait", "manual review#1", "waiting");
  for (int i = 0; i < 3; i++)
    send_job(h, i);
  /* the newest message acked: only sqlite_sequence remembers its id */
  int64_t last = send_job(h, 3);
  http_resp r;
  host_request(h, &r, "POST", "/queues/jobs/messages/pull",
               "{\"batch_size\":10}");
  ck_assert_int_eq(r.status, 200);
  json_t *msgs = json_object_get(r.json, "messages");
  ck_assert_int_eq(json_array_size(msgs), 4);
  json_t *newest = json_array_get(msgs, 3);
  json_t *nid = json_object_get(newest, "id");
  ck_assert_int_eq(json_is_integer(nid)
                       ? json_integer_value(nid)
                       : strtoll(json_string_value(nid), NULL, 10),
                   last);
  char ack[400];
  snprintf(ack, sizeof ack,
           "{\"acks\":[{\"lease_id\":\"%s\"}],\"retries\":[{\"lease_id\":"
           "\"%s\",\"delay_seconds\":0},{\"lease_id\":\"%s\","
           "\"delay_seconds\":0},{\"lease_id\":\"%s\",\"delay_seconds\":0}]}",
           jstr(newest, "lease_id"), jstr(json_array_get(msgs, 0), "lease_id"),
           jstr(json_array_get(msgs, 1), "lease_id"),
           jstr(json_array_get(msgs, 2), "lease_id"));
  http_resp_free(&r);
  json_decref(post(h, "/queues/jobs/messages/ack", ack, 200));
  host_stop(h, proc_now_ms() + SETTLE_MS, 0);
}

/* `duro migrate --from FROM --to TO`: its exit status; its stdout and
 * stderr in *out (caller frees). */
static int migrate(const char *from, const char *to, char **out) {
  char log[400];
  snprintf(log, sizeof log, "%s/migrate.log", proc_tmp_dir);
  const char *argv[] = {DURO_BIN, "migrate", "--from", from, "--to", to, NULL};
  pid_t pid = proc_spawn(argv, NULL, log, log);
  int rc = proc_wait_exit(pid, proc_now_ms() + SETTLE_MS);
  *out = proc_slurp(log);
  ck_assert_msg(!proc_sanitizer_report(*out), "%s", proc_tail(*out));
  return rc;
}

/* ---- comparing the two journals ------------------------------------------ */

static void *open_store(const store_backend *be, const char *path) {
  void *db = NULL;
  char err[512];
  ck_assert_msg(be->open(path, -1, &db, err, sizeof err) == 0, "%s", err);
  return db;
}

static journal *open_journal(const store_backend *be, const char *path) {
  journal *j = NULL;
  char err[512];
  ck_assert_msg(journal_open_backend(be, path, -1, &j, err, sizeof err) == 0,
                "%s", err);
  return j;
}

static void str_eq(const char *a, const char *b, const char *what) {
  ck_assert_msg((!a && !b) || (a && b && !strcmp(a, b)),
                "%s differs: \"%s\" / \"%s\"", what, a ? a : "(null)",
                b ? b : "(null)");
}

typedef struct attempt_list {
  char text[4096];
  size_t len;
} attempt_list;

static void on_attempt(void *ctx, const char *key, uint32_t number,
                       int64_t started_ms, int64_t ended_ms, const char *error,
                       const char *build) {
  attempt_list *l = ctx;
  if (l->len < sizeof l->text)
    l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len,
                               "%s %u %lld %lld %s %s;", key, number,
                               (long long)started_ms, (long long)ended_ms,
                               error ? error : "-", build ? build : "-");
}

/* Every row of `t` on SQLite, in the order of its columns, as text
 * (NULL as \\N): the same text both sides must give. */
static char *sqlite_dump(const char *path, const store_table *t) {
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  char sql[600], order[64] = "1";
  for (size_t i = 2; i <= t->n_columns; i++)
    snprintf(order + strlen(order), sizeof order - strlen(order), ",%zu", i);
  snprintf(sql, sizeof sql, "SELECT %s FROM %s ORDER BY %s", t->columns,
           t->name, order);
  sqlite3_stmt *st;
  ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (size_t i = 0; i < t->n_columns; i++) {
      const char *v = (const char *)sqlite3_column_text(st, (int)i);
      fprintf(f, "%s%s", i ? "|" : "", v ? v : "\\N");
    }
    fputc('\n', f);
  }
  fclose(f);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return text;
}

static char *pg_dump(const store_table *t) {
  char sql[600], order[64] = "1";
  for (size_t i = 2; i <= t->n_columns; i++)
    snprintf(order + strlen(order), sizeof order - strlen(order), ",%zu", i);
  snprintf(sql, sizeof sql, "SELECT %s FROM %s ORDER BY %s", t->columns,
           t->name, order);
  PGconn *c = PQconnectdb(conninfo);
  ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
  PGresult *r = PQexec(c, sql);
  ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
                PQresultErrorMessage(r));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  for (int row = 0; row < PQntuples(r); row++) {
    for (int i = 0; i < (int)t->n_columns; i++)
      fprintf(f, "%s%s", i ? "|" : "",
              PQgetisnull(r, row, i) ? "\\N" : PQgetvalue(r, row, i));
    fputc('\n', f);
  }
  fclose(f);
  PQclear(r);
  PQfinish(c);
  return text;
}

/* The instance `id` the same in both: its row, steps, attempts and
 * pending events; returns its rowid. */
static int64_t same_instance(journal *a, journal *b, const char *id) {
  journal_instance x = {0}, y = {0};
  ck_assert_int_eq(journal_instance_get(a, "order-flow", id, &x), 0);
  ck_assert_int_eq(journal_instance_get(b, "order-flow", id, &y), 0);
  ck_assert_int_eq(x.rowid, y.rowid);
  str_eq(duro_status_name(x.status), duro_status_name(y.status), "status");
  str_eq(x.params, y.params, "params");
  str_eq(x.output, y.output, "output");
  str_eq(x.wait_type, y.wait_type, "wait_type");
  str_eq(x.build, y.build, "build");
  ck_assert_int_eq(x.created_ms, y.created_ms);
  ck_assert_int_eq(x.started_ms, y.started_ms);
  ck_assert_int_eq(x.ended_ms, y.ended_ms);
  ck_assert_int_eq(x.wake_ms, y.wake_ms);
  ck_assert_int_eq(x.retention_ms, y.retention_ms);
  ck_assert_int_eq(x.restarts, y.restarts);
  int64_t rowid = x.rowid;
  journal_instance_clear(&x);
  journal_instance_clear(&y);

  journal_step *sx, *sy;
  size_t nx, ny;
  ck_assert_int_eq(journal_steps_load(a, rowid, &sx, &nx), 0);
  ck_assert_int_eq(journal_steps_load(b, rowid, &sy, &ny), 0);
  ck_assert_int_gt(nx, 0);
  ck_assert_int_eq(nx, ny);
  for (size_t i = 0; i < nx; i++) {
    str_eq(sx[i].key, sy[i].key, "step key");
    str_eq(duro_step_status_name(sx[i].status),
           duro_step_status_name(sy[i].status), "step status");
    str_eq(sx[i].result, sy[i].result, "step result");
    str_eq(sx[i].build, sy[i].build, "step build");
    ck_assert_int_eq(sx[i].seq, sy[i].seq);
    ck_assert_int_eq(sx[i].attempts, sy[i].attempts);
    ck_assert_int_eq(sx[i].wake_ms, sy[i].wake_ms);
    ck_assert_int_eq(sx[i].attempt_started_ms, sy[i].attempt_started_ms);
  }
  journal_steps_free(sx, nx);
  journal_steps_free(sy, ny);

  attempt_list ax = {.len = 0}, ay = {.len = 0};
  ck_assert_int_eq(journal_attempts_each(a, rowid, on_attempt, &ax), 0);
  ck_assert_int_eq(journal_attempts_each(b, rowid, on_attempt, &ay), 0);
  str_eq(ax.text, ay.text, "attempts");

  journal_event *ex, *ey;
  ck_assert_int_eq(journal_events_pending(a, rowid, &ex, &nx), 0);
  ck_assert_int_eq(journal_events_pending(b, rowid, &ey, &ny), 0);
  ck_assert_int_eq(nx, ny);
  for (size_t i = 0; i < nx; i++) {
    ck_assert_int_eq(ex[i].seq, ey[i].seq);
    str_eq(ex[i].payload, ey[i].payload, "event payload");
  }
  journal_events_free(ex, nx);
  journal_events_free(ey, ny);
  return rowid;
}

START_TEST(journal_moves_to_postgresql_and_runs_on) {
  fresh_db();
  host_run H;
  build_sqlite_journal(&H);

  /* Text with the characters COPY's text format gives a meaning (tab,
   * newline, return, a backslash before N), which duro's compact JSON
   * never holds: a queue's counts under an odd name.  And keys with
   * gaps, as deleted rows leave them, so that keys numbered afresh would
   * differ: instances from 101, events from 51.  And the messages'
   * keys as a keyed consumer's lease stores them, with their pointer.
   * And an instance's search attributes, a string and a number. */
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(db,
                                "INSERT INTO queue_counts VALUES("
                                "'odd\tq\r\nname \\N', 1, 2);"
                                "UPDATE instances SET rowid=rowid+100;"
                                "UPDATE steps SET instance=instance+100;"
                                "UPDATE attempts SET instance=instance+100;"
                                "UPDATE events SET instance=instance+100,"
                                " seq=seq+50;"
                                "UPDATE messages SET key='\"k\"';"
                                "INSERT INTO queue_key_pointers VALUES("
                                "'jobs','/account');"
                                "INSERT INTO attributes SELECT rowid,"
                                "'customer',workflow,'c42',NULL FROM "
                                "instances WHERE id='o-wait';"
                                "INSERT INTO attributes SELECT rowid,"
                                "'amount',workflow,NULL,12.5 FROM "
                                "instances WHERE id='o-wait';",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);

  char *out;
  int rc = migrate(db_path, conninfo, &out);
  ck_assert_msg(rc == 0, "duro migrate exited %d:\n%s", rc, proc_tail(out));
  assert_contains(out, "instances");
  assert_contains(out, " s\n"); /* the time taken */

  /* (a) every table holds as many rows on both sides, and the printed
   * count is the table's */
  void *sq = open_store(&store_sqlite, db_path);
  void *pg = open_store(&store_pg, conninfo);
  for (size_t i = 0; i < migrate_n_tables; i++) {
    const store_table *t = &migrate_tables[i];
    int64_t a = -1, b = -2;
    ck_assert_int_eq(store_sqlite.table_count(sq, t, &a), 0);
    ck_assert_int_eq(store_pg.table_count(pg, t, &b), 0);
    ck_assert_msg(a == b, "%s: %lld rows in SQLite, %lld in PostgreSQL",
                  t->name, (long long)a, (long long)b);
    char line[128];
    snprintf(line, sizeof line, "%s %lld rows\n", t->name, (long long)a);
    char *p = strstr(out, t->name);
    ck_assert_msg(p, "no line for %s in:\n%s", t->name, out);
    char *nl = strchr(p, '\n');
    char got[128];
    snprintf(got, sizeof got, "%.*s", (int)(nl - p), p);
    char want[128];
    snprintf(want, sizeof want, "%s %lld rows", t->name, (long long)a);
    /* columns are padded: compare without the spaces */
    char *g = got, *w = want;
    for (char *s = got; *s; s++)
      if (*s != ' ')
        *g++ = *s;
    *g = 0;
    for (char *s = want; *s; s++)
      if (*s != ' ')
        *w++ = *s;
    *w = 0;
    str_eq(got, want, "printed count");
  }
  /* and the same rows, value for value */
  for (size_t i = 0; i < migrate_n_tables; i++) {
    char *a = sqlite_dump(db_path, &migrate_tables[i]);
    char *b = pg_dump(&migrate_tables[i]);
    ck_assert_msg(!strcmp(a, b), "%s differs:\n%s---\n%s",
                  migrate_tables[i].name, proc_tail(a), proc_tail(b));
    free(a);
    free(b);
  }
  /* the two approvals sent before the copy, byte for byte */
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM events WHERE payload="
                          "E'{\"approved\":true,\"note\":\"a\\\\\\\\b "
                          "\\\\\\\\N\"}'"),
                   2);
  int64_t n = 0;
  ck_assert_int_eq(store_pg.table_count(pg, &migrate_tables[0], &n), 0);
  ck_assert_int_eq(n, 3);
  store_sqlite.close(sq);
  store_pg.close(pg);
  free(out);

  journal *ja = open_journal(&store_sqlite, db_path);
  journal *jb = open_journal(&store_pg, conninfo);
  same_instance(ja, jb, "o-done");
  same_instance(ja, jb, "o-sleep");
  same_instance(ja, jb, "o-wait");
  journal_close(ja);
  journal_close(jb);
  int64_t max_rowid = pg_int("SELECT MAX(rowid) FROM instances");
  int64_t max_event = pg_int("SELECT MAX(seq) FROM events");
  int64_t max_message = pg_int("SELECT MAX(seq) FROM messages");
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM cron_triggers"), 1);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM messages"), 3);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM messages WHERE key='\"k\"'"),
                   3);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM queue_key_pointers WHERE "
                          "queue='jobs' AND pointer='/account'"),
                   1);
  /* an instance's search attributes, with their instance's rowid */
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM attributes a JOIN instances "
                          "i ON i.rowid=a.instance WHERE i.id='o-wait' AND "
                          "((a.name='customer' AND a.str='c42') OR "
                          "(a.name='amount' AND a.num=12.5))"),
                   2);

  /* (b) a host on the PostgreSQL journal runs on from where SQLite left */
  host_run P;
  host_init(&P, "pg");
  write_config(&P, conninfo);
  host_start(&P);
  json_t *d = host_describe(&P, "order-flow", "o-wait");
  ck_assert_str_eq(jstr(d, "status"), "waiting");
  json_decref(d);
  approve(&P, "o-wait");
  json_decref(host_wait_status(&P, "order-flow", "o-wait", "complete",
                               proc_now_ms() + SETTLE_MS));
  create_order(&P, "o-new", 0);
  wait_step(&P, "o-new", "manual review#1", "waiting");
  int64_t new_message = send_job(&P, 9);
  host_stop(&P, proc_now_ms() + SETTLE_MS, 0);

  ck_assert_int_eq(max_rowid, 103);
  ck_assert_int_eq(max_event, 52);
  ck_assert_int_gt(pg_int("SELECT rowid FROM instances WHERE id='o-new'"),
                   max_rowid);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM instances WHERE id='o-wait' "
                          "AND status='complete'"),
                   1);
  ck_assert_int_gt(pg_int("SELECT MAX(seq) FROM events"), max_event);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM events WHERE "
                          "consumed_by IS NOT NULL AND type='approval'"),
                   3);
  /* the acked message's id (4) is not handed out again */
  ck_assert_int_gt(max_message, 0);
  ck_assert_int_eq(new_message, 5);
}
END_TEST

/* A host running on the source holds its lock: refused, nothing copied. */
START_TEST(running_host_is_refused) {
  fresh_db();
  host_run H;
  host_init(&H, "running");
  write_config(&H, NULL);
  host_start(&H);
  create_order(&H, "o1", 0);
  char *out;
  int rc = migrate(db_path, conninfo, &out);
  ck_assert_msg(rc == 1, "exited %d:\n%s", rc, proc_tail(out));
  assert_contains(out, "in use by another duro run");
  assert_contains(out, "stop that host first");
  free(out);
  host_stop(&H, proc_now_ms() + SETTLE_MS, 0);
  /* nothing was created in the target */
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM pg_tables WHERE "
                          "tablename='instances'"),
                   0);
}
END_TEST

/* A target with rows is never merged into: refused with its counts, and
 * it is left as it was. */
START_TEST(target_with_rows_is_refused) {
  fresh_db();
  host_run H;
  build_sqlite_journal(&H);
  char *out;
  ck_assert_int_eq(migrate(db_path, conninfo, &out), 0);
  free(out);
  int rc = migrate(db_path, conninfo, &out);
  ck_assert_msg(rc == 1, "exited %d:\n%s", rc, proc_tail(out));
  assert_contains(out, "already holds a journal with");
  assert_contains(out, "instances 3");
  assert_contains(out, "messages 3");
  assert_contains(out, "cron_triggers 1");
  assert_contains(out, "empty database");
  free(out);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM instances"), 3);
}
END_TEST

START_TEST(not_a_journal_is_refused) {
  fresh_db();
  char path[400];
  snprintf(path, sizeof path, "%s/notes.txt", proc_tmp_dir);
  FILE *f = fopen(path, "w");
  fputs("not a database\n", f);
  fclose(f);
  char *out;
  int rc = migrate(path, conninfo, &out);
  ck_assert_msg(rc == 1, "exited %d:\n%s", rc, proc_tail(out));
  assert_contains(out, "is not a duro journal");
  free(out);

  /* a SQLite database of something else */
  snprintf(path, sizeof path, "%s/other.db", proc_tmp_dir);
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(db,
                                "CREATE TABLE t(x); INSERT INTO t VALUES(1)",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);
  rc = migrate(path, conninfo, &out);
  ck_assert_msg(rc == 1, "exited %d:\n%s", rc, proc_tail(out));
  assert_contains(out, "is not a duro journal (no such table: meta)");
  free(out);

  /* a missing file is not created */
  snprintf(path, sizeof path, "%s/missing.db", proc_tmp_dir);
  rc = migrate(path, conninfo, &out);
  ck_assert_int_eq(rc, 1);
  assert_contains(out, "No such file or directory");
  free(out);
  ck_assert_int_ne(access(path, F_OK), 0);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM pg_tables WHERE "
                          "tablename='instances'"),
                   0);
}
END_TEST

/* Another schema: an older one names how to upgrade it, a newer one the
 * duro to use. */
START_TEST(other_schema_is_refused) {
  fresh_db();
  char path[400];
  snprintf(path, sizeof path, "%s/j.db", proc_tmp_dir);
  journal *j = NULL;
  char err[256];
  ck_assert_int_eq(journal_open(path, 1, &j, err, sizeof err), 0);
  journal_close(j);
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(db,
                                "UPDATE meta SET value='5' WHERE "
                                "key='schema'",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  char *out;
  int rc = migrate(path, conninfo, &out);
  ck_assert_msg(rc == 1, "exited %d:\n%s", rc, proc_tail(out));
  assert_contains(out, "is a journal of schema 5; duro migrate copies "
                       "schema 13");
  assert_contains(out, "upgrades it");
  free(out);
  ck_assert_int_eq(sqlite3_exec(db,
                                "UPDATE meta SET value='14' WHERE "
                                "key='schema'",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);
  rc = migrate(path, conninfo, &out);
  ck_assert_int_eq(rc, 1);
  assert_contains(out, "schema 14, newer than this duro's 13");
  free(out);
}
END_TEST

/* A row PostgreSQL refuses in the last table copied (text that is not
 * UTF-8, which SQLite stores as given) fails the whole copy: no row of
 * any table is left, and once the row is mended a second migrate finds
 * the target empty and copies everything. */
START_TEST(failed_copy_leaves_nothing) {
  fresh_db();
  char path[400];
  snprintf(path, sizeof path, "%s/j.db", proc_tmp_dir);
  journal *j = NULL;
  char err[256];
  ck_assert_int_eq(journal_open(path, 1, &j, err, sizeof err), 0);
  journal_close(j);
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  ck_assert_int_eq(
      sqlite3_exec(db,
                   "INSERT INTO instances(workflow,id,status,params,"
                   "created_ms,retention_ms) VALUES('wf','a','queued','{}',1,"
                   "1),('wf','b','queued','{}',2,1);"
                   "INSERT INTO cron_ticks VALUES('t',1,'failed',1,NULL,"
                   "CAST(X'FF' AS TEXT))",
                   NULL, NULL, NULL),
      SQLITE_OK);
  char *out;
  int rc = migrate(path, conninfo, &out);
  ck_assert_msg(rc == 1, "exited %d:\n%s", rc, proc_tail(out));
  assert_contains(out, "copy failed, nothing copied");
  assert_contains(out, "UTF8");
  free(out);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM instances"), 0);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM cron_ticks"), 0);

  ck_assert_int_eq(sqlite3_exec(db, "UPDATE cron_ticks SET error='mended'",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);
  rc = migrate(path, conninfo, &out);
  ck_assert_msg(rc == 0, "exited %d:\n%s", rc, proc_tail(out));
  free(out);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM instances"), 2);
  ck_assert_int_eq(pg_int("SELECT COUNT(*) FROM cron_ticks"), 1);
}
END_TEST

/* The copy's list holds every table of the SQLite schema (but meta, and
 * instance_counts, which its triggers keep from the instances). */
START_TEST(every_table_is_copied) {
  char path[400];
  snprintf(path, sizeof path, "%s/j.db", proc_tmp_dir);
  journal *j = NULL;
  char err[256];
  ck_assert_int_eq(journal_open(path, 1, &j, err, sizeof err), 0);
  journal_close(j);
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *st;
  ck_assert_int_eq(
      sqlite3_prepare_v2(db,
                         "SELECT name FROM sqlite_master WHERE type='table' "
                         "AND name NOT LIKE 'sqlite_%' AND name NOT IN "
                         "('meta','instance_counts')",
                         -1, &st, NULL),
      SQLITE_OK);
  size_t n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    int listed = 0;
    for (size_t i = 0; i < migrate_n_tables; i++)
      listed |= !strcmp(migrate_tables[i].name, name);
    ck_assert_msg(listed, "table %s is not copied", name);
    n++;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  ck_assert_int_eq(n, migrate_n_tables);
}
END_TEST

/* An encrypted journal (storage.encryption) is copied as it is: its
 * values stay sealed in PostgreSQL, where the same keys open them (each
 * is bound to its instance's rowid, which the copy keeps) and none
 * opens without them. */
#define MARKER "Zq7-migrated-8Kd"
START_TEST(encrypted_journal_copied_as_is) {
  fresh_db();
  unsigned char key[JOURNAL_CRYPT_KEY_BYTES];
  memset(key, 7, sizeof key);
  journal_crypt *keys = journal_crypt_new();
  ck_assert_int_eq(journal_crypt_add(keys, "k1", key), 0);
  ck_assert_int_eq(journal_crypt_activate(keys, "k1"), 0);
  char path[400], err[256];
  snprintf(path, sizeof path, "%s/enc.db", proc_tmp_dir);
  journal *j = NULL;
  ck_assert_int_eq(journal_open(path, 1, &j, err, sizeof err), 0);
  journal_set_crypt(j, keys);
  journal_instance in = {.workflow = "wf",
                         .id = "e1",
                         .status = DURO_STATUS_QUEUED,
                         .params = "{\"ssn\":\"" MARKER "\"}",
                         .created_ms = 10,
                         .retention_ms = 1000};
  journal_batch b = {0};
  journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &in;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  int64_t rowid = b.ops[0].out_rowid;
  journal_batch_reset(&b);
  journal_step st = {.key = "a#1",
                     .name = "a",
                     .count = 1,
                     .seq = 1,
                     .type = DURO_STEP_DO,
                     .status = DURO_STEP_COMPLETE,
                     .result = "\"" MARKER "\"",
                     .attempts = 1,
                     .started_ms = 11,
                     .ended_ms = 12,
                     .wake_ms = JOURNAL_NONE,
                     .attempt_started_ms = 11};
  journal_op *op = journal_batch_add(&b, JOP_STEP_PUT);
  op->rowid = rowid;
  op->step = &st;
  op = journal_batch_add(&b, JOP_EVENT_INSERT);
  op->rowid = rowid;
  op->event_type = "go";
  op->event_payload = "\"" MARKER "\"";
  op->ts_ms = 12;
  op = journal_batch_add(&b, JOP_MESSAGE_INSERT);
  op->queue = "q";
  op->body = "\"" MARKER "\"";
  op->ts_ms = 12;
  op->visible_ms = 12;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  journal_batch_free(&b);
  journal_close(j);

  char *out = NULL;
  ck_assert_msg(migrate(path, conninfo, &out) == 0, "%s", out);
  free(out);
  ck_assert_int_eq(pg_int("SELECT count(*) FROM instances x WHERE x::text "
                          "LIKE '%" MARKER "%'") +
                       pg_int("SELECT count(*) FROM steps x WHERE x::text "
                              "LIKE '%" MARKER "%'") +
                       pg_int("SELECT count(*) FROM events x WHERE x::text "
                              "LIKE '%" MARKER "%'") +
                       pg_int("SELECT count(*) FROM messages x WHERE x::text "
                              "LIKE '%" MARKER "%'"),
                   0);
  j = open_journal(&store_pg, conninfo);
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get(j, "wf", "e1", &got), DURO_E_STORAGE);
  journal_set_crypt(j, keys);
  ck_assert_int_eq(journal_instance_get(j, "wf", "e1", &got), 0);
  ck_assert_str_eq(got.params, "{\"ssn\":\"" MARKER "\"}");
  journal_instance_clear(&got);
  journal_step *steps = NULL;
  size_t n = 0;
  ck_assert_int_eq(journal_steps_load(j, rowid, &steps, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(steps[0].result, "\"" MARKER "\"");
  journal_steps_free(steps, n);
  journal_event *ev = NULL;
  ck_assert_int_eq(journal_events_all(j, rowid, &ev, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(ev[0].payload, "\"" MARKER "\"");
  journal_events_free(ev, n);
  journal_message *m = NULL;
  ck_assert_int_eq(journal_queue_peek(j, "q", 20, 10, &m, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(m[0].body, "\"" MARKER "\"");
  journal_messages_free(m, n);
  journal_close(j);
  journal_crypt_free(keys);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pg_migrate");
  TCase *tc = tcase_create("migrate");
  tcase_add_unchecked_fixture(tc, cluster_start, cluster_stop);
  proc_fixtures(tc, "duro-pg-migrate");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, journal_moves_to_postgresql_and_runs_on);
  tcase_add_test(tc, running_host_is_refused);
  tcase_add_test(tc, target_with_rows_is_refused);
  tcase_add_test(tc, not_a_journal_is_refused);
  tcase_add_test(tc, other_schema_is_refused);
  tcase_add_test(tc, failed_copy_leaves_nothing);
  tcase_add_test(tc, every_table_is_copied);
  tcase_add_test(tc, encrypted_journal_copied_as_is);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
