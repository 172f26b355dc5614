/* pg_schema.c — the PostgreSQL journal's schema: SQLite's schema 6
 * (sqlite_schema.c) translated, plus, in 7, the hosts sharing a database
 * and the builds they share; created or brought to this version by one
 * opener at a time, and its version checked.
 *
 * Text columns use the "C" collation: names sort and compare bytewise as
 * in SQLite, whatever the database's locale (a lease range scan depends
 * on it). */
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#include "pg_internal.h"

/* 7: schema 6 and the hosts sharing the database (the hosts table, each
 * instance's owner); 8: an instance's deadline and parent; 9: the
 * pipelines (SQLite's schema 8); 10: instances' log lines; 11: a
 * pipeline record row holds one send's records (SQLite's 10); 12: the
 * traceparent an instance was created with and a message sent with
 * (SQLite's 11); 13: flow control's rates the hosts share (flow_rates)
 * and instances' claim keys (PostgreSQL's alone); 14: each message's key
 * under a consumer's concurrency by key, and the pointer each queue's
 * keys are of (SQLite's 12); 15: instances' search attributes and bulk
 * actions' jobs (SQLite's 13); 16: each host's counts; 17: the
 * listing's indexes on creation and end time.  A journal of 6 to 16 is
 * brought to 17 when opened. */
#define SCHEMA_VERSION "17"
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
    /* Schema 8: an instance's deadline (a workflow's `timeout`). */
    "ALTER TABLE instances ADD COLUMN IF NOT EXISTS deadline_ms BIGINT;"
    "ALTER TABLE instances ADD COLUMN IF NOT EXISTS parent BIGINT;"
    "ALTER TABLE instances ADD COLUMN IF NOT EXISTS"
    " parent_close INTEGER NOT NULL DEFAULT 0;"
    /* Schema 12: the creator's traceparent. */
    "ALTER TABLE instances ADD COLUMN IF NOT EXISTS traceparent " TXT ";"
    "CREATE INDEX IF NOT EXISTS instances_child ON instances(parent)"
    " WHERE parent IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS instances_live_child ON instances(parent)"
    " WHERE parent IS NOT NULL AND ended_ms IS NULL;"
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
    /* Schema 12: a message's sender's traceparent. */
    "ALTER TABLE messages ADD COLUMN IF NOT EXISTS traceparent " TXT ";"
    /* Schema 14: a message's key (queue_keys.h), NULL until a keyed lease
     * computes it, in messages_age too, so that a keyed lease's walk
     * passes over a key at its limit without sending its rows; and the
     * pointer each queue's keys are of.  The index is built again in the
     * upgrade's transaction: all of it or none. */
    "ALTER TABLE messages ADD COLUMN IF NOT EXISTS key " TXT ";"
    "DROP INDEX IF EXISTS messages_age;"
    "CREATE INDEX messages_age ON messages(queue, sent_ms, seq, key);"
    "CREATE TABLE IF NOT EXISTS queue_key_pointers(queue " TXT " PRIMARY KEY,"
    " pointer " TXT " NOT NULL);"
    "CREATE TABLE IF NOT EXISTS cron_triggers(trigger " TXT " PRIMARY KEY,"
    " since_ms BIGINT NOT NULL, complete BIGINT NOT NULL,"
    " failed BIGINT NOT NULL, missed BIGINT NOT NULL,"
    " skipped BIGINT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS cron_ticks(trigger " TXT " NOT NULL,"
    " tick_ms BIGINT NOT NULL, state " TXT " NOT NULL, fired_ms BIGINT,"
    " instance " TXT ", error " TXT ", PRIMARY KEY(trigger, tick_ms));"
    "CREATE TABLE IF NOT EXISTS queue_counts(queue " TXT " PRIMARY KEY,"
    " dropped BIGINT NOT NULL, dead_lettered BIGINT NOT NULL);"
    /* Schema 9: pipelines, as sqlite_schema.c's schema 8. */
    "CREATE TABLE IF NOT EXISTS pipelines(pipeline " TXT " PRIMARY KEY,"
    " next_seq BIGINT NOT NULL, accepted BIGINT NOT NULL,"
    " accepted_bytes BIGINT NOT NULL, written BIGINT NOT NULL,"
    " written_bytes BIGINT NOT NULL, files BIGINT NOT NULL,"
    " backlog_bytes BIGINT NOT NULL, last_flush_ms BIGINT,"
    " plan_first BIGINT, plan_last BIGINT, plan_ms BIGINT,"
    " plan_host BIGINT, plan_until BIGINT);"
    "CREATE TABLE IF NOT EXISTS pipeline_records(pipeline " TXT " NOT NULL,"
    " seq BIGINT NOT NULL, body " TXT " NOT NULL, bytes BIGINT NOT NULL,"
    " sent_ms BIGINT NOT NULL, PRIMARY KEY(pipeline, seq));"
    /* Schema 11: a row holds one send's records, seq..last, as their
     * lines (as SQLite's schema 10); a record of schema 10 becomes a row
     * of one line. */
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM information_schema.columns"
    " WHERE table_schema=current_schema() AND table_name='pipeline_records'"
    " AND column_name='last') THEN"
    " ALTER TABLE pipeline_records ADD COLUMN last BIGINT NOT NULL DEFAULT 0;"
    " UPDATE pipeline_records SET last=seq, body=body||E'\\n';"
    " END IF; END $$;"
    /* Schema 10: instances' log lines, as SQLite's logs table. */
    "CREATE TABLE IF NOT EXISTS logs(instance BIGINT NOT NULL,"
    " n BIGINT NOT NULL, ts_ms BIGINT NOT NULL, level INTEGER NOT NULL,"
    " step " TXT ", attempt BIGINT NOT NULL, message " TXT " NOT NULL,"
    " PRIMARY KEY(instance, n));"
    /* Schema 13: each rate key's theoretical arrival time (the hosts'
     * clocks' ms), which the hosts share (pg_rates.c). */
    "CREATE TABLE IF NOT EXISTS flow_rates(key BIGINT PRIMARY KEY,"
    " tat DOUBLE PRECISION NOT NULL);"
    /* and a live instance's claim key (flow.singleton's skip mode), one
     * live instance a key a workflow on all the hosts */
    "ALTER TABLE instances ADD COLUMN IF NOT EXISTS claim_key " TXT ";"
    "CREATE UNIQUE INDEX IF NOT EXISTS instances_claim ON instances("
    " workflow, claim_key) WHERE claim_key IS NOT NULL;"
    /* Schema 15: instances' search attributes, as SQLite's 13. */
    "CREATE TABLE IF NOT EXISTS attributes(instance BIGINT NOT NULL,"
    " name " TXT " NOT NULL, workflow " TXT " NOT NULL, str " TXT ","
    " num DOUBLE PRECISION, PRIMARY KEY(instance, name));"
    "CREATE INDEX IF NOT EXISTS attributes_str ON attributes(workflow, name,"
    " str, instance) WHERE str IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS attributes_num ON attributes(workflow, name,"
    " num, instance) WHERE num IS NOT NULL;"
    /* Schema 15: bulk actions' jobs, as SQLite's schema 13; `host` the
     * host that runs one (hosts.id; 0: none yet). */
    "CREATE TABLE IF NOT EXISTS bulk_jobs(id BIGSERIAL PRIMARY KEY,"
    " workflow " TXT " NOT NULL, action " TXT " NOT NULL,"
    " terminate INTEGER NOT NULL, status " TXT ", prefix " TXT ","
    " created_after BIGINT NOT NULL, created_before BIGINT NOT NULL,"
    " ended_after BIGINT NOT NULL, ended_before BIGINT NOT NULL,"
    " bound BIGINT NOT NULL, below BIGINT NOT NULL, matched BIGINT NOT NULL,"
    " done BIGINT NOT NULL, failed BIGINT NOT NULL, skipped BIGINT NOT NULL,"
    " state " TXT " NOT NULL, created_ms BIGINT NOT NULL, ended_ms BIGINT,"
    " host BIGINT NOT NULL DEFAULT 0, errors " TXT ", plan " TXT ","
    " where_terms " TXT ", ids " TXT ");"
    /* the columns bulk_jobs gained since: a job's search attribute terms
     * and its chosen instances (filter.ids, a JSON array of their ids) */
    "ALTER TABLE bulk_jobs ADD COLUMN IF NOT EXISTS where_terms " TXT ";"
    "ALTER TABLE bulk_jobs ADD COLUMN IF NOT EXISTS ids " TXT ";"
    "CREATE INDEX IF NOT EXISTS bulk_jobs_workflow ON bulk_jobs(workflow, id);"
    "CREATE INDEX IF NOT EXISTS bulk_jobs_running ON bulk_jobs(id)"
    " WHERE state='running';"
    /* Schema 16: each host's counts as it last renewed its lease (the
     * JSON its engine gives), for the cluster's view from any host. */
    "ALTER TABLE hosts ADD COLUMN IF NOT EXISTS counts " TXT ";"
    /* Schema 17: a workflow's instances by creation and by end time, for
     * the listing's time ranges (pg_read_sched.c); the end's only once
     * there is one, so a create writes one index more, an end one. */
    "CREATE INDEX IF NOT EXISTS instances_created ON instances(workflow,"
    " created_ms);"
    "CREATE INDEX IF NOT EXISTS instances_ended ON instances(workflow,"
    " ended_ms) WHERE ended_ms IS NOT NULL;"
    "UPDATE meta SET value='" SCHEMA_VERSION "' WHERE key='schema' AND"
    " value IN ('6','7','8','9','10','11','12','13','14','15','16');";

/* The schema version stored in meta, into ver; 0 or DURO_E_STORAGE. */
int pg_schema_check(PGconn *c, char *err, size_t errlen) {
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
int pg_schema_create(PGconn *c, char *err, size_t errlen) {
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
