/* pg.c — the PostgreSQL backend of the journal (libpq): sqlite.c's schema
 * 6 translated (plus, in 7, the hosts sharing a database and the builds
 * they share), the writes of every JOP_* op and every read query, with
 * the same results.
 *
 * The journal's "path" is a libpq connection string.  Connections:
 * `wr` is used only by the thread that leads a group commit (begin, apply
 * and commit run on it, in one BEGIN ... COMMIT); a thread that reads
 * takes a connection from a small pool and gives it back (pg_conn.c), so
 * reads wait for each other only when all are busy.  Each connection prepares
 * its statements once (PQprepare) and runs them by name; the writer sends a
 * group's in libpq's pipeline mode (pg_pipe.c).  Reads run in autocommit (READ
 * COMMITTED), so a read started after a commit returned sees it.
 * synchronous_full 1 is synchronous_commit=on (COMMIT returns once the WAL is
 * flushed), 0 is synchronous_commit=off (a crash of the server may lose the
 * last groups, never tear one), -1 a read-only session.
 *
 * Text columns use the "C" collation: names sort and compare bytewise as
 * in SQLite, whatever the database's locale (a lease range scan depends
 * on it).
 *
 * Connections and errors are pg_conn.c's, the hosts sharing a database
 * pg_hosts.c's (pg_internal.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"
#include "log.h"
#include "pg_internal.h"

/* 7: schema 6 and the hosts sharing the database (the hosts table, each
 * instance's owner).  A journal of 6 is brought to 7 when opened. */
#define SCHEMA_VERSION "7"
/* The advisory lock that one opener at a time creating or upgrading the
 * schema holds (any fixed number; no other lock of duro's uses it). */
#define SCHEMA_LOCK "7140100"

/* Bytewise text, as SQLite compares it. */
#define TXT "TEXT COLLATE \"C\""

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(key " TXT " PRIMARY KEY, value " TXT ");"
    "INSERT INTO meta VALUES('schema','" SCHEMA_VERSION "') "
    "ON CONFLICT(key) DO NOTHING;"
    "CREATE TABLE IF NOT EXISTS instances("
    " rowid BIGSERIAL PRIMARY KEY,"
    " workflow " TXT " NOT NULL, id " TXT " NOT NULL, status " TXT " NOT NULL,"
    " params " TXT " NOT NULL, output " TXT ", error " TXT ","
    " created_ms BIGINT NOT NULL, started_ms BIGINT, ended_ms BIGINT,"
    " wake_ms BIGINT, paused_ms BIGINT, wait_type " TXT ","
    " control INTEGER NOT NULL DEFAULT 0, retention_ms BIGINT NOT NULL,"
    " build " TXT ", restarts BIGINT NOT NULL DEFAULT 0,"
    " UNIQUE(workflow, id));"
    /* Schema 7: the host that runs an instance (hosts.id; 0: none yet, so
     * the first host to look takes it).  Every host reads its own. */
    "ALTER TABLE instances ADD COLUMN IF NOT EXISTS"
    " owner BIGINT NOT NULL DEFAULT 0;"
    "DROP INDEX IF EXISTS instances_wake;"
    "CREATE INDEX IF NOT EXISTS instances_owner_wake ON instances(owner,"
    " wake_ms) WHERE wake_ms IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS instances_owner_queued ON instances(owner,"
    " rowid) WHERE status='queued';"
    "CREATE INDEX IF NOT EXISTS instances_owner_live ON instances(owner)"
    " WHERE status NOT IN ('complete','errored','terminated');"
    /* A host while it lives: it renews `heartbeat` (the server's clock)
     * every third of lease_ms; one that stopped renewing is `dead` and
     * its instances go to the others. */
    "CREATE TABLE IF NOT EXISTS hosts(id BIGSERIAL PRIMARY KEY,"
    " name " TXT " NOT NULL, pid BIGINT NOT NULL,"
    " started TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " heartbeat TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " lease_ms BIGINT NOT NULL, dead BOOLEAN NOT NULL DEFAULT false);"
    /* The plugin builds instances may be pinned to, for every host: a
     * host that takes over an instance pinned to a build it never loaded
     * fetches it from here.  seen_ms: when a host last had it loaded. */
    "CREATE TABLE IF NOT EXISTS builds(hash " TXT " PRIMARY KEY,"
    " plugin " TXT " NOT NULL, image BYTEA NOT NULL,"
    " seen_ms BIGINT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS instances_status ON instances(status);"
    "CREATE INDEX IF NOT EXISTS instances_control ON instances(control) "
    "WHERE control<>0;"
    "CREATE INDEX IF NOT EXISTS instances_expiry ON instances("
    " (ended_ms + retention_ms)) WHERE ended_ms IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS instances_pin ON "
    "instances(workflow, build) WHERE build IS NOT NULL;"
    "CREATE TABLE IF NOT EXISTS steps("
    " instance BIGINT NOT NULL, key " TXT " NOT NULL, seq BIGINT NOT NULL,"
    " name " TXT " NOT NULL, count BIGINT NOT NULL, type " TXT " NOT NULL,"
    " status " TXT " NOT NULL, result " TXT ", error " TXT ","
    " attempts BIGINT NOT NULL, started_ms BIGINT, ended_ms BIGINT,"
    " wake_ms BIGINT, attempt_started_ms BIGINT, build " TXT ","
    " PRIMARY KEY(instance, key));"
    "CREATE TABLE IF NOT EXISTS attempts("
    " instance BIGINT NOT NULL, key " TXT " NOT NULL, number BIGINT NOT NULL,"
    " started_ms BIGINT, ended_ms BIGINT, error " TXT ", build " TXT ","
    " PRIMARY KEY(instance, key, number));"
    "CREATE TABLE IF NOT EXISTS events("
    " seq BIGSERIAL PRIMARY KEY, instance BIGINT NOT NULL,"
    " type " TXT " NOT NULL, payload " TXT " NOT NULL, ts_ms BIGINT NOT NULL,"
    " consumed_by " TXT ");"
    "CREATE INDEX IF NOT EXISTS events_by_instance ON events(instance, seq);"
    /* A sequence never hands out an id twice: a message id is never used
     * again, as with SQLite's AUTOINCREMENT. */
    "CREATE TABLE IF NOT EXISTS messages("
    " seq BIGSERIAL PRIMARY KEY, queue " TXT " NOT NULL,"
    " body " TXT " NOT NULL,"
    " attempts BIGINT NOT NULL, visible_ms BIGINT NOT NULL, lease " TXT ","
    " sent_ms BIGINT NOT NULL, last_error " TXT ");"
    "CREATE INDEX IF NOT EXISTS messages_next ON messages(queue, visible_ms);"
    "CREATE INDEX IF NOT EXISTS messages_age ON messages(queue, sent_ms);"
    "CREATE TABLE IF NOT EXISTS cron_triggers(trigger " TXT " PRIMARY KEY,"
    " since_ms BIGINT NOT NULL, complete BIGINT NOT NULL,"
    " failed BIGINT NOT NULL, missed BIGINT NOT NULL,"
    " skipped BIGINT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS cron_ticks(trigger " TXT " NOT NULL,"
    " tick_ms BIGINT NOT NULL, state " TXT " NOT NULL, fired_ms BIGINT,"
    " instance " TXT ", error " TXT ", PRIMARY KEY(trigger, tick_ms));"
    "CREATE TABLE IF NOT EXISTS queue_counts(queue " TXT " PRIMARY KEY,"
    " dropped BIGINT NOT NULL, dead_lettered BIGINT NOT NULL);"
    "UPDATE meta SET value='" SCHEMA_VERSION "' WHERE key='schema' AND"
    " value='6';";

/* ---- the writer's statements --------------------------------------------
 * Parameters are typed where PostgreSQL could not infer them (a bare $n in
 * a select list, or compared with NULL). */

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
  ST_SWEEP,
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
  ST_NOTIFY,
  ST_FENCE,
  ST_WRITE_COUNT_
};

static const char *const write_sql[ST_WRITE_COUNT_] = {
    /* RETURNING gives no row for a duplicate: that is the duplicate. */
    [ST_INSTANCE_INSERT] =
        "INSERT INTO instances(workflow,id,status,params,created_ms,"
        "retention_ms,owner) VALUES($1,$2,$3,$4,$5,$6,$7) "
        "ON CONFLICT(workflow,id) DO NOTHING RETURNING rowid",
    [ST_INSTANCE_SET] =
        "UPDATE instances SET status=$2, output=$3, error=$4, started_ms=$5, "
        "ended_ms=$6, wake_ms=$7, paused_ms=$8, wait_type=$9, "
        "control=CASE WHEN $10::int<>0 THEN 0 ELSE control END "
        "WHERE rowid=$1",
    [ST_INSTANCE_CONTROL] = "UPDATE instances SET control=$2 WHERE rowid=$1",
    [ST_INSTANCE_CONTROL_CLEAR] =
        "UPDATE instances SET control=0 WHERE rowid=$1",
    [ST_STEP_PUT] =
        "INSERT INTO steps(instance,key,seq,name,count,type,status,"
        "result,error,attempts,started_ms,ended_ms,wake_ms,attempt_started_ms,"
        "build) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15) "
        "ON CONFLICT(instance,key) DO UPDATE SET seq=excluded.seq,"
        "name=excluded.name,count=excluded.count,type=excluded.type,"
        "status=excluded.status,result=excluded.result,error=excluded.error,"
        "attempts=excluded.attempts,started_ms=excluded.started_ms,"
        "ended_ms=excluded.ended_ms,wake_ms=excluded.wake_ms,"
        "attempt_started_ms=excluded.attempt_started_ms,build=excluded.build",
    [ST_STEPS_DISCARD] = "DELETE FROM steps WHERE instance=$1 AND seq>=$2",
    [ST_ATTEMPTS_DISCARD] =
        "DELETE FROM attempts WHERE instance=$1 AND key NOT IN "
        "(SELECT key FROM steps WHERE instance=$1)",
    /* An instance that ends closes the steps still pending. */
    [ST_STEPS_CANCEL] =
        "UPDATE steps SET status='cancelled', ended_ms=$2, wake_ms=NULL "
        "WHERE instance=$1 AND status='waiting'",
    [ST_INSTANCE_RESTARTED] =
        "UPDATE instances SET restarts=restarts+1 WHERE rowid=$1",
    [ST_STEPS_SHIFT_WAKE] =
        "UPDATE steps SET wake_ms=wake_ms+$2 WHERE instance=$1 AND "
        "status='waiting' AND wake_ms IS NOT NULL",
    [ST_ATTEMPT_PUT] =
        "INSERT INTO attempts(instance,key,number,started_ms,"
        "ended_ms,error,build) VALUES($1,$2,$3,$4,$5,$6,$7) "
        "ON CONFLICT(instance,key,number) DO UPDATE SET "
        "started_ms=excluded.started_ms,ended_ms=excluded.ended_ms,"
        "error=excluded.error,build=excluded.build",
    /* Nothing is stored for an instance that has ended: checked in the
     * transaction, so an end that overtakes the event cannot be missed. */
    [ST_EVENT_INSERT] =
        "INSERT INTO events(instance,type,payload,ts_ms) "
        "SELECT $1::bigint,$2::text,$3::text,$4::bigint FROM instances "
        "WHERE rowid=$1::bigint AND "
        "status NOT IN ('complete','errored','terminated') RETURNING seq",
    [ST_EVENT_CONSUME] = "UPDATE events SET consumed_by=$2 WHERE seq=$1",
    [ST_WAKE_IF_WAITING] =
        "WITH u AS (UPDATE instances SET wake_ms=$3 WHERE rowid=$1 AND "
        "status='waiting' AND wait_type=$2 RETURNING 1) "
        "SELECT (SELECT COUNT(*) FROM u), owner FROM instances WHERE rowid=$1",
    /* Only when it changes. */
    [ST_INSTANCE_PIN] = "UPDATE instances SET build=$2::text WHERE rowid=$1 "
                        "AND build IS DISTINCT FROM $2::text",
    [ST_WAKE_IF_EVENT_PENDING] =
        "UPDATE instances SET wake_ms=$2 WHERE rowid=$1 AND "
        "status='waiting' AND wait_type IS NOT NULL AND EXISTS(SELECT 1 "
        "FROM events WHERE instance=$1 AND type=instances.wait_type AND "
        "consumed_by IS NULL)",
    /* One statement for the whole sweep: the picked instances, then their
     * rows everywhere; the count is of instances deleted. */
    [ST_SWEEP] =
        "WITH picked AS (SELECT rowid FROM instances WHERE "
        "ended_ms IS NOT NULL AND (ended_ms + retention_ms) <= $1 AND "
        "status IN ('complete','errored','terminated') LIMIT $2 "
        /* another host sweeping at the same time takes other rows */
        "FOR UPDATE SKIP LOCKED), "
        "s AS (DELETE FROM steps WHERE instance IN (SELECT rowid FROM "
        "picked)), "
        "a AS (DELETE FROM attempts WHERE instance IN (SELECT rowid FROM "
        "picked)), "
        "e AS (DELETE FROM events WHERE instance IN (SELECT rowid FROM "
        "picked)), "
        "i AS (DELETE FROM instances WHERE rowid IN (SELECT rowid FROM "
        "picked) RETURNING 1) SELECT COUNT(*) FROM i",
    [ST_MESSAGE_INSERT] = "INSERT INTO messages(queue,body,attempts,"
                          "visible_ms,sent_ms) VALUES($1,$2,0,$4,$3) "
                          "RETURNING seq",
    [ST_MESSAGE_PICK] =
        "SELECT seq,attempts,body,sent_ms,last_error FROM messages WHERE "
        "queue=$1 AND visible_ms<=$2 ORDER BY visible_ms,seq LIMIT $3 "
        /* another host's lease of the same messages, not yet committed,
         * is left to it: a message is leased to one consumer at a time */
        "FOR UPDATE SKIP LOCKED",
    [ST_MESSAGE_LEASE] = "UPDATE messages SET lease=$2, visible_ms=$3, "
                         "attempts=attempts+1 WHERE seq=$1",
    /* A lease is held while its message is invisible; its id names its
     * row ("<token>-<seq>"). */
    [ST_MESSAGE_ACK] = "DELETE FROM messages WHERE seq=$4 AND lease=$1 AND "
                       "queue=$2 AND visible_ms>$3",
    [ST_MESSAGE_HELD] = "SELECT seq,attempts FROM messages WHERE seq=$4 AND "
                        "lease=$1 AND queue=$2 AND visible_ms>$3",
    [ST_MESSAGE_MOVE] =
        "UPDATE messages SET queue=$2, lease=NULL, visible_ms=$3, "
        "last_error=COALESCE($4,last_error) WHERE seq=$1",
    [ST_MESSAGE_DELETE] = "DELETE FROM messages WHERE seq=$1",
    [ST_MESSAGES_DROPPED] =
        "INSERT INTO queue_counts(queue,dropped,dead_lettered) "
        "VALUES($1,$2,$3) ON CONFLICT(queue) DO UPDATE SET "
        "dropped=queue_counts.dropped+excluded.dropped,"
        "dead_lettered=queue_counts.dead_lettered+excluded.dead_lettered",
    [ST_CRON_SINCE] =
        "INSERT INTO cron_triggers(trigger,since_ms,complete,failed,missed,"
        "skipped) VALUES($1,$2,0,0,0,0) ON CONFLICT(trigger) DO NOTHING",
    /* A tick is claimed by inserting its row: a second claim changes
     * nothing (out_rowid 0). */
    [ST_CRON_TICK] = "INSERT INTO cron_ticks(trigger,tick_ms,state,"
                     "fired_ms,instance,error) VALUES($1,$2,$3,$4,$5,$6) "
                     "ON CONFLICT(trigger,tick_ms) DO NOTHING",
    [ST_CRON_TICK_SET] = "UPDATE cron_ticks SET state=$3, error=$4 WHERE "
                         "trigger=$1 AND tick_ms=$2 AND state='fired'",
    [ST_CRON_MISSED_EXTRA] = "UPDATE cron_triggers SET missed=missed+$2 "
                             "WHERE trigger=$1",
    /* The counts go with the rows' writes, so they outlive the sweep. */
    [ST_CRON_COUNT] =
        "UPDATE cron_triggers SET "
        "complete=complete+($2::text='complete')::int,"
        "failed=failed+($2::text='failed')::int,"
        "missed=missed+($2::text='missed')::int,"
        "skipped=skipped+($2::text='skipped')::int WHERE trigger=$1",
    [ST_CRON_SWEEP] =
        "DELETE FROM cron_ticks WHERE tick_ms<$1 AND tick_ms<(SELECT "
        "MAX(tick_ms) FROM cron_ticks AS c WHERE c.trigger=cron_ticks.trigger)",
    /* Delivered to the channel's listener when the group commits. */
    [ST_NOTIFY] = "SELECT pg_notify($1, $2)",
    [ST_MESSAGES_EXPIRE] =
        "DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE "
        "queue=$1 AND sent_ms<$2 LIMIT $3)",
    /* A host's lease row, alive, held until the group commits (pg_begin);
     * a dead one divides by zero: an error, so that nothing sent behind
     * it in the same pipeline commits. */
    [ST_FENCE] = "SELECT 1/COUNT(*) FROM (SELECT id FROM hosts WHERE id=$1 "
                 "AND NOT dead FOR SHARE) AS alive",
};

/* Prepares every write statement on the writer connection as "w<i>". */
static int prepare_writes(PGconn *c, char *err, size_t errlen) {
  for (int i = 0; i < ST_WRITE_COUNT_; i++) {
    char name[16];
    snprintf(name, sizeof name, "w%d", i);
    PGresult *r = PQprepare(c, name, write_sql[i], 0, NULL);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
      snprintf(err, errlen, "PostgreSQL: preparing %s: %s", name,
               PQresultErrorMessage(r));
    PQclear(r);
    if (!ok)
      return DURO_E_STORAGE;
  }
  return 0;
}

/* The schema version stored in meta, into ver; 0 or DURO_E_STORAGE. */
static int schema_check(PGconn *c, char *err, size_t errlen) {
  PGresult *r = PQexec(c, "SELECT value FROM meta WHERE key='schema'");
  int rc = 0;
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    snprintf(err, errlen, "PostgreSQL: no journal schema: %s",
             PQresultErrorMessage(r));
    rc = DURO_E_STORAGE;
  } else if (PQntuples(r) != 1 ||
             strcmp(PQgetvalue(r, 0, 0), SCHEMA_VERSION) != 0) {
    snprintf(err, errlen,
             "PostgreSQL: journal schema %s, this duro knows " SCHEMA_VERSION,
             PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "(none)");
    rc = DURO_E_STORAGE;
  }
  PQclear(r);
  return rc;
}

/* After a failed connect at open: STORE_UNREACHABLE when it may succeed
 * later by itself, DURO_E_STORAGE when the server refused us for good.
 * PQping asks the server's state without logging in: no answer (no server
 * on the socket or port yet) and "not accepting connections" (starting
 * up, in recovery, shutting down) are the server being away.  A server
 * that answers normally refused our login (a wrong password, an unknown
 * user or database), unless it came up between the two calls: one more
 * connect tells; when it succeeds, *c is that connection and 0 returns. */
static int open_failed(const char *conninfo, int synchronous_full, PGconn **c,
                       char *err, size_t errlen) {
  switch (PQping(conninfo)) {
  case PQPING_NO_RESPONSE:
  case PQPING_REJECT:
    return STORE_UNREACHABLE;
  case PQPING_NO_ATTEMPT: /* a connection string libpq cannot use */
    return DURO_E_STORAGE;
  case PQPING_OK:
    break;
  }
  *c = pg_connect(conninfo, synchronous_full, err, errlen);
  return *c ? 0 : DURO_E_STORAGE;
}

/* 1 when the database holds a journal of this schema version. */
static int schema_current(PGconn *c) {
  PGresult *r = PQexec(c, "SELECT value FROM meta WHERE key='schema'");
  int current = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                !strcmp(PQgetvalue(r, 0, 0), SCHEMA_VERSION);
  PQclear(r);
  return current;
}

/* Creates the schema, or brings it to this version, unless it is current.
 * One opener at a time (a session's advisory lock, let go with the
 * session should it die), and each looks again once it holds the lock:
 * hosts started together on an empty database all found no schema, and
 * those that came after the first ran its DDL under the first host's
 * transactions, whose row and table locks it deadlocked with.  A current
 * schema is left alone: its DDL would take its tables' exclusive locks
 * under hosts already running on them.  The DDL runs in one transaction:
 * a failure leaves the schema as it was. */
static int schema_create(PGconn *c, char *err, size_t errlen) {
  char msg[512];
  if (schema_current(c))
    return 0;
  if (pg_exec_cmd(c, "SELECT pg_advisory_lock(" SCHEMA_LOCK ")", msg,
                  sizeof msg))
    goto failed;
  int rc = 0;
  if (!schema_current(c) && (pg_exec_cmd(c, "BEGIN", msg, sizeof msg) ||
                             pg_exec_cmd(c, schema_sql, msg, sizeof msg) ||
                             pg_exec_cmd(c, "COMMIT", msg, sizeof msg))) {
    PGresult *rb = PQexec(c, "ROLLBACK");
    PQclear(rb);
    rc = DURO_E_STORAGE;
  }
  PGresult *r = PQexec(c, "SELECT pg_advisory_unlock(" SCHEMA_LOCK ")");
  PQclear(r);
  if (!rc)
    return 0;
failed:
  snprintf(err, errlen, "PostgreSQL: cannot create schema: %s", msg);
  return DURO_E_STORAGE;
}

static int pg_open(const char *conninfo, int synchronous_full, void **out,
                   char *err, size_t errlen) {
  PGconn *c = pg_connect(conninfo, synchronous_full, err, errlen);
  int rc;
  if (!c && (rc = open_failed(conninfo, synchronous_full, &c, err, errlen)))
    return rc;
  if ((synchronous_full >= 0 && schema_create(c, err, errlen)) ||
      schema_check(c, err, errlen) || prepare_writes(c, err, errlen)) {
    PQfinish(c);
    return DURO_E_STORAGE;
  }
  pg_store *pg = xcalloc(1, sizeof *pg);
  pg->wr = c;
  pg->conninfo = xstrdup(conninfo);
  pg->synchronous_full = synchronous_full;
  pthread_mutex_init(&pg->readers_mu, NULL);
  pthread_cond_init(&pg->readers_cv, NULL);
  pthread_mutex_init(&pg->lease_mu, NULL);
  pthread_cond_init(&pg->lease_cv, NULL);
  *out = pg;
  return 0;
}

static void pg_close(void *db) {
  pg_store *pg = db;
  pg_host_leave(pg);
  PQfinish(pg->wr);
  for (reader *r = pg->readers, *next; r; r = next) {
    next = r->next;
    PQfinish(r->conn);
    free(r);
  }
  pthread_mutex_destroy(&pg->readers_mu);
  pthread_cond_destroy(&pg->readers_cv);
  pthread_mutex_destroy(&pg->lease_mu);
  pthread_cond_destroy(&pg->lease_cv);
  free(pg->conninfo);
  free(pg);
}

/* ---- the group's transaction --------------------------------------------- */

/* A writer connection the server dropped (a restart) is connected again
 * before the next group: its prepared statements are gone with it. */
static int writer_ready(pg_store *pg) {
  if (PQstatus(pg->wr) == CONNECTION_OK)
    return 0;
  char err[512];
  PGconn *c = pg_connect(pg->conninfo, pg->synchronous_full, err, sizeof err);
  if (!c || prepare_writes(c, err, sizeof err) ||
      pg_session_name(pg, c, err, sizeof err)) {
    store_error("%s", err);
    PQfinish(c);
    return DURO_E_STORAGE;
  }
  PQfinish(pg->wr);
  pg->wr = c;
  return 0;
}

/* libpq learns that the server dropped the connection only when it next
 * uses it: a BEGIN that finds it so connects again and begins once more
 * (nothing was written yet), so that a restarted server costs no group.
 * A connection that sat idle with nothing to read was not closed by the
 * server (its closing would be there): then BEGIN is not waited for, it
 * goes out with the group's first writes (pg_pipe.c). */
static int begin_once(pg_store *pg) {
  int quiet = pg_write_quiet(pg);
  if (!quiet) {
    PGresult *r = PQexec(pg->wr, "BEGIN");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) {
      pg_set_err("BEGIN", pg_failure_of(pg->wr, r));
      pg_drop_if_lost(&pg->wr, r);
    }
    PQclear(r);
    if (!ok)
      return DURO_E_STORAGE;
  }
  /* A host's group holds its own lease row, alive, until it commits (the
   * fence, ST_FENCE), sent with the group's first writes either way. */
  params p = {0};
  p_i64(&p, pg->host);
  return pg_write_begin(pg, !quiet, pg->host ? ST_FENCE : -1, &p);
}

static int pg_begin(void *db) {
  pg_store *pg = db;
  if (writer_ready(pg))
    return DURO_E_STORAGE;
  int rc = begin_once(pg);
  if (rc && PQstatus(pg->wr) != CONNECTION_OK && writer_ready(pg) == 0)
    rc = begin_once(pg);
  return rc;
}

/* COMMIT of a transaction that failed answers "ROLLBACK": not committed.
 * A COMMIT the server's crash cut off fails the group like any other
 * failure (it may have landed: then the engine, which runs the instances
 * again from the journal, finds it there), and the connection is made
 * again for the next group.  Behind queued writes it goes out with them
 * and a Sync: one round trip for all (pg_pipe.c). */
static int pg_commit(void *db) {
  pg_store *pg = db;
  PGresult *r;
  if (pg->piped) {
    if (pg_write_finish(pg, "COMMIT", &r))
      return DURO_E_STORAGE;
  } else {
    r = PQexec(pg->wr, "COMMIT");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      pg_set_err("COMMIT", pg_failure_of(pg->wr, r));
      pg_drop_if_lost(&pg->wr, r);
      PQclear(r);
      return DURO_E_STORAGE;
    }
  }
  int rc = 0;
  if (strcmp(PQcmdStatus(r), "COMMIT") != 0) {
    store_error("COMMIT: the transaction was rolled back");
    rc = DURO_E_STORAGE;
  }
  PQclear(r);
  return rc;
}

static void pg_rollback(void *db) {
  pg_store *pg = db;
  pg_write_abandon(pg);
  if (PQstatus(pg->wr) == CONNECTION_OK &&
      PQtransactionStatus(pg->wr) != PQTRANS_IDLE) {
    PGresult *r = PQexec(pg->wr, "ROLLBACK");
    PQclear(r);
  }
}

/* ---- applying ops on the writer connection -------------------------------
 */

/* Runs a write and puts how many rows it changed in out_rowid. */
static int write_changes(pg_store *pg, int which, const params *p,
                         journal_op *op) {
  PGresult *r = pg_write_run(pg, which, p);
  if (!r)
    return DURO_E_STORAGE;
  op->out_rowid = strtoll(PQcmdTuples(r), NULL, 10);
  PQclear(r);
  return 0;
}

static int cron_count(pg_store *pg, const char *trigger, const char *state) {
  params p = {0};
  p_text(&p, trigger);
  p_text(&p, state);
  return pg_write_queue(pg, ST_CRON_COUNT, &p);
}

static int count_spent(pg_store *pg, const char *queue, int dead_lettered,
                       int64_t n) {
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, dead_lettered ? 0 : n);
  p_i64(&p, dead_lettered ? n : 0);
  return pg_write_queue(pg, ST_MESSAGES_DROPPED, &p);
}

/* As sqlite.c: the visible messages are picked first, those out of
 * attempts go to the dead-letter queue (or are dropped), then the others
 * are leased one by one. */
static int message_lease(pg_store *pg, journal_op *op) {
  params p = {0};
  p_text(&p, op->queue);
  p_i64(&p, op->ts_ms);
  p_i64(&p, (int64_t)op->n_leases);
  journal_message *v = xcalloc(op->n_leases ? op->n_leases : 1, sizeof *v);
  op->messages = v;
  op->n_messages = 0;
  PGresult *r = pg_write_run(pg, ST_MESSAGE_PICK, &p);
  if (!r)
    return DURO_E_STORAGE;
  int rows = PQntuples(r);
  int64_t *spent = xcalloc(rows ? (size_t)rows : 1, sizeof *spent);
  size_t n = 0, n_spent = 0;
  for (int i = 0; i < rows && n + n_spent < op->n_leases; i++) {
    if (op->max_attempts && get_i64(r, i, 1) >= (int64_t)op->max_attempts) {
      spent[n_spent++] = get_i64(r, i, 0);
      continue;
    }
    journal_message *m = &v[n++];
    m->seq = get_i64(r, i, 0);
    m->attempts = (uint32_t)get_i64(r, i, 1) + 1;
    m->body = get_text(r, i, 2);
    m->sent_ms = get_i64(r, i, 3);
    m->last_error = get_text(r, i, 4);
    m->queue = xstrdup(op->queue);
    m->lease = xasprintf("%s-%lld", op->lease_token, (long long)m->seq);
    m->visible_ms = op->visible_ms;
  }
  PQclear(r);
  op->n_messages = n;
  op->out_rowid = (int64_t)n_spent; /* dead-lettered or dropped */
  int rc = 0;
  for (size_t i = 0; i < n_spent && rc == 0; i++) {
    params q = {0};
    p_i64(&q, spent[i]);
    if (op->dead_letter_queue) {
      p_text(&q, op->dead_letter_queue);
      p_i64(&q, op->ts_ms);
      p_text(&q, "{\"name\":\"queue.lease_expired\",\"message\":"
                 "\"delivered max_retries + 1 times, never acked\"}");
    }
    rc = pg_write_queue(
        pg, op->dead_letter_queue ? ST_MESSAGE_MOVE : ST_MESSAGE_DELETE, &q);
  }
  if (rc == 0 && n_spent)
    rc = count_spent(pg, op->queue, op->dead_letter_queue != NULL,
                     (int64_t)n_spent);
  free(spent);
  for (size_t i = 0; i < n && rc == 0; i++) {
    params q = {0};
    p_i64(&q, v[i].seq);
    p_text(&q, v[i].lease);
    p_i64(&q, op->visible_ms);
    rc = pg_write_queue(pg, ST_MESSAGE_LEASE, &q);
  }
  return rc;
}

static int message_retry(pg_store *pg, journal_op *op) {
  params p = {0};
  p_text(&p, op->lease);
  p_text(&p, op->queue);
  p_i64(&p, op->ts_ms);
  p_i64(&p, journal_lease_seq(op->lease));
  PGresult *r = pg_write_run(pg, ST_MESSAGE_HELD, &p);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) == 0) {
    PQclear(r);
    op->out_rowid = JOURNAL_RETRY_NOT_HELD;
    return 0;
  }
  int64_t seq = get_i64(r, 0, 0), attempts = get_i64(r, 0, 1);
  PQclear(r);
  int spent = attempts >= (int64_t)op->max_attempts;
  params q = {0};
  p_i64(&q, seq);
  if (spent && !op->dead_letter_queue) {
    op->out_rowid = JOURNAL_RETRY_DROPPED;
    int rc = pg_write_queue(pg, ST_MESSAGE_DELETE, &q);
    return rc ? rc : count_spent(pg, op->queue, 0, 1);
  }
  p_text(&q, spent ? op->dead_letter_queue : op->queue);
  p_i64(&q, spent ? op->ts_ms : op->visible_ms);
  p_text(&q, op->error);
  op->out_rowid = spent ? JOURNAL_RETRY_DEAD_LETTERED : JOURNAL_RETRY_DELAYED;
  int rc = pg_write_queue(pg, ST_MESSAGE_MOVE, &q);
  return rc || !spent ? rc : count_spent(pg, op->queue, 1, 1);
}

/* A tick row's write; a row it changed counts in its state. */
static int cron_tick_written(pg_store *pg, int which, const params *p,
                             journal_op *op) {
  int rc = write_changes(pg, which, p, op);
  return rc || !op->out_rowid ? rc : cron_count(pg, op->queue, op->body);
}

/* An insert whose RETURNING gives the new id; no row: *inserted = 0. */
static int write_returning(pg_store *pg, int which, const params *p,
                           int *inserted, int64_t *id) {
  PGresult *r = pg_write_run(pg, which, p);
  if (!r)
    return DURO_E_STORAGE;
  *inserted = PQntuples(r) > 0;
  if (*inserted)
    *id = get_i64(r, 0, 0);
  PQclear(r);
  return 0;
}

/* Whether the event woke the instance (out_rowid), and which host runs it
 * (out_owner): another host is sent a notice "e <rowid> <woke>",
 * delivered when the group commits. */
static int wake_if_waiting(pg_store *pg, journal_op *op, const params *p) {
  PGresult *r = pg_write_run(pg, ST_WAKE_IF_WAITING, p);
  if (!r)
    return DURO_E_STORAGE;
  int found = PQntuples(r) > 0;
  op->out_rowid = found ? get_i64(r, 0, 0) : 0;
  op->out_owner = found ? get_i64(r, 0, 1) : pg->host;
  PQclear(r);
  if (op->out_owner == pg->host)
    return 0;
  char channel[40], text[48];
  snprintf(channel, sizeof channel, HOST_CHANNEL "%" PRId64, op->out_owner);
  snprintf(text, sizeof text, "e %" PRId64 " %d", op->rowid, op->out_rowid > 0);
  params n = {0};
  p_text(&n, channel);
  p_text(&n, text);
  return pg_write_queue(pg, ST_NOTIFY, &n);
}

static int instance_insert(pg_store *pg, journal_op *op) {
  const journal_instance *in = op->inst;
  params p = {0};
  int rc, inserted = 0;
  p_text(&p, in->workflow);
  p_text(&p, in->id);
  p_text(&p, duro_status_name(in->status));
  p_text(&p, in->params);
  p_i64(&p, in->created_ms);
  p_i64(&p, in->retention_ms);
  p_i64(&p, pg->host);
  if ((rc = write_returning(pg, ST_INSTANCE_INSERT, &p, &inserted,
                            &op->out_rowid)))
    return rc;
  op->rc = inserted ? 0 : DURO_E_ALREADY_EXISTS;
  return 0;
}

/* An instance's new state; an end by error or terminate cancels the
 * steps still open. */
static int instance_set(pg_store *pg, journal_op *op) {
  const journal_instance *in = op->inst;
  params p = {0};
  int rc;
  p_i64(&p, in->rowid);
  p_text(&p, duro_status_name(in->status));
  p_text(&p, in->output);
  p_text(&p, in->error);
  p_ms(&p, in->started_ms);
  p_ms(&p, in->ended_ms);
  p_ms(&p, in->wake_ms);
  p_ms(&p, in->paused_ms);
  p_text(&p, in->wait_type);
  p_i64(&p, op->clear_control);
  if ((rc = pg_write_queue(pg, ST_INSTANCE_SET, &p)))
    return rc;
  if (in->status != DURO_STATUS_ERRORED && in->status != DURO_STATUS_TERMINATED)
    return 0;
  params c = {0};
  p_i64(&c, in->rowid);
  p_ms(&c, in->ended_ms);
  return pg_write_queue(pg, ST_STEPS_CANCEL, &c);
}

/* The instance's one-statement ops: its control, restarts, pin. */
static int instance_mark(pg_store *pg, journal_op *op) {
  params p = {0};
  switch (op->kind) {
  case JOP_INSTANCE_CONTROL:
    p_i64(&p, op->rowid);
    p_i64(&p, op->inst ? op->inst->control : 0);
    return pg_write_queue(pg, ST_INSTANCE_CONTROL, &p);
  case JOP_INSTANCE_CONTROL_CLEAR:
    p_i64(&p, op->rowid);
    return pg_write_queue(pg, ST_INSTANCE_CONTROL_CLEAR, &p);
  case JOP_INSTANCE_RESTARTED:
    p_i64(&p, op->rowid);
    return pg_write_queue(pg, ST_INSTANCE_RESTARTED, &p);
  case JOP_INSTANCE_PIN:
    p_i64(&p, op->rowid);
    p_text(&p, op->step_key);
    return pg_write_queue(pg, ST_INSTANCE_PIN, &p);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

static int step_put(pg_store *pg, journal_op *op) {
  const journal_step *s = op->step;
  params p = {0};
  p_i64(&p, op->rowid);
  p_text(&p, s->key);
  p_i64(&p, s->seq);
  p_text(&p, s->name);
  p_i64(&p, s->count);
  p_text(&p, duro_step_kind_name(s->type));
  p_text(&p, duro_step_status_name(s->status));
  p_text(&p, s->result);
  p_text(&p, s->error);
  p_i64(&p, s->attempts);
  p_ms(&p, s->started_ms);
  p_ms(&p, s->ended_ms);
  p_ms(&p, s->wake_ms);
  p_ms(&p, s->attempt_started_ms);
  p_text(&p, s->build);
  return pg_write_queue(pg, ST_STEP_PUT, &p);
}

/* The steps' other ops: a discard (with the attempts), a shift of their
 * wakes, an attempt's row. */
static int steps_change(pg_store *pg, journal_op *op) {
  params p = {0};
  int rc;
  switch (op->kind) {
  case JOP_STEPS_DISCARD: {
    p_i64(&p, op->rowid);
    p_i64(&p, op->from_seq < 0 ? INT64_MIN : op->from_seq);
    if ((rc = pg_write_queue(pg, ST_STEPS_DISCARD, &p)))
      return rc;
    params a = {0};
    p_i64(&a, op->rowid);
    return pg_write_queue(pg, ST_ATTEMPTS_DISCARD, &a);
  }
  case JOP_STEPS_SHIFT_WAKE:
    p_i64(&p, op->rowid);
    p_i64(&p, op->from_seq);
    return pg_write_queue(pg, ST_STEPS_SHIFT_WAKE, &p);
  case JOP_ATTEMPT_PUT:
    p_i64(&p, op->rowid);
    p_text(&p, op->attempt.key);
    p_i64(&p, op->attempt.number);
    p_ms(&p, op->attempt.started_ms);
    p_ms(&p, op->attempt.ended_ms);
    p_text(&p, op->attempt.error);
    p_text(&p, op->attempt.build);
    return pg_write_queue(pg, ST_ATTEMPT_PUT, &p);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

/* An event's ops: its insert, its consumption, the wakes it may cause. */
static int event_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  int rc, inserted = 0;
  switch (op->kind) {
  case JOP_EVENT_INSERT:
    p_i64(&p, op->rowid);
    p_text(&p, op->event_type);
    p_text(&p, op->event_payload);
    p_i64(&p, op->ts_ms);
    if ((rc = write_returning(pg, ST_EVENT_INSERT, &p, &inserted,
                              &op->out_rowid)))
      return rc;
    op->rc = inserted ? 0 : DURO_E_INSTANCE_ENDED;
    return 0;
  case JOP_EVENT_CONSUME:
    p_i64(&p, op->event_seq);
    p_text(&p, op->step_key);
    return pg_write_queue(pg, ST_EVENT_CONSUME, &p);
  case JOP_WAKE_IF_WAITING:
    p_i64(&p, op->rowid);
    p_text(&p, op->event_type);
    p_i64(&p, op->ts_ms);
    return wake_if_waiting(pg, op, &p);
  case JOP_WAKE_IF_EVENT_PENDING:
    p_i64(&p, op->rowid);
    p_i64(&p, op->ts_ms);
    return write_changes(pg, ST_WAKE_IF_EVENT_PENDING, &p, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

static int sweep(pg_store *pg, journal_op *op) {
  params p = {0};
  p_i64(&p, op->ts_ms);
  p_i64(&p, op->from_seq);
  PGresult *r = pg_write_run(pg, ST_SWEEP, &p);
  if (!r)
    return DURO_E_STORAGE;
  op->out_rowid = get_i64(r, 0, 0);
  PQclear(r);
  return 0;
}

/* A queue's ops (a lease and a retry have their own functions). */
static int message_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  int inserted = 0;
  switch (op->kind) {
  case JOP_MESSAGE_INSERT:
    p_text(&p, op->queue);
    p_text(&p, op->body);
    p_i64(&p, op->ts_ms);
    p_i64(&p, op->visible_ms);
    return write_returning(pg, ST_MESSAGE_INSERT, &p, &inserted,
                           &op->out_rowid);
  case JOP_MESSAGE_ACK:
    p_text(&p, op->lease);
    p_text(&p, op->queue);
    p_i64(&p, op->ts_ms);
    p_i64(&p, journal_lease_seq(op->lease));
    return write_changes(pg, ST_MESSAGE_ACK, &p, op);
  case JOP_MESSAGES_EXPIRE:
    p_text(&p, op->queue);
    p_i64(&p, op->ts_ms);
    p_i64(&p, op->from_seq);
    return write_changes(pg, ST_MESSAGES_EXPIRE, &p, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

/* A cron trigger's ops: its start, its ticks, their sweep. */
static int cron_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  switch (op->kind) {
  case JOP_CRON_SINCE:
    p_text(&p, op->queue);
    p_i64(&p, op->ts_ms);
    return pg_write_queue(pg, ST_CRON_SINCE, &p);
  case JOP_CRON_TICK:
    p_text(&p, op->queue);
    p_i64(&p, op->visible_ms);
    p_text(&p, op->body);
    p_ms(&p, op->ts_ms);
    p_text(&p, op->lease);
    p_text(&p, op->error);
    return cron_tick_written(pg, ST_CRON_TICK, &p, op);
  case JOP_CRON_TICK_SET:
    p_text(&p, op->queue);
    p_i64(&p, op->visible_ms);
    p_text(&p, op->body);
    p_text(&p, op->error);
    return cron_tick_written(pg, ST_CRON_TICK_SET, &p, op);
  case JOP_CRON_SWEEP:
    p_i64(&p, op->ts_ms);
    return write_changes(pg, ST_CRON_SWEEP, &p, op);
  case JOP_CRON_MISSED_EXTRA:
    p_text(&p, op->queue);
    p_i64(&p, op->from_seq);
    return pg_write_queue(pg, ST_CRON_MISSED_EXTRA, &p);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

/* Every op kind is named here, so the compiler tells of a new one left
 * out (-Wswitch). */
static int pg_apply(void *db, journal_op *op) {
  pg_store *pg = db;
  switch (op->kind) {
  case JOP_INSTANCE_INSERT:
    return instance_insert(pg, op);
  case JOP_INSTANCE_SET:
    return instance_set(pg, op);
  case JOP_INSTANCE_CONTROL:
  case JOP_INSTANCE_CONTROL_CLEAR:
  case JOP_INSTANCE_RESTARTED:
  case JOP_INSTANCE_PIN:
    return instance_mark(pg, op);
  case JOP_STEP_PUT:
    return step_put(pg, op);
  case JOP_STEPS_DISCARD:
  case JOP_STEPS_SHIFT_WAKE:
  case JOP_ATTEMPT_PUT:
    return steps_change(pg, op);
  case JOP_EVENT_INSERT:
  case JOP_EVENT_CONSUME:
  case JOP_WAKE_IF_WAITING:
  case JOP_WAKE_IF_EVENT_PENDING:
    return event_apply(pg, op);
  case JOP_SWEEP:
    return sweep(pg, op);
  case JOP_MESSAGE_INSERT:
  case JOP_MESSAGE_ACK:
  case JOP_MESSAGES_EXPIRE:
    return message_apply(pg, op);
  case JOP_MESSAGE_LEASE:
    return message_lease(pg, op);
  case JOP_MESSAGE_RETRY:
    return message_retry(pg, op);
  case JOP_CRON_SINCE:
  case JOP_CRON_TICK:
  case JOP_CRON_TICK_SET:
  case JOP_CRON_SWEEP:
  case JOP_CRON_MISSED_EXTRA:
    return cron_apply(pg, op);
  }
  store_error("PostgreSQL backend: unknown journal op %d", (int)op->kind);
  return DURO_E_STORAGE;
}

/* ---- reads ----------------------------------------------------------------
 */

/* The enums of status.h from their stored names (-1, "unknown", for a
 * name that is none of them). */
static duro_status get_status(const PGresult *r, int row, int col) {
  return (duro_status)duro_status_parse(get_str(r, row, col));
}

#define INSTANCE_COLS                                                          \
  "rowid,workflow,id,status,params,output,error,created_ms,started_ms,"        \
  "ended_ms,wake_ms,paused_ms,wait_type,control,retention_ms,build,restarts,"  \
  "owner"

static void read_instance(const PGresult *r, journal_instance *o) {
  o->rowid = get_i64(r, 0, 0);
  o->workflow = get_text(r, 0, 1);
  o->id = get_text(r, 0, 2);
  o->status = get_status(r, 0, 3);
  o->params = get_text(r, 0, 4);
  o->output = get_text(r, 0, 5);
  o->error = get_text(r, 0, 6);
  o->created_ms = get_ms(r, 0, 7);
  o->started_ms = get_ms(r, 0, 8);
  o->ended_ms = get_ms(r, 0, 9);
  o->wake_ms = get_ms(r, 0, 10);
  o->paused_ms = get_ms(r, 0, 11);
  o->wait_type = get_text(r, 0, 12);
  o->control = (int)get_i64(r, 0, 13);
  o->retention_ms = get_i64(r, 0, 14);
  o->build = get_text(r, 0, 15);
  o->restarts = get_i64(r, 0, 16);
  o->owner = get_i64(r, 0, 17);
}

static int instance_query(pg_store *pg, const char *sql, const params *p,
                          journal_instance *out) {
  PGresult *r = pg_query(pg, sql, p);
  if (!r)
    return DURO_E_STORAGE;
  int rc = DURO_E_NOT_FOUND;
  if (PQntuples(r) > 0) {
    read_instance(r, out);
    rc = 0;
  }
  PQclear(r);
  return rc;
}

static int pg_instance_get(void *db, const char *workflow, const char *id,
                           journal_instance *out) {
  params p = {0};
  p_text(&p, workflow);
  p_text(&p, id);
  return instance_query(
      db, "SELECT " INSTANCE_COLS " FROM instances WHERE workflow=$1 AND id=$2",
      &p, out);
}

static int pg_instance_get_rowid(void *db, int64_t rowid,
                                 journal_instance *out) {
  params p = {0};
  p_i64(&p, rowid);
  return instance_query(
      db, "SELECT " INSTANCE_COLS " FROM instances WHERE rowid=$1", &p, out);
}

static int pg_steps_load(void *db, int64_t rowid, journal_step **out,
                         size_t *n) {
  params p = {0};
  p_i64(&p, rowid);
  *out = NULL;
  *n = 0;
  PGresult *r = pg_query(db,
                         "SELECT key,name,count,seq,type,status,result,error,"
                         "attempts,started_ms,ended_ms,wake_ms,"
                         "attempt_started_ms,build FROM steps "
                         "WHERE instance=$1 ORDER BY seq",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  int rows = PQntuples(r);
  journal_step *v = rows ? xcalloc((size_t)rows, sizeof *v) : NULL;
  for (int i = 0; i < rows; i++) {
    journal_step *o = &v[i];
    o->key = get_text(r, i, 0);
    o->name = get_text(r, i, 1);
    o->count = (uint32_t)get_i64(r, i, 2);
    o->seq = get_i64(r, i, 3);
    o->type = (duro_step_kind)duro_step_kind_parse(get_str(r, i, 4));
    o->status = (duro_step_status)duro_step_status_parse(get_str(r, i, 5));
    o->result = get_text(r, i, 6);
    o->error = get_text(r, i, 7);
    o->attempts = (uint32_t)get_i64(r, i, 8);
    o->started_ms = get_ms(r, i, 9);
    o->ended_ms = get_ms(r, i, 10);
    o->wake_ms = get_ms(r, i, 11);
    o->attempt_started_ms = get_ms(r, i, 12);
    o->build = get_text(r, i, 13);
  }
  PQclear(r);
  *out = v;
  *n = (size_t)rows;
  return 0;
}

static int pg_attempts_each(void *db, int64_t rowid,
                            void (*fn)(void *ctx, const char *key,
                                       uint32_t number, int64_t started_ms,
                                       int64_t ended_ms, const char *error,
                                       const char *build),
                            void *ctx) {
  params p = {0};
  p_i64(&p, rowid);
  PGresult *r = pg_query(db,
                         "SELECT key,number,started_ms,ended_ms,error,build "
                         "FROM attempts WHERE instance=$1 ORDER BY key,number",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0), (uint32_t)get_i64(r, i, 1), get_ms(r, i, 2),
       get_ms(r, i, 3), get_str(r, i, 4), get_str(r, i, 5));
  PQclear(r);
  return 0;
}

/* The events of instance `rowid` that `sql` selects, as seq, type,
 * payload, ts_ms and consumed_by, in its order. */
static int read_events(void *db, const char *sql, int64_t rowid,
                       journal_event **out, size_t *n) {
  params p = {0};
  p_i64(&p, rowid);
  *out = NULL;
  *n = 0;
  PGresult *r = pg_query(db, sql, &p);
  if (!r)
    return DURO_E_STORAGE;
  int rows = PQntuples(r);
  journal_event *v = rows ? xcalloc((size_t)rows, sizeof *v) : NULL;
  for (int i = 0; i < rows; i++) {
    v[i].seq = get_i64(r, i, 0);
    v[i].type = get_text(r, i, 1);
    v[i].payload = get_text(r, i, 2);
    v[i].ts_ms = get_i64(r, i, 3);
    v[i].consumed_by = get_text(r, i, 4);
  }
  PQclear(r);
  *out = v;
  *n = (size_t)rows;
  return 0;
}

static int pg_events_pending(void *db, int64_t rowid, journal_event **out,
                             size_t *n) {
  return read_events(db,
                     "SELECT seq,type,payload,ts_ms,consumed_by FROM events "
                     "WHERE instance=$1 AND consumed_by IS NULL ORDER BY seq",
                     rowid, out, n);
}

static int pg_events_all(void *db, int64_t rowid, journal_event **out,
                         size_t *n) {
  return read_events(db,
                     "SELECT seq,type,payload,ts_ms,consumed_by FROM events "
                     "WHERE instance=$1 ORDER BY seq",
                     rowid, out, n);
}

static int pg_due(void *db, int64_t after_ms, int64_t upto_ms, size_t limit,
                  int64_t *rowids, int64_t *wakes, size_t *n) {
  params p = {0};
  p_i64(&p, after_ms);
  p_i64(&p, upto_ms);
  p_i64(&p, (int64_t)limit);
  *n = 0;
  p_i64(&p, ((pg_store *)db)->host);
  PGresult *r =
      pg_query(db,
               "SELECT rowid, wake_ms FROM instances WHERE owner=$4 "
               "AND wake_ms>$1 AND wake_ms<=$2 ORDER BY wake_ms LIMIT $3",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r) && *n < limit; i++) {
    rowids[*n] = get_i64(r, i, 0);
    wakes[*n] = get_i64(r, i, 1);
    (*n)++;
  }
  PQclear(r);
  return 0;
}

static int pg_next_wake(void *db, int64_t after_ms, int64_t *wake) {
  params p = {0};
  p_i64(&p, after_ms);
  p_i64(&p, ((pg_store *)db)->host);
  *wake = JOURNAL_NONE;
  PGresult *r = pg_query(
      db, "SELECT MIN(wake_ms) FROM instances WHERE owner=$2 AND wake_ms>$1",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) > 0)
    *wake = get_ms(r, 0, 0);
  PQclear(r);
  return 0;
}

static int pg_recover_each(void *db,
                           void (*fn)(void *ctx, int64_t rowid,
                                      duro_status status, int control),
                           void *ctx) {
  params p = {0};
  p_i64(&p, ((pg_store *)db)->host);
  PGresult *r = pg_query(db,
                         "SELECT rowid,status,control FROM instances WHERE "
                         "owner=$1 AND (status='queued' OR (control<>0 AND "
                         "status IN ('waiting','paused')))",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_i64(r, i, 0), get_status(r, i, 1), (int)get_i64(r, i, 2));
  PQclear(r);
  return 0;
}

static int pg_queued_from(void *db, int64_t from, size_t limit, int64_t *rowids,
                          size_t *n) {
  params p = {0};
  p_i64(&p, from);
  p_i64(&p, (int64_t)limit);
  p_i64(&p, ((pg_store *)db)->host);
  *n = 0;
  PGresult *r =
      pg_query(db,
               "SELECT rowid FROM instances WHERE owner=$3 AND "
               "status='queued' AND rowid>=$1 ORDER BY rowid LIMIT $2",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r) && *n < limit; i++)
    rowids[(*n)++] = get_i64(r, i, 0);
  PQclear(r);
  return 0;
}

static int pg_oldest_queued(void *db, const char *workflow,
                            int64_t *created_ms) {
  params p = {0};
  p_text(&p, workflow);
  *created_ms = JOURNAL_NONE;
  PGresult *r =
      pg_query(db,
               "SELECT created_ms FROM instances WHERE status='queued' "
               "AND ($1::text IS NULL OR workflow=$1::text) "
               "ORDER BY rowid LIMIT 1",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) > 0)
    *created_ms = get_i64(r, 0, 0);
  PQclear(r);
  return 0;
}

static int pg_build_pinned(void *db, const char *workflow, const char *build,
                           int *pinned) {
  params p = {0};
  p_text(&p, workflow);
  p_text(&p, build);
  *pinned = 0;
  PGresult *r =
      pg_query(db,
               "SELECT 1 FROM instances WHERE workflow=$1 AND build=$2 "
               "AND build IS NOT NULL AND status IN "
               "('queued','waiting','paused') LIMIT 1",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  *pinned = PQntuples(r) > 0;
  PQclear(r);
  return 0;
}

static int pg_pinned_builds(void *db,
                            void (*fn)(void *ctx, const char *workflow,
                                       const char *build, int64_t n),
                            void *ctx) {
  params p = {0};
  PGresult *r =
      pg_query(db,
               "SELECT workflow, build, COUNT(*) FROM instances "
               "WHERE build IS NOT NULL AND status IN "
               "('queued','waiting','paused') GROUP BY workflow, build",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0), get_str(r, i, 1), get_i64(r, i, 2));
  PQclear(r);
  return 0;
}

static int pg_list(void *db, const char *workflow, int status, int64_t cursor,
                   size_t limit,
                   void (*fn)(void *ctx, int64_t rowid, const char *id,
                              duro_status status, int64_t created_ms),
                   void *ctx) {
  params p = {0};
  p_text(&p, workflow);
  p_text(&p, status < 0 ? NULL : duro_status_name(status));
  p_i64(&p, cursor);
  p_i64(&p, (int64_t)limit);
  PGresult *r =
      pg_query(db,
               "SELECT rowid,id,status,created_ms FROM instances "
               "WHERE workflow=$1 AND ($2::text IS NULL OR "
               "status=$2::text) AND ($3::bigint=0 OR rowid<$3::bigint) "
               "ORDER BY rowid DESC LIMIT $4",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_i64(r, i, 0), get_str(r, i, 1), get_status(r, i, 2),
       get_i64(r, i, 3));
  PQclear(r);
  return 0;
}

static int pg_count_by_status(void *db,
                              void (*fn)(void *ctx, const char *workflow,
                                         duro_status status, int64_t n),
                              void *ctx) {
  params p = {0};
  PGresult *r = pg_query(db,
                         "SELECT workflow,status,COUNT(*) FROM instances "
                         "GROUP BY workflow,status ORDER BY workflow,status",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0), get_status(r, i, 1), get_i64(r, i, 2));
  PQclear(r);
  return 0;
}

static int pg_queue_stats_each(void *db, const char *queue, int64_t now_ms,
                               void (*fn)(void *ctx, const char *queue,
                                          const journal_queue_stats *st),
                               void *ctx) {
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, now_ms);
  PGresult *r = pg_query(
      db,
      "SELECT queue, SUM((visible_ms<=$2)::int), SUM((visible_ms>$2 AND "
      "lease IS NULL)::int), SUM((visible_ms>$2 AND lease IS NOT NULL)::int), "
      "MIN(sent_ms), MIN(CASE WHEN visible_ms<=$2 THEN visible_ms END) "
      "FROM messages WHERE $1::text IS NULL OR queue=$1::text "
      "GROUP BY queue ORDER BY queue",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_queue_stats q = {get_i64(r, i, 1), get_i64(r, i, 2),
                             get_i64(r, i, 3), get_ms(r, i, 4),
                             get_ms(r, i, 5)};
    fn(ctx, get_str(r, i, 0), &q);
  }
  PQclear(r);
  return 0;
}

static int pg_queue_ready(void *db, const char *queue, int64_t now_ms,
                          uint32_t limit, journal_queue_ready_info *out) {
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, now_ms);
  p_i64(&p, limit);
  PGresult *r =
      pg_query(db,
               "SELECT COUNT(*), MIN(visible_ms) FROM (SELECT visible_ms FROM "
               "messages WHERE queue=$1 AND visible_ms<=$2 ORDER BY visible_ms "
               "LIMIT $3) AS ready",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  out->ready = (uint32_t)get_i64(r, 0, 0);
  out->oldest_visible_ms = get_ms(r, 0, 1);
  PQclear(r);
  params q = {0};
  p_text(&q, queue);
  p_i64(&q, now_ms);
  r = pg_query(db,
               "SELECT MIN(visible_ms) FROM messages WHERE queue=$1 AND "
               "visible_ms>$2",
               &q);
  if (!r)
    return DURO_E_STORAGE;
  out->next_visible_ms = get_ms(r, 0, 0);
  PQclear(r);
  return 0;
}

/* The token's leases: "<token>-<seq>" sorts between "<token>-" and
 * "<token>." bytewise (the columns' "C" collation). */
static int pg_queue_leases(void *db, const char *queue, int64_t now_ms,
                           const char *token,
                           void (*fn)(void *ctx, const char *lease),
                           void *ctx) {
  char *lo = xasprintf("%s-", token), *hi = xasprintf("%s.", token);
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, now_ms);
  p_text(&p, lo);
  p_text(&p, hi);
  PGresult *r = pg_query(db,
                         "SELECT lease FROM messages WHERE queue=$1 AND "
                         "visible_ms>$2 AND lease>=$3 AND lease<$4",
                         &p);
  free(lo);
  free(hi);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0));
  PQclear(r);
  return 0;
}

/* As sqlite.c: oldest sent first (messages_age), the lease only while
 * held. */
static int pg_queue_peek(void *db, const char *queue, int64_t now_ms,
                         size_t limit, journal_message **out, size_t *n) {
  *out = NULL;
  *n = 0;
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, now_ms);
  p_i64(&p, (int64_t)limit);
  PGresult *r = pg_query(db,
                         "SELECT seq, body, attempts, sent_ms, visible_ms, "
                         "CASE WHEN visible_ms>$2 THEN lease END, last_error "
                         "FROM messages WHERE queue=$1 "
                         "ORDER BY sent_ms, seq LIMIT $3",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  size_t rows = (size_t)PQntuples(r);
  journal_message *v = xcalloc(rows ? rows : 1, sizeof *v);
  for (size_t i = 0; i < rows && i < limit; i++) {
    journal_message *m = &v[(*n)++];
    m->seq = get_i64(r, (int)i, 0);
    m->queue = xstrdup(queue);
    m->body = get_text(r, (int)i, 1);
    m->attempts = (uint32_t)get_i64(r, (int)i, 2);
    m->sent_ms = get_i64(r, (int)i, 3);
    m->visible_ms = get_i64(r, (int)i, 4);
    m->lease = get_text(r, (int)i, 5);
    m->last_error = get_text(r, (int)i, 6);
  }
  PQclear(r);
  *out = v;
  return 0;
}

static int pg_queue_counts_each(void *db,
                                void (*fn)(void *ctx, const char *queue,
                                           int64_t dropped,
                                           int64_t dead_lettered),
                                void *ctx) {
  params p = {0};
  PGresult *r = pg_query(
      db, "SELECT queue, dropped, dead_lettered FROM queue_counts", &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0), get_i64(r, i, 1), get_i64(r, i, 2));
  PQclear(r);
  return 0;
}

static int pg_cron_state(void *db, const char *trigger, journal_cron *out) {
  params p = {0};
  p_text(&p, trigger);
  memset(out, 0, sizeof *out);
  out->since_ms = out->last_tick_ms = JOURNAL_NONE;
  PGresult *r =
      pg_query(db,
               "SELECT since_ms, (SELECT MAX(tick_ms) FROM cron_ticks "
               "WHERE trigger=$1), complete, failed, missed, skipped "
               "FROM cron_triggers WHERE trigger=$1",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) > 0) {
    out->since_ms = get_i64(r, 0, 0);
    out->last_tick_ms = get_ms(r, 0, 1);
    out->complete = get_i64(r, 0, 2);
    out->failed = get_i64(r, 0, 3);
    out->missed = get_i64(r, 0, 4);
    out->skipped = get_i64(r, 0, 5);
  }
  PQclear(r);
  return 0;
}

static int pg_cron_ticks(void *db, const char *trigger, const char *state,
                         size_t limit,
                         void (*fn)(void *ctx, const journal_cron_tick *t),
                         void *ctx) {
  params p = {0};
  p_text(&p, trigger);
  p_text(&p, state);
  p_i64(&p, (int64_t)limit);
  PGresult *r =
      pg_query(db,
               "SELECT tick_ms, state, fired_ms, instance, error FROM "
               "cron_ticks WHERE trigger=$1 AND ($2::text IS NULL OR "
               "state=$2::text) ORDER BY tick_ms DESC LIMIT $3",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_cron_tick t = {get_i64(r, i, 0), get_str(r, i, 1), get_ms(r, i, 2),
                           get_str(r, i, 3), get_str(r, i, 4)};
    fn(ctx, &t);
  }
  PQclear(r);
  return 0;
}

/* ---- plugin builds shared by the hosts ------------------------------------
 * On the calling thread's reader connection, outside any group: a build
 * is a file of the build store, not journal state. */

/* Reads the file at `path` whole (malloc'ed, *len bytes); NULL on failure,
 * recorded. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0) {
    buf = xmalloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
      free(buf);
      buf = NULL;
    }
  }
  if (f)
    fclose(f);
  if (!buf)
    store_error("cannot read build %s", path);
  *len = buf ? (size_t)n : 0;
  return buf;
}

static int pg_build_put(void *db, const char *hash, const char *plugin,
                        const char *path, int64_t now_ms) {
  params p = {0};
  p_text(&p, hash);
  p_i64(&p, now_ms);
  PGresult *r = pg_query(db,
                         "WITH u AS (UPDATE builds SET seen_ms=$2 WHERE "
                         "hash=$1 RETURNING 1) SELECT COUNT(*) FROM u",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  int known = get_i64(r, 0, 0) > 0;
  PQclear(r);
  if (known)
    return 0;
  size_t len;
  char *image = slurp(path, &len);
  if (!image)
    return DURO_E_IO;
  reader *rd = pg_reader_take(db);
  int rc = DURO_E_STORAGE;
  if (rd) {
    char now[24];
    snprintf(now, sizeof now, "%" PRId64, now_ms);
    const char *v[4] = {hash, plugin, image, now};
    int lens[4] = {0, 0, (int)len, 0}, fmts[4] = {0, 0, 1, 0};
    r = PQexecParams(rd->conn,
                     "INSERT INTO builds(hash,plugin,image,seen_ms) "
                     "VALUES($1,$2,$3,$4) ON CONFLICT(hash) DO UPDATE SET "
                     "seen_ms=excluded.seen_ms",
                     4, NULL, v, lens, fmts, 0);
    if (PQresultStatus(r) == PGRES_COMMAND_OK)
      rc = 0;
    else
      pg_set_err("storing a build", pg_failure_of(rd->conn, r));
    pg_drop_if_lost(&rd->conn, r);
    PQclear(r);
    pg_reader_give(db, rd);
  }
  free(image);
  return rc;
}

static int pg_build_get(void *db, const char *hash, const char *path) {
  reader *rd = pg_reader_take(db);
  if (!rd)
    return DURO_E_STORAGE;
  const char *v[1] = {hash};
  PGresult *r =
      PQexecParams(rd->conn, "SELECT image FROM builds WHERE hash=$1", 1, NULL,
                   v, NULL, NULL, 1 /* binary: the bytes as stored */);
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) {
    pg_set_err("fetching a build", pg_failure_of(rd->conn, r));
    pg_drop_if_lost(&rd->conn, r);
  }
  pg_reader_give(db, rd);
  if (!ok) {
    PQclear(r);
    return DURO_E_STORAGE;
  }
  if (PQntuples(r) == 0) {
    PQclear(r);
    store_error("build %s is not in the database", hash);
    return DURO_E_NOT_FOUND;
  }
  /* Written beside, synced, renamed: a crash leaves no half build. */
  char *tmp = xasprintf("%s.fetch", path);
  FILE *f = fopen(tmp, "wb");
  int len = PQgetlength(r, 0, 0);
  ok = f && fwrite(PQgetvalue(r, 0, 0), 1, (size_t)len, f) == (size_t)len &&
       fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (f && fclose(f) != 0)
    ok = 0;
  ok = ok && rename(tmp, path) == 0;
  if (!ok) {
    store_error("cannot write build %s to %s", hash, path);
    unlink(tmp);
  }
  free(tmp);
  PQclear(r);
  return ok ? 0 : DURO_E_IO;
}

static int pg_builds_prune(void *db, int64_t seen_before_ms, size_t *n) {
  params p = {0};
  p_i64(&p, seen_before_ms);
  PGresult *r = pg_query(
      db,
      "WITH d AS (DELETE FROM builds WHERE seen_ms<$1 AND NOT EXISTS (SELECT "
      "1 FROM instances WHERE build=builds.hash AND status NOT IN "
      "('complete','errored','terminated')) RETURNING 1) "
      "SELECT COUNT(*) FROM d",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  *n = (size_t)get_i64(r, 0, 0);
  PQclear(r);
  return 0;
}

/* ---- copying a journal in (migrate.c) ------------------------------------
 * On the writer connection, inside the group transaction pg_begin opened:
 * the copy is one transaction, all or nothing.  Table and column names
 * come from the schema's list (migrate.h), never from the user. */

static int pg_table_count(void *db, const store_table *t, int64_t *n) {
  pg_store *pg = db;
  if (pg_write_finish(pg, NULL, NULL))
    return DURO_E_STORAGE;
  char *sql = xasprintf("SELECT COUNT(*) FROM %s", t->name);
  PGresult *r = PQexec(pg->wr, sql);
  free(sql);
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
  if (ok)
    *n = get_i64(r, 0, 0);
  else
    pg_set_err(t->name, PQresultErrorMessage(r));
  PQclear(r);
  return ok ? 0 : DURO_E_STORAGE;
}

/* COPY's text format, buffered: rows are sent to the server 64 KiB at a
 * time rather than one message each. */
typedef struct copy_in {
  pg_store *pg;
  size_t n_columns;
  char *buf;
  size_t len, cap;
  int64_t rows;
} copy_in;

#define COPY_CHUNK 65536

static void copy_byte(copy_in *c, char ch) {
  if (c->len == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 2 * COPY_CHUNK;
    c->buf = xrealloc(c->buf, c->cap);
  }
  c->buf[c->len++] = ch;
}

static int copy_flush(copy_in *c) {
  if (c->len && PQputCopyData(c->pg->wr, c->buf, (int)c->len) != 1) {
    pg_set_err("COPY", PQerrorMessage(c->pg->wr));
    return DURO_E_STORAGE;
  }
  c->len = 0;
  return 0;
}

/* One row: values separated by tabs, NULL as \N, and the characters
 * COPY gives a meaning (backslash, tab, newline, return) escaped. */
static int copy_row(void *ctx, const char *const *values) {
  copy_in *c = ctx;
  for (size_t i = 0; i < c->n_columns; i++) {
    if (i)
      copy_byte(c, '\t');
    const char *v = values[i];
    if (!v) {
      copy_byte(c, '\\');
      copy_byte(c, 'N');
      continue;
    }
    for (; *v; v++) {
      char esc = *v == '\\'   ? '\\'
                 : *v == '\t' ? 't'
                 : *v == '\n' ? 'n'
                 : *v == '\r' ? 'r'
                              : 0;
      if (esc) {
        copy_byte(c, '\\');
        copy_byte(c, esc);
      } else {
        copy_byte(c, *v);
      }
    }
  }
  copy_byte(c, '\n');
  c->rows++;
  return c->len >= COPY_CHUNK ? copy_flush(c) : 0;
}

static int pg_table_import(void *db, const store_table *t,
                           int (*produce)(void *ctx, store_row_fn put,
                                          void *put_ctx),
                           void *ctx, int64_t *n) {
  pg_store *pg = db;
  /* COPY cannot run in pipeline mode: any queued writes are read first. */
  if (pg_write_finish(pg, NULL, NULL))
    return DURO_E_STORAGE;
  /* duro's text is UTF-8, whatever the database's default client
   * encoding. */
  if (pg_exec_cmd(pg->wr, "SET client_encoding='UTF8'", NULL, 0))
    return DURO_E_STORAGE;
  char *sql = xasprintf("COPY %s(%s) FROM STDIN", t->name, t->columns);
  PGresult *r = PQexec(pg->wr, sql);
  free(sql);
  if (PQresultStatus(r) != PGRES_COPY_IN) {
    pg_set_err(t->name, PQresultErrorMessage(r));
    PQclear(r);
    return DURO_E_STORAGE;
  }
  PQclear(r);
  copy_in c = {.pg = pg, .n_columns = t->n_columns};
  int rc = produce(ctx, copy_row, &c);
  if (rc == 0)
    rc = copy_flush(&c);
  free(c.buf);
  /* A producer that failed ends the COPY with an error: the server
   * discards the rows, and the transaction is left to roll back.  Its
   * message is the producer's, so the server's is not recorded over
   * it. */
  int ended = PQputCopyEnd(pg->wr, rc ? "the copy was abandoned" : NULL) == 1;
  int ok = ended;
  while ((r = PQgetResult(pg->wr)) != NULL) {
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      if (ok && rc == 0)
        pg_set_err(t->name, PQresultErrorMessage(r));
      ok = 0;
    }
    PQclear(r);
  }
  if (!ended && rc == 0)
    pg_set_err("COPY", PQerrorMessage(pg->wr));
  if (rc)
    return rc;
  if (!ok)
    return DURO_E_STORAGE;
  *n = c.rows;
  return 0;
}

static int pg_key_continue(void *db, const store_table *t, int64_t high) {
  pg_store *pg = db;
  if (pg_write_finish(pg, NULL, NULL))
    return DURO_E_STORAGE;
  /* setval(seq, v, true): the next value is v + 1; with nothing to go
   * past, setval(seq, 1, false) makes it 1. */
  char *sql =
      xasprintf("SELECT setval(pg_get_serial_sequence('%s','%s'), "
                "GREATEST(%" PRId64 ", COALESCE(MAX(%s),0), 1), "
                "GREATEST(%" PRId64 ", COALESCE(MAX(%s),0)) > 0) FROM %s",
                t->name, t->serial, high, t->serial, high, t->serial, t->name);
  int rc = pg_exec_cmd(pg->wr, sql, NULL, 0);
  free(sql);
  return rc;
}

const store_backend store_pg = {
    .open = pg_open,
    .close = pg_close,
    .begin = pg_begin,
    .apply = pg_apply,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .instance_get = pg_instance_get,
    .instance_get_rowid = pg_instance_get_rowid,
    .steps_load = pg_steps_load,
    .attempts_each = pg_attempts_each,
    .events_pending = pg_events_pending,
    .events_all = pg_events_all,
    .due = pg_due,
    .next_wake = pg_next_wake,
    .recover_each = pg_recover_each,
    .queued_from = pg_queued_from,
    .oldest_queued = pg_oldest_queued,
    .build_pinned = pg_build_pinned,
    .pinned_builds = pg_pinned_builds,
    .list = pg_list,
    .count_by_status = pg_count_by_status,
    .queue_stats_each = pg_queue_stats_each,
    .queue_ready = pg_queue_ready,
    .queue_leases = pg_queue_leases,
    .queue_peek = pg_queue_peek,
    .queue_counts_each = pg_queue_counts_each,
    .cron_state = pg_cron_state,
    .cron_ticks = pg_cron_ticks,
    .table_count = pg_table_count,
    .table_import = pg_table_import,
    .key_continue = pg_key_continue,
    .join = pg_join,
    .takeover = pg_takeover,
    .adopt = pg_adopt,
    .notify = pg_notify,
    .lease_held = pg_lease_held,
    .quiet = pg_quiet,
    .build_put = pg_build_put,
    .build_get = pg_build_get,
    .builds_prune = pg_builds_prune,
};
