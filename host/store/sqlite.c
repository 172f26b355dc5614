/* sqlite.c — the SQLite backend of the journal: schema and its
 * migrations, the writes of every JOP_* op, and every read query.
 *
 * Connections to one WAL-mode file: `wr` is used only by the thread that
 * currently leads a group commit (journal.c runs begin, apply and commit
 * on it); every read takes a reader connection of a pool (with its
 * prepared statements cached) and gives it back, so reads on different
 * workers never wait for each other, and a thread that ends leaves no
 * connection behind.  WAL lets reads proceed
 * while a group commits, and a read started after a commit returns sees
 * it.  With synchronous=FULL, COMMIT returns after the fsync.
 *
 * Invariant: this is the only file that includes sqlite3.h. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "duro.h"
#include "util.h"

enum {
  ST_INSTANCE_INSERT,
  ST_INSTANCE_SET,
  ST_INSTANCE_CONTROL,
  ST_INSTANCE_CONTROL_CLEAR,
  ST_STEP_PUT,
  ST_STEPS_DISCARD,
  ST_STEPS_CANCEL,
  ST_INSTANCE_RESTARTED,
  ST_ATTEMPTS_DISCARD,
  ST_STEPS_SHIFT_WAKE,
  ST_ATTEMPT_PUT,
  ST_EVENT_INSERT,
  ST_EVENT_CONSUME,
  ST_WAKE_IF_WAITING,
  ST_WAKE_IF_EVENT_PENDING,
  ST_INSTANCE_PIN,
  ST_SWEEP_PICK,
  ST_SWEEP_STEPS,
  ST_SWEEP_ATTEMPTS,
  ST_SWEEP_EVENTS,
  ST_SWEEP_INSTANCES,
  ST_SWEEP_CLEAR,
  ST_MESSAGE_INSERT,
  ST_MESSAGE_PICK,
  ST_MESSAGE_LEASE,
  ST_MESSAGE_ACK,
  ST_MESSAGE_HELD,
  ST_MESSAGES_DROPPED,
  ST_MESSAGE_MOVE,
  ST_MESSAGE_DELETE,
  ST_MESSAGES_EXPIRE,
  ST_CRON_SINCE,
  ST_CRON_TICK,
  ST_CRON_TICK_SET,
  ST_CRON_MISSED_EXTRA,
  ST_CRON_COUNT,
  ST_CRON_SWEEP,
  ST_BEGIN,
  ST_COMMIT,
  ST_ROLLBACK,
  ST_WRITE_COUNT_
};

static const char *const write_sql[ST_WRITE_COUNT_] = {
    [ST_INSTANCE_INSERT] =
        "INSERT INTO instances(workflow,id,status,params,created_ms,"
        "retention_ms) VALUES(?1,?2,?3,?4,?5,?6) "
        "ON CONFLICT(workflow,id) DO NOTHING",
    [ST_INSTANCE_SET] =
        "UPDATE instances SET status=?2, output=?3, error=?4, started_ms=?5, "
        "ended_ms=?6, wake_ms=?7, paused_ms=?8, wait_type=?9, "
        "control=CASE WHEN ?10 THEN 0 ELSE control END "
        "WHERE rowid=?1",
    [ST_INSTANCE_CONTROL] = "UPDATE instances SET control=?2 WHERE rowid=?1",
    [ST_INSTANCE_CONTROL_CLEAR] =
        "UPDATE instances SET control=0 WHERE rowid=?1",
    [ST_STEP_PUT] =
        "INSERT OR REPLACE INTO steps(instance,key,seq,name,count,type,status,"
        "result,error,attempts,started_ms,ended_ms,wake_ms,attempt_started_ms,"
        "build) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)",
    [ST_STEPS_DISCARD] = "DELETE FROM steps WHERE instance=?1 AND seq>=?2",
    [ST_ATTEMPTS_DISCARD] =
        "DELETE FROM attempts WHERE instance=?1 AND key NOT IN "
        "(SELECT key FROM steps WHERE instance=?1)",
    /* An instance that ends closes the steps still pending (a back-off,
     * a sleep, an event wait): nothing will run them. */
    [ST_STEPS_CANCEL] =
        "UPDATE steps SET status='cancelled', ended_ms=?2, wake_ms=NULL "
        "WHERE instance=?1 AND status='waiting'",
    [ST_INSTANCE_RESTARTED] =
        "UPDATE instances SET restarts=restarts+1 WHERE rowid=?1",
    [ST_STEPS_SHIFT_WAKE] =
        "UPDATE steps SET wake_ms=wake_ms+?2 WHERE instance=?1 AND "
        "status='waiting' AND wake_ms IS NOT NULL",
    [ST_ATTEMPT_PUT] =
        "INSERT OR REPLACE INTO attempts(instance,key,number,started_ms,"
        "ended_ms,error,build) VALUES(?1,?2,?3,?4,?5,?6,?7)",
    /* Nothing is stored for an instance that has ended: checked in the
     * commit, so an end that overtakes the event cannot be missed. */
    [ST_EVENT_INSERT] = "INSERT INTO events(instance,type,payload,ts_ms) "
                        "SELECT ?1,?2,?3,?4 FROM instances WHERE rowid=?1 AND "
                        "status NOT IN ('complete','errored','terminated')",
    [ST_EVENT_CONSUME] = "UPDATE events SET consumed_by=?2 WHERE seq=?1",
    [ST_WAKE_IF_WAITING] = "UPDATE instances SET wake_ms=?3 WHERE rowid=?1 AND "
                           "status='waiting' AND wait_type=?2",
    /* Only when it changes: the pin index is not touched by the many
     * status writes of an instance. */
    [ST_INSTANCE_PIN] = "UPDATE instances SET build=?2 WHERE rowid=?1 AND "
                        "build IS NOT ?2",
    [ST_WAKE_IF_EVENT_PENDING] =
        "UPDATE instances SET wake_ms=?2 WHERE rowid=?1 AND "
        "status='waiting' AND wait_type IS NOT NULL AND EXISTS(SELECT 1 "
        "FROM events WHERE instance=?1 AND type=instances.wait_type AND "
        "consumed_by IS NULL)",
    /* The expression matches the instances_expiry index. */
    [ST_SWEEP_PICK] =
        "INSERT INTO temp.sweep SELECT rowid FROM instances WHERE "
        "ended_ms IS NOT NULL AND ended_ms + retention_ms <= ?1 AND "
        "status IN ('complete','errored','terminated') LIMIT ?2",
    [ST_SWEEP_STEPS] =
        "DELETE FROM steps WHERE instance IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_ATTEMPTS] =
        "DELETE FROM attempts WHERE instance IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_EVENTS] =
        "DELETE FROM events WHERE instance IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_INSTANCES] =
        "DELETE FROM instances WHERE rowid IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_CLEAR] = "DELETE FROM temp.sweep",
    [ST_MESSAGE_INSERT] = "INSERT INTO messages(queue,body,attempts,"
                          "visible_ms,sent_ms) VALUES(?1,?2,0,?4,?3)",
    /* Served by messages_next: the queue's visible messages in order. */
    [ST_MESSAGE_PICK] =
        "SELECT seq,attempts,body,sent_ms,last_error FROM messages WHERE "
        "queue=?1 AND visible_ms<=?2 ORDER BY visible_ms,seq LIMIT ?3",
    [ST_MESSAGE_LEASE] = "UPDATE messages SET lease=?2, visible_ms=?3, "
                         "attempts=attempts+1 WHERE seq=?1",
    /* A lease is held while its message is invisible: once visible_ms
     * passed, the message may be pulled again under another lease.  A
     * lease id names its message ("<token>-<seq>", lease_seq), so an ack
     * finds the row by its key and needs no index on leases (bench Q1:
     * one index fewer to keep on every lease and ack). */
    [ST_MESSAGE_ACK] = "DELETE FROM messages WHERE seq=?4 AND lease=?1 AND "
                       "queue=?2 AND visible_ms>?3",
    [ST_MESSAGE_HELD] = "SELECT seq,attempts FROM messages WHERE seq=?4 AND "
                        "lease=?1 AND queue=?2 AND visible_ms>?3",
    [ST_MESSAGE_MOVE] =
        "UPDATE messages SET queue=?2, lease=NULL, visible_ms=?3, "
        "last_error=COALESCE(?4,last_error) WHERE seq=?1",
    [ST_MESSAGE_DELETE] = "DELETE FROM messages WHERE seq=?1",
    [ST_MESSAGES_DROPPED] =
        "INSERT INTO queue_counts(queue,dropped,dead_lettered) "
        "VALUES(?1,?2,?3) ON CONFLICT(queue) DO UPDATE SET "
        "dropped=dropped+excluded.dropped,"
        "dead_lettered=dead_lettered+excluded.dead_lettered",
    /* Served by messages_age. */
    [ST_CRON_SINCE] = "INSERT OR IGNORE INTO cron_triggers(trigger,since_ms,"
                      "complete,failed,missed,skipped) VALUES(?1,?2,0,0,0,0)",
    /* A tick is claimed by inserting its row: a second claim changes
     * nothing (out_rowid 0). */
    [ST_CRON_TICK] = "INSERT OR IGNORE INTO cron_ticks(trigger,tick_ms,state,"
                     "fired_ms,instance,error) VALUES(?1,?2,?3,?4,?5,?6)",
    /* Only a tick still `fired` is settled, once. */
    [ST_CRON_TICK_SET] = "UPDATE cron_ticks SET state=?3, error=?4 WHERE "
                         "trigger=?1 AND tick_ms=?2 AND state='fired'",
    [ST_CRON_MISSED_EXTRA] = "UPDATE cron_triggers SET missed=missed+?2 "
                             "WHERE trigger=?1",
    /* The counts go with the rows' writes, so they outlive the rows the
     * sweep deletes. */
    [ST_CRON_COUNT] =
        "UPDATE cron_triggers SET complete=complete+(?2='complete'),"
        "failed=failed+(?2='failed'),missed=missed+(?2='missed'),"
        "skipped=skipped+(?2='skipped') WHERE trigger=?1",
    /* Ticks older than ?1, but each trigger's newest, which says where
     * its schedule stands. */
    [ST_CRON_SWEEP] =
        "DELETE FROM cron_ticks WHERE tick_ms<?1 AND tick_ms<(SELECT "
        "MAX(tick_ms) FROM cron_ticks AS c WHERE c.trigger=cron_ticks.trigger)",
    [ST_MESSAGES_EXPIRE] =
        "DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE "
        "queue=?1 AND sent_ms<?2 LIMIT ?3)",
    /* A group's transaction: prepared once, as every other write. */
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
    "INSERT OR IGNORE INTO meta VALUES('schema','6');"
    "CREATE TABLE IF NOT EXISTS instances("
    " rowid INTEGER PRIMARY KEY,"
    " workflow TEXT NOT NULL, id TEXT NOT NULL, status TEXT NOT NULL,"
    " params TEXT NOT NULL, output TEXT, error TEXT,"
    " created_ms INTEGER NOT NULL, started_ms INTEGER, ended_ms INTEGER,"
    " wake_ms INTEGER, paused_ms INTEGER, wait_type TEXT,"
    " control INTEGER NOT NULL DEFAULT 0, retention_ms INTEGER NOT NULL,"
    " build TEXT, restarts INTEGER NOT NULL DEFAULT 0,"
    " UNIQUE(workflow, id));"
    "CREATE INDEX IF NOT EXISTS instances_wake ON instances(wake_ms)"
    " WHERE wake_ms IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS instances_status ON instances(status);"
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
    " sent_ms INTEGER NOT NULL, last_error TEXT);"
    "CREATE INDEX IF NOT EXISTS messages_next ON messages(queue, visible_ms);"
    "CREATE INDEX IF NOT EXISTS messages_age ON messages(queue, sent_ms);"
    /* Schema 5: messages of a queue out of retries, dropped (no
     * dead-letter queue) or dead-lettered, counted in the commit that
     * drops or moves them. */
    /* Schema 5: cron triggers.  A trigger is known from since_ms on (no
     * tick before it is missed) and counts its ticks by how they ended;
     * each tick that came is a row, claimed before anything fires, kept
     * 30 days (cron/trigger.c sweeps them). */
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
    " WITHOUT ROWID;";

/* A read connection and its cached statements, keyed by the address of
 * their SQL text (always a string literal here). */
#define READER_CACHE 24
typedef struct reader {
  sqlite3 *db;
  struct {
    const char *sql;
    sqlite3_stmt *st;
  } cache[READER_CACHE];
  size_t n;
  struct reader *next; /* every reader, in `readers` */
  struct reader *next_idle;
} reader;

/* Which file a path named (st_dev, st_ino), to find it deleted or
 * replaced later. */
typedef struct file_id {
  dev_t dev;
  ino_t ino;
  int known;
} file_id;

/* The backend's handle: the writer connection with its prepared
 * statements, the pool of readers, and the files they opened. */
typedef struct sqlite_store {
  sqlite3 *wr;
  sqlite3_stmt *ws[ST_WRITE_COUNT_];
  char *path;
  int synchronous_full;
  file_id file, wal;          /* the database and its write-ahead log */
  int counted;                /* instance_counts is kept (counts_setup) */
  pthread_mutex_t readers_mu; /* guards `readers` and `idle` */
  reader *readers;            /* every reader, closed with the store */
  reader *idle;               /* those no read holds, the last freed first */
} sqlite_store;

/* Why `db` failed, for journal_errmsg. */
static void set_err(sqlite3 *db, const char *what) {
  store_error("%s%s%s", what ? what : "", what ? ": " : "",
              db ? sqlite3_errmsg(db) : "no connection");
}

/* ---- open / close -------------------------------------------------------- */

/* synchronous_full < 0: a read-only connection (a dry run beside a running
 * host), which sets nothing. */
static int open_conn(const char *path, int synchronous_full, sqlite3 **out,
                     char *err, size_t errlen) {
  sqlite3 *db = NULL;
  int flags = synchronous_full < 0 ? SQLITE_OPEN_READONLY
                                   : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "%s: cannot open database: %s", path,
             db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return DURO_E_STORAGE;
  }
  sqlite3_busy_timeout(db, 10000);
  if (synchronous_full < 0) {
    *out = db;
    return 0;
  }
  /* 1 KiB pages (for a new file; an existing one keeps its own): a step's
   * commit appends about two pages to the WAL and fsyncs them, and with
   * 4 KiB pages that fsync cost ~50% more than a bare one-row commit on
   * the development machine; with 1 KiB pages, 5-15% (bench W2). */
  char sql[200];
  snprintf(sql, sizeof sql,
           "PRAGMA page_size=1024; PRAGMA journal_mode=WAL;"
           "PRAGMA synchronous=%s; PRAGMA foreign_keys=OFF;",
           synchronous_full ? "FULL" : "NORMAL");
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", path, msg ? msg : "pragma failed");
    sqlite3_free(msg);
    sqlite3_close(db);
    return DURO_E_STORAGE;
  }
  *out = db;
  return 0;
}

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
static int counts_kept(sqlite3 *db) {
  int kept = 0;
  sqlite3_exec(db,
               "SELECT 1 FROM sqlite_master WHERE type='trigger' AND "
               "name='instance_counts_move'",
               exists_cb, &kept, NULL);
  return kept;
}

static int counts_setup(sqlite3 *db, const char *path, char *err,
                        size_t errlen) {
  if (counts_kept(db))
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

/* Whether path+suffix is no longer the file `id` names: deleted, or
 * another file renamed over it.  A file not seen yet is learned (the
 * write-ahead log appears with the first write). */
static int file_gone(const char *path, const char *suffix, file_id *id) {
  char name[4096];
  snprintf(name, sizeof name, "%s%s", path, suffix);
  struct stat st;
  if (stat(name, &st) != 0)
    return id->known;
  if (!id->known) {
    *id = (file_id){st.st_dev, st.st_ino, 1};
    return 0;
  }
  return st.st_dev != id->dev || st.st_ino != id->ino;
}

/* The files the connections have open are still the ones at the path.
 * Deleted (or replaced), they still take writes, which a restart would
 * never find: every acknowledged write since would be lost. */
static int sqlite_check(void *db) {
  sqlite_store *sq = db;
  if (sq->synchronous_full < 0)
    return 0; /* a read-only look writes nothing */
  const char *gone = file_gone(sq->path, "", &sq->file)      ? ""
                     : file_gone(sq->path, "-wal", &sq->wal) ? "-wal"
                                                             : NULL;
  if (!gone)
    return 0;
  store_error("%s%s was deleted or replaced while the host ran: writes "
              "are refused until it restarts",
              sq->path, gone);
  return DURO_E_STORAGE;
}

/* A failed sqlite3_exec of the opening's: "<path>: <what>: <msg>" (or
 * "<path>: <msg>" without `what`) into err; frees msg. */
static int exec_failed(char *err, size_t errlen, const char *path,
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
    rc = exec_failed(err, errlen, path, "cannot upgrade the messages table",
                     msg);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
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
    return exec_failed(err, errlen, path, "cannot upgrade the schema", msg);
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
    return exec_failed(err, errlen, path, "cannot upgrade the schema", msg);
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
    return exec_failed(err, errlen, path, "cannot upgrade the schema", msg);
  }
  return 0;
}

static int sqlite_open(const char *path, int synchronous_full, void **out,
                       char *err, size_t errlen) {
  sqlite_store *sq = xcalloc(1, sizeof *sq);
  int rc = open_conn(path, synchronous_full, &sq->wr, err, errlen);
  if (rc)
    goto fail;
  char *msg = NULL;
  if (synchronous_full < 0)
    goto statements; /* read-only: the schema is as the host left it */
  if (sqlite3_exec(sq->wr, schema_sql, NULL, NULL, &msg) != SQLITE_OK) {
    rc = exec_failed(err, errlen, path, "cannot create schema", msg);
    goto fail;
  }
  if ((rc = upgrade_messages(sq->wr, path, err, errlen)) != 0 ||
      (rc = upgrade_columns(sq->wr, path, err, errlen)) != 0)
    goto fail;
  if ((rc = counts_setup(sq->wr, path, err, errlen)) != 0)
    goto fail;
statements:
  sq->counted = counts_kept(sq->wr);
  /* The sweep's scratch table lives in the connection's temp database,
   * writable even on a read-only connection. */
  if (sqlite3_exec(sq->wr,
                   "CREATE TEMP TABLE IF NOT EXISTS sweep(id INTEGER "
                   "PRIMARY KEY)",
                   NULL, NULL, &msg) != SQLITE_OK) {
    rc = exec_failed(err, errlen, path, NULL, msg);
    goto fail;
  }
  for (int i = 0; i < ST_WRITE_COUNT_; i++) {
    if (sqlite3_prepare_v3(sq->wr, write_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                           &sq->ws[i], NULL) != SQLITE_OK) {
      snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(sq->wr));
      rc = DURO_E_STORAGE;
      goto fail;
    }
  }
  sq->path = xstrdup(path);
  sq->synchronous_full = synchronous_full;
  file_gone(path, "", &sq->file);
  file_gone(path, "-wal", &sq->wal);
  pthread_mutex_init(&sq->readers_mu, NULL);
  *out = sq;
  return 0;

fail:
  for (int i = 0; i < ST_WRITE_COUNT_; i++)
    sqlite3_finalize(sq->ws[i]);
  sqlite3_close(sq->wr);
  free(sq);
  return rc;
}

static void sqlite_close(void *db) {
  sqlite_store *sq = db;
  for (int i = 0; i < ST_WRITE_COUNT_; i++)
    sqlite3_finalize(sq->ws[i]);
  sqlite3_close(sq->wr);
  for (reader *r = sq->readers, *next; r; r = next) {
    next = r->next;
    for (size_t i = 0; i < r->n; i++)
      sqlite3_finalize(r->cache[i].st);
    sqlite3_close(r->db);
    free(r);
  }
  pthread_mutex_destroy(&sq->readers_mu);
  free(sq->path);
  free(sq);
}

/* ---- applying ops on the writer connection ------------------------------- */

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
  if (s)
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, i);
}

static void bind_ms(sqlite3_stmt *st, int i, int64_t v) {
  if (v == JOURNAL_NONE)
    sqlite3_bind_null(st, i);
  else
    sqlite3_bind_int64(st, i, v);
}

static int step_done(sqlite_store *sq, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  return 0;
}

/* Counts a tick of the trigger by its state (cron_triggers). */
static int cron_count(sqlite_store *sq, const char *trigger,
                      const char *state) {
  sqlite3_stmt *st = sq->ws[ST_CRON_COUNT];
  bind_text(st, 1, trigger);
  bind_text(st, 2, state);
  return step_done(sq, st);
}

/* Counts n messages of `queue` out of retries (queue_counts): dropped,
 * or moved to its dead-letter queue. */
static int count_spent(sqlite_store *sq, const char *queue, int dead_lettered,
                       int64_t n) {
  sqlite3_stmt *st = sq->ws[ST_MESSAGES_DROPPED];
  bind_text(st, 1, queue);
  sqlite3_bind_int64(st, 2, dead_lettered ? 0 : n);
  sqlite3_bind_int64(st, 3, dead_lettered ? n : 0);
  return step_done(sq, st);
}

/* Picks the visible messages first, then leases them one by one: an
 * UPDATE while the SELECT still walks the index it changes could meet a
 * row twice. */
static int message_lease(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st = sq->ws[ST_MESSAGE_PICK];
  bind_text(st, 1, op->queue);
  sqlite3_bind_int64(st, 2, op->ts_ms);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)op->n_leases);
  journal_message *v = xcalloc(op->n_leases ? op->n_leases : 1, sizeof *v);
  int64_t *spent = xcalloc(op->n_leases ? op->n_leases : 1, sizeof *spent);
  size_t n = 0, n_spent = 0;
  int s = SQLITE_DONE;
  while (n + n_spent < op->n_leases && (s = sqlite3_step(st)) == SQLITE_ROW) {
    /* Delivered max_attempts times and the last lease ran out unacked:
     * an expired lease is a failed attempt too (a handler that crashes
     * the host never acks), so it goes the way of a spent retry. */
    if (op->max_attempts &&
        sqlite3_column_int64(st, 1) >= (int64_t)op->max_attempts) {
      spent[n_spent++] = sqlite3_column_int64(st, 0);
      continue;
    }
    journal_message *m = &v[n++];
    m->seq = sqlite3_column_int64(st, 0);
    m->attempts = (uint32_t)sqlite3_column_int64(st, 1) + 1;
    m->body = xstrdup((const char *)sqlite3_column_text(st, 2));
    m->sent_ms = sqlite3_column_int64(st, 3);
    const unsigned char *err = sqlite3_column_text(st, 4);
    m->last_error = err ? xstrdup((const char *)err) : NULL;
    m->queue = xstrdup(op->queue);
    m->lease = xasprintf("%s-%lld", op->lease_token, (long long)m->seq);
    m->visible_ms = op->visible_ms;
  }
  int rc = n + n_spent < op->n_leases && s != SQLITE_DONE;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  op->messages = v;
  op->n_messages = n;
  if (rc) {
    free(spent);
    set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  op->out_rowid = (int64_t)n_spent; /* dead-lettered or dropped */
  for (size_t i = 0; i < n_spent && rc == 0; i++) {
    st = sq->ws[op->dead_letter_queue ? ST_MESSAGE_MOVE : ST_MESSAGE_DELETE];
    sqlite3_bind_int64(st, 1, spent[i]);
    if (op->dead_letter_queue) {
      bind_text(st, 2, op->dead_letter_queue);
      sqlite3_bind_int64(st, 3, op->ts_ms);
      bind_text(st, 4,
                "{\"name\":\"queue.lease_expired\",\"message\":"
                "\"delivered max_retries + 1 times, never acked\"}");
    }
    rc = step_done(sq, st);
  }
  if (rc == 0 && n_spent)
    rc = count_spent(sq, op->queue, op->dead_letter_queue != NULL,
                     (int64_t)n_spent);
  free(spent);
  if (rc)
    return rc;
  for (size_t i = 0; i < n; i++) {
    st = sq->ws[ST_MESSAGE_LEASE];
    sqlite3_bind_int64(st, 1, v[i].seq);
    bind_text(st, 2, v[i].lease);
    sqlite3_bind_int64(st, 3, op->visible_ms);
    if ((rc = step_done(sq, st)))
      return rc;
  }
  return 0;
}

/* A retried message goes back to its queue after the delay, unless it
 * has had its max_attempts: then to the dead-letter queue (visible at
 * once, attempts and error kept), or it is dropped. */
static int message_retry(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st = sq->ws[ST_MESSAGE_HELD];
  bind_text(st, 1, op->lease);
  bind_text(st, 2, op->queue);
  sqlite3_bind_int64(st, 3, op->ts_ms);
  sqlite3_bind_int64(st, 4, journal_lease_seq(op->lease));
  int s = sqlite3_step(st);
  int64_t seq = s == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  int64_t attempts = s == SQLITE_ROW ? sqlite3_column_int64(st, 1) : 0;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (s != SQLITE_ROW && s != SQLITE_DONE) {
    set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  if (s == SQLITE_DONE) {
    op->out_rowid = JOURNAL_RETRY_NOT_HELD;
    return 0;
  }
  int spent = attempts >= (int64_t)op->max_attempts;
  if (spent && !op->dead_letter_queue) {
    st = sq->ws[ST_MESSAGE_DELETE];
    sqlite3_bind_int64(st, 1, seq);
    op->out_rowid = JOURNAL_RETRY_DROPPED;
    int rc = step_done(sq, st);
    return rc ? rc : count_spent(sq, op->queue, 0, 1);
  }
  st = sq->ws[ST_MESSAGE_MOVE];
  sqlite3_bind_int64(st, 1, seq);
  bind_text(st, 2, spent ? op->dead_letter_queue : op->queue);
  sqlite3_bind_int64(st, 3, spent ? op->ts_ms : op->visible_ms);
  bind_text(st, 4, op->error);
  op->out_rowid = spent ? JOURNAL_RETRY_DEAD_LETTERED : JOURNAL_RETRY_DELAYED;
  int rc = step_done(sq, st);
  return rc || !spent ? rc : count_spent(sq, op->queue, 1, 1);
}

/* step_done, then how many rows the statement changed into out_rowid. */
static int step_changes(sqlite_store *sq, sqlite3_stmt *st, journal_op *op) {
  int rc = step_done(sq, st);
  op->out_rowid = rc == 0 ? sqlite3_changes(sq->wr) : 0;
  return rc;
}

/* Runs a tick row's write; a row it changed counts in its state. */
static int cron_tick_written(sqlite_store *sq, sqlite3_stmt *st,
                             journal_op *op) {
  int rc = step_changes(sq, st, op);
  return rc || !op->out_rowid ? rc : cron_count(sq, op->queue, op->body);
}

static int instance_insert(sqlite_store *sq, journal_op *op) {
  const journal_instance *in = op->inst;
  sqlite3_stmt *st = sq->ws[ST_INSTANCE_INSERT];
  int rc;
  bind_text(st, 1, in->workflow);
  bind_text(st, 2, in->id);
  bind_text(st, 3, duro_status_name(in->status));
  bind_text(st, 4, in->params);
  sqlite3_bind_int64(st, 5, in->created_ms);
  sqlite3_bind_int64(st, 6, in->retention_ms);
  if ((rc = step_done(sq, st)))
    return rc;
  if (sqlite3_changes(sq->wr) == 0) {
    op->rc = DURO_E_ALREADY_EXISTS;
  } else {
    op->rc = 0;
    op->out_rowid = sqlite3_last_insert_rowid(sq->wr);
  }
  return 0;
}

/* An instance's new state; an end by error or terminate cancels the
 * steps still open. */
static int instance_set(sqlite_store *sq, journal_op *op) {
  const journal_instance *in = op->inst;
  sqlite3_stmt *st = sq->ws[ST_INSTANCE_SET];
  int rc;
  sqlite3_bind_int64(st, 1, in->rowid);
  bind_text(st, 2, duro_status_name(in->status));
  bind_text(st, 3, in->output);
  bind_text(st, 4, in->error);
  bind_ms(st, 5, in->started_ms);
  bind_ms(st, 6, in->ended_ms);
  bind_ms(st, 7, in->wake_ms);
  bind_ms(st, 8, in->paused_ms);
  bind_text(st, 9, in->wait_type);
  sqlite3_bind_int(st, 10, op->clear_control);
  if ((rc = step_done(sq, st)))
    return rc;
  if (in->status != DURO_STATUS_ERRORED && in->status != DURO_STATUS_TERMINATED)
    return 0;
  st = sq->ws[ST_STEPS_CANCEL];
  sqlite3_bind_int64(st, 1, in->rowid);
  bind_ms(st, 2, in->ended_ms);
  return step_done(sq, st);
}

/* The instance's one-statement ops: its control, restarts, pin. */
static int instance_mark(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  switch (op->kind) {
  case JOP_INSTANCE_CONTROL:
    st = sq->ws[ST_INSTANCE_CONTROL];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int(st, 2, op->inst ? op->inst->control : 0);
    return step_done(sq, st);
  case JOP_INSTANCE_CONTROL_CLEAR:
    st = sq->ws[ST_INSTANCE_CONTROL_CLEAR];
    sqlite3_bind_int64(st, 1, op->rowid);
    return step_done(sq, st);
  case JOP_INSTANCE_RESTARTED:
    st = sq->ws[ST_INSTANCE_RESTARTED];
    sqlite3_bind_int64(st, 1, op->rowid);
    return step_done(sq, st);
  case JOP_INSTANCE_PIN:
    st = sq->ws[ST_INSTANCE_PIN];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_text(st, 2, op->step_key);
    return step_done(sq, st);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

static int step_put(sqlite_store *sq, journal_op *op) {
  const journal_step *s = op->step;
  sqlite3_stmt *st = sq->ws[ST_STEP_PUT];
  sqlite3_bind_int64(st, 1, op->rowid);
  bind_text(st, 2, s->key);
  sqlite3_bind_int64(st, 3, s->seq);
  bind_text(st, 4, s->name);
  sqlite3_bind_int64(st, 5, s->count);
  bind_text(st, 6, duro_step_kind_name(s->type));
  bind_text(st, 7, duro_step_status_name(s->status));
  bind_text(st, 8, s->result);
  bind_text(st, 9, s->error);
  sqlite3_bind_int64(st, 10, s->attempts);
  bind_ms(st, 11, s->started_ms);
  bind_ms(st, 12, s->ended_ms);
  bind_ms(st, 13, s->wake_ms);
  bind_ms(st, 14, s->attempt_started_ms);
  bind_text(st, 15, s->build);
  return step_done(sq, st);
}

/* The steps' other ops: a discard (with the attempts), a shift of their
 * wakes, an attempt's row. */
static int steps_change(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  int rc;
  switch (op->kind) {
  case JOP_STEPS_DISCARD:
    st = sq->ws[ST_STEPS_DISCARD];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->from_seq < 0 ? INT64_MIN : op->from_seq);
    if ((rc = step_done(sq, st)))
      return rc;
    st = sq->ws[ST_ATTEMPTS_DISCARD];
    sqlite3_bind_int64(st, 1, op->rowid);
    return step_done(sq, st);
  case JOP_STEPS_SHIFT_WAKE:
    st = sq->ws[ST_STEPS_SHIFT_WAKE];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->from_seq);
    return step_done(sq, st);
  case JOP_ATTEMPT_PUT:
    st = sq->ws[ST_ATTEMPT_PUT];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_text(st, 2, op->attempt.key);
    sqlite3_bind_int64(st, 3, op->attempt.number);
    bind_ms(st, 4, op->attempt.started_ms);
    bind_ms(st, 5, op->attempt.ended_ms);
    bind_text(st, 6, op->attempt.error);
    bind_text(st, 7, op->attempt.build);
    return step_done(sq, st);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

/* An event's ops: its insert, its consumption, the wakes it may cause. */
static int event_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  int rc;
  switch (op->kind) {
  case JOP_EVENT_INSERT:
    st = sq->ws[ST_EVENT_INSERT];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_text(st, 2, op->event_type);
    bind_text(st, 3, op->event_payload);
    sqlite3_bind_int64(st, 4, op->ts_ms);
    if ((rc = step_done(sq, st)))
      return rc;
    if (sqlite3_changes(sq->wr) == 0) {
      op->rc = DURO_E_INSTANCE_ENDED;
      return 0;
    }
    op->rc = 0;
    op->out_rowid = sqlite3_last_insert_rowid(sq->wr);
    return 0;
  case JOP_EVENT_CONSUME:
    st = sq->ws[ST_EVENT_CONSUME];
    sqlite3_bind_int64(st, 1, op->event_seq);
    bind_text(st, 2, op->step_key);
    return step_done(sq, st);
  case JOP_WAKE_IF_WAITING:
    st = sq->ws[ST_WAKE_IF_WAITING];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_text(st, 2, op->event_type);
    sqlite3_bind_int64(st, 3, op->ts_ms);
    return step_changes(sq, st, op);
  case JOP_WAKE_IF_EVENT_PENDING:
    st = sq->ws[ST_WAKE_IF_EVENT_PENDING];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->ts_ms);
    return step_changes(sq, st, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

static int sweep(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st = sq->ws[ST_SWEEP_PICK];
  int rc;
  sqlite3_bind_int64(st, 1, op->ts_ms);
  sqlite3_bind_int64(st, 2, op->from_seq);
  if ((rc = step_done(sq, st)))
    return rc;
  op->out_rowid = sqlite3_changes(sq->wr);
  for (int k = ST_SWEEP_STEPS; k <= ST_SWEEP_CLEAR; k++)
    if ((rc = step_done(sq, sq->ws[k])))
      return rc;
  return 0;
}

/* A queue's ops (a lease and a retry have their own functions). */
static int message_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  int rc;
  switch (op->kind) {
  case JOP_MESSAGE_INSERT:
    st = sq->ws[ST_MESSAGE_INSERT];
    bind_text(st, 1, op->queue);
    bind_text(st, 2, op->body);
    sqlite3_bind_int64(st, 3, op->ts_ms);
    sqlite3_bind_int64(st, 4, op->visible_ms);
    if ((rc = step_done(sq, st)))
      return rc;
    op->out_rowid = sqlite3_last_insert_rowid(sq->wr);
    return 0;
  case JOP_MESSAGE_ACK:
    st = sq->ws[ST_MESSAGE_ACK];
    bind_text(st, 1, op->lease);
    bind_text(st, 2, op->queue);
    sqlite3_bind_int64(st, 3, op->ts_ms);
    sqlite3_bind_int64(st, 4, journal_lease_seq(op->lease));
    return step_changes(sq, st, op);
  case JOP_MESSAGES_EXPIRE:
    st = sq->ws[ST_MESSAGES_EXPIRE];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->ts_ms);
    sqlite3_bind_int64(st, 3, op->from_seq);
    return step_changes(sq, st, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

/* A cron trigger's ops: its start, its ticks, their sweep. */
static int cron_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  switch (op->kind) {
  case JOP_CRON_SINCE:
    st = sq->ws[ST_CRON_SINCE];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->ts_ms);
    return step_done(sq, st);
  case JOP_CRON_TICK:
    st = sq->ws[ST_CRON_TICK];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->visible_ms);
    bind_text(st, 3, op->body);
    bind_ms(st, 4, op->ts_ms);
    bind_text(st, 5, op->lease);
    bind_text(st, 6, op->error);
    return cron_tick_written(sq, st, op);
  case JOP_CRON_TICK_SET:
    st = sq->ws[ST_CRON_TICK_SET];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->visible_ms);
    bind_text(st, 3, op->body);
    bind_text(st, 4, op->error);
    return cron_tick_written(sq, st, op);
  case JOP_CRON_SWEEP:
    st = sq->ws[ST_CRON_SWEEP];
    sqlite3_bind_int64(st, 1, op->ts_ms);
    return step_changes(sq, st, op);
  case JOP_CRON_MISSED_EXTRA:
    st = sq->ws[ST_CRON_MISSED_EXTRA];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->from_seq);
    return step_done(sq, st);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

/* Every op kind is named here, so the compiler tells of a new one left
 * out (-Wswitch). */
static int sqlite_apply(void *db, journal_op *op) {
  sqlite_store *sq = db;
  switch (op->kind) {
  case JOP_INSTANCE_INSERT:
    return instance_insert(sq, op);
  case JOP_INSTANCE_SET:
    return instance_set(sq, op);
  case JOP_INSTANCE_CONTROL:
  case JOP_INSTANCE_CONTROL_CLEAR:
  case JOP_INSTANCE_RESTARTED:
  case JOP_INSTANCE_PIN:
    return instance_mark(sq, op);
  case JOP_STEP_PUT:
    return step_put(sq, op);
  case JOP_STEPS_DISCARD:
  case JOP_STEPS_SHIFT_WAKE:
  case JOP_ATTEMPT_PUT:
    return steps_change(sq, op);
  case JOP_EVENT_INSERT:
  case JOP_EVENT_CONSUME:
  case JOP_WAKE_IF_WAITING:
  case JOP_WAKE_IF_EVENT_PENDING:
    return event_apply(sq, op);
  case JOP_SWEEP:
    return sweep(sq, op);
  case JOP_MESSAGE_INSERT:
  case JOP_MESSAGE_ACK:
  case JOP_MESSAGES_EXPIRE:
    return message_apply(sq, op);
  case JOP_MESSAGE_LEASE:
    return message_lease(sq, op);
  case JOP_MESSAGE_RETRY:
    return message_retry(sq, op);
  case JOP_CRON_SINCE:
  case JOP_CRON_TICK:
  case JOP_CRON_TICK_SET:
  case JOP_CRON_SWEEP:
  case JOP_CRON_MISSED_EXTRA:
    return cron_apply(sq, op);
  }
  return DURO_E_INVALID_ARGUMENT;
}

/* Runs one of the transaction statements. */
static int exec_ws(sqlite_store *sq, int which) {
  sqlite3_stmt *st = sq->ws[which];
  int s = sqlite3_step(st);
  sqlite3_reset(st);
  if (s != SQLITE_DONE) {
    set_err(sq->wr, write_sql[which]);
    return DURO_E_STORAGE;
  }
  return 0;
}

static int sqlite_begin(void *db) { return exec_ws(db, ST_BEGIN); }

static int sqlite_commit(void *db) { return exec_ws(db, ST_COMMIT); }

/* A failed statement or COMMIT (a full disk, an I/O error, a busy lock)
 * can leave the transaction open: never leave it so, or every later
 * group would join a transaction that cannot commit. */
static void sqlite_rollback(void *db) {
  sqlite_store *sq = db;
  if (!sqlite3_get_autocommit(sq->wr))
    exec_ws(sq, ST_ROLLBACK);
}

/* ---- reads --------------------------------------------------------------- */

static char *col_text(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? xstrdup((const char *)t) : NULL;
}

/* The enums of status.h from their stored names (-1, "unknown", for a
 * name that is none of them). */
static const char *col_name(sqlite3_stmt *st, int i) {
  return (const char *)sqlite3_column_text(st, i);
}

static duro_status col_status(sqlite3_stmt *st, int i) {
  return (duro_status)duro_status_parse(col_name(st, i));
}

static int64_t col_ms(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL
             ? JOURNAL_NONE
             : sqlite3_column_int64(st, i);
}

/* A reader for one read, from the pool: an idle one, or a new one when
 * every reader is busy.  Readers belong to the pool, not to threads, so a
 * thread that reads once and ends (a consumer's batch, a cron handler's
 * tick) leaves nothing open behind it; the pool holds as many as reads
 * ever ran at once.  Every read gives its reader back (reader_give). */
static reader *reader_take(sqlite_store *sq) {
  pthread_mutex_lock(&sq->readers_mu);
  reader *r = sq->idle;
  if (r)
    sq->idle = r->next_idle;
  pthread_mutex_unlock(&sq->readers_mu);
  if (r)
    return r;
  r = xcalloc(1, sizeof *r);
  char err[256];
  if (open_conn(sq->path, sq->synchronous_full, &r->db, err, sizeof err) != 0) {
    store_error("%s", err);
    /* A deleted file, a broken disk, no descriptors left: this read
     * fails with a storage error, and the next one tries again. */
    free(r);
    return NULL;
  }
  /* A reader looks at one instance at a time: a small page cache keeps
   * the many readers (workers, HTTP pool) from holding megabytes each. */
  sqlite3_exec(r->db, "PRAGMA cache_size=-256", NULL, NULL, NULL);
  pthread_mutex_lock(&sq->readers_mu);
  r->next = sq->readers;
  sq->readers = r;
  pthread_mutex_unlock(&sq->readers_mu);
  return r;
}

/* Ends a read: its reader goes back to the pool; returns rc. */
static int reader_give(sqlite_store *sq, reader *r, int rc) {
  if (!r)
    return rc;
  pthread_mutex_lock(&sq->readers_mu);
  r->next_idle = sq->idle;
  sq->idle = r;
  pthread_mutex_unlock(&sq->readers_mu);
  return rc;
}

/* The cached statement for `sql` (a literal), prepared on first use. */
static int prepare_rd(reader *r, const char *sql, sqlite3_stmt **st) {
  *st = NULL;
  if (!r)
    return DURO_E_STORAGE; /* reader_take said why */
  for (size_t i = 0; i < r->n; i++)
    if (r->cache[i].sql == sql) {
      *st = r->cache[i].st;
      return 0;
    }
  if (sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) !=
      SQLITE_OK) {
    set_err(r->db, NULL);
    *st = NULL;
    return DURO_E_STORAGE;
  }
  if (r->n < READER_CACHE) {
    r->cache[r->n].sql = sql;
    r->cache[r->n].st = *st;
    r->n++;
  }
  return 0;
}

/* Ends a read: cached statements are reset, others finalized. */
static void release_rd(reader *r, sqlite3_stmt *st) {
  if (!r || !st)
    return;
  for (size_t i = 0; i < r->n; i++)
    if (r->cache[i].st == st) {
      sqlite3_reset(st);
      sqlite3_clear_bindings(st);
      return;
    }
  sqlite3_finalize(st);
}

/* The end of a row loop: SQLITE_DONE is the only success; anything else
 * (an I/O error, a corrupt page) is a storage error, never "no more
 * rows". */
static int rows_end(reader *r, int s) {
  if (s == SQLITE_DONE)
    return 0;
  set_err(r->db, NULL);
  return DURO_E_STORAGE;
}

/* One read on a reader of the pool, the shape of every read below but
 * queue_ready's: rd_open takes a reader and prepares `sql` (a literal;
 * the caller binds q->st), rd_row steps to the next row (1 while there is
 * one), rd_close ends the read and returns `rc`, or the storage error that
 * ended its rows.  A read that stopped at a row it wanted no more is
 * whole. */
typedef struct rd {
  sqlite_store *sq;
  reader *r;
  sqlite3_stmt *st;
  int s; /* what the last sqlite3_step said */
} rd;

static int rd_open(rd *q, void *db, const char *sql) {
  q->sq = db;
  q->r = reader_take(db);
  q->s = SQLITE_DONE;
  return prepare_rd(q->r, sql, &q->st);
}

static int rd_row(rd *q) { return (q->s = sqlite3_step(q->st)) == SQLITE_ROW; }

static int rd_close(rd *q, int rc) {
  if (rc == 0 && q->s != SQLITE_ROW)
    rc = rows_end(q->r, q->s);
  release_rd(q->r, q->st);
  return reader_give(q->sq, q->r, rc);
}

#define INSTANCE_COLS                                                          \
  "rowid,workflow,id,status,params,output,error,created_ms,started_ms,"        \
  "ended_ms,wake_ms,paused_ms,wait_type,control,retention_ms,build,restarts"

static void read_instance(sqlite3_stmt *st, journal_instance *o) {
  o->rowid = sqlite3_column_int64(st, 0);
  o->workflow = col_text(st, 1);
  o->id = col_text(st, 2);
  o->status = col_status(st, 3);
  o->params = col_text(st, 4);
  o->output = col_text(st, 5);
  o->error = col_text(st, 6);
  o->created_ms = col_ms(st, 7);
  o->started_ms = col_ms(st, 8);
  o->ended_ms = col_ms(st, 9);
  o->wake_ms = col_ms(st, 10);
  o->paused_ms = col_ms(st, 11);
  o->wait_type = col_text(st, 12);
  o->control = sqlite3_column_int(st, 13);
  o->retention_ms = sqlite3_column_int64(st, 14);
  o->build = col_text(st, 15);
  o->restarts = sqlite3_column_int64(st, 16);
}

static int instance_query(void *db, const char *sql, int64_t rowid,
                          const char *workflow, const char *id,
                          journal_instance *out) {
  rd q;
  int rc = rd_open(&q, db, sql);
  if (rc == 0) {
    if (workflow) {
      bind_text(q.st, 1, workflow);
      bind_text(q.st, 2, id);
    } else {
      sqlite3_bind_int64(q.st, 1, rowid);
    }
    if (rd_row(&q))
      read_instance(q.st, out);
    else if (q.s == SQLITE_DONE)
      rc = DURO_E_NOT_FOUND;
  }
  return rd_close(&q, rc);
}

static int sqlite_instance_get(void *db, const char *workflow, const char *id,
                               journal_instance *out) {
  return instance_query(
      db, "SELECT " INSTANCE_COLS " FROM instances WHERE workflow=?1 AND id=?2",
      0, workflow, id, out);
}

static int sqlite_instance_get_rowid(void *db, int64_t rowid,
                                     journal_instance *out) {
  return instance_query(
      db, "SELECT " INSTANCE_COLS " FROM instances WHERE rowid=?1", rowid, NULL,
      NULL, out);
}

static int sqlite_steps_load(void *db, int64_t rowid, journal_step **out,
                             size_t *n) {
  journal_step *v = NULL;
  size_t len = 0, cap = 0;
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT key,name,count,seq,type,status,result,error,"
                   "attempts,started_ms,ended_ms,wake_ms,"
                   "attempt_started_ms,build FROM steps "
                   "WHERE instance=?1 ORDER BY seq");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, rowid);
    while (rd_row(&q)) {
      if (len == cap) {
        cap = cap ? cap * 2 : 16;
        v = xrealloc(v, cap * sizeof *v);
      }
      sqlite3_stmt *st = q.st;
      journal_step *o = &v[len++];
      o->key = col_text(st, 0);
      o->name = col_text(st, 1);
      o->count = (uint32_t)sqlite3_column_int64(st, 2);
      o->seq = sqlite3_column_int64(st, 3);
      o->type = (duro_step_kind)duro_step_kind_parse(col_name(st, 4));
      o->status = (duro_step_status)duro_step_status_parse(col_name(st, 5));
      o->result = col_text(st, 6);
      o->error = col_text(st, 7);
      o->attempts = (uint32_t)sqlite3_column_int64(st, 8);
      o->started_ms = col_ms(st, 9);
      o->ended_ms = col_ms(st, 10);
      o->wake_ms = col_ms(st, 11);
      o->attempt_started_ms = col_ms(st, 12);
      o->build = col_text(st, 13);
    }
  }
  if ((rc = rd_close(&q, rc))) {
    journal_steps_free(v, len);
    v = NULL;
    len = 0;
  }
  *out = v;
  *n = len;
  return rc;
}

static int sqlite_attempts_each(void *db, int64_t rowid,
                                void (*fn)(void *ctx, const char *key,
                                           uint32_t number, int64_t started_ms,
                                           int64_t ended_ms, const char *error,
                                           const char *build),
                                void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT key,number,started_ms,ended_ms,error,build "
                   "FROM attempts WHERE instance=?1 ORDER BY key,number");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, rowid);
    while (rd_row(&q))
      fn(ctx, (const char *)sqlite3_column_text(q.st, 0),
         (uint32_t)sqlite3_column_int64(q.st, 1), col_ms(q.st, 2),
         col_ms(q.st, 3), (const char *)sqlite3_column_text(q.st, 4),
         (const char *)sqlite3_column_text(q.st, 5));
  }
  return rd_close(&q, rc);
}

/* The instance's events that `sql` selects (seq, type, payload, ts_ms,
 * consumed_by; ?1 the instance), in its order. */
static int read_events(void *db, const char *sql, int64_t rowid,
                       journal_event **out, size_t *n) {
  journal_event *v = NULL;
  size_t len = 0, cap = 0;
  rd q;
  int rc = rd_open(&q, db, sql);
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, rowid);
    while (rd_row(&q)) {
      if (len == cap) {
        cap = cap ? cap * 2 : 8;
        v = xrealloc(v, cap * sizeof *v);
      }
      journal_event *o = &v[len++];
      o->seq = sqlite3_column_int64(q.st, 0);
      o->type = col_text(q.st, 1);
      o->payload = col_text(q.st, 2);
      o->ts_ms = sqlite3_column_int64(q.st, 3);
      o->consumed_by = col_text(q.st, 4);
    }
  }
  if ((rc = rd_close(&q, rc))) {
    journal_events_free(v, len);
    v = NULL;
    len = 0;
  }
  *out = v;
  *n = len;
  return rc;
}

static int sqlite_events_pending(void *db, int64_t rowid, journal_event **out,
                                 size_t *n) {
  return read_events(db,
                     "SELECT seq,type,payload,ts_ms,consumed_by FROM events "
                     "WHERE instance=?1 AND consumed_by IS NULL ORDER BY seq",
                     rowid, out, n);
}

static int sqlite_events_all(void *db, int64_t rowid, journal_event **out,
                             size_t *n) {
  return read_events(db,
                     "SELECT seq,type,payload,ts_ms,consumed_by FROM events "
                     "WHERE instance=?1 ORDER BY seq",
                     rowid, out, n);
}

static int sqlite_due(void *db, int64_t after_ms, int64_t upto_ms, size_t limit,
                      int64_t *rowids, int64_t *wakes, size_t *n) {
  *n = 0;
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT rowid, wake_ms FROM instances WHERE wake_ms>?1 "
                   "AND wake_ms<=?2 ORDER BY wake_ms LIMIT ?3");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, after_ms);
    sqlite3_bind_int64(q.st, 2, upto_ms);
    sqlite3_bind_int64(q.st, 3, (sqlite3_int64)limit);
    while (rd_row(&q)) {
      rowids[*n] = sqlite3_column_int64(q.st, 0);
      wakes[*n] = sqlite3_column_int64(q.st, 1);
      (*n)++;
    }
  }
  if ((rc = rd_close(&q, rc)))
    *n = 0;
  return rc;
}

static int sqlite_next_wake(void *db, int64_t after_ms, int64_t *wake) {
  *wake = JOURNAL_NONE;
  rd q;
  int rc =
      rd_open(&q, db, "SELECT MIN(wake_ms) FROM instances WHERE wake_ms>?1");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, after_ms);
    if (rd_row(&q))
      *wake = col_ms(q.st, 0);
  }
  return rd_close(&q, rc);
}

static int sqlite_recover_each(void *db,
                               void (*fn)(void *ctx, int64_t rowid,
                                          duro_status status, int control),
                               void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT rowid,status,control FROM instances WHERE "
                   "status='queued' OR (control<>0 AND status IN "
                   "('waiting','paused'))");
  if (rc == 0)
    while (rd_row(&q))
      fn(ctx, sqlite3_column_int64(q.st, 0), col_status(q.st, 1),
         sqlite3_column_int(q.st, 2));
  return rd_close(&q, rc);
}

static int sqlite_list(void *db, const char *workflow, int status,
                       int64_t cursor, size_t limit,
                       void (*fn)(void *ctx, int64_t rowid, const char *id,
                                  duro_status status, int64_t created_ms),
                       void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT rowid,id,status,created_ms FROM instances "
                   "WHERE workflow=?1 AND (?2 IS NULL OR status=?2) AND "
                   "(?3=0 OR rowid<?3) ORDER BY rowid DESC LIMIT ?4");
  if (rc == 0) {
    bind_text(q.st, 1, workflow);
    bind_text(q.st, 2, status < 0 ? NULL : duro_status_name(status));
    sqlite3_bind_int64(q.st, 3, cursor);
    sqlite3_bind_int64(q.st, 4, (sqlite3_int64)limit);
    while (rd_row(&q))
      fn(ctx, sqlite3_column_int64(q.st, 0),
         (const char *)sqlite3_column_text(q.st, 1), col_status(q.st, 2),
         sqlite3_column_int64(q.st, 3));
  }
  return rd_close(&q, rc);
}

static int sqlite_count_by_status(void *db,
                                  void (*fn)(void *ctx, const char *workflow,
                                             duro_status status, int64_t n),
                                  void *ctx) {
  sqlite_store *sq = db;
  rd q;
  /* A read-only look at a file of an older host may have no counts: it
   * counts the rows. */
  int rc =
      rd_open(&q, db,
              sq->counted ? "SELECT workflow,status,n FROM instance_counts "
                            "WHERE n>0 ORDER BY workflow,status"
                          : "SELECT workflow,status,COUNT(*) FROM instances "
                            "GROUP BY workflow,status ORDER BY "
                            "workflow,status");
  if (rc == 0)
    while (rd_row(&q))
      fn(ctx, (const char *)sqlite3_column_text(q.st, 0), col_status(q.st, 1),
         sqlite3_column_int64(q.st, 2));
  return rd_close(&q, rc);
}

static int sqlite_build_pinned(void *db, const char *workflow,
                               const char *build, int *pinned) {
  *pinned = 0;
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT 1 FROM instances WHERE workflow=?1 AND build=?2 "
                   "AND build IS NOT NULL AND status IN "
                   "('queued','waiting','paused') LIMIT 1");
  if (rc == 0) {
    bind_text(q.st, 1, workflow);
    bind_text(q.st, 2, build);
    *pinned = rd_row(&q);
  }
  return rd_close(&q, rc);
}

static int sqlite_pinned_builds(void *db,
                                void (*fn)(void *ctx, const char *workflow,
                                           const char *build, int64_t n),
                                void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT workflow, build, COUNT(*) FROM instances "
                   "WHERE build IS NOT NULL AND status IN "
                   "('queued','waiting','paused') GROUP BY workflow, build");
  if (rc == 0)
    while (rd_row(&q))
      fn(ctx, (const char *)sqlite3_column_text(q.st, 0),
         (const char *)sqlite3_column_text(q.st, 1),
         sqlite3_column_int64(q.st, 2));
  return rd_close(&q, rc);
}

/* Two probes of messages_next, each reading at most `limit` + 1 rows:
 * what a consumer's dispatch asks on every pass, whatever the queue's
 * depth. */
static const char sql_queue_ready[] =
    "SELECT COUNT(*), MIN(visible_ms) FROM (SELECT visible_ms FROM messages "
    "WHERE queue=?1 AND visible_ms<=?2 ORDER BY visible_ms LIMIT ?3)";
static const char sql_queue_next[] =
    "SELECT MIN(visible_ms) FROM messages WHERE queue=?1 AND visible_ms>?2";

static int sqlite_queue_ready(void *db, const char *queue, int64_t now_ms,
                              uint32_t limit, journal_queue_ready_info *out) {
  reader *r = reader_take(db);
  sqlite3_stmt *st = NULL;
  int s = SQLITE_DONE;
  int rc = prepare_rd(r, sql_queue_ready, &st);
  if (rc == 0) {
    bind_text(st, 1, queue);
    sqlite3_bind_int64(st, 2, now_ms);
    sqlite3_bind_int64(st, 3, limit);
    if ((s = sqlite3_step(st)) == SQLITE_ROW) {
      out->ready = (uint32_t)sqlite3_column_int64(st, 0);
      out->oldest_visible_ms = col_ms(st, 1);
      s = sqlite3_step(st);
    }
    rc = rows_end(r, s);
    release_rd(r, st);
  }
  if (rc == 0 && (rc = prepare_rd(r, sql_queue_next, &st)) == 0) {
    bind_text(st, 1, queue);
    sqlite3_bind_int64(st, 2, now_ms);
    if ((s = sqlite3_step(st)) == SQLITE_ROW) {
      out->next_visible_ms = col_ms(st, 0);
      s = sqlite3_step(st);
    }
    rc = rows_end(r, s);
    release_rd(r, st);
  }
  return reader_give(db, r, rc);
}

static const char sql_queued_from[] =
    "SELECT rowid FROM instances WHERE status='queued' AND rowid>=?1 "
    "ORDER BY rowid LIMIT ?2";

static int sqlite_queued_from(void *db, int64_t from, size_t limit,
                              int64_t *rowids, size_t *n) {
  *n = 0;
  rd q;
  int rc = rd_open(&q, db, sql_queued_from);
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, from);
    sqlite3_bind_int64(q.st, 2, (sqlite3_int64)limit);
    while (rd_row(&q) && *n < limit)
      rowids[(*n)++] = sqlite3_column_int64(q.st, 0);
  }
  return rd_close(&q, rc);
}

/* On instances_status, in rowid order: the unary + keeps the planner off
 * (workflow, id), which would read every instance of the workflow. */
static const char sql_oldest_queued[] =
    "SELECT created_ms FROM instances WHERE status='queued' AND "
    "(?1 IS NULL OR +workflow=?1) ORDER BY rowid LIMIT 1";

static int sqlite_oldest_queued(void *db, const char *workflow,
                                int64_t *created_ms) {
  *created_ms = JOURNAL_NONE;
  rd q;
  int rc = rd_open(&q, db, sql_oldest_queued);
  if (rc == 0) {
    bind_text(q.st, 1, workflow);
    if (rd_row(&q)) {
      *created_ms = sqlite3_column_int64(q.st, 0);
      rd_row(&q);
    }
  }
  return rd_close(&q, rc);
}

static const char sql_cron_state[] =
    "SELECT since_ms, (SELECT MAX(tick_ms) FROM cron_ticks WHERE trigger=?1),"
    " complete, failed, missed, skipped FROM cron_triggers WHERE trigger=?1";

static int sqlite_cron_state(void *db, const char *trigger, journal_cron *out) {
  memset(out, 0, sizeof *out);
  out->since_ms = out->last_tick_ms = JOURNAL_NONE;
  rd q;
  int rc = rd_open(&q, db, sql_cron_state);
  if (rc == 0) {
    bind_text(q.st, 1, trigger);
    if (rd_row(&q)) {
      sqlite3_stmt *st = q.st;
      out->since_ms = sqlite3_column_int64(st, 0);
      out->last_tick_ms = col_ms(st, 1);
      out->complete = sqlite3_column_int64(st, 2);
      out->failed = sqlite3_column_int64(st, 3);
      out->missed = sqlite3_column_int64(st, 4);
      out->skipped = sqlite3_column_int64(st, 5);
      rd_row(&q);
    }
  }
  return rd_close(&q, rc);
}

static const char sql_cron_ticks[] =
    "SELECT tick_ms, state, fired_ms, instance, error FROM cron_ticks WHERE "
    "trigger=?1 AND (?2 IS NULL OR state=?2) ORDER BY tick_ms DESC LIMIT ?3";

static int sqlite_cron_ticks(void *db, const char *trigger, const char *state,
                             size_t limit,
                             void (*fn)(void *ctx, const journal_cron_tick *t),
                             void *ctx) {
  rd q;
  int rc = rd_open(&q, db, sql_cron_ticks);
  if (rc == 0) {
    bind_text(q.st, 1, trigger);
    bind_text(q.st, 2, state);
    sqlite3_bind_int64(q.st, 3, (sqlite3_int64)limit);
    while (rd_row(&q)) {
      sqlite3_stmt *st = q.st;
      journal_cron_tick t = {
          sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
          col_ms(st, 2), (const char *)sqlite3_column_text(st, 3),
          (const char *)sqlite3_column_text(st, 4)};
      fn(ctx, &t);
    }
  }
  return rd_close(&q, rc);
}

/* The queue's held messages (visible_ms after now: in flight, or
 * delayed, which hold no lease) on messages_next, with the token's
 * leases: "<token>-<seq>" sorts between "<token>-" and "<token>.". */
static const char sql_queue_leases[] =
    "SELECT lease FROM messages WHERE queue=?1 AND visible_ms>?2 AND "
    "lease>=?3 AND lease<?4";

static int sqlite_queue_leases(void *db, const char *queue, int64_t now_ms,
                               const char *token,
                               void (*fn)(void *ctx, const char *lease),
                               void *ctx) {
  rd q;
  int rc = rd_open(&q, db, sql_queue_leases);
  if (rc)
    return rd_close(&q, rc);
  char *lo = xasprintf("%s-", token), *hi = xasprintf("%s.", token);
  bind_text(q.st, 1, queue);
  sqlite3_bind_int64(q.st, 2, now_ms);
  bind_text(q.st, 3, lo);
  bind_text(q.st, 4, hi);
  while (rd_row(&q))
    fn(ctx, (const char *)sqlite3_column_text(q.st, 0));
  rc = rd_close(&q, rc);
  free(lo);
  free(hi);
  return rc;
}

/* On messages_age, so a deep queue costs `limit` rows.  The lease only
 * while held: an expired one names no holder any more. */
static const char sql_queue_peek[] =
    "SELECT seq, body, attempts, sent_ms, visible_ms, "
    "CASE WHEN visible_ms>?2 THEN lease END, last_error FROM messages "
    "WHERE queue=?1 ORDER BY sent_ms, seq LIMIT ?3";

static int sqlite_queue_peek(void *db, const char *queue, int64_t now_ms,
                             size_t limit, journal_message **out, size_t *n) {
  *out = NULL;
  *n = 0;
  rd q;
  int rc = rd_open(&q, db, sql_queue_peek);
  if (rc)
    return rd_close(&q, rc);
  bind_text(q.st, 1, queue);
  sqlite3_bind_int64(q.st, 2, now_ms);
  sqlite3_bind_int64(q.st, 3, (sqlite3_int64)limit);
  journal_message *v = xcalloc(limit ? limit : 1, sizeof *v);
  while (*n < limit && rd_row(&q)) {
    sqlite3_stmt *st = q.st;
    journal_message *m = &v[(*n)++];
    m->seq = sqlite3_column_int64(st, 0);
    m->queue = xstrdup(queue);
    m->body = col_text(st, 1);
    m->attempts = (uint32_t)sqlite3_column_int64(st, 2);
    m->sent_ms = sqlite3_column_int64(st, 3);
    m->visible_ms = sqlite3_column_int64(st, 4);
    m->lease = col_text(st, 5);
    m->last_error = col_text(st, 6);
  }
  *out = v;
  return rd_close(&q, rc);
}

static const char sql_queue_counts[] =
    "SELECT queue, dropped, dead_lettered FROM queue_counts";

static int sqlite_queue_counts_each(void *db,
                                    void (*fn)(void *ctx, const char *queue,
                                               int64_t dropped,
                                               int64_t dead_lettered),
                                    void *ctx) {
  rd q;
  int rc = rd_open(&q, db, sql_queue_counts);
  if (rc == 0)
    while (rd_row(&q))
      fn(ctx, (const char *)sqlite3_column_text(q.st, 0),
         sqlite3_column_int64(q.st, 1), sqlite3_column_int64(q.st, 2));
  return rd_close(&q, rc);
}

/* One pass over the queue's rows (or every row): the counts are sums of
 * conditions rather than separate index probes. */
static int sqlite_queue_stats_each(void *db, const char *queue, int64_t now_ms,
                                   void (*fn)(void *ctx, const char *queue,
                                              const journal_queue_stats *st),
                                   void *ctx) {
  rd q;
  int rc = rd_open(
      &q, db,
      "SELECT queue, SUM(visible_ms<=?2), SUM(visible_ms>?2 AND lease IS "
      "NULL), SUM(visible_ms>?2 AND lease IS NOT NULL), MIN(sent_ms), "
      "MIN(CASE WHEN visible_ms<=?2 THEN visible_ms END) FROM messages "
      "WHERE ?1 IS NULL OR queue=?1 GROUP BY queue ORDER BY queue");
  if (rc == 0) {
    bind_text(q.st, 1, queue);
    sqlite3_bind_int64(q.st, 2, now_ms);
    while (rd_row(&q)) {
      sqlite3_stmt *st = q.st;
      journal_queue_stats t = {
          sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
          sqlite3_column_int64(st, 3), col_ms(st, 4), col_ms(st, 5)};
      fn(ctx, (const char *)sqlite3_column_text(st, 0), &t);
    }
  }
  return rd_close(&q, rc);
}

/* ---- copying the journal out (migrate.c) ----------------------------------
 * On the writer connection: the copy runs on one thread, with no host. */

static int sqlite_schema_version(const char *path, char *version, size_t n,
                                 char *err, size_t errlen) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = DURO_E_NOT_FOUND;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema'", -1,
                         &st, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "%s", db ? sqlite3_errmsg(db) : "out of memory");
  } else if (sqlite3_step(st) != SQLITE_ROW || !sqlite3_column_text(st, 0)) {
    snprintf(err, errlen, "no schema row in its meta table");
  } else {
    snprintf(version, n, "%s", (const char *)sqlite3_column_text(st, 0));
    rc = 0;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rc;
}

static int sqlite_table_count(void *db, const store_table *t, int64_t *n) {
  sqlite_store *sq = db;
  char *sql = xasprintf("SELECT COUNT(*) FROM %s", t->name);
  sqlite3_stmt *st = NULL;
  int rc = DURO_E_STORAGE;
  *n = 0;
  if (sqlite3_prepare_v2(sq->wr, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *n = sqlite3_column_int64(st, 0);
    rc = 0;
  } else {
    set_err(sq->wr, t->name);
  }
  sqlite3_finalize(st);
  free(sql);
  return rc;
}

/* The highest key ever used: an AUTOINCREMENT table remembers it in
 * sqlite_sequence even once its rows are deleted; for the others it is
 * their greatest key, which SQLite itself goes on from. */
static int key_high(sqlite_store *sq, const store_table *t, int64_t *high) {
  char *sql = xasprintf("SELECT MAX(COALESCE((SELECT MAX(%s) FROM %s),0),"
                        "COALESCE((SELECT seq FROM sqlite_sequence WHERE "
                        "name='%s'),0))",
                        t->serial, t->name, t->name);
  sqlite3_stmt *st = NULL;
  int rc = DURO_E_STORAGE;
  if (sqlite3_prepare_v2(sq->wr, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *high = sqlite3_column_int64(st, 0);
    rc = 0;
  } else {
    set_err(sq->wr, t->name);
  }
  sqlite3_finalize(st);
  free(sql);
  return rc;
}

static int sqlite_table_export(void *db, const store_table *t, int64_t *high,
                               store_row_fn put, void *put_ctx) {
  sqlite_store *sq = db;
  if (t->serial && key_high(sq, t, high))
    return DURO_E_STORAGE;
  char *sql = xasprintf("SELECT %s FROM %s", t->columns, t->name);
  sqlite3_stmt *st = NULL;
  const char **values = xcalloc(t->n_columns, sizeof *values);
  int rc = 0, s = SQLITE_DONE;
  if (sqlite3_prepare_v2(sq->wr, sql, -1, &st, NULL) != SQLITE_OK ||
      (size_t)sqlite3_column_count(st) != t->n_columns) {
    set_err(sq->wr, t->name);
    rc = DURO_E_STORAGE;
    goto done;
  }
  while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
    for (size_t i = 0; i < t->n_columns; i++)
      values[i] = (const char *)sqlite3_column_text(st, (int)i);
    rc = put(put_ctx, values);
  }
  if (rc == 0 && s != SQLITE_DONE) {
    set_err(sq->wr, t->name);
    rc = DURO_E_STORAGE;
  }
done:
  sqlite3_finalize(st);
  free(values);
  free(sql);
  return rc;
}

const store_backend store_sqlite = {
    .open = sqlite_open,
    .close = sqlite_close,
    .begin = sqlite_begin,
    .apply = sqlite_apply,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .check = sqlite_check,
    .instance_get = sqlite_instance_get,
    .instance_get_rowid = sqlite_instance_get_rowid,
    .steps_load = sqlite_steps_load,
    .attempts_each = sqlite_attempts_each,
    .events_pending = sqlite_events_pending,
    .events_all = sqlite_events_all,
    .due = sqlite_due,
    .next_wake = sqlite_next_wake,
    .recover_each = sqlite_recover_each,
    .queued_from = sqlite_queued_from,
    .oldest_queued = sqlite_oldest_queued,
    .build_pinned = sqlite_build_pinned,
    .pinned_builds = sqlite_pinned_builds,
    .list = sqlite_list,
    .count_by_status = sqlite_count_by_status,
    .queue_stats_each = sqlite_queue_stats_each,
    .queue_ready = sqlite_queue_ready,
    .queue_leases = sqlite_queue_leases,
    .queue_peek = sqlite_queue_peek,
    .queue_counts_each = sqlite_queue_counts_each,
    .cron_state = sqlite_cron_state,
    .cron_ticks = sqlite_cron_ticks,
    .schema_version = sqlite_schema_version,
    .table_count = sqlite_table_count,
    .table_export = sqlite_table_export,
};
