/* sqlite_schema.c — the SQLite journal's schema: its tables created where
 * missing, a file of an older schema upgraded, and the instance counts
 * kept by triggers. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "sqlite_internal.h"

/* The columns of pipeline_records (schema 10). */
#define PIPELINE_RECORDS                                                       \
  "(pipeline TEXT NOT NULL, seq INTEGER NOT NULL, last INTEGER NOT NULL,"      \
  " bytes INTEGER NOT NULL, sent_ms INTEGER NOT NULL, body TEXT NOT NULL,"     \
  " PRIMARY KEY(pipeline, seq)) WITHOUT ROWID"

/* Schema 12: the pointer each queue's messages.key holds the values of
 * (queue_keys.h). */
#define MESSAGE_KEY_POINTERS                                                   \
  "CREATE TABLE IF NOT EXISTS queue_key_pointers(queue TEXT PRIMARY KEY,"      \
  " pointer TEXT NOT NULL) WITHOUT ROWID;"

/* Schema 13: instances' search attributes (attr.h), a string or a
 * number each, deleted with their instance.  An index a type serves a
 * list's `where`: one workflow's instances of one value, newest first
 * (an equality), or of a range of values. */
#define ATTRIBUTES                                                             \
  "CREATE TABLE IF NOT EXISTS attributes(instance INTEGER NOT NULL,"           \
  " name TEXT NOT NULL, workflow TEXT NOT NULL, str TEXT, num REAL,"           \
  " PRIMARY KEY(instance, name)) WITHOUT ROWID;"                               \
  "CREATE INDEX IF NOT EXISTS attributes_str ON attributes(workflow, name,"    \
  " str, instance) WHERE str IS NOT NULL;"                                     \
  "CREATE INDEX IF NOT EXISTS attributes_num ON attributes(workflow, name,"    \
  " num, instance) WHERE num IS NOT NULL;"

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
    "INSERT OR IGNORE INTO meta VALUES('schema','13');"
    "CREATE TABLE IF NOT EXISTS instances("
    " rowid INTEGER PRIMARY KEY,"
    " workflow TEXT NOT NULL, id TEXT NOT NULL, status TEXT NOT NULL,"
    " params TEXT NOT NULL, output TEXT, error TEXT,"
    " created_ms INTEGER NOT NULL, started_ms INTEGER, ended_ms INTEGER,"
    " wake_ms INTEGER, paused_ms INTEGER, wait_type TEXT,"
    " control INTEGER NOT NULL DEFAULT 0, retention_ms INTEGER NOT NULL,"
    " build TEXT, restarts INTEGER NOT NULL DEFAULT 0, deadline_ms INTEGER,"
    " parent INTEGER, parent_close INTEGER NOT NULL DEFAULT 0,"
    " traceparent TEXT, UNIQUE(workflow, id));"
    "CREATE INDEX IF NOT EXISTS instances_wake ON instances(wake_ms)"
    " WHERE wake_ms IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS instances_status ON instances(status);"
    /* a workflow's instances by creation time, for the listing's filter
     * (built on first open of an older file; written once a row) */
    "CREATE INDEX IF NOT EXISTS instances_created ON instances(workflow,"
    " created_ms);"
    /* and by end time, once there is one (written by the end alone) */
    "CREATE INDEX IF NOT EXISTS instances_ended ON instances(workflow,"
    " ended_ms) WHERE ended_ms IS NOT NULL;"
    /* Reconciliation looks for persisted requests: few, so a partial
     * index keeps it from reading every row. */
    "CREATE INDEX IF NOT EXISTS instances_control ON instances(control) "
    "WHERE control<>0;"
    "CREATE INDEX IF NOT EXISTS instances_expiry ON instances("
    " ended_ms + retention_ms) WHERE ended_ms IS NOT NULL;"
    "CREATE TABLE IF NOT EXISTS steps("
    " instance INTEGER NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL,"
    " name TEXT NOT NULL, count INTEGER NOT NULL, type TEXT NOT NULL,"
    " status TEXT NOT NULL, result TEXT, error TEXT,"
    " attempts INTEGER NOT NULL, started_ms INTEGER, ended_ms INTEGER,"
    " wake_ms INTEGER, attempt_started_ms INTEGER, build TEXT,"
    " PRIMARY KEY(instance, key)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS attempts("
    " instance INTEGER NOT NULL, key TEXT NOT NULL, number INTEGER NOT NULL,"
    " started_ms INTEGER, ended_ms INTEGER, error TEXT, build TEXT,"
    " PRIMARY KEY(instance, key, number)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS events("
    " seq INTEGER PRIMARY KEY, instance INTEGER NOT NULL,"
    " type TEXT NOT NULL, payload TEXT NOT NULL, ts_ms INTEGER NOT NULL,"
    " consumed_by TEXT);"
    "CREATE INDEX IF NOT EXISTS events_by_instance ON events(instance, seq);"
    /* Schema 4: queue messages.  messages_next serves a pull (the next
     * visible messages of a queue), messages_age the retention sweep and
     * the oldest message of a queue.  (Schema 5 dropped messages_lease:
     * a lease id names its row.) */
    /* AUTOINCREMENT: a message id is never used again, even once every
     * message is acked and the table is empty. */
    "CREATE TABLE IF NOT EXISTS messages("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL,"
    " body TEXT NOT NULL,"
    " attempts INTEGER NOT NULL, visible_ms INTEGER NOT NULL, lease TEXT,"
    " sent_ms INTEGER NOT NULL, last_error TEXT, traceparent TEXT,"
    " key TEXT);"
    "CREATE INDEX IF NOT EXISTS messages_next ON messages(queue, visible_ms);"
    /* Schema 12: the key in messages_age, after the sent order (sent_ms,
     * seq), so that a keyed lease's walk passes over a key at its limit
     * in the index alone (SQLITE_SQL_KEY_PICK). */
    "CREATE INDEX IF NOT EXISTS messages_age ON messages(queue, sent_ms, "
    "seq, key);" MESSAGE_KEY_POINTERS
    /* Schema 5: messages of a queue out of retries, dropped (no
     * dead-letter queue) or dead-lettered, counted in the commit that
     * drops or moves them. */
    /* Schema 5: cron triggers.  A trigger is known from since_ms on (no
     * tick before it is missed) and counts its ticks by how they ended;
     * each tick that came is a row, claimed before anything fires, kept
     * 30 days (cron/trigger_dispatch.c sweeps them). */
    "CREATE TABLE IF NOT EXISTS cron_triggers(trigger TEXT PRIMARY KEY,"
    " since_ms INTEGER NOT NULL, complete INTEGER NOT NULL,"
    " failed INTEGER NOT NULL, missed INTEGER NOT NULL,"
    " skipped INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS cron_ticks(trigger TEXT NOT NULL,"
    " tick_ms INTEGER NOT NULL, state TEXT NOT NULL, fired_ms INTEGER,"
    " instance TEXT, error TEXT, PRIMARY KEY(trigger, tick_ms))"
    " WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS queue_counts(queue TEXT PRIMARY KEY,"
    " dropped INTEGER NOT NULL, dead_lettered INTEGER NOT NULL)"
    " WITHOUT ROWID;"
    /* Schema 8: pipelines.  A pipeline's row numbers its records (seq,
     * per pipeline, never used twice), keeps its counts, and holds the
     * plan of the batch being written (plan_first..plan_last, planned at
     * plan_ms, by host plan_host until plan_until; NULL: none), so that a
     * crash between the plan and its "done" writes the same file again.
     * A record is deleted by the commit that records its file written. */
    "CREATE TABLE IF NOT EXISTS pipelines(pipeline TEXT PRIMARY KEY,"
    " next_seq INTEGER NOT NULL, accepted INTEGER NOT NULL,"
    " accepted_bytes INTEGER NOT NULL, written INTEGER NOT NULL,"
    " written_bytes INTEGER NOT NULL, files INTEGER NOT NULL,"
    " backlog_bytes INTEGER NOT NULL, last_flush_ms INTEGER,"
    " plan_first INTEGER, plan_last INTEGER, plan_ms INTEGER,"
    " plan_host INTEGER, plan_until INTEGER) WITHOUT ROWID;"
    /* Schema 10: a row holds one send's records, seq..last, as their
     * lines (each ending in a newline; bytes counts them all): a send is
     * one insert, not one a record.  A batch is whole rows.  The body
     * comes last: a row's other columns are read without its overflow
     * pages. */
    "CREATE TABLE IF NOT EXISTS pipeline_records" PIPELINE_RECORDS ";"
    /* Schema 9: an instance's log lines, numbered per instance (n), the
     * oldest deleted past its workflow's limits.logs, all with the
     * instance. */
    "CREATE TABLE IF NOT EXISTS logs(instance INTEGER NOT NULL,"
    " n INTEGER NOT NULL, ts_ms INTEGER NOT NULL, level INTEGER NOT NULL,"
    " step TEXT, attempt INTEGER NOT NULL, message TEXT NOT NULL,"
    " PRIMARY KEY(instance, n)) WITHOUT ROWID;"
    /* Schema 13: bulk actions' jobs (journal_bulk, host/bulk/): the
     * filter a column each, the walk's bound and cursor (`below`), the
     * counts, and the host that runs it.  Ids never used twice. */
    "CREATE TABLE IF NOT EXISTS bulk_jobs(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " workflow TEXT NOT NULL, action TEXT NOT NULL, terminate INTEGER NOT NULL,"
    " status TEXT, prefix TEXT, created_after INTEGER NOT NULL,"
    " created_before INTEGER NOT NULL, ended_after INTEGER NOT NULL,"
    " ended_before INTEGER NOT NULL, bound INTEGER NOT NULL,"
    " below INTEGER NOT NULL, matched INTEGER NOT NULL, done INTEGER NOT NULL,"
    " failed INTEGER NOT NULL, skipped INTEGER NOT NULL, state TEXT NOT NULL,"
    " created_ms INTEGER NOT NULL, ended_ms INTEGER,"
    " host INTEGER NOT NULL DEFAULT 0, errors TEXT, plan TEXT,"
    " where_terms TEXT, ids TEXT);"
    "CREATE INDEX IF NOT EXISTS bulk_jobs_workflow ON bulk_jobs(workflow, id);"
    "CREATE INDEX IF NOT EXISTS bulk_jobs_running ON bulk_jobs(id)"
    " WHERE state='running';" ATTRIBUTES;

static int exists_cb(void *ctx, int n, char **v, char **names) {
  (void)n, (void)v, (void)names;
  *(int *)ctx = 1;
  return 0;
}

/* Instance counts per workflow and status, kept by triggers in the
 * transaction of every write that inserts, deletes or moves an instance,
 * so that /metrics and a workflow's stats read a few rows where they
 * read every instance.  A file without them gets them from one scan, in
 * the transaction that adds the triggers; an older host that opens the
 * file keeps them right (the triggers are the file's).  Rows that fall
 * to 0 stay. */
static const char counts_sql[] =
    "BEGIN IMMEDIATE;"
    "CREATE TABLE instance_counts(workflow TEXT NOT NULL,"
    " status TEXT NOT NULL, n INTEGER NOT NULL,"
    " PRIMARY KEY(workflow, status)) WITHOUT ROWID;"
    "INSERT INTO instance_counts SELECT workflow, status, COUNT(*) FROM"
    " instances GROUP BY workflow, status;"
    "CREATE TRIGGER instance_counts_insert AFTER INSERT ON instances BEGIN"
    " INSERT INTO instance_counts VALUES(new.workflow, new.status, 1)"
    " ON CONFLICT(workflow, status) DO UPDATE SET n=n+1; END;"
    "CREATE TRIGGER instance_counts_delete AFTER DELETE ON instances BEGIN"
    " UPDATE instance_counts SET n=n-1 WHERE workflow=old.workflow AND"
    " status=old.status; END;"
    "CREATE TRIGGER instance_counts_move AFTER UPDATE OF status ON instances"
    " WHEN old.status IS NOT new.status BEGIN"
    " UPDATE instance_counts SET n=n-1 WHERE workflow=old.workflow AND"
    " status=old.status;"
    " INSERT INTO instance_counts VALUES(new.workflow, new.status, 1)"
    " ON CONFLICT(workflow, status) DO UPDATE SET n=n+1; END;"
    "COMMIT;";

/* Whether the file keeps instance_counts. */
int sqlite_counts_kept(sqlite3 *db) {
  int kept = 0;
  sqlite3_exec(db,
               "SELECT 1 FROM sqlite_master WHERE type='trigger' AND "
               "name='instance_counts_move'",
               exists_cb, &kept, NULL);
  return kept;
}

static int counts_setup(sqlite3 *db, const char *path, char *err,
                        size_t errlen) {
  if (sqlite_counts_kept(db))
    return 0;
  char *msg = NULL;
  if (sqlite3_exec(db, counts_sql, NULL, NULL, &msg) == SQLITE_OK)
    return 0;
  snprintf(err, errlen, "%s: cannot add the instance counts: %s", path,
           msg ? msg : "?");
  sqlite3_free(msg);
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  return DURO_E_STORAGE;
}

/* A failed sqlite3_exec of the opening's: "<path>: <what>: <msg>" (or
 * "<path>: <msg>" without `what`) into err; frees msg. */
int sqlite_exec_failed(char *err, size_t errlen, const char *path,
                       const char *what, char *msg) {
  snprintf(err, errlen, "%s: %s%s%s", path, what ? what : "", what ? ": " : "",
           msg ? msg : "?");
  sqlite3_free(msg);
  return DURO_E_STORAGE;
}

static int upgrade_messages(sqlite3 *db, const char *path, char *err,
                            size_t errlen) {
  char *msg = NULL;
  int old_messages = 0, rc;
  /* Schema 4's messages table reused the ids of deleted messages; schema
   * 5 rebuilds it with AUTOINCREMENT (ids go on from the highest kept). */
  if (sqlite3_exec(db,
                   "SELECT 1 FROM sqlite_master WHERE name='messages' AND "
                   "sql NOT LIKE '%AUTOINCREMENT%'",
                   exists_cb, &old_messages, &msg) != SQLITE_OK ||
      (old_messages &&
       sqlite3_exec(
           db,
           "BEGIN IMMEDIATE;"
           "CREATE TABLE messages_v5("
           " seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL,"
           " body TEXT NOT NULL, attempts INTEGER NOT NULL,"
           " visible_ms INTEGER NOT NULL, lease TEXT,"
           " sent_ms INTEGER NOT NULL, last_error TEXT);"
           "INSERT INTO messages_v5 SELECT seq,queue,body,attempts,"
           " visible_ms,lease,sent_ms,last_error FROM messages;"
           "DROP TABLE messages;"
           "ALTER TABLE messages_v5 RENAME TO messages;"
           "CREATE INDEX messages_next ON messages(queue, visible_ms);"
           "CREATE INDEX messages_age ON messages(queue, sent_ms);"
           "COMMIT",
           NULL, NULL, &msg) != SQLITE_OK)) {
    rc = sqlite_exec_failed(err, errlen, path,
                            "cannot upgrade the messages table", msg);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  return 0;
}

/* Adds the column `decl` ("name TYPE") to `table` unless it has one of
 * that name; 0, or non-zero with *msg set. */
static int add_column(sqlite3 *db, const char *table, const char *decl,
                      char **msg) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT %.*s FROM %s LIMIT 0",
           (int)strcspn(decl, " "), decl, table);
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
    return 0;
  snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s", table, decl);
  return sqlite3_exec(db, sql, NULL, NULL, msg) != SQLITE_OK;
}

/* The file's schema is from + 1 where it was from; 0, or non-zero with
 * *msg set. */
static int version_from(sqlite3 *db, int from, char **msg) {
  char sql[128];
  snprintf(sql, sizeof sql,
           "UPDATE meta SET value='%d' WHERE key='schema' AND value='%d'",
           from + 1, from);
  return sqlite3_exec(db, sql, NULL, NULL, msg) != SQLITE_OK;
}

/* Schema 12 keeps each message's key (queue_keys.h) in messages.key,
 * NULL until a keyed lease computes it, and in messages_age: one
 * transaction adds the column, builds the index again and moves the
 * version, so a file is at 11 or at 12, never between.  (A file whose
 * messages table the schema above just created has them already.) */
static int upgrade_message_keys(sqlite3 *db, const char *path, char *err,
                                size_t errlen) {
  int has_key = 0;
  char *msg = NULL;
  if (sqlite3_exec(db,
                   "SELECT 1 FROM pragma_index_info('messages_age') WHERE "
                   "name='key'",
                   exists_cb, &has_key, &msg) != SQLITE_OK ||
      sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
      (!has_key &&
       (add_column(db, "messages", "key TEXT", &msg) ||
        sqlite3_exec(db,
                     "DROP INDEX IF EXISTS messages_age;"
                     "CREATE INDEX messages_age ON messages(queue, sent_ms, "
                     "seq, key);",
                     NULL, NULL, &msg) != SQLITE_OK)) ||
      version_from(db, 11, &msg) ||
      /* schema 13: bulk_jobs and attributes, which the schema above
       * creates */
      version_from(db, 12, &msg) ||
      sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  }
  return 0;
}

/* The columns later schemas added, each where it is missing. */
static int upgrade_columns(sqlite3 *db, const char *path, char *err,
                           size_t errlen) {
  char *msg = NULL;
  /* Schema 1 kept every attempt in `attempts`; schema 2 keeps the
   * successful one in its step row. */
  if (sqlite3_exec(db, "SELECT attempt_started_ms, build FROM steps LIMIT 0",
                   NULL, NULL, NULL) != SQLITE_OK &&
      sqlite3_exec(db,
                   "ALTER TABLE steps ADD COLUMN attempt_started_ms INTEGER;"
                   "ALTER TABLE steps ADD COLUMN build TEXT;"
                   "UPDATE meta SET value='2' WHERE key='schema';",
                   NULL, NULL, &msg) != SQLITE_OK) {
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  }
  /* Schema 3 pins an instance to the build it runs on (hot reload); the
   * index serves the question "is any instance that has not ended still
   * pinned to this build". */
  if ((sqlite3_exec(db, "SELECT build FROM instances LIMIT 0", NULL, NULL,
                    NULL) != SQLITE_OK &&
       sqlite3_exec(db,
                    "ALTER TABLE instances ADD COLUMN build TEXT;"
                    "UPDATE meta SET value='3' WHERE key='schema';",
                    NULL, NULL, &msg) != SQLITE_OK) ||
      sqlite3_exec(db,
                   /* Over the build alone: a status in the predicate
                    * would make every status write update the index. */
                   "DROP INDEX IF EXISTS instances_build;"
                   "CREATE INDEX IF NOT EXISTS instances_pin ON "
                   "instances(workflow, build) WHERE build IS NOT NULL;"
                   /* Schema 4 only adds the messages table, which the
                    * schema above creates where it is missing; schema 5
                    * drops its lease index (leases held under schema 4
                    * cannot be acked: they run out and deliver again). */
                   "DROP INDEX IF EXISTS messages_lease;"
                   "UPDATE meta SET value='5' WHERE key='schema' AND "
                   "value IN ('3','4')",
                   NULL, NULL, &msg) != SQLITE_OK) {
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  }
  /* Schema 6 counts an instance's restarts: a re-run step's idempotency
   * key names the run it belongs to. */
  if ((sqlite3_exec(db, "SELECT restarts FROM instances LIMIT 0", NULL, NULL,
                    NULL) != SQLITE_OK &&
       sqlite3_exec(db,
                    "ALTER TABLE instances ADD COLUMN restarts INTEGER NOT "
                    "NULL DEFAULT 0;",
                    NULL, NULL, &msg) != SQLITE_OK) ||
      sqlite3_exec(db,
                   "UPDATE meta SET value='6' WHERE key='schema' AND "
                   "value='5'",
                   NULL, NULL, &msg) != SQLITE_OK) {
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  }
  /* Schema 7 gives an instance a deadline (a workflow's `timeout`) and
   * the parent that started it (duro_child_start); the index serves the
   * children still running, which a parent's end may terminate. */
  if ((sqlite3_exec(db, "SELECT deadline_ms FROM instances LIMIT 0", NULL, NULL,
                    NULL) != SQLITE_OK &&
       sqlite3_exec(db, "ALTER TABLE instances ADD COLUMN deadline_ms INTEGER;",
                    NULL, NULL, &msg) != SQLITE_OK) ||
      (sqlite3_exec(db, "SELECT parent FROM instances LIMIT 0", NULL, NULL,
                    NULL) != SQLITE_OK &&
       sqlite3_exec(db,
                    "ALTER TABLE instances ADD COLUMN parent INTEGER;"
                    "ALTER TABLE instances ADD COLUMN parent_close INTEGER "
                    "NOT NULL DEFAULT 0;",
                    NULL, NULL, &msg) != SQLITE_OK) ||
      sqlite3_exec(db,
                   "CREATE INDEX IF NOT EXISTS instances_child ON "
                   "instances(parent) WHERE parent IS NOT NULL;"
                   "CREATE INDEX IF NOT EXISTS instances_live_child ON "
                   "instances(parent) WHERE parent IS NOT NULL AND "
                   "ended_ms IS NULL;",
                   NULL, NULL, &msg) != SQLITE_OK ||
      sqlite3_exec(db,
                   "UPDATE meta SET value='7' WHERE key='schema' AND "
                   "value='6'",
                   NULL, NULL, &msg) != SQLITE_OK) {
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  }
  /* Schema 8 only adds the pipelines' tables, which the schema above
   * creates where they are missing. */
  if (sqlite3_exec(db,
                   "UPDATE meta SET value='8' WHERE key='schema' AND "
                   "value='7'",
                   NULL, NULL, &msg) != SQLITE_OK ||
      /* and schema 9 only the logs table */
      sqlite3_exec(db,
                   "UPDATE meta SET value='9' WHERE key='schema' AND "
                   "value='8'",
                   NULL, NULL, &msg) != SQLITE_OK)
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  /* Schema 10 keeps a send's records in one row: each record of schema
   * 9 becomes a row of one line. */
  if (sqlite3_exec(db, "SELECT last FROM pipeline_records LIMIT 0", NULL, NULL,
                   NULL) != SQLITE_OK &&
      sqlite3_exec(db,
                   "BEGIN;"
                   "CREATE TABLE pipeline_records_10" PIPELINE_RECORDS ";"
                   "INSERT INTO pipeline_records_10 SELECT pipeline, seq, "
                   "seq, bytes, sent_ms, body||char(10) FROM "
                   "pipeline_records;"
                   "DROP TABLE pipeline_records;"
                   "ALTER TABLE pipeline_records_10 RENAME TO "
                   "pipeline_records;"
                   "COMMIT;",
                   NULL, NULL, &msg) != SQLITE_OK) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  }
  if (sqlite3_exec(db,
                   "UPDATE meta SET value='10' WHERE key='schema' AND "
                   "value='9'",
                   NULL, NULL, &msg) != SQLITE_OK)
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  /* Schema 11 keeps the traceparent an instance was created with, so its
   * trace continues its caller's after a restart too, and the one a queue
   * message was sent with, which the instance it starts continues. */
  int rc, bad = add_column(db, "instances", "traceparent TEXT", &msg) ||
                add_column(db, "messages", "traceparent TEXT", &msg) ||
                version_from(db, 10, &msg) ||
                /* the columns bulk_jobs (schema 13) gained since: a job's
                 * search attribute terms and its chosen instances */
                add_column(db, "bulk_jobs", "where_terms TEXT", &msg) ||
                add_column(db, "bulk_jobs", "ids TEXT", &msg);
  if (bad)
    return sqlite_exec_failed(err, errlen, path, "cannot upgrade the schema",
                              msg);
  if ((rc = upgrade_message_keys(db, path, err, errlen)) != 0)
    return rc;
  return 0;
}

int sqlite_schema_setup(sqlite3 *db, const char *path, char *err,
                        size_t errlen) {
  char *msg = NULL;
  int rc;
  if (sqlite3_exec(db, schema_sql, NULL, NULL, &msg) != SQLITE_OK)
    return sqlite_exec_failed(err, errlen, path, "cannot create schema", msg);
  if ((rc = upgrade_messages(db, path, err, errlen)) != 0 ||
      (rc = upgrade_columns(db, path, err, errlen)) != 0)
    return rc;
  return counts_setup(db, path, err, errlen);
}
